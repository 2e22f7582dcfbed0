//! The per-architecture instruction layer of fntrace.
//!
//! The generic code (site discovery, the patching core) decides; this crate
//! knows what the instructions look like. Everything that depends on an
//! instruction set lives behind the [`Isa`] and [`Patcher`] traits,
//! selected by the ELF machine, class and byte order of the file at hand
//! with [`for_elf`] and [`patcher_for_elf`].
//!
//! x86-64, AArch64 and MIPS (o32 and n64, both byte orders) implement
//! [`Isa`] (what sites look like) and [`Patcher`] (the plans that switch
//! them, the veneers and trampolines); x86-64 also implements
//! [`BreakpointPatcher`], the byte-level protocol its runtime uses.
//! [`Placer`] (`place.rs`) applies the core's changes with a [`Patcher`]:
//! the trampolines, veneers and direct-call stubs a site's new target
//! needs, placed in memory the caller owns ([`Space`]), and the plan.
#![forbid(unsafe_code)]

pub mod aarch64;
mod isa;
pub mod mips;
pub mod patch;
pub mod place;
mod plan;
pub mod x86_64;

pub use isa::{Call, CallTarget, Isa, PointerReloc, RelocCall, SledKind};
pub use patch::{BreakpointPatcher, Code, PatchError, Resume, Shape, SlotLayout};
pub use place::{Applied, CodeKind, Load, NoRoom, PlaceError, Placer, Prepared, Request, Space, Want};
pub use plan::{Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec, Write, MAX_WRITES};

/// ELF `e_machine` value of x86-64.
pub const EM_X86_64: u16 = 62;
/// ELF `e_machine` value of AArch64.
pub const EM_AARCH64: u16 = 183;
/// ELF `e_machine` value of MIPS (32- and 64-bit).
pub const EM_MIPS: u16 = 8;

/// Which ELF file an instruction layer is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfArch {
    /// `e_machine`.
    pub machine: u16,
    /// `ELFCLASS64`.
    pub is_64: bool,
    /// `ELFDATA2MSB`.
    pub big_endian: bool,
}

impl ElfArch {
    /// x86-64 (64-bit, little-endian).
    pub const X86_64: ElfArch = ElfArch {
        machine: EM_X86_64,
        is_64: true,
        big_endian: false,
    };

    /// AArch64 (64-bit, little-endian).
    pub const AARCH64: ElfArch = ElfArch {
        machine: EM_AARCH64,
        is_64: true,
        big_endian: false,
    };

    /// The architecture as users know it, with the class or byte order
    /// that makes it one fntrace does not handle ("32-bit x86-64",
    /// "big-endian AArch64"), for messages.
    pub fn describe(&self) -> String {
        let name = elf_machine_name(self.machine);
        match self.machine {
            EM_X86_64 | EM_AARCH64 if !self.is_64 => format!("32-bit {name}"),
            EM_AARCH64 if self.big_endian => format!("big-endian {name}"),
            _ => name,
        }
    }
}

/// The one of `layers` (x86-64, AArch64, MIPS32 BE/LE, MIPS64 BE/LE)
/// for `arch`.
fn pick<T: ?Sized>(arch: ElfArch, layers: [&'static T; 6]) -> Option<&'static T> {
    let index = match (arch.machine, arch.is_64, arch.big_endian) {
        (EM_X86_64, true, false) => 0,
        (EM_AARCH64, true, false) => 1,
        (EM_MIPS, false, true) => 2,
        (EM_MIPS, false, false) => 3,
        (EM_MIPS, true, true) => 4,
        (EM_MIPS, true, false) => 5,
        _ => return None,
    };
    Some(layers[index])
}

/// The instruction layer for an ELF file's architecture, or `None` if
/// fntrace does not support it (32-bit x86-64 objects, big-endian AArch64).
pub fn for_elf(arch: ElfArch) -> Option<&'static dyn Isa> {
    use mips::{MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE};
    pick::<dyn Isa>(
        arch,
        [
            &x86_64::X86_64,
            &aarch64::AARCH64,
            &MIPS32_BE,
            &MIPS32_LE,
            &MIPS64_BE,
            &MIPS64_LE,
        ],
    )
}

/// The generic patching verbs for an ELF file's architecture.
pub fn patcher_for_elf(arch: ElfArch) -> Option<&'static dyn Patcher> {
    use mips::{MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE};
    pick::<dyn Patcher>(
        arch,
        [
            &x86_64::X86_64,
            &aarch64::AARCH64,
            &MIPS32_BE,
            &MIPS32_LE,
            &MIPS64_BE,
            &MIPS64_LE,
        ],
    )
}

/// The verbs the runtime uses, for the architectures whose runtime exists
/// (x86-64, AArch64).
pub fn breakpoint_patcher_for(arch: ElfArch) -> Option<&'static dyn BreakpointPatcher> {
    match arch {
        ElfArch::X86_64 => Some(&x86_64::X86_64),
        ElfArch::AARCH64 => Some(&aarch64::AARCH64),
        _ => None,
    }
}

/// The breakpoint-protocol patcher of the machine this code is built for,
/// as a type: the runtime, which only ever patches its own process, calls
/// its verbs directly, so they inline into the batch's loops over 100,000
/// sites (the kernel's arch code is compiled in the same way). Tools that
/// read other machines' binaries choose by ELF header instead.
#[cfg(target_arch = "x86_64")]
pub type NativePatcher = x86_64::X86_64;

/// The native patcher (see [`NativePatcher`]).
#[cfg(target_arch = "x86_64")]
pub static NATIVE_PATCHER: NativePatcher = x86_64::X86_64;

/// See [`NativePatcher`].
#[cfg(target_arch = "aarch64")]
pub type NativePatcher = aarch64::Aarch64;

/// See [`NativePatcher`].
#[cfg(target_arch = "aarch64")]
pub static NATIVE_PATCHER: NativePatcher = aarch64::AARCH64;

/// A readable name for an ELF `e_machine`, for error messages.
pub fn elf_machine_name(e_machine: u16) -> String {
    let name = match e_machine {
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S/390",
        40 => "ARM",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => return format!("e_machine {e_machine}"),
    };
    name.to_string()
}

/// Formats bytes as space-separated hex, for messages.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}
