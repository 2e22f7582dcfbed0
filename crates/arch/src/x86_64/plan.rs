//! The generic plans on x86-64: the breakpoint protocol
//! ([`BreakpointPatcher::rewrite`]: an `int3` on the site's first byte, the
//! rest of the site, then its first byte, the kernel's `text_poke_bp`). The
//! states between the writes are safe only with the runtime's trap
//! handler, which emulates the new instruction for a thread that meets the
//! `int3`; on the RISC architectures each write is safe on its own.

use super::X86_64;
use crate::patch::{BreakpointPatcher, Code, PatchError, Shape};
use crate::plan::{Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec};

impl X86_64 {
    /// The bytes of `site` in `state`.
    fn bytes_in(&self, site: &PlanSite<'_>, state: State) -> Result<Vec<u8>, PlanError> {
        let len = site.original.len();
        let code = match state {
            State::Original => return Ok(site.original.to_vec()),
            State::Off => self.make_nop(Shape::Inline, len),
            State::Call { target, .. } => self.make_call(Shape::Inline, site.addr, len, target),
            State::Redirect { to } => {
                // `jmp rel32` at the site's start; any bytes after it are
                // never reached.
                let end = site.addr.wrapping_add(5);
                let rel = i32::try_from(to.wrapping_sub(end) as i64)
                    .map_err(|_| PlanError::Reach { from: site.addr, to })?;
                if len < 5 {
                    return Err(PlanError::Unsupported(format!(
                        "a redirect needs 5 bytes, the site has {len}"
                    )));
                }
                let mut bytes = vec![0xe9];
                bytes.extend_from_slice(&rel.to_le_bytes());
                let pad = self.make_nop(Shape::Inline, len - 5);
                if len > 5 {
                    bytes.extend_from_slice(pad.map_err(err)?.as_slice());
                }
                return Ok(bytes);
            }
        };
        Ok(code.map_err(err)?.as_slice().to_vec())
    }
}

fn err(e: PatchError) -> PlanError {
    match e {
        PatchError::Reach { from, to } => PlanError::Reach { from, to },
        PatchError::Length(len) => PlanError::Form(format!("no patchable form for a site of {len} bytes")),
        PatchError::Shape => PlanError::Form(PatchError::Shape.to_string()),
    }
}

impl Patcher for X86_64 {
    fn plan(&self, site: &PlanSite<'_>, from: State, to: State) -> Result<Plan, PlanError> {
        let old = self.bytes_in(site, from)?;
        let new = self.bytes_in(site, to)?;
        if old == new {
            return Ok(Plan::EMPTY);
        }
        let new = Code::new(&new).ok_or_else(|| PlanError::Form(format!("a site of {} bytes", new.len())))?;
        Ok(self.rewrite(site.addr, &new).into_iter().collect())
    }

    fn reaches(&self, site: &PlanSite<'_>, target: u64) -> bool {
        // The call ends the site (`Shape::Inline`).
        let call = site
            .addr
            .wrapping_add(site.original.len().saturating_sub(5) as u64);
        BreakpointPatcher::reaches(self, call, target)
    }

    fn return_address(&self, site: &PlanSite<'_>) -> Result<u64, PlanError> {
        Ok(site.addr + site.original.len() as u64)
    }

    fn veneer(&self, _at: u64, to: u64) -> Result<Vec<u8>, PlanError> {
        // jmp *0(%rip); .quad to
        let mut code = vec![0xff, 0x25, 0, 0, 0, 0];
        code.extend_from_slice(&to.to_le_bytes());
        Ok(code)
    }

    fn veneer_len(&self) -> usize {
        14
    }

    fn direct_stub(&self, _at: u64, _replacement: u64) -> Result<Option<Vec<u8>>, PlanError> {
        Ok(None)
    }

    fn trampoline(&self, _at: u64, _spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
        Err(PlanError::Unsupported(
            "x86-64 trampolines are the runtime's own assembly (crates/runtime)".into(),
        ))
    }

    fn trampoline_align(&self, _family: Family) -> u64 {
        16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(site: &[u8], from: State, to: State) -> Vec<(u64, Vec<u8>)> {
        let site = PlanSite {
            addr: 0x1000,
            original: site,
            entry: true,
        };
        X86_64
            .plan(&site, from, to)
            .unwrap()
            .into_iter()
            .map(|w| (w.addr, w.bytes.to_vec()))
            .collect()
    }

    const FENTRY: [u8; 5] = [0xe8, 0x10, 0x20, 0x00, 0x00];
    const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

    #[test]
    fn int3_then_the_tail_then_the_first_byte() {
        // call __fentry__ -> nop5: the kernel's text_poke_bp order.
        assert_eq!(
            plan(&FENTRY, State::Original, State::Off),
            [
                (0x1000, vec![0xcc]),
                (0x1001, NOP5[1..].to_vec()),
                (0x1000, vec![0x0f])
            ]
        );
        // nop5 -> call 0x2000 (rel32 from 0x1005).
        let on = State::Call {
            target: 0x2000,
            regs: false,
        };
        let w = plan(&FENTRY, State::Off, on);
        assert_eq!(w[0], (0x1000, vec![0xcc]));
        assert_eq!(w[1], (0x1001, 0x0ffbu32.to_le_bytes().to_vec()));
        assert_eq!(w[2], (0x1000, vec![0xe8]));
        // Nothing to do, nothing written.
        assert!(plan(&FENTRY, on, on).is_empty());
    }

    #[test]
    fn reach_and_redirect() {
        let site = PlanSite {
            addr: 0x1000,
            original: &FENTRY,
            entry: true,
        };
        assert!(Patcher::reaches(&X86_64, &site, 0x7fff_0000));
        assert!(!Patcher::reaches(&X86_64, &site, 0x1_0000_1005));
        assert_eq!(Patcher::return_address(&X86_64, &site).unwrap(), 0x1005);
        let w = plan(&FENTRY, State::Off, State::Redirect { to: 0x3000 });
        assert_eq!(w.last(), Some(&(0x1000, vec![0xe9])));
        let far = X86_64.plan(&site, State::Off, State::Redirect { to: 0x1_0000_1005 });
        assert!(matches!(far, Err(PlanError::Reach { .. })));
    }
}
