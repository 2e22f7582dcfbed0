//! The interface between generic code and one instruction set.

/// A call instruction found in code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Length of the whole instruction in bytes. On MIPS, a call is the
    /// whole sequence a site consists of, its delay slot included (`-pg`'s
    /// `move at, ra; jal _mcount; addiu sp, sp, -8`), and its address is the
    /// sequence's first instruction.
    pub len: u8,
    /// Where it goes.
    pub target: CallTarget,
}

/// The destination of a call instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallTarget {
    /// A direct call to this address (`call rel32` on x86-64).
    Direct(u64),
    /// An indirect call through the pointer stored at this address
    /// (`call *slot(%rip)` on x86-64, e.g. a GOT entry).
    Memory(u64),
    /// An indirect call through the pointer stored at this offset from the
    /// global pointer (MIPS PIC: `lw t9, %call16(f)(gp); jalr t9`): a GOT
    /// entry, once the file's `_gp` is known.
    GpRelative(i64),
}

/// A call site found from a relocation in a relocatable object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelocCall {
    /// Section offset of the first byte of the call instruction.
    pub offset: u64,
    /// Length of the call instruction.
    pub len: u8,
}

/// How a relocation computes the value of a pointer-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerReloc {
    /// `S + A` (e.g. `R_X86_64_64`).
    Absolute,
    /// `S + A - P` (e.g. `R_X86_64_PC64`): the entry is relative to its own
    /// address, but the address it designates is still `S + A`.
    PcRelative,
    /// `B + A` (e.g. `R_X86_64_RELATIVE`): load base plus addend.
    Relative,
}

/// The kind of an XRay sled, as recorded in `xray_instr_map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SledKind {
    /// Function entry (`FUNCTION_ENTER`, and `LOG_ARGS_ENTER`).
    Entry,
    /// Function exit at a `ret` (`FUNCTION_EXIT`).
    Exit,
    /// Function exit through a tail call (`TAIL_CALL`).
    Tail,
}

/// What generic code needs to know about one instruction set.
///
/// Every method takes raw bytes and never trusts them: short or garbled
/// input gives `None` or an error string, never a panic.
pub trait Isa: Sync {
    /// Name of the architecture, as users know it.
    fn name(&self) -> &'static str;

    /// Size in bytes of a code pointer in table entries (`.quad` on 64-bit).
    fn pointer_size(&self) -> usize;

    /// Decodes a call instruction at the start of `code`, located at `addr`.
    fn decode_call(&self, code: &[u8], addr: u64) -> Option<Call>;

    /// Calls `found(address, call)` for every call instruction in `code`
    /// (located at `addr`), decoding linearly from the start.
    fn for_each_call(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, Call));

    /// Whether `code` (located at `addr`) may hold a call whose target
    /// `wanted` accepts. `false` means [`Isa::for_each_call`] would find no
    /// such call, so decoding can be skipped; the default always says `true`.
    fn may_call(&self, code: &[u8], addr: u64, wanted: &mut dyn FnMut(CallTarget) -> bool) -> bool {
        let _ = (code, addr, wanted);
        true
    }

    /// The NOP instructions at the start of `code`: how many instructions and
    /// how many bytes in all, stopping after at most `max_bytes` bytes.
    fn nop_run(&self, code: &[u8], max_bytes: usize) -> (usize, usize);

    /// Length of a landing-pad instruction at a function entry (`endbr64`),
    /// which an entry site may follow; 0 if there is none.
    fn landing_pad_len(&self, code: &[u8]) -> usize;

    /// Calls `found(stub_address, slot_address)` for every PLT stub in a PLT
    /// section (`code` located at `addr`): the stub jumps through `slot`.
    fn for_each_plt_stub(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, u64));

    /// Checks that `code` starts with an unpatched XRay sled of `kind` and
    /// returns the sled length.
    fn xray_sled(&self, kind: SledKind, code: &[u8]) -> Result<usize, String>;

    /// If a relocation of type `r_type` at `r_offset` in an executable section
    /// with contents `section` is the target field of a call instruction,
    /// the call.
    fn reloc_call(&self, r_type: u32, r_offset: u64, section: &[u8]) -> Option<RelocCall>;

    /// How a relocation of type `r_type` fills a pointer-table entry, if it is
    /// one of the kinds that do.
    fn pointer_reloc(&self, r_type: u32) -> Option<PointerReloc>;

    /// The relocation type that stores `S + A` in a pointer-sized field, and
    /// whether the architecture uses RELA (explicit addends).
    fn absolute_pointer_reloc(&self) -> (u32, bool);
}
