//! Which calls go to a profiling hook (`__fentry__`, `mcount`, `__return__`).
//!
//! In a linked file a call reaches the hook through a PLT stub (`call
//! __fentry__@plt`), through its GOT slot (gcc's PIC `call
//! *__fentry__@GOTPCREL(%rip)`), or directly when the hook is defined in the
//! file itself; on MIPS through the GOT slot `$gp` addresses, which the
//! dynamic symbol table names ([`Got`]). In a relocatable object the call
//! carries a relocation against the hook's symbol. This module maps both to
//! [`Hook`]s.

use std::collections::HashMap;

use fntrace_arch::CallTarget;
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget, SymbolIndex,
};

use crate::dynrel::DynReloc;
use crate::got::Got;
use crate::image::Image;
use crate::symbols::FunctionTable;

/// A profiling hook that instrumented code calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    /// `__fentry__`, called first thing in a function.
    Fentry,
    /// `mcount` (glibc also has `_mcount`), called after the prologue.
    Mcount,
    /// `__return__`, called before a `ret` (`-minstrument-return=call`).
    Return,
}

impl Hook {
    pub fn from_name(name: &str) -> Option<Hook> {
        // GNU ld's MIPS stubs that set `t9` for a PIC function called from
        // non-PIC code (`.pic._mcount`) fall through into it.
        let name = name.strip_prefix(".pic.").unwrap_or(name);
        // The long-branch veneers that linkers insert where a call cannot
        // reach (AArch64 `bl` beyond ±128 MB) jump to the hook: GNU ld
        // names them `__<name>_veneer`, lld `__AArch64{AbsLong,ADRP}Thunk_<name>`.
        let name = name
            .strip_prefix("__")
            .and_then(|n| n.strip_suffix("_veneer"))
            .or_else(|| name.strip_prefix("__AArch64AbsLongThunk_"))
            .or_else(|| name.strip_prefix("__AArch64ADRPThunk_"))
            .unwrap_or(name);
        match name {
            "__fentry__" => Some(Hook::Fentry),
            "mcount" | "_mcount" | "__mcount" | "__gnu_mcount_nc" => Some(Hook::Mcount),
            "__return__" => Some(Hook::Return),
            _ => None,
        }
    }
}

/// Sections holding PLT stubs, as GNU ld and lld name them.
const PLT_SECTIONS: [&str; 3] = [".plt", ".plt.sec", ".plt.got"];

/// Where the hooks can be reached, and the names of other call targets for
/// messages.
#[derive(Default)]
pub(crate) struct Hooks {
    /// Linked files: direct-call targets (PLT stubs, defined hooks).
    direct: HashMap<u64, Hook>,
    /// Linked files: pointer slots (GOT entries) holding a hook's address.
    slots: HashMap<u64, Hook>,
    /// Linked files: PLT stub address → symbol name, for messages.
    plt_names: HashMap<u64, String>,
    /// Linked files: GOT slot → symbol name, for messages.
    slot_names: HashMap<u64, String>,
    /// Relocatable objects: (section, call offset) → (call length, hook).
    relocated: HashMap<(usize, u64), (u8, Hook)>,
    /// Linked files: the global pointer GP-relative calls load through
    /// (MIPS `_gp`).
    gp: Option<u64>,
}

impl Hooks {
    /// The hooks of the file; in a linked file, the GOT slots named by
    /// dynamic relocations are those [`Hooks::name_slot`] took in.
    pub fn read(mut self, image: &Image<'_>, functions: &FunctionTable, got: &Got) -> Hooks {
        if image.relocatable() {
            self.read_relocations(image);
        } else {
            self.gp = got.gp;
            self.read_linked(image, functions, got);
        }
        self
    }

    /// Linked files: a GOT slot the dynamic linker fills (a relocation
    /// against a symbol), with its symbol's name.
    pub fn name_slot(&mut self, dynsyms: &object::SymbolTable<'_, '_>, reloc: DynReloc) {
        if reloc.symbol == 0 {
            return;
        }
        let index = SymbolIndex(reloc.symbol as usize);
        let Ok(name) = dynsyms.symbol_by_index(index).and_then(|s| s.name()) else {
            return;
        };
        self.add_slot(reloc.offset, name);
    }

    /// A GOT slot filled with symbol `name`'s address.
    fn add_slot(&mut self, slot: u64, name: &str) {
        if let Some(hook) = Hook::from_name(name) {
            self.slots.insert(slot, hook);
        }
        self.slot_names.insert(slot, name.to_string());
    }

    /// True if nothing in the file calls a hook.
    pub fn is_empty(&self) -> bool {
        self.direct.is_empty() && self.slots.is_empty() && self.relocated.is_empty()
    }

    fn read_linked(&mut self, image: &Image<'_>, functions: &FunctionTable, got: &Got) {
        // GOT slots that dynamic symbols name without a relocation (MIPS).
        for (slot, name) in &got.symbol_slots {
            self.add_slot(*slot, name);
        }
        // Hooks defined in the file itself (static links, custom hooks).
        let mut defined: HashMap<u64, Hook> = HashMap::new();
        for f in &functions.functions {
            if let Some(hook) = Hook::from_name(&f.name) {
                defined.insert(f.address, hook);
            }
        }
        // GOT slots filled at link time with a defined hook's address.
        if !defined.is_empty() {
            for (_, got) in image
                .sections_named(".got")
                .chain(image.sections_named(".got.plt"))
            {
                let step = image.isa.pointer_size();
                for (i, word) in got.data.chunks_exact(step).enumerate() {
                    if let Some(hook) = image.read_pointer(word).and_then(|v| defined.get(&v)) {
                        self.slots
                            .insert(got.address.wrapping_add((i * step) as u64), *hook);
                    }
                }
            }
        }
        // PLT stubs jump through slots.
        for name in PLT_SECTIONS {
            for (_, plt) in image.sections_named(name) {
                image
                    .isa
                    .for_each_plt_stub(plt.data, plt.address, &mut |stub, slot| {
                        if let Some(hook) = self.slots.get(&slot) {
                            self.direct.insert(stub, *hook);
                        }
                        if let Some(name) = self.slot_names.get(&slot) {
                            self.plt_names.insert(stub, format!("{name}@plt"));
                        }
                    });
            }
        }
        self.direct.extend(defined);
    }

    fn read_relocations(&mut self, image: &Image<'_>) {
        for section in image.file.sections() {
            let index = section.index().0;
            let Some(info) = image.section(index).filter(|s| s.exec) else {
                continue;
            };
            for (offset, reloc) in section.relocations() {
                let RelocationFlags::Elf { r_type } = reloc.flags() else {
                    continue;
                };
                let RelocationTarget::Symbol(symbol) = reloc.target() else {
                    continue;
                };
                let Some(hook) = image
                    .file
                    .symbol_by_index(symbol)
                    .ok()
                    .and_then(|s| s.name().ok().and_then(Hook::from_name))
                else {
                    continue;
                };
                if let Some(call) = image.isa.reloc_call(r_type.0, offset, info.data) {
                    self.relocated.insert((index, call.offset), (call.len, hook));
                }
            }
        }
    }

    /// The hook a call in a linked file goes to.
    pub fn linked_call(&self, target: CallTarget) -> Option<Hook> {
        match target {
            CallTarget::Direct(address) => self.direct.get(&address).copied(),
            CallTarget::Memory(slot) => self.slots.get(&slot).copied(),
            CallTarget::GpRelative(offset) => self.slots.get(&self.gp?.wrapping_add_signed(offset)).copied(),
        }
    }

    /// The hook a call at `offset` of `section` in a relocatable object goes
    /// to, and the length of the call.
    pub fn relocated_call(&self, section: usize, offset: u64) -> Option<(u8, Hook)> {
        self.relocated.get(&(section, offset)).copied()
    }

    /// All hook calls of a relocatable object: (section, offset, length, hook).
    pub fn relocated_calls(&self) -> impl Iterator<Item = (usize, u64, u8, Hook)> + '_ {
        self.relocated
            .iter()
            .map(|(&(section, offset), &(len, hook))| (section, offset, len, hook))
    }

    /// A name for a call target of a linked file, for messages.
    pub fn describe(&self, target: CallTarget, image: &Image<'_>, functions: &FunctionTable) -> String {
        match target {
            CallTarget::Direct(address) => self
                .plt_names
                .get(&address)
                .cloned()
                .or_else(|| {
                    let section = image.code_section_at(address)?;
                    let i = functions.at(section, address)?;
                    Some(functions.functions[i].name.to_string())
                })
                .unwrap_or_else(|| format!("{address:#x}")),
            CallTarget::Memory(slot) => match self.slot_names.get(&slot) {
                Some(name) => format!("*{name}@got"),
                None => format!("*{slot:#x}"),
            },
            CallTarget::GpRelative(offset) => {
                match self
                    .gp
                    .and_then(|gp| self.slot_names.get(&gp.wrapping_add_signed(offset)))
                {
                    Some(name) => format!("*{name}@got"),
                    None => format!("*{offset}(gp)"),
                }
            }
        }
    }
}
