//! The per-site decision: from the set of ops that want a site to what the
//! site must call (the kernel's `ftrace_get_addr_new`).

use crate::model::{OpsFlags, OpsId, Target, MAX_OPS};

/// What a site wanted by the ops in `wanted` must call, `flags[i]` being the
/// flags of ops `i`: nothing, the one ops' own trampoline, or the list
/// trampoline (with registers if any of the ops wants them).
pub fn decide(wanted: u64, flags: &[OpsFlags; MAX_OPS]) -> Target {
    // Not `count_ones`: without `popcnt` in the target it is a long
    // sequence, and this runs for every site at every registration.
    match wanted {
        0 => Target::Nop,
        w if w & (w - 1) == 0 => Target::Ops(w.trailing_zeros() as OpsId),
        _ => Target::List {
            regs: bits(wanted).any(|i| flags[i].regs()),
        },
    }
}

/// The indices of the set bits of `mask`, lowest first.
pub fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            i
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(regs: &[usize]) -> [OpsFlags; MAX_OPS] {
        let mut all = [OpsFlags::default(); MAX_OPS];
        for &i in regs {
            all[i].save_regs = true;
        }
        all
    }

    #[test]
    fn nobody_wants_it_nop() {
        assert_eq!(decide(0, &flags(&[])), Target::Nop);
    }

    #[test]
    fn one_ops_its_own_trampoline_with_or_without_regs() {
        assert_eq!(decide(1 << 5, &flags(&[])), Target::Ops(5));
        assert_eq!(decide(1 << 63, &flags(&[63])), Target::Ops(63));
    }

    #[test]
    fn several_ops_the_list_with_regs_if_any_wants_them() {
        assert_eq!(decide(0b101, &flags(&[])), Target::List { regs: false });
        assert_eq!(decide(0b101, &flags(&[2])), Target::List { regs: true });
        assert_eq!(decide(0b101, &flags(&[1])), Target::List { regs: false });
        let mut ipmodify = flags(&[]);
        ipmodify[0].ipmodify = true;
        assert_eq!(decide(0b11, &ipmodify), Target::List { regs: true });
    }

    #[test]
    fn bits_lists_set_bits() {
        assert_eq!(bits(0).count(), 0);
        assert_eq!(bits(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(bits(u64::MAX).count(), 64);
    }
}
