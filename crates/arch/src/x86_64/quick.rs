//! Byte-pattern fast paths for the forms compilers emit at sites: the
//! canonical NOPs and the two call forms. Discovery checks one site per
//! function (100,000 in a large program), and building an `iced-x86`
//! decoder for each costs more than the check itself. Anything that is not
//! one of these exact patterns goes to the decoder, so the answers are the
//! decoder's (the tests compare both).

use crate::isa::{Call, CallTarget};

/// The longest x86-64 instruction.
const MAX_INSN: usize = 15;

/// Length of the canonical NOP at the start of `code`, if there is one:
/// `90`, `66 90`, or `0f 1f` with a zero displacement (`nopl (%rax)` …
/// `nopl 0x0(%rax,%rax,1)` with a 32-bit displacement) after any number of
/// `66` prefixes and an optional `2e`, as gcc, clang and binutils pad.
pub(super) fn nop_len(code: &[u8]) -> Option<usize> {
    match code {
        [0x90, ..] => return Some(1),
        [0x66, 0x90, ..] => return Some(2),
        _ => {}
    }
    let mut at = code.iter().take_while(|&&b| b == 0x66).count();
    if code.get(at) == Some(&0x2e) {
        at += 1;
    }
    let body: &[u8] = match code.get(at..)? {
        [0x0f, 0x1f, 0x00, ..] => &[0x0f, 0x1f, 0x00],
        [0x0f, 0x1f, 0x40, ..] => &[0x0f, 0x1f, 0x40, 0x00],
        [0x0f, 0x1f, 0x44, ..] => &[0x0f, 0x1f, 0x44, 0x00, 0x00],
        [0x0f, 0x1f, 0x80, ..] => &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
        [0x0f, 0x1f, 0x84, ..] => &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        _ => return None,
    };
    let len = at + body.len();
    (len <= MAX_INSN && code.get(at..len)? == body).then_some(len)
}

/// True if the instruction at the start of `code` is certainly not a NOP:
/// every NOP starts with `90` or `0f`, or with a prefix (legacy or REX);
/// `endbr64`, which often follows a function's NOPs, is not one either.
pub(super) fn not_nop(code: &[u8]) -> bool {
    match code {
        [0xf3, 0x0f, 0x1e, 0xfa, ..] => true,
        [first, ..] => !matches!(
            first,
            0x90 | 0x0f | 0x26 | 0x2e | 0x36 | 0x3e | 0x40..=0x4f | 0x64..=0x67 | 0xf0 | 0xf2 | 0xf3
        ),
        [] => true,
    }
}

/// The call at the start of `code` (located at `addr`) if it is `e8 rel32`
/// or `ff 15 disp32` (`call *disp32(%rip)`).
pub(super) fn call(code: &[u8], addr: u64) -> Option<Call> {
    let (len, disp, direct) = match *code {
        [0xe8, a, b, c, d, ..] => (5u8, i32::from_le_bytes([a, b, c, d]), true),
        [0xff, 0x15, a, b, c, d, ..] => (6u8, i32::from_le_bytes([a, b, c, d]), false),
        _ => return None,
    };
    let to = addr
        .wrapping_add(u64::from(len))
        .wrapping_add(i64::from(disp) as u64);
    Some(Call {
        len,
        target: if direct {
            CallTarget::Direct(to)
        } else {
            CallTarget::Memory(to)
        },
    })
}

/// Whether a call that `wanted` accepts may be in `code` (located at
/// `addr`), found without decoding: every `call rel32` ends with `e8` and
/// its displacement, every `call *disp32(%rip)` with `ff 15` and its
/// displacement, whatever prefixes come before, and the target is the
/// instruction's end plus the displacement. So looking at every byte finds
/// every call that decoding from the start finds (and maybe more).
pub(super) fn may_call(code: &[u8], addr: u64, wanted: &mut dyn FnMut(CallTarget) -> bool) -> bool {
    let mut at = 0;
    while let Some(i) = code[at..].iter().position(|&b| b == 0xe8 || b == 0xff) {
        let i = at + i;
        if call(&code[i..], addr.wrapping_add(i as u64)).is_some_and(|c| wanted(c.target)) {
            return true;
        }
        at = i + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};

    use super::super::{call_of, decode_one, X86_64};
    use super::*;
    use crate::isa::CallTarget;
    use crate::isa::Isa;

    /// `nop_run` as the decoder alone answers it.
    fn decoded_nop_run(code: &[u8], max_bytes: usize) -> (usize, usize) {
        let code = &code[..code.len().min(max_bytes)];
        let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
        let mut insn = Instruction::default();
        let (mut count, mut bytes) = (0, 0);
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.is_invalid() || insn.mnemonic() != Mnemonic::Nop {
                break;
            }
            count += 1;
            bytes += insn.len();
        }
        (count, bytes)
    }

    /// Every pattern `nop_len` accepts, with and without prefixes.
    fn patterns() -> Vec<Vec<u8>> {
        let bodies: [&[u8]; 5] = [
            &[0x0f, 0x1f, 0x00],
            &[0x0f, 0x1f, 0x40, 0x00],
            &[0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
            &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        ];
        let mut out = vec![vec![0x90], vec![0x66, 0x90]];
        for body in bodies {
            for prefixes in 0..10 {
                for cs in [false, true] {
                    let mut p = vec![0x66; prefixes];
                    if cs {
                        p.push(0x2e);
                    }
                    p.extend_from_slice(body);
                    out.push(p);
                }
            }
        }
        out
    }

    #[test]
    fn canonical_nops_are_what_the_decoder_says() {
        for p in patterns() {
            let decoded = decode_one(&p, 0).filter(|i| i.mnemonic() == Mnemonic::Nop);
            assert_eq!(nop_len(&p), decoded.map(|i| i.len()), "{p:02x?}");
            // Cut short: never a NOP.
            assert_eq!(nop_len(&p[..p.len() - 1]), None, "{p:02x?}");
        }
    }

    #[test]
    fn nop_runs_match_the_decoder() {
        let mut all = Vec::new();
        for p in patterns() {
            all.extend_from_slice(&p);
        }
        all.extend_from_slice(&[0x55, 0x90]);
        for start in 0..all.len() {
            for max in [1, 5, 16, 128, usize::MAX] {
                let code = &all[start..];
                assert_eq!(
                    X86_64.nop_run(code, max),
                    decoded_nop_run(code, max),
                    "at {start}"
                );
            }
        }
        // Pseudo-random bytes, biased towards NOP bytes.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let pool = [
            0x90, 0x66, 0x2e, 0x0f, 0x1f, 0x00, 0x40, 0x44, 0x80, 0x84, 0x48, 0xe8, 0xff,
        ];
        for _ in 0..20_000 {
            let code: Vec<u8> = (0..24)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    pool[(seed % pool.len() as u64) as usize]
                })
                .collect();
            assert_eq!(
                X86_64.nop_run(&code, 128),
                decoded_nop_run(&code, 128),
                "{code:02x?}"
            );
        }
    }

    #[test]
    fn what_is_not_a_nop_is_no_nop_for_the_decoder() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for first in 0..=255u8 {
            for _ in 0..400 {
                let mut code = vec![first];
                code.extend((0..14).map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                }));
                if not_nop(&code) {
                    let decoded = decode_one(&code, 0);
                    assert!(
                        !matches!(decoded, Some(i) if i.mnemonic() == Mnemonic::Nop),
                        "{code:02x?}"
                    );
                }
            }
        }
        assert!(not_nop(&[0xf3, 0x0f, 0x1e, 0xfa]));
        assert!(!not_nop(&[0x66, 0x90]));
    }

    #[test]
    fn calls_found_by_decoding_are_found_by_looking() {
        // clang -pg: ... call 1060 <mcount@plt>; add $0x3,%ebx (as in
        // `calls_in_a_function_body`), then prefixed forms of both calls.
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0x53, 0x50, 0x89, 0xfb, 0xe8, 0x73, 0xfe, 0xff, 0xff, 0x83, 0xc3, 0x03,
            0xf2, 0xe8, 0x10, 0x00, 0x00, 0x00, 0x41, 0xff, 0x15, 0x20, 0x00, 0x00, 0x00, 0x67, 0xff, 0x15,
            0x00, 0x01, 0x00, 0x00,
        ];
        let mut calls = Vec::new();
        X86_64.for_each_call(&code, 0x11e0, &mut |_, call| calls.push(call.target));
        assert_eq!(calls.len(), 3, "{calls:x?}");
        for call in &calls {
            assert!(X86_64.may_call(&code, 0x11e0, &mut |t| t == *call), "{call:x?}");
        }
        assert!(!X86_64.may_call(&code, 0x11e0, &mut |t| t == CallTarget::Direct(0x1234)));
        // Pseudo-random code: whatever decoding finds, looking finds too.
        let mut seed = 0x1234_5678_9abc_def1u64;
        for _ in 0..2_000 {
            let code: Vec<u8> = (0..64)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    [0xe8, 0xff, 0x15, 0x66, 0xf2, 0x41, 0x00, seed as u8][(seed >> 8) as usize % 8]
                })
                .collect();
            X86_64.for_each_call(&code, 0x4000, &mut |_, call| {
                assert!(
                    X86_64.may_call(&code, 0x4000, &mut |t| t == call.target),
                    "{code:02x?}"
                );
            });
        }
    }

    #[test]
    fn calls_match_the_decoder() {
        let codes: [&[u8]; 6] = [
            &[0xe8, 0x8b, 0xfe, 0xff, 0xff],
            &[0xe8, 0x00, 0x00, 0x00, 0x80, 0x90],
            &[0xe8, 0xff, 0xff, 0xff, 0x7f],
            &[0xff, 0x15, 0xf6, 0x2d, 0x00, 0x00],
            &[0xff, 0x15, 0x00, 0x00, 0x00, 0x80],
            &[0xe8, 0x00, 0x00, 0x00],
        ];
        for code in codes {
            for addr in [0, 0x11e0, u64::MAX - 3, 0x7fff_ffff_0000] {
                let decoded = decode_one(code, addr).and_then(|i| call_of(&i));
                assert_eq!(
                    X86_64.decode_call(code, addr),
                    decoded,
                    "{code:02x?} at {addr:#x}"
                );
            }
        }
    }
}
