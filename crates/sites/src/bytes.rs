//! A site's exact bytes, kept inline: a large program has a site per
//! function, and a heap allocation each (plus freeing it) cost more than
//! finding the site. Only runs of NOPs longer than [`INLINE`] bytes
//! (`-fpatchable-function-entry` with a large `N`) go to the heap.

use std::fmt;
use std::ops::Deref;

/// Bytes kept inline: every call, 5-byte NOP and XRay sled, and the usual
/// patchable NOP runs; with the length and the variant, 16 bytes in all.
const INLINE: usize = 14;

/// The bytes of a site; derefs to `[u8]`.
#[derive(Clone)]
pub struct SiteBytes(Repr);

#[derive(Clone)]
enum Repr {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    /// A thin pointer, to keep the value small.
    Heap(Box<Box<[u8]>>),
}

impl SiteBytes {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> SiteBytes {
        SiteBytes(match bytes.len() {
            len @ 0..=INLINE => {
                let mut inline = [0; INLINE];
                inline[..len].copy_from_slice(bytes);
                Repr::Inline {
                    len: len as u8,
                    bytes: inline,
                }
            }
            _ => Repr::Heap(Box::new(bytes.into())),
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }
}

impl Deref for SiteBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for SiteBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<&[u8]> for SiteBytes {
    fn from(bytes: &[u8]) -> SiteBytes {
        SiteBytes::new(bytes)
    }
}

impl PartialEq for SiteBytes {
    fn eq(&self, other: &SiteBytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SiteBytes {}

impl PartialEq<[u8]> for SiteBytes {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for SiteBytes {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl fmt::Debug for SiteBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small() {
        assert_eq!(std::mem::size_of::<SiteBytes>(), 16);
    }

    #[test]
    fn inline_and_heap_hold_the_same_bytes() {
        for len in [0, 1, 5, INLINE, INLINE + 1, 128] {
            let data: Vec<u8> = (0..len as u8).collect();
            let bytes = SiteBytes::new(&data);
            assert_eq!(&*bytes, &data[..]);
            assert_eq!(bytes.len(), len);
            assert_eq!(bytes, SiteBytes::from(&data[..]));
            assert_eq!(format!("{bytes:?}"), format!("{data:?}"));
        }
        assert_ne!(SiteBytes::new(&[0x90]), SiteBytes::new(&[0x90, 0x00]));
        assert_eq!(SiteBytes::new(&[0x90, 0x90]), [0x90, 0x90]);
    }
}
