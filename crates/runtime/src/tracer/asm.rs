//! The tracer's assembly: the fast paths that record an event without
//! leaving assembly (entry with return hijacking, entry of functions with
//! exit sleds, exit at a return sled, the `function` tracer's entry), and
//! the return trampoline a hijacked function returns into.
//!
//! The return trampoline keeps the return registers (`rax`, `rdx`, `xmm0`,
//! `xmm1` — whole `ymm0`/`ymm1` where the CPU has AVX) and asks
//! `graph_return` where to go; it leaves by `jmp`, so no frame of ours stays
//! on the stack.

use std::arch::global_asm;
use std::sync::atomic::{AtomicUsize, Ordering};

use fntrace_arch::Shape;
use fntrace_core::Role;

use super::graph;
use super::thread::{off, SHADOW};
// The assembly takes the write pointer from the cursor's low 32 bits.
const _: () = assert!(super::thread::DEPTH_SHIFT == 32);
// The profiler's entries test the count's limit with the sign of its 32 bits.
const _: () = assert!(super::thread::PROFILE_COMMITS == 1 << 31);

/// The largest delta from the base an event holds.
static MAX_DELTA: u64 = fntrace_format::event::MAX_DELTA_FROM_BASE;
/// The cursor steps of the fast paths' commits.
static STEP_PUSH: u64 = super::thread::STEP_PUSH;
/// The word of a `DATA_REGISTERS` event of no words (the fast path ORs
/// the count, shifted by the kind's bits, in).
static DATA_REGISTERS_WORD: u64 = fntrace_format::event::data_word(fntrace_format::event::DATA_REGISTERS, 0);
const _: () = assert!(
    fntrace_format::event::data_word(fntrace_format::event::DATA_REGISTERS, 3)
        == fntrace_format::event::data_word(fntrace_format::event::DATA_REGISTERS, 0) | 3 << 3
);
static STEP_POP: u64 = super::thread::STEP_POP;
static STEP_PAYLOAD: u64 = super::thread::STEP_PAYLOAD;
static STEP_FRAME_PUSH: u64 = super::thread::STEP_FRAME_PUSH;
static STEP_FRAME_POP: u64 = super::thread::STEP_FRAME_POP;
// The fast paths derive the ENTRY and EXIT words from the function id and
// the delta from the base (plus one).
const _: () = assert!(
    fntrace_format::event::encode_from_base(fntrace_format::event::Kind::Exit, 5, 6) == 7 << 27 | 5 << 3 | 1
);
const _: () = assert!(fntrace_format::event::word_of(fntrace_format::event::Kind::Entry, 5) == 5 << 3);
const _: () = assert!(fntrace_format::event::word_of(fntrace_format::event::Kind::Exit, 5) == 5 << 3 | 1);

/// Where `fntrace_return_all` saves the vector registers in its save
/// area (after the nine general ones and a word of padding), which
/// `graph_return` reads `xmm0` from.
pub const RETURN_VECS: usize = 80;

/// The fast paths exist (and `fast_slot` asks for them).
pub const FAST_PATHS: bool = true;

/// How many entries each return trampoline has: one (AArch64 has more,
/// for signed return addresses).
pub const RETURN_ENTRIES: usize = 1;

/// The return trampoline that `a` enters: `a` (one entry each).
#[inline]
pub fn return_entry_of(a: usize) -> usize {
    a
}

/// The return trampoline (the address written into hijacked slots).
pub fn return_trampoline() -> usize {
    fntrace_return_to_handler as *const () as usize
}

/// The return trampoline that keeps every register, for the functions
/// whose callers may rely on it (`fids::PLAIN`), whichever the tracer: its
/// fast path, which falls back to [`return_trampoline_all`].
pub fn return_trampoline_bare() -> usize {
    fntrace_return_bare as *const () as usize
}

/// Where every return trampoline lies, `[start, end)`: every address a
/// hijacked return slot may hold.
pub fn return_trampolines() -> (usize, usize) {
    (
        fntrace_returns_start as *const () as usize,
        fntrace_returns_end as *const () as usize,
    )
}

/// The slow return trampoline that keeps every register.
pub fn return_trampoline_all() -> usize {
    fntrace_return_all as *const () as usize
}

/// function_graph's fast entry for a bare site, if it has one (no exit
/// sites: its frame is pushed and its return hijacked).
pub fn fast_graph_bare(open: bool) -> Option<usize> {
    (!open).then_some(fntrace_bare_fast_entry as *const () as usize)
}

/// The fast routine of `function_graph` for a site of `role` and `shape`,
/// if it has one: entries hijack the return unless the function has exit
/// sites (`open`); exits are served at return sleds only (a tail exit
/// site is followed by a jump, not a return).
pub fn fast_graph(role: Role, shape: Shape, open: bool) -> Option<usize> {
    let f: unsafe extern "C" fn() = match (role, shape, open) {
        (Role::Entry, _, false) => fntrace_fast_entry,
        (Role::Mcount, _, false) => fntrace_fast_entry_mcount,
        (Role::Entry, _, true) => fntrace_fast_open,
        (Role::Exit, Shape::ReturnSled, true) => fntrace_fast_exit,
        _ => return None,
    };
    Some(f as usize)
}

/// function_graph's fast entry for an entry site of a function whose
/// arguments are recorded, all integers in their ABI registers (`open`: a
/// function with exit sleds, whose return is not hijacked): its slot's
/// data word points at the function's [`ArgWords`].
pub fn fast_graph_args(open: bool) -> usize {
    let f: unsafe extern "C" fn() = if open {
        fntrace_fast_open_args
    } else {
        fntrace_fast_entry_args
    };
    f as usize
}

/// What `fntrace_fast_entry_args` reads of a function, made once
/// (`args::fast_words`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgWords {
    /// The frame word (`fid | flags << 32`).
    pub frame: u64,
    /// The descriptor (`fntrace_format::values::register_descriptor`).
    pub descriptor: u64,
    /// The `DATA` word: `DATA_REGISTERS`, K + 1 payload words.
    pub data: u64,
    /// K, the argument registers to record (1 to 6).
    pub count: u64,
    /// Where the copy of the K registers begins.
    pub copy: usize,
}

impl ArgWords {
    /// The words of a function whose frame word is `frame` and whose
    /// descriptor is `descriptor` (its count, K, in the top byte).
    pub fn new(frame: u64, descriptor: u64) -> Option<ArgWords> {
        let copies: [unsafe extern "C" fn(); 6] = [
            fntrace_args_copy1,
            fntrace_args_copy2,
            fntrace_args_copy3,
            fntrace_args_copy4,
            fntrace_args_copy5,
            fntrace_args_copy6,
        ];
        let count = descriptor >> 56;
        let copy = *copies.get((count as usize).checked_sub(1)?)? as *const () as usize;
        Some(ArgWords {
            frame,
            descriptor,
            data: fntrace_format::event::data_word(fntrace_format::event::DATA_REGISTERS, count as u32 + 1),
            count,
            copy,
        })
    }
}

/// The profiler's return trampoline (the address its hijacked slots get).
pub fn profile_trampoline() -> usize {
    fntrace_profile_return as *const () as usize
}

/// The fast routine of `profile` for a site of `role` and `shape`, as
/// [`fast_graph`]'s.
pub fn fast_profile(role: Role, shape: Shape, open: bool) -> Option<usize> {
    let f: unsafe extern "C" fn() = match (role, shape, open) {
        (Role::Entry, _, false) => fntrace_prof_entry,
        (Role::Mcount, _, false) => fntrace_prof_entry_mcount,
        (Role::Entry, _, true) => fntrace_prof_open,
        (Role::Exit, Shape::ReturnSled, true) => fntrace_prof_exit,
        _ => return None,
    };
    Some(f as usize)
}

/// The fast entry routine of the `function` tracer for a site of `role`.
pub fn fast_caller(role: Role) -> Option<usize> {
    match role {
        Role::Entry => Some(fntrace_fast_caller as *const () as usize),
        Role::Mcount => Some(fntrace_fast_caller_mcount as *const () as usize),
        Role::Exit => None,
    }
}

/// Where the fast paths go when they cannot record: the tracer's ops and
/// the generic routine of the site's role.
static FALLBACK_OPS: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_ENTRY: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_MCOUNT: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_EXIT: AtomicUsize = AtomicUsize::new(0);

/// Sets the fast paths' fallback: the ops and its generic routine for
/// each site role.
pub fn set_fallback(ops: usize, routine: impl Fn(Role) -> usize) {
    FALLBACK_OPS.store(ops, Ordering::Relaxed);
    FALLBACK_ENTRY.store(routine(Role::Entry), Ordering::Release);
    FALLBACK_MCOUNT.store(routine(Role::Mcount), Ordering::Release);
    FALLBACK_EXIT.store(routine(Role::Exit), Ordering::Release);
}

/// This thread's tracer state (the initial-exec TLS word the fast paths read).
#[inline(always)]
pub fn tls_get() -> usize {
    let p: usize;
    // SAFETY: reads this thread's TLS word `fntrace_tls_thread`.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags),
        );
    }
    p
}

/// Sets this thread's tracer state.
pub fn tls_set(v: usize) {
    // SAFETY: writes this thread's TLS word `fntrace_tls_thread`.
    unsafe {
        std::arch::asm!(
            "mov {t}, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {v}",
            t = out(reg) _,
            v = in(reg) v,
            options(nostack, preserves_flags),
        );
    }
}

extern "C" {
    fn fntrace_returns_start();
    fn fntrace_returns_end();
    fn fntrace_return_all();
    fn fntrace_return_bare();
    fn fntrace_bare_fast_entry();
    fn fntrace_return_to_handler();
    fn fntrace_fast_entry();
    fn fntrace_fast_entry_args();
    fn fntrace_fast_open_args();
    fn fntrace_args_copy1();
    fn fntrace_args_copy2();
    fn fntrace_args_copy3();
    fn fntrace_args_copy4();
    fn fntrace_args_copy5();
    fn fntrace_args_copy6();
    fn fntrace_fast_entry_mcount();
    fn fntrace_fast_open();
    fn fntrace_fast_exit();
    fn fntrace_fast_caller();
    fn fntrace_fast_caller_mcount();
    fn fntrace_profile_return();
    fn fntrace_prof_entry();
    fn fntrace_prof_entry_mcount();
    fn fntrace_prof_open();
    fn fntrace_prof_exit();
}

global_asm!(
    r#"
    // This thread's `Thread` (initial-exec TLS: one load through fs).
    .section .tbss,"awT",@nobits
    .p2align 3
    .globl fntrace_tls_thread
    .hidden fntrace_tls_thread
    .type fntrace_tls_thread, @object
    .size fntrace_tls_thread, 8
fntrace_tls_thread:
    .zero 8

    // Every fast path below follows one protocol (`thread.rs`, "Signals"):
    // read the thread's cursor (write pointer, depth, commit count), write
    // the frame past the depth, then publish with one compare-exchange of
    // the cursor that also reserves the event's words, and only then write
    // them (a zero word is one reserved and never written). No lock prefix:
    // only this thread's signal handlers can run in between, and a signal
    // never splits an instruction. If a handler traced anything meanwhile,
    // the cursor changed (every commit counts): the exchange fails and the
    // path starts again from `1:`; no word it wrote before the exchange
    // was one a handler had published.

    // rcx = this thread's state, \cur = its cursor, \wptr = where its next
    // event goes (the cursor's low 32 bits count words from the state);
    // to `fail` unless the fast paths may run and the chunk has room
    // (`fend` is 0 while they may not). \cur32 and \wptr32 name the low
    // halves of \cur and \wptr.
    // The registers the fast entry paths use (the arguments among them),
    // saved on entry and given back on every way out.
    .macro FNTRACE_SAVE
    push rax
    push rdx
    push rcx
    push rsi
    push rdi
    push r8
    .endm

    .macro FNTRACE_RESTORE
    pop r8
    pop rdi
    pop rsi
    pop rcx
    pop rdx
    pop rax
    .endm

    .macro FNTRACE_CURSOR fail, cur, cur32, wptr, wptr32
    mov rcx, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]
    mov rcx, qword ptr fs:[rcx]
    test rcx, rcx
    jz \fail
    mov \cur, [rcx + {cursor}]
    mov \wptr32, \cur32
    lea \wptr, [rcx + \wptr * 8]
    cmp \wptr, [rcx + {fend}]
    jae \fail
    .endm

    // \frame = the cursor's depth, in bytes of frames; then \frame = the
    // frame at that depth (the top one is 64 bytes below; the sentinel
    // below the first has a slot above any stack). The frames are at a
    // fixed offset from the thread's state.
    .macro FNTRACE_DEPTH frame, cur
    mov \frame, \cur
    shr \frame, {depth_shift}
    and \frame, {depth_mask}
    .endm
    .macro FNTRACE_FRAME frame
    lea \frame, [rcx + \frame + {frames_off}]
    .endm

    // rax = ticks since the thread's base, plus one (no event word is 0),
    // shifted into an event word's delta bits; to `fail` if that does not
    // fit. Clobbers rdx.
    .macro FNTRACE_DELTA fail
    rdtsc
    shl rdx, 32
    or rax, rdx
    sub rax, [rcx + {base}]
    cmp rax, [rip + {max_delta}]
    ja \fail
    inc rax
    shl rax, 27
    .endm

    // Publishes: the cursor from \old to \new (or back to `1:`), then the
    // event word \event at \at.
    .macro FNTRACE_COMMIT old, new, event, at
    mov rax, \old
    cmpxchg [rcx + {cursor}], \new
    jne 1b
    mov \at, \event
    .endm

    // Publishes the EXIT of the top frame (it ends at rsi; r9 is the
    // cursor read, rdi where the event goes) and reserves \extra more
    // words after it; to `8:` if the delta does not fit, back to `1:` if
    // the exchange fails. Clobbers rax, rdx, rsi.
    .macro FNTRACE_COMMIT_EXIT extra
    FNTRACE_DELTA 8f
    mov edx, dword ptr [rsi - 32]
    lea rdx, [rdx * 8 + 1]
    or rdx, rax
    mov rsi, r9
    add rsi, [rip + {step_pop}]
    .if \extra
    add rsi, \extra
    .endif
    FNTRACE_COMMIT r9, rsi, rdx, "[rdi]"
    .endm

    // The fast entry paths (function_graph: FNTRACE_FAST_ENTRY; function:
    // FNTRACE_FAST_CALLER), one per role: `entry` sites (fentry, patchable
    // entries: the function's return slot is [rsp + 8] on entry) and
    // `mcount` sites (after the prologue `push rbp; mov rbp, rsp`: the
    // slot is [rbp + 8]). `\slot` is that slot once the registers are
    // pushed. r11 is the site slot's data word: the frame word of the
    // function (`fid | flags << 32`), or the `function` tracer's event word.
    //
    // function_graph records the ENTRY event, pushes the frame and hijacks
    // the return, saving only what it uses. The return address is read
    // once, before the first try (a retry finds the trampoline there), and
    // the slot hijacked before the commit: a frame is published with its
    // slot already pointing at the trampoline, and any way out but the
    // commit puts the address back. Anything unusual (no thread state yet,
    // busy, a chunk full, a frame gone or a tail call, a long delta) goes
    // to the generic routine of the role with the tracer's ops.
    .macro FNTRACE_FAST_ENTRY name, slot, fallback, hijack, bare=0
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    .if \bare
    push r10
    push r11
    mov r11, [rsp + 16]
    movsxd r10, dword ptr [r11 - 4]
    add r11, r10
    mov r11, [r11 + 16]
    .endif
    FNTRACE_SAVE
    push r9
    .if \hijack
    mov r8, \slot
    .endif
1:
    FNTRACE_CURSOR 8f, rdi, edi, r9, r9d
    FNTRACE_DEPTH rsi, rdi
    cmp rsi, {shadow_bytes}
    jae 8f
    FNTRACE_FRAME rsi
    // The frame below (the sentinel if none) must be an outer call: a slot
    // at or below ours means it is gone (longjmp) or a tail call.
    lea rdx, \slot
    cmp [rsi - 64], rdx
    jbe 8f
    mov [rsi], rdx
    mov [rsi + 32], r11
    .if \hijack
    mov [rsi + 8], r8
    .if \bare
    lea rax, [rip + fntrace_return_bare]
    .else
    lea rax, [rip + fntrace_return_to_handler]
    .endif
    mov \slot, rax
    .endif
    FNTRACE_DELTA 8f
    lea edx, [r11 * 8]
    or rdx, rax
    mov rsi, rdi
    add rsi, [rip + {step_push}]
    FNTRACE_COMMIT rdi, rsi, rdx, "[r9]"
    pop r9
    FNTRACE_RESTORE
    .if \bare
    pop r11
    pop r10
    .endif
    ret
8:
    .if \hijack
    mov \slot, r8
    .endif
    pop r9
    FNTRACE_RESTORE
    .if \bare
    pop r11
    pop r10
    jmp {bare_entry}
    .else
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + \fallback]
    .endif
    .size \name, . - \name
    .endm

    // The `function` tracer: r11 is the ENTRY_CALLER word of the site's
    // function; the event's payload is the caller's address (the
    // function's return address, in its return slot).
    .macro FNTRACE_FAST_CALLER name, slot, fallback
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    FNTRACE_SAVE
1:
    FNTRACE_CURSOR 8f, rdi, edi, rsi, esi
    FNTRACE_DELTA 8f
    mov r8, rax
    or r8, r11
    mov rdx, rdi
    add rdx, [rip + {step_payload}]
    FNTRACE_COMMIT rdi, rdx, r8, "[rsi]"
    mov rdx, \slot
    mov [rsi + 8], rdx
    FNTRACE_RESTORE
    ret
8:
    FNTRACE_RESTORE
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + \fallback]
    .size \name, . - \name
    .endm

    FNTRACE_FAST_ENTRY fntrace_fast_entry, "[rsp + 64]", {fallback_entry}, 1
    FNTRACE_FAST_ENTRY fntrace_fast_entry_mcount, "[rbp + 8]", {fallback_mcount}, 1
    // Functions with exit sleds (XRay): the frame is pushed, the return
    // is not hijacked; fntrace_fast_exit closes it.
    FNTRACE_FAST_ENTRY fntrace_fast_open, "[rsp + 64]", {fallback_entry}, 0
    // Bare sites (`bare.rs`): every register kept — r10 and r11 too: the
    // function's callers may keep values in them across the call (gcc's
    // -fipa-ra) — and no slot: the detour calls through its word W, and the
    // frame word is the third of its words (W + 16), found from the
    // detour's own call displacement; the return goes to
    // fntrace_return_bare, and anything unusual to the bare generic routine
    // (which takes the ops from W + 8).
    FNTRACE_FAST_ENTRY fntrace_bare_fast_entry, "[rsp + 80]", {fallback_entry}, 1, 1

    // function_graph's fast entries of a function whose arguments are
    // recorded (`-A`, `-a`) where all of them are integers in their ABI
    // registers, in order (`args::fast_descriptor`): as fntrace_fast_entry
    // (`\hijack`) or fntrace_fast_open (a function with exit sleds), and
    // the event is followed, in the same reservation, by a DATA word, the
    // descriptor and one word per argument register (`DATA_REGISTERS`).
    // r11 points at the function's `ArgWords` (`args::fast_words`): the
    // frame word, the descriptor, the DATA word, K (the registers to
    // record, 1 to 6) and where to enter the copy below to copy K. r10
    // (the static chain) is kept. Nothing is written past the write
    // pointer before the commit: a word there could be left behind, and
    // read later in place of a zero.
    .macro FNTRACE_FAST_ARGS name, hijack
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    push r10
    FNTRACE_SAVE
    push r9
    // The arguments are now at: rdi [rsp+16], rsi [rsp+24], rdx [rsp+40],
    // rcx [rsp+32], r8 [rsp+8], r9 [rsp]; the return slot at [rsp+72].
    mov r10, r11
    mov r11, [r10]
    .if \hijack
    mov r8, [rsp + 72]
    .endif
1:
    FNTRACE_CURSOR 8f, rdi, edi, r9, r9d
    // Room for the K + 2 words after the event.
    mov rax, [r10 + 24]
    lea rax, [r9 + rax * 8 + 16]
    cmp rax, [rcx + {fend}]
    jae 8f
    FNTRACE_DEPTH rsi, rdi
    cmp rsi, {shadow_bytes}
    jae 8f
    FNTRACE_FRAME rsi
    lea rdx, [rsp + 72]
    cmp [rsi - 64], rdx
    jbe 8f
    mov [rsi], rdx
    mov [rsi + 32], r11
    .if \hijack
    mov [rsi + 8], r8
    lea rax, [rip + fntrace_return_to_handler]
    mov [rsp + 72], rax
    .endif
    FNTRACE_DELTA 8f
    lea edx, [r11 * 8]
    or rdx, rax
    mov rsi, [r10 + 24]
    lea rsi, [rdi + rsi + 2]
    add rsi, [rip + {step_push}]
    FNTRACE_COMMIT rdi, rsi, rdx, "[r9]"
    // After the commit, as every fast path writes its words, in an order
    // a reader parses from any prefix (a signal in between may leave the
    // rest 0: read as lost events; registers without their descriptor,
    // written last, are said not written): the DATA word, the K
    // registers (from the last: the copy is entered at its K-th step and
    // falls through), the descriptor.
    mov rdx, [r10 + 16]
    mov [r9 + 8], rdx
    jmp qword ptr [r10 + 32]
8:
    .if \hijack
    mov [rsp + 72], r8
    .endif
    pop r9
    FNTRACE_RESTORE
    pop r10
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + {fallback_entry}]
    .size \name, . - \name
    .endm

    FNTRACE_FAST_ARGS fntrace_fast_entry_args, 1
    FNTRACE_FAST_ARGS fntrace_fast_open_args, 0

    // The copy of both (the same stack, r9 the event, r10 the words), and
    // their way out.
    .text
    .p2align 4
    .globl fntrace_args_copy6
    .hidden fntrace_args_copy6
    .type fntrace_args_copy6, @function
fntrace_args_copy6:
    mov rdx, [rsp]
    mov [r9 + 64], rdx
    .globl fntrace_args_copy5
    .hidden fntrace_args_copy5
fntrace_args_copy5:
    mov rdx, [rsp + 8]
    mov [r9 + 56], rdx
    .globl fntrace_args_copy4
    .hidden fntrace_args_copy4
fntrace_args_copy4:
    mov rdx, [rsp + 32]
    mov [r9 + 48], rdx
    .globl fntrace_args_copy3
    .hidden fntrace_args_copy3
fntrace_args_copy3:
    mov rdx, [rsp + 40]
    mov [r9 + 40], rdx
    .globl fntrace_args_copy2
    .hidden fntrace_args_copy2
fntrace_args_copy2:
    mov rdx, [rsp + 24]
    mov [r9 + 32], rdx
    .globl fntrace_args_copy1
    .hidden fntrace_args_copy1
fntrace_args_copy1:
    mov rdx, [rsp + 16]
    mov [r9 + 24], rdx
    mov rdx, [r10 + 8]
    mov [r9 + 16], rdx
    pop r9
    FNTRACE_RESTORE
    pop r10
    ret
    .size fntrace_args_copy6, . - fntrace_args_copy6

    // The fast exit path (function_graph, XRay return sleds, patched as
    // `call slot; ret`): r11 is the slot's data word, the function's frame
    // word (its id, flags 0); [rsp + 8] is the function's return slot. The
    // function is returning: rax and rdx hold its value (kept in r8 and
    // r10), rcx, rsi, rdi and r8-r11 are free. Pops the frame and records
    // the EXIT if the top frame is this function's, not hijacked; anything
    // else goes to the generic exit routine.
    .text
    .p2align 4
    .globl fntrace_fast_exit
    .hidden fntrace_fast_exit
    .type fntrace_fast_exit, @function
fntrace_fast_exit:
    mov r8, rax
    mov r10, rdx
1:
    FNTRACE_CURSOR 8f, r9, r9d, rdi, edi
    FNTRACE_DEPTH rsi, r9
    FNTRACE_FRAME rsi
    lea rdx, [rsp + 8]
    cmp [rsi - 64], rdx
    jne 8f
    cmp [rsi - 32], r11
    jne 8f
    FNTRACE_DELTA 8f
    lea edx, [r11 * 8 + 1]
    or rdx, rax
    mov rsi, r9
    add rsi, [rip + {step_pop}]
    FNTRACE_COMMIT r9, rsi, rdx, "[rdi]"
    mov rax, r8
    mov rdx, r10
    ret
8:
    mov rax, r8
    mov rdx, r10
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + {fallback_exit}]
    .size fntrace_fast_exit, . - fntrace_fast_exit
    FNTRACE_FAST_CALLER fntrace_fast_caller, "[rsp + 56]", {fallback_entry}
    FNTRACE_FAST_CALLER fntrace_fast_caller_mcount, "[rbp + 8]", {fallback_mcount}

    // The profiler's fast paths (`profile.rs`): the same frames, slots,
    // cursor protocol and fallbacks as function_graph's, no event; the
    // call's numbers go to the thread's cell of the function (one cache
    // line, found at the entry by shifting the function id, and kept in
    // the frame) as its frame is popped.

    // rcx = this thread's state, \cur = its cursor; to `fail` unless the
    // profiler's fast paths may run (`fend` is FEND_PROFILE then).
    .macro FNTRACE_PROF_CURSOR fail, cur
    mov rcx, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]
    mov rcx, qword ptr fs:[rcx]
    test rcx, rcx
    jz \fail
    cmp qword ptr [rcx + {fend}], {fend_profile}
    jne \fail
    mov \cur, [rcx + {cursor}]
    .endm

    // \cell = the thread's cell of function \fid (32 bits); to `fail` if
    // the table does not reach it yet (the generic path grows it).
    .macro FNTRACE_PROF_CELL fail, cell, cell32, fid
    mov \cell32, \fid
    cmp \cell, [rcx + {profile_len}]
    jae \fail
    shl \cell, {cell_shift}
    add \cell, [rcx + {profile}]
    .endm

    // The end of a call whose frame (the top one) is at rsi - 64, the
    // cursor read in r9: rdi = its cell, rdx = its duration (0 if the
    // counter went back: another core's), and the function's total = the
    // total when it began + the duration, written before the pop
    // (`profile.rs`, "Signals"); then the frame popped, or back to `1:`.
    // Clobbers rax.
    .macro FNTRACE_PROF_POP
    mov rdi, [rsi - 64 + {f_cell}]
    rdtsc
    shl rdx, 32
    or rdx, rax
    sub rdx, [rsi - 64 + {f_start}]
    jae 2f
    xor edx, edx
2:
    mov rax, [rsi - 64 + {f_total0}]
    add rax, rdx
    mov [rdi + {c_total}], rax
    mov rax, r9
    add r9, [rip + {step_frame_pop}]
    cmpxchg [rcx + {cursor}], r9
    jne 1b
    .endm

    // The popped call's other numbers into its cell, and its duration
    // into its caller's cell as callees' time (the caller's frame is at
    // rsi - 128: the sentinel, whose cell is the sink, if none), each with
    // one instruction (min and max with a compare-exchange loop, no lock
    // prefix) so that a signal handler tracing the same function in
    // between keeps the cells consistent. rdx = duration, rdi = the cell.
    // Clobbers rax and rdx. Labels 3-6 only.
    .macro FNTRACE_PROF_ACCOUNT
    inc qword ptr [rdi + {c_calls}]
    add [rdi + {c_time}], rdx
    mov rax, [rsi - 128 + {f_cell}]
    add [rax + {c_children}], rdx
    cmp rdx, [rdi + {c_max}]
    jbe 4f
    mov rax, [rdi + {c_max}]
3:
    cmp rdx, rax
    jbe 4f
    cmpxchg [rdi + {c_max}], rdx
    jne 3b
4:
    not rdx
    cmp rdx, [rdi + {c_not_min}]
    jbe 6f
    mov rax, [rdi + {c_not_min}]
5:
    cmp rdx, rax
    jbe 6f
    cmpxchg [rdi + {c_not_min}], rdx
    jne 5b
6:
    .endm

    // The hijack targets, from here to fntrace_returns_end: the return
    // trampolines, one after another (a library call's guard treats a
    // return address among them as its caller's: `libcall.rs`).
    .text
    .p2align 4
    .globl fntrace_returns_start
    .hidden fntrace_returns_start
fntrace_returns_start:
    // The fast return path: a hijacked function returned here; rax and
    // rdx hold its return value (kept in r8 and r11; xmm0/xmm1 are not
    // touched), every other caller-saved register is free. Pops the frame,
    // records the EXIT and jumps to the real return address (held in r10:
    // once the frame is popped, a handler may reuse its place); anything
    // unusual goes to the slow trampoline below.
    .text
    .p2align 4
    .globl fntrace_return_to_handler
    .hidden fntrace_return_to_handler
    .type fntrace_return_to_handler, @function
    nop
fntrace_return_to_handler:
    mov r8, rax
    mov r11, rdx
1:
    FNTRACE_CURSOR 8f, r9, r9d, rdi, edi
    FNTRACE_DEPTH rsi, r9
    FNTRACE_FRAME rsi
    // The top frame (the sentinel if none) must be this return's.
    lea rdx, [rsp - 8]
    cmp [rsi - 64], rdx
    jne 8f
    mov r10, [rsi - 56]
    lea rdx, [rip + fntrace_return_to_handler]
    cmp r10, rdx
    je 8f
    movzx eax, byte ptr [rsi - {ret_tag}]
    test eax, eax
    jnz 5f
    FNTRACE_COMMIT_EXIT 0
    mov rax, r8
    mov rdx, r11
    jmp r10
5:
    // A return value to record (`-R`: the frame's tag of it, an integer
    // in rax): the EXIT is followed, in the same reservation, by a DATA
    // word, the descriptor (count 1, the tag; kept in the red zone until
    // written last: the frame may be reused once popped) and rax.
    lea rdx, [rdi + 24]
    cmp rdx, [rcx + {fend}]
    jae 8f
    bts rax, 56
    mov [rsp - 16], rax
    FNTRACE_COMMIT_EXIT 3
    mov rax, [rip + {data_registers}]
    or rax, 2 << 3
    mov [rdi + 8], rax
    mov [rdi + 24], r8
    mov rax, [rsp - 16]
    mov [rdi + 16], rax
    mov rax, r8
    mov rdx, r11
    jmp r10
8:
    mov rax, r8
    mov rdx, r11
    jmp fntrace_return_all
    .size fntrace_return_to_handler, . - fntrace_return_to_handler

    // The fast return of bare functions: as fntrace_return_to_handler,
    // but the registers it uses are kept (the callers of such a function
    // may rely on them; the first lands where the function's return address
    // was). The real return address goes just below them, for the final
    // jump once they are back: in the red zone all along, which signal
    // frames skip. Anything unusual goes to fntrace_return_all.
    .text
    .p2align 4
    .globl fntrace_return_bare
    .hidden fntrace_return_bare
    .type fntrace_return_bare, @function
    nop
fntrace_return_bare:
    push rcx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
    mov r8, rax
    mov r11, rdx
1:
    FNTRACE_CURSOR 8f, r9, r9d, rdi, edi
    FNTRACE_DEPTH rsi, r9
    FNTRACE_FRAME rsi
    // The top frame (the sentinel if none) must be this return's: its
    // slot is just above the registers pushed.
    lea rdx, [rsp + 48]
    cmp [rsi - 64], rdx
    jne 8f
    mov r10, [rsi - 56]
    lea rdx, [rip + fntrace_return_bare]
    cmp r10, rdx
    je 8f
    FNTRACE_COMMIT_EXIT 0
    mov [rsp - 8], r10
    mov rax, r8
    mov rdx, r11
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rcx
    jmp [rsp - 64]
8:
    mov rax, r8
    mov rdx, r11
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rcx
    jmp fntrace_return_all
    .size fntrace_return_bare, . - fntrace_return_bare

    // The slow return trampoline, where every fast return path goes for
    // anything unusual, and the return of functions no compiler prepared
    // (bare sites), whose callers may keep values in any register across
    // the call (gcc's -fipa-ra): it keeps every register — the general
    // ones and all sixteen vector registers — and calls `graph_return`,
    // which serves both tracers. The
    // real return address is left just below the stack (the red zone,
    // which signal frames skip) for the final jump, every register being
    // the function's.
    .text
    .p2align 4
    .globl fntrace_return_all
    .hidden fntrace_return_all
    .type fntrace_return_all, @function
    nop
fntrace_return_all:
    push rbp
    mov rbp, rsp
    and rsp, -16
    sub rsp, 624
    mov [rsp], rax
    mov [rsp + 8], rdx
    mov [rsp + 16], rcx
    mov [rsp + 24], rsi
    mov [rsp + 32], rdi
    mov [rsp + 40], r8
    mov [rsp + 48], r9
    mov [rsp + 56], r10
    mov [rsp + 64], r11
    // ymm only if the CPU has AVX and (where XINUSE can be read) the
    // upper halves are in use: see FNTRACE_SAVE_VECS in routines.rs.
    mov dword ptr [rsp + 600], 0
    cmp byte ptr [rip + {avx}], 0
    je 1f
    mov dword ptr [rsp + 600], 4
    cmp byte ptr [rip + {xinuse}], 0
    je 5f
    mov ecx, 1
    xgetbv
    mov [rsp + 600], eax
5:
    test byte ptr [rsp + 600], 4
    jz 1f
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    vmovdqu [rsp + {return_vecs} + \i * 32], ymm\i
    .endr
    jmp 2f
1:
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    movdqu [rsp + {return_vecs} + \i * 16], xmm\i
    .endr
2:
    mov rdi, rbp
    mov rsi, rsp
    call {ret}
    mov [rbp - 8], rax
    test byte ptr [rsp + 600], 4
    jz 3f
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    vmovdqu ymm\i, [rsp + {return_vecs} + \i * 32]
    .endr
    jmp 4f
3:
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    movdqu xmm\i, [rsp + {return_vecs} + \i * 16]
    .endr
4:
    mov rax, [rsp]
    mov rdx, [rsp + 8]
    mov rcx, [rsp + 16]
    mov rsi, [rsp + 24]
    mov rdi, [rsp + 32]
    mov r8, [rsp + 40]
    mov r9, [rsp + 48]
    mov r10, [rsp + 56]
    mov r11, [rsp + 64]
    mov rsp, rbp
    pop rbp
    jmp [rsp - 16]
    .size fntrace_return_all, . - fntrace_return_all

    // The profiler's return trampoline, as fntrace_return_to_handler: rax
    // kept in r8, rdx pushed where the function's return address was (the
    // top frame's slot is then rsp); the real return address in r10. A
    // tail call's frame holds this trampoline as its return address: the
    // jump to it ends the caller's frame, at the same slot, next.
    .text
    .p2align 4
    .globl fntrace_profile_return
    .hidden fntrace_profile_return
    .type fntrace_profile_return, @function
    nop
fntrace_profile_return:
    push rdx
    mov r8, rax
1:
    FNTRACE_PROF_CURSOR 8f, r9
    FNTRACE_DEPTH rsi, r9
    FNTRACE_FRAME rsi
    cmp [rsi - 64], rsp
    jne 8f
    mov r10, [rsi - 56]
    FNTRACE_PROF_POP
    FNTRACE_PROF_ACCOUNT
    mov rax, r8
    pop rdx
    jmp r10
8:
    mov rax, r8
    pop rdx
    jmp fntrace_return_all
    .size fntrace_profile_return, . - fntrace_profile_return
    .globl fntrace_returns_end
    .hidden fntrace_returns_end
fntrace_returns_end:

    // The profiler's entries: the frame pushed with its start tick, its
    // cell and the function's total so far (the cell's), the return
    // hijacked into fntrace_profile_return unless \hijack is 0.
    .macro FNTRACE_PROF_ENTRY name, slot, fallback, hijack
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    FNTRACE_SAVE
    .if \hijack
    mov r8, \slot
    .endif
1:
    FNTRACE_PROF_CURSOR 8f, rdi
    // The commit count (the write pointer's bits) below PROFILE_COMMITS.
    test edi, edi
    js 8f
    FNTRACE_DEPTH rsi, rdi
    cmp rsi, {shadow_bytes}
    jae 8f
    FNTRACE_PROF_CELL 8f, rax, eax, r11d
    FNTRACE_FRAME rsi
    lea rdx, \slot
    cmp [rsi - 64], rdx
    jbe 8f
    mov [rsi], rdx
    mov [rsi + {f_cell}], rax
    mov rax, [rax + {c_total}]
    mov [rsi + {f_total0}], rax
    mov [rsi + 32], r11
    .if \hijack
    mov [rsi + 8], r8
    lea rax, [rip + fntrace_profile_return]
    mov \slot, rax
    .endif
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov [rsi + {f_start}], rax
    mov rax, rdi
    add rdi, [rip + {step_frame_push}]
    cmpxchg [rcx + {cursor}], rdi
    jne 1b
    FNTRACE_RESTORE
    ret
8:
    .if \hijack
    mov \slot, r8
    .endif
    FNTRACE_RESTORE
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + \fallback]
    .size \name, . - \name
    .endm

    FNTRACE_PROF_ENTRY fntrace_prof_entry, "[rsp + 56]", {fallback_entry}, 1
    FNTRACE_PROF_ENTRY fntrace_prof_entry_mcount, "[rbp + 8]", {fallback_mcount}, 1
    FNTRACE_PROF_ENTRY fntrace_prof_open, "[rsp + 56]", {fallback_entry}, 0

    // The profiler's exit at an XRay return sled (`call slot; ret`), as
    // fntrace_fast_exit: r11 is the function's frame word, [rsp + 8] its
    // return slot; rax and rdx hold the return value (kept in r8 and r10).
    .text
    .p2align 4
    .globl fntrace_prof_exit
    .hidden fntrace_prof_exit
    .type fntrace_prof_exit, @function
fntrace_prof_exit:
    mov r8, rax
    mov r10, rdx
1:
    FNTRACE_PROF_CURSOR 8f, r9
    FNTRACE_DEPTH rsi, r9
    FNTRACE_FRAME rsi
    lea rdx, [rsp + 8]
    cmp [rsi - 64], rdx
    jne 8f
    cmp [rsi - 32], r11
    jne 8f
    FNTRACE_PROF_POP
    FNTRACE_PROF_ACCOUNT
    mov rax, r8
    mov rdx, r10
    ret
8:
    mov rax, r8
    mov rdx, r10
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + {fallback_exit}]
    .size fntrace_prof_exit, . - fntrace_prof_exit

"#,
    bare_entry = sym crate::routines::fntrace_bare_entry,
    avx = sym crate::routines::AVX,
    xinuse = sym crate::routines::XINUSE,
    fend = const off::FEND,
    max_delta = sym MAX_DELTA,
    step_push = sym STEP_PUSH,
    return_vecs = const RETURN_VECS,
    data_registers = sym DATA_REGISTERS_WORD,
    step_pop = sym STEP_POP,
    step_payload = sym STEP_PAYLOAD,
    depth_shift = const super::thread::DEPTH_SHIFT,
    depth_mask = const super::thread::DEPTH_MASK,
    cursor = const off::CURSOR,
    base = const off::BASE,
    shadow_bytes = const SHADOW * 64,
    frames_off = const super::thread::FRAMES_OFF,
    ret_tag = const super::thread::RET_TAG_FROM_END,
    fallback_ops = sym FALLBACK_OPS,
    fallback_entry = sym FALLBACK_ENTRY,
    fallback_mcount = sym FALLBACK_MCOUNT,
    fallback_exit = sym FALLBACK_EXIT,
    ret = sym graph::graph_return,
    fend_profile = const super::thread::FEND_PROFILE,
    profile = const off::PROFILE,
    profile_len = const off::PROFILE_LEN,
    cell_shift = const super::profile::CELL_SHIFT,
    c_calls = const super::profile::off::CALLS,
    f_start = const std::mem::offset_of!(super::thread::Frame, start),
    f_total0 = const std::mem::offset_of!(super::thread::Frame, total0),
    f_cell = const std::mem::offset_of!(super::thread::Frame, cell),
    c_total = const super::profile::off::TOTAL,
    c_time = const super::profile::off::TIME,
    c_children = const super::profile::off::CHILDREN,
    c_not_min = const super::profile::off::NOT_MIN,
    c_max = const super::profile::off::MAX,
    step_frame_push = sym STEP_FRAME_PUSH,
    step_frame_pop = sym STEP_FRAME_POP,
);
