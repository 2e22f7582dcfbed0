//! The per-architecture instruction layer of fntrace.
//!
//! The generic code (site discovery now, the patching core later) decides;
//! this crate knows what the instructions look like. Everything that depends
//! on an instruction set lives behind the [`Isa`] trait, selected by the ELF
//! `e_machine` of the file at hand with [`for_elf_machine`].
//!
//! Only x86-64 is implemented so far; MIPS and AArch64 will be added behind
//! the same trait.
#![forbid(unsafe_code)]

mod isa;
pub mod patch;
pub mod x86_64;

pub use isa::{Call, CallTarget, Isa, PointerReloc, RelocCall, SledKind};
pub use patch::{Code, PatchError, Patcher, Resume, Shape, SlotLayout};

/// ELF `e_machine` value of x86-64.
pub const EM_X86_64: u16 = 62;

/// The instruction layer for an ELF `e_machine`, or `None` if fntrace does
/// not support that architecture yet.
pub fn for_elf_machine(e_machine: u16) -> Option<&'static dyn Isa> {
    match e_machine {
        EM_X86_64 => Some(&x86_64::X86_64),
        _ => None,
    }
}

/// The patching verbs for an ELF `e_machine`, if fntrace can patch it.
pub fn patcher_for_elf_machine(e_machine: u16) -> Option<&'static dyn Patcher> {
    match e_machine {
        EM_X86_64 => Some(&x86_64::X86_64),
        _ => None,
    }
}

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
