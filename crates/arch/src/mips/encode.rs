//! MIPS instruction encoders and the few decoders the plans need: the
//! R-, I- and J-formats of the MIPS32/MIPS64 release 2 base ISA.

/// Register numbers, o32 names (n64 calls 8..11 `a4..a7` and 12 `t0`).
pub mod reg {
    /// `$zero`.
    pub const ZERO: u32 = 0;
    /// `$at`, the assembler temporary: `-pg` saves `ra` in it.
    pub const AT: u32 = 1;
    /// `$v0`.
    pub const V0: u32 = 2;
    /// `$v1`: `-mlong-calls` builds `_mcount`'s address in it.
    pub const V1: u32 = 3;
    /// `$a0`, the first argument.
    pub const A0: u32 = 4;
    /// `$t0` in o32 (`$a4` in n64).
    pub const T0_O32: u32 = 8;
    /// `$t0` in n64 (`$t4` in o32).
    pub const T0_N64: u32 = 12;
    /// `$t9`: PIC calls go through it.
    pub const T9: u32 = 25;
    /// `$gp`.
    pub const GP: u32 = 28;
    /// `$sp`.
    pub const SP: u32 = 29;
    /// `$fp` (`$s8`).
    pub const FP: u32 = 30;
    /// `$ra`.
    pub const RA: u32 = 31;
}

/// `nop` (`sll zero, zero, 0`).
pub const NOP: u32 = 0;

const fn r(rs: u32, rt: u32, rd: u32, sa: u32, funct: u32) -> u32 {
    (rs & 31) << 21 | (rt & 31) << 16 | (rd & 31) << 11 | (sa & 31) << 6 | (funct & 63)
}

const fn i(op: u32, rs: u32, rt: u32, imm: u16) -> u32 {
    op << 26 | (rs & 31) << 21 | (rt & 31) << 16 | imm as u32
}

/// `or rd, rs, zero`, the `move` gcc 12 emits (`move at, ra` = `0x03e00825`).
pub const fn move_(rd: u32, rs: u32) -> u32 {
    r(rs, reg::ZERO, rd, 0, 0x25)
}

/// `jr rs`.
pub const fn jr(rs: u32) -> u32 {
    r(rs, 0, 0, 0, 0x08)
}

/// `jalr rd, rs`.
pub const fn jalr(rd: u32, rs: u32) -> u32 {
    r(rs, 0, rd, 0, 0x09)
}

/// `addu rd, rs, rt`.
pub const fn addu(rd: u32, rs: u32, rt: u32) -> u32 {
    r(rs, rt, rd, 0, 0x21)
}

/// `daddu rd, rs, rt`.
pub const fn daddu(rd: u32, rs: u32, rt: u32) -> u32 {
    r(rs, rt, rd, 0, 0x2d)
}

/// `dsll32 rd, rt, sa` (shift left by `sa + 32`).
pub const fn dsll32(rd: u32, rt: u32, sa: u32) -> u32 {
    r(0, rt, rd, sa, 0x3c)
}

/// `dsll rd, rt, sa`.
pub const fn dsll(rd: u32, rt: u32, sa: u32) -> u32 {
    r(0, rt, rd, sa, 0x38)
}

/// `lui rt, imm`.
pub const fn lui(rt: u32, imm: u16) -> u32 {
    i(0x0f, 0, rt, imm)
}

/// `addiu rt, rs, imm`.
pub const fn addiu(rt: u32, rs: u32, imm: i16) -> u32 {
    i(0x09, rs, rt, imm as u16)
}

/// `daddiu rt, rs, imm`.
pub const fn daddiu(rt: u32, rs: u32, imm: i16) -> u32 {
    i(0x19, rs, rt, imm as u16)
}

/// `ori rt, rs, imm`.
pub const fn ori(rt: u32, rs: u32, imm: u16) -> u32 {
    i(0x0d, rs, rt, imm)
}

/// `lw rt, off(base)`.
pub const fn lw(rt: u32, off: i16, base: u32) -> u32 {
    i(0x23, base, rt, off as u16)
}

/// `sw rt, off(base)`.
pub const fn sw(rt: u32, off: i16, base: u32) -> u32 {
    i(0x2b, base, rt, off as u16)
}

/// `ld rt, off(base)`.
pub const fn ld(rt: u32, off: i16, base: u32) -> u32 {
    i(0x37, base, rt, off as u16)
}

/// `sd rt, off(base)`.
pub const fn sd(rt: u32, off: i16, base: u32) -> u32 {
    i(0x3f, base, rt, off as u16)
}

/// `beq rs, rt, off` (`off` in instructions, from the delay slot).
pub const fn beq(rs: u32, rt: u32, off: i16) -> u32 {
    i(0x04, rs, rt, off as u16)
}

/// `bne rs, rt, off`.
pub const fn bne(rs: u32, rt: u32, off: i16) -> u32 {
    i(0x05, rs, rt, off as u16)
}

/// `bnel rs, rt, off`: branch-likely; when not taken its delay slot is
/// annulled (not executed).
pub const fn bnel(rs: u32, rt: u32, off: i16) -> u32 {
    i(0x15, rs, rt, off as u16)
}

/// `b off` (`beq zero, zero, off`): the 004 seed's `b 1f` is `b(4)`,
/// `0x10000004`.
pub const fn b(off: i16) -> u32 {
    beq(reg::ZERO, reg::ZERO, off)
}

/// `li rt, imm` for a small immediate (`addiu rt, zero, imm`): the 001
/// seed's `li t0, 0|1`.
pub const fn li(rt: u32, imm: i16) -> u32 {
    addiu(rt, reg::ZERO, imm)
}

/// `jal target` (`target` within the 256 MB region of the delay slot).
pub const fn jal(target: u64) -> u32 {
    0x03 << 26 | ((target >> 2) as u32 & 0x03ff_ffff)
}

/// `j target`.
pub const fn j(target: u64) -> u32 {
    0x02 << 26 | ((target >> 2) as u32 & 0x03ff_ffff)
}

/// Whether a `jal`/`j` at `at` reaches `target`: the same 256 MB region
/// as the delay slot (the kernel's `apply_r_mips_26_rel` check, whose
/// failure the 000 seed reports as "relocation overflow").
pub const fn jal_reaches(at: u64, target: u64) -> bool {
    target & 3 == 0 && (at.wrapping_add(4) & !0x0fff_ffff) == (target & !0x0fff_ffff)
}

/// The target of a `jal`/`j` at `at`.
pub const fn jal_target(at: u64, word: u32) -> u64 {
    (at.wrapping_add(4) & !0x0fff_ffff) | ((word & 0x03ff_ffff) as u64) << 2
}

/// The major opcode of `word`.
pub const fn opcode(word: u32) -> u32 {
    word >> 26
}

/// Whether `word` is `bal off` (`bgezal zero, off`): what GNU ld relaxes
/// a PIC `jalr t9` to when the callee is near and local.
pub const fn is_bal(word: u32) -> bool {
    word >> 16 == 0x0411
}

/// Whether `word` is `jal`.
pub const fn is_jal(word: u32) -> bool {
    opcode(word) == 0x03
}

/// The `%hi` half of a 32-bit address: what `lui` loads so that adding the
/// sign-extended `%lo` gives the address.
pub const fn hi(addr: u64) -> u16 {
    ((addr.wrapping_add(0x8000)) >> 16) as u16
}

/// The `%lo` half of an address, as `addiu` sign-extends it.
pub const fn lo(addr: u64) -> i16 {
    addr as u16 as i16
}

/// Whether `addr` is what `lui`/`addiu` can build: a sign-extended 32-bit
/// value (any address on MIPS32; the low and high 2 GiB on MIPS64).
pub const fn fits_hi_lo(addr: u64) -> bool {
    let v = addr as i64;
    v == v as i32 as i64
}

/// The four 16-bit parts `%highest`, `%higher`, `%hi`, `%lo` of a 64-bit
/// address, with the carries that the sign-extending `daddiu`s need.
pub const fn parts64(addr: u64) -> [u16; 4] {
    let lo = addr as u16;
    let hi = (addr.wrapping_add(0x8000) >> 16) as u16;
    let higher = (addr.wrapping_add(0x8000_8000) >> 32) as u16;
    let highest = (addr.wrapping_add(0x8000_8000_8000) >> 48) as u16;
    [highest, higher, hi, lo]
}

/// The registers of an R-format word: `(rs, rt, rd, funct)`.
pub const fn r_fields(word: u32) -> (u32, u32, u32, u32) {
    ((word >> 21) & 31, (word >> 16) & 31, (word >> 11) & 31, word & 63)
}

/// Whether `word` is `move rd, rs` in any of the forms gcc and gas emit
/// (`or`, `addu`, `daddu` with `$zero`).
pub const fn is_move(word: u32, rd: u32, rs: u32) -> bool {
    let (w_rs, w_rt, w_rd, funct) = r_fields(word);
    opcode(word) == 0
        && (word >> 6) & 31 == 0
        && w_rd == rd
        && ((w_rs == rs && w_rt == 0) || (w_rs == 0 && w_rt == rs))
        && (funct == 0x25 || funct == 0x21 || funct == 0x2d)
}

/// Whether `word` is `addiu/daddiu sp, sp, imm`; returns `imm`.
pub const fn sp_adjust(word: u32) -> Option<i16> {
    let op = opcode(word);
    if (op == 0x09 || op == 0x19) && (word >> 21) & 31 == reg::SP && (word >> 16) & 31 == reg::SP {
        Some(word as u16 as i16)
    } else {
        None
    }
}

/// Whether `word` is `jalr ra, rs` (the call form `jalr rs`); returns `rs`.
pub const fn jalr_ra(word: u32) -> Option<u32> {
    let (rs, rt, rd, funct) = r_fields(word);
    if opcode(word) == 0 && rt == 0 && rd == reg::RA && funct == 0x09 && (word >> 6) & 31 == 0 {
        Some(rs)
    } else {
        None
    }
}

/// `sdc1 ft, off(base)`: store a double (64-bit) floating-point register.
pub const fn sdc1(ft: u32, off: i16, base: u32) -> u32 {
    i(0x3d, base, ft, off as u16)
}

/// `ldc1 ft, off(base)`: load a double (64-bit) floating-point register.
pub const fn ldc1(ft: u32, off: i16, base: u32) -> u32 {
    i(0x35, base, ft, off as u16)
}
