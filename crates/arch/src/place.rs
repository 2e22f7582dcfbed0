//! Applying the core's changes: for a site's new target, which code its
//! call goes to (the trampoline itself, or a veneer near the site when the
//! call cannot reach it; for a redirect, the replacement or a direct-call
//! stub), where that code goes, the code itself, and the site's plan.
//!
//! The generic core decides *what* a site does (off, an ops' trampoline,
//! the list, a redirect); the [`Patcher`] knows one site's instructions.
//! Between the two sits what the kernel's arch code does when it patches a
//! module's call sites (`module_emit_plt_entry` on arm64, the 000 seed's
//! veneers on MIPS): generate a trampoline once per ops, and a veneer once
//! per trampoline and region of code the trampoline is out of reach of.
//! That is [`Placer`]'s job, the same for every architecture and for every
//! caller (the runtime, and `crates/emu`, which runs it under qemu-user).
//!
//! The placer owns no memory and writes nothing. The caller owns the
//! executable memory: the placer asks it, through [`Space`], for room of a
//! length and alignment near an address, and hands back the bytes to put
//! there ([`Load`]: written and flushed before the plan's first write)
//! with the site's [`Plan`]. Code placed is never moved or freed: a thread
//! may be inside it long after the last site stops calling it.

use thiserror::Error;

use crate::plan::{Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec};

/// What a piece of placed code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// A trampoline ([`Patcher::trampoline`]).
    Trampoline,
    /// A veneer that continues at `to` ([`Patcher::veneer`]).
    Veneer {
        /// The trampoline it reaches.
        to: u64,
    },
    /// A direct-call stub that continues in `replacement`
    /// ([`Patcher::direct_stub`]).
    Stub {
        /// The function the site's callers end up in.
        replacement: u64,
    },
}

/// The room [`Placer`] asks a [`Space`] for.
pub struct Request<'a> {
    /// What goes there.
    pub kind: CodeKind,
    /// Its length in bytes.
    pub len: usize,
    /// The alignment its address needs (a power of two).
    pub align: u64,
    /// The address it should be near: the site a veneer or stub serves;
    /// for a trampoline, the code it will mostly serve (the caller's hint).
    pub near: u64,
    /// Whether an address will do: for a veneer or stub, the site's call
    /// reaches it; for a trampoline, any address does. The placer checks
    /// the answer with it.
    pub fits: &'a dyn Fn(u64) -> bool,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("kind", &self.kind)
            .field("len", &self.len)
            .field("align", &self.align)
            .field("near", &format_args!("{:#x}", self.near))
            .finish_non_exhaustive()
    }
}

/// Executable memory, owned by the caller (the runtime maps pools near its
/// modules; the emulation tests have fixed areas).
pub trait Space {
    /// The address of `request.len` bytes, aligned to `request.align`,
    /// that `request.fits`, reserved for good: the placer returns the code
    /// to write there as a [`Load`].
    fn place(&mut self, request: &Request<'_>) -> Result<u64, NoRoom>;
}

/// A [`Space`] has no room where the request needs it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct NoRoom(pub String);

/// Code to write before the plan that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// Where.
    pub addr: u64,
    /// The machine code, in the target's byte order.
    pub bytes: Vec<u8>,
    /// What it is.
    pub kind: CodeKind,
}

impl Load {
    /// `bytes` to load at `at` as `kind`, which must be the `expected`
    /// length the place was reserved for.
    fn checked(kind: CodeKind, at: u64, bytes: Vec<u8>, expected: usize) -> Result<Load, PlaceError> {
        if bytes.len() != expected {
            return Err(PlaceError::Length {
                kind,
                got: bytes.len(),
                expected,
            });
        }
        Ok(Load {
            addr: at,
            bytes,
            kind,
        })
    }
}

/// What a site should do, as the caller knows it: the core's decision with
/// the ops' trampolines resolved to addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The compiler's bytes.
    Original,
    /// Off (the core's NOP).
    Off,
    /// Call the trampoline at `trampoline` (made by [`Placer::trampoline`],
    /// or the caller's own), with the register frame or not.
    Call {
        /// The trampoline's address.
        trampoline: u64,
        /// The ops wants the register frame.
        regs: bool,
    },
    /// The function's callers end up in `replacement`.
    Redirect {
        /// The replacement function.
        replacement: u64,
    },
}

/// Why a change cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlaceError {
    /// The arch layer refuses the code or the plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The space has no room for the code.
    #[error("no room for a {kind:?} of {len} bytes near {near:#x}: {why}")]
    NoRoom {
        /// What was to be placed.
        kind: CodeKind,
        /// Its length.
        len: usize,
        /// Near where.
        near: u64,
        /// The space's reason.
        why: NoRoom,
    },
    /// The space offered an address the request does not accept.
    #[error("the space placed a {kind:?} at {at:#x}, which {why}")]
    BadPlace {
        /// What was to be placed.
        kind: CodeKind,
        /// Where the space put it.
        at: u64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The arch layer made code of another length than it announced.
    #[error("a {kind:?} of {got} bytes, {expected} expected")]
    Length {
        /// What was made.
        kind: CodeKind,
        /// Its length.
        got: usize,
        /// The length announced (or made at the probe address).
        expected: usize,
    },
}

/// What a site needs before its plan: the state it goes to, and new code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The site's new state, for [`Patcher::plan`].
    pub state: State,
    /// Code placed for this change (a veneer or a stub made now; none when
    /// one made before serves), to write before the plan.
    pub loads: Vec<Load>,
    /// The call goes through the veneer at this address.
    pub veneer: Option<u64>,
}

/// A change ready to carry out: write `loads`, then `plan` phase by phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The state the site is in after the plan.
    pub state: State,
    /// Code to write (and flush) first.
    pub loads: Vec<Load>,
    /// The call goes through the veneer at this address.
    pub veneer: Option<u64>,
    /// The site's writes.
    pub plan: Plan,
}

/// Veneers and stubs are placed at least at this alignment (AArch64
/// literals need 8; 16 keeps every kind on a line boundary).
const CODE_ALIGN: u64 = 16;

/// The alignment of a veneer or stub that `site` calls: what a trampoline
/// its call reaches needs (64 KB for a MIPS entry site's `lui at`), at
/// least [`CODE_ALIGN`].
fn align_for(patcher: &dyn Patcher, site: &PlanSite<'_>) -> u64 {
    let family = if site.entry { Family::Entry } else { Family::Mcount };
    CODE_ALIGN.max(patcher.trampoline_align(family))
}

/// Places the code the core's changes need and plans the sites; remembers
/// what it placed, so that a trampoline is made once per spec and a veneer
/// once per trampoline and reach.
pub struct Placer<'p> {
    patcher: &'p dyn Patcher,
    trampolines: Vec<(TrampolineSpec, u64)>,
    veneers: Vec<(u64, u64)>,
    stubs: Vec<(u64, u64)>,
}

impl std::fmt::Debug for Placer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("trampolines", &self.trampolines)
            .field("veneers", &self.veneers)
            .field("stubs", &self.stubs)
            .finish_non_exhaustive()
    }
}

impl<'p> Placer<'p> {
    /// A placer with nothing placed yet.
    pub fn new(patcher: &'p dyn Patcher) -> Placer<'p> {
        Placer {
            patcher,
            trampolines: Vec::new(),
            veneers: Vec::new(),
            stubs: Vec::new(),
        }
    }

    /// The arch layer it plans with.
    pub fn patcher(&self) -> &'p dyn Patcher {
        self.patcher
    }

    /// The trampoline for `spec` (an ops' callback, the family of its
    /// sites, registers or not): its address, and its code if it was made
    /// now (`None` when it was made before). `near` is the code it will
    /// mostly serve, a hint for the space.
    pub fn trampoline(
        &mut self,
        space: &mut dyn Space,
        spec: &TrampolineSpec,
        near: u64,
    ) -> Result<(u64, Option<Load>), PlaceError> {
        if let Some(&(_, at)) = self.trampolines.iter().find(|(s, _)| s == spec) {
            return Ok((at, None));
        }
        let kind = CodeKind::Trampoline;
        let align = self.patcher.trampoline_align(spec.family);
        // Made once at an aligned probe address to learn its length.
        let len = self.patcher.trampoline(align, spec)?.len();
        let at = self.reserve(space, kind, len, align, near, &|_| true)?;
        let bytes = self.patcher.trampoline(at, spec)?;
        let load = Load::checked(kind, at, bytes, len)?;
        self.trampolines.push((*spec, at));
        Ok((at, Some(load)))
    }

    /// The state `site` goes to for `want`, with the veneer or stub it
    /// needs, placed now if none placed before serves.
    pub fn prepare(
        &mut self,
        space: &mut dyn Space,
        site: &PlanSite<'_>,
        want: Want,
    ) -> Result<Prepared, PlaceError> {
        let mut loads = Vec::new();
        let mut veneer = None;
        let state = match want {
            Want::Original => State::Original,
            Want::Off => State::Off,
            Want::Call { trampoline, regs } => {
                let target = if self.patcher.reaches(site, trampoline) {
                    trampoline
                } else {
                    let (at, load) = self.veneer(space, site, trampoline)?;
                    loads.extend(load);
                    veneer = Some(at);
                    at
                };
                State::Call { target, regs }
            }
            Want::Redirect { replacement } => {
                let (to, load) = self.stub(space, site, replacement)?;
                loads.extend(load);
                State::Redirect { to }
            }
        };
        Ok(Prepared { state, loads, veneer })
    }

    /// [`Placer::prepare`], then the plan from `from`.
    pub fn change(
        &mut self,
        space: &mut dyn Space,
        site: &PlanSite<'_>,
        from: State,
        want: Want,
    ) -> Result<Applied, PlaceError> {
        let Prepared { state, loads, veneer } = self.prepare(space, site, want)?;
        let plan = self.patcher.plan(site, from, state)?;
        Ok(Applied {
            state,
            loads,
            veneer,
            plan,
        })
    }

    /// A veneer to `to` that `site` reaches: one made before, or a new one.
    fn veneer(
        &mut self,
        space: &mut dyn Space,
        site: &PlanSite<'_>,
        to: u64,
    ) -> Result<(u64, Option<Load>), PlaceError> {
        let patcher = self.patcher;
        if let Some(&(at, _)) = self
            .veneers
            .iter()
            .find(|&&(at, t)| t == to && patcher.reaches(site, at))
        {
            return Ok((at, None));
        }
        let kind = CodeKind::Veneer { to };
        let len = patcher.veneer_len();
        let align = align_for(patcher, site);
        let at = self.reserve(space, kind, len, align, site.addr, &|at| {
            patcher.reaches(site, at)
        })?;
        let bytes = patcher.veneer(at, to)?;
        let load = Load::checked(kind, at, bytes, len)?;
        self.veneers.push((at, to));
        Ok((at, Some(load)))
    }

    /// Where `site`'s redirect to `replacement` goes: the replacement
    /// itself where the site jumps anywhere, else a stub the site reaches.
    fn stub(
        &mut self,
        space: &mut dyn Space,
        site: &PlanSite<'_>,
        replacement: u64,
    ) -> Result<(u64, Option<Load>), PlaceError> {
        let patcher = self.patcher;
        if let Some(&(at, _)) = self
            .stubs
            .iter()
            .find(|&&(at, r)| r == replacement && patcher.reaches(site, at))
        {
            return Ok((at, None));
        }
        // Made once at a probe address: `None` means no stub at all.
        let Some(probe) = patcher.direct_stub(CODE_ALIGN, replacement)? else {
            return Ok((replacement, None));
        };
        let kind = CodeKind::Stub { replacement };
        let len = probe.len();
        let align = align_for(patcher, site);
        let at = self.reserve(space, kind, len, align, site.addr, &|at| {
            patcher.reaches(site, at)
        })?;
        let bytes = patcher.direct_stub(at, replacement)?.unwrap_or_default();
        let load = Load::checked(kind, at, bytes, len)?;
        self.stubs.push((at, replacement));
        Ok((at, Some(load)))
    }

    /// Asks the space for room and checks its answer.
    fn reserve(
        &self,
        space: &mut dyn Space,
        kind: CodeKind,
        len: usize,
        align: u64,
        near: u64,
        fits: &dyn Fn(u64) -> bool,
    ) -> Result<u64, PlaceError> {
        let request = Request {
            kind,
            len,
            align,
            near,
            fits,
        };
        let at = space
            .place(&request)
            .map_err(|why| PlaceError::NoRoom { kind, len, near, why })?;
        if at % align.max(1) != 0 {
            return Err(PlaceError::BadPlace {
                kind,
                at,
                why: "is not aligned as asked",
            });
        }
        if !fits(at) {
            return Err(PlaceError::BadPlace {
                kind,
                at,
                why: "the site's call does not reach",
            });
        }
        Ok(at)
    }
}

#[cfg(test)]
#[path = "place_tests.rs"]
mod tests;
