//! A minimal protobuf writer for the hot packets: fields appended to a
//! `Vec<u8>` (varints, length-delimited fields), a nested message's length
//! patched in after it is written.
//!
//! The field numbers of the Perfetto messages written by hand are here, from
//! Perfetto's `.proto` files (`perfetto_protos`' `protos/perfetto/trace/`);
//! the tests decode what is written with `perfetto_protos` and compare it
//! with the same packets built as messages.

/// Wire type of a varint field.
const VARINT: u32 = 0;
/// Wire type of a length-delimited field (string, bytes, message).
const LEN: u32 = 2;

/// `Trace.packet` (`trace.proto`).
pub const TRACE_PACKET: u32 = 1;

/// `TracePacket` (`trace_packet.proto`).
pub mod packet {
    pub const TIMESTAMP: u32 = 8;
    pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
}

/// `TrackEvent` (`track_event/track_event.proto`).
pub mod event {
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
}

/// `DebugAnnotation` (`track_event/debug_annotation.proto`).
pub mod annotation {
    pub const NAME_IID: u32 = 1;
    pub const BOOL_VALUE: u32 = 2;
    pub const UINT_VALUE: u32 = 3;
    pub const STRING_VALUE: u32 = 6;
    pub const STRING_VALUE_IID: u32 = 17;
}

/// `InternedData` (`interned_data/interned_data.proto`).
pub mod interned {
    /// `EventName { iid = 1, name = 2 }`.
    pub const EVENT_NAMES: u32 = 2;
    /// `DebugAnnotationName { iid = 1, name = 2 }`.
    pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
    /// `InternedString { iid = 1, str = 2 }`.
    pub const DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
    /// The fields of the three entries.
    pub const IID: u32 = 1;
    pub const NAME: u32 = 2;
}

/// Appends `v` as a varint.
#[inline]
pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends the key of field `field` of wire type `wire`.
#[inline]
fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// Appends varint field `field` (`uint64`, `uint32`, `bool`, `enum`; an
/// `int32`/`enum` value as its sign-extended 64 bits, as protobuf does).
#[inline]
pub fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, VARINT);
    varint(buf, v);
}

/// Appends length-delimited field `field` (`string`, `bytes`).
#[inline]
pub fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(buf, field, LEN);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Appends message field `field`, its fields appended by `f` (what it
/// returns is returned): a one-byte length is reserved, and the message
/// moved in the rare case its length needs more.
#[inline]
pub fn message<R>(buf: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    key(buf, field, LEN);
    let at = buf.len();
    buf.push(0);
    let r = f(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8;
    } else {
        let mut head = Vec::with_capacity(10);
        varint(&mut head, len as u64);
        buf.splice(at..=at, head);
    }
    r
}

/// A message of at most [`Small::CAP`] bytes, encoded on the stack: the
/// hot packets, without the capacity checks and length moves of a `Vec`.
/// Its length, so any of its nested messages', fits in one byte.
pub struct Small {
    bytes: [u8; Small::CAP],
    len: usize,
}

impl Small {
    pub const CAP: usize = 64;

    #[inline(always)]
    pub fn new() -> Small {
        const { assert!(Small::CAP < 0x80) };
        Small {
            bytes: [0; Small::CAP],
            len: 0,
        }
    }

    /// The whole buffer, of which the first [`Small::len`] bytes are
    /// written (copied faster than those).
    #[inline(always)]
    pub fn buffer(&self) -> &[u8; Small::CAP] {
        &self.bytes
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends a byte (panics past the capacity: the callers write less).
    #[inline(always)]
    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }

    /// Appends varint field `field`, as [`uint`].
    #[inline(always)]
    pub fn uint(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field << 3 | VARINT));
        self.varint(v);
    }

    /// Starts message field `field`; its fields follow, then [`Small::end`]
    /// with what this returns.
    #[inline(always)]
    pub fn begin(&mut self, field: u32) -> usize {
        self.varint(u64::from(field << 3 | LEN));
        self.push(0);
        self.len - 1
    }

    /// Ends the message that [`Small::begin`] started: sets its length.
    #[inline(always)]
    pub fn end(&mut self, at: usize) {
        self.bytes[at] = (self.len - at - 1) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_lengths() {
        let cases: [(u64, &[u8]); 6] = [
            (0, &[0]),
            (1, &[1]),
            (127, &[0x7f]),
            (128, &[0x80, 1]),
            (300, &[0xac, 2]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1],
            ),
        ];
        for (v, want) in cases {
            let mut buf = Vec::new();
            varint(&mut buf, v);
            assert_eq!(buf, want, "{v}");
        }
        let mut buf = Vec::new();
        uint(&mut buf, 17, 5);
        assert_eq!(buf, [0x88, 1, 5]);
        for len in [0usize, 1, 127, 128, 300, 20_000] {
            let mut buf = vec![0xee];
            message(&mut buf, 11, |b| bytes(b, 2, &vec![b'x'; len]));
            let mut want = vec![0xee, 0x5a];
            let mut inner = vec![0x12];
            varint(&mut inner, len as u64);
            inner.extend_from_slice(&vec![b'x'; len]);
            varint(&mut want, inner.len() as u64);
            want.extend(inner);
            assert_eq!(buf, want, "{len}");
        }
    }

    #[test]
    fn small_messages_are_encoded_as_vec_ones() {
        for v in [0, 1, 127, 128, 300, 1 << 40, u64::MAX] {
            let mut small = Small::new();
            let packet = small.begin(1);
            small.uint(8, v);
            let event = small.begin(11);
            small.uint(17, v);
            small.end(event);
            small.uint(10, 3);
            small.end(packet);
            let mut buf = Vec::new();
            message(&mut buf, 1, |b| {
                uint(b, 8, v);
                message(b, 11, |b| uint(b, 17, v));
                uint(b, 10, 3);
            });
            assert_eq!(small.buffer()[..small.len()], buf, "{v}");
        }
    }
}
