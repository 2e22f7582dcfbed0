//! The values `-A` and `-R` ask for (`fntrace_format::args`): which
//! functions want them (their specs, matched by `fids::publish`), and
//! their capture — at entry from the register frame the regs routine
//! built, at the return from the return registers — into the payload of
//! a `DATA` event (`fntrace_format::values`).
//!
//! Capture never faults the program: registers are copies, a stack word
//! is read directly only in the page of the return slot (mapped: the
//! stack is), and strings and any other memory through
//! [`sys::read_memory`], which stops at the first unreadable byte. A
//! string pointer that reads nothing is recorded as unreadable (`NULL`
//! for 0); one that ends in unreadable memory before its terminator, as
//! cut there.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use fntrace_filter::{Filter, Names};
use fntrace_format::args::{ArgSpec, Format, Item, Place, FP_ARGS, INT_ARGS, MAX_ITEMS};
use fntrace_format::values::{self, Writer, MAX_PAYLOAD, MAX_STRING};
use fntrace_sites::params::{AtEntry, Params, Type};

use super::asm::ArgWords;
use crate::state::State;
use crate::sys;

/// A spec and the functions it is for.
#[derive(Debug)]
pub struct Wanted {
    /// Its pattern, parsed.
    pub filter: Filter,
    /// What to record, shared by the functions it selects.
    pub shared: Arc<ArgSpec>,
}

/// Parses the specs of `FNTRACE_ARGS` (`Settings::args`).
pub fn parse(items: &[String]) -> Result<Vec<Wanted>, String> {
    items
        .iter()
        .map(|item| {
            let spec = ArgSpec::parse(item).map_err(|e| e.to_string())?;
            let filter = Filter::parse(&[spec.pattern.as_str()]).map_err(|e| format!("'{item}': {e}"))?;
            Ok(Wanted {
                filter,
                shared: Arc::new(spec),
            })
        })
        .collect()
}

/// The registers and stack a call's values are read from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame {
    /// The general registers, in `fntrace_format::args::REGISTERS` order
    /// (at a return only `rax` is set).
    pub gp: [u64; 16],
    /// The low 8 bytes of `xmm0`-`xmm7` (at a return only `xmm0`).
    pub xmm: [u64; 8],
    /// The return slot of the call (its stack arguments lie above it).
    pub slot: usize,
}

/// Bytes of values a spec may need: what its items can take at most,
/// within the payload's bound.
fn bound<'a>(items: impl Iterator<Item = &'a Item>) -> usize {
    items
        .map(|i| {
            if matches!(i.format, Format::Str | Format::StdString | Format::Slice(_)) {
                2 + MAX_STRING
            } else {
                9
            }
        })
        .sum::<usize>()
        .min(MAX_PAYLOAD)
}

/// Captures `items` (of `spec`) from `frame` and hands the payload bytes
/// to `emit`. A small buffer for the common case (a few numbers), a full
/// one for strings and names: the buffer is zeroed on every call.
pub fn capture<'a, R>(
    spec: &ArgSpec,
    items: impl Iterator<Item = &'a Item> + Clone,
    frame: &Frame,
    emit: impl FnOnce(&[u8]) -> R,
) -> R {
    if bound(items.clone()) <= 64 {
        let mut buf = [0u8; 64];
        let n = write(spec, items, frame, &mut buf);
        emit(&buf[..n])
    } else {
        let mut buf = [0u8; MAX_PAYLOAD];
        let n = write(spec, items, frame, &mut buf);
        emit(&buf[..n])
    }
}

fn write<'a>(spec: &ArgSpec, items: impl Iterator<Item = &'a Item>, frame: &Frame, buf: &mut [u8]) -> usize {
    let mut w = Writer::new(buf);
    for item in items {
        let raw = raw_value(item, frame);
        let kind = match item.format {
            Format::Str => {
                string(&mut w, raw);
                continue;
            }
            Format::StdString => {
                // libstdc++'s layout: the pointer, then the length.
                let mut head = [0u8; 16];
                if sys::read_memory(raw as usize, &mut head) < 16 {
                    w.unreadable(raw);
                } else {
                    let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap_or([0; 8]));
                    counted(&mut w, word(0), word(8));
                }
                continue;
            }
            Format::Slice(len) => {
                counted(&mut w, raw, place_value(len, item.format, frame));
                continue;
            }
            Format::Enum(i) => {
                let shift = 64 - 8 * u32::from(item.size.clamp(1, 8));
                let value = ((raw << shift) as i64) >> shift;
                let name = spec
                    .enums
                    .get(usize::from(i))
                    .and_then(|e| e.iter().find(|(v, _)| *v == value));
                match name {
                    Some((_, n)) => w.name(n.as_bytes()),
                    None => w.scalar(values::KIND_SIGNED, item.size, raw),
                };
                continue;
            }
            Format::Aggregate => values::KIND_AGGREGATE,
            Format::Unknown => values::KIND_UNKNOWN,
            Format::Float => values::KIND_FLOAT,
            integer => integer_kind(integer).unwrap_or(values::KIND_SIGNED),
        };
        w.scalar(kind, item.size, raw);
    }
    w.len()
}

/// The value kind of an integer format (`None` for the others): what the
/// generic capture writes and the fast path's descriptor names.
fn integer_kind(format: Format) -> Option<u8> {
    Some(match format {
        Format::Signed => values::KIND_SIGNED,
        Format::Unsigned => values::KIND_UNSIGNED,
        Format::Hex => values::KIND_HEX,
        Format::Octal => values::KIND_OCTAL,
        Format::Char => values::KIND_CHAR,
        Format::Ptr => values::KIND_PTR,
        Format::Bool => values::KIND_BOOL,
        _ => return None,
    })
}

/// The 8 bytes an item's place holds.
fn raw_value(item: &Item, frame: &Frame) -> u64 {
    place_value(item.place, item.format, frame)
}

/// The 8 bytes `place` holds, for a value of `format`.
fn place_value(place: Place, format: Format, frame: &Frame) -> u64 {
    match place {
        Place::Reg(r) => frame.gp[usize::from(r) & 15],
        Place::Xmm(n) => frame.xmm[usize::from(n) & 7],
        Place::Retval if format == Format::Float => frame.xmm[0],
        Place::Retval => frame.gp[0],
        Place::Stack(k) => stack_word(frame.slot, usize::from(k)),
    }
}

/// The `k`-th word above the return slot: read directly in the slot's
/// own page, else without faulting (0 if unreadable).
fn stack_word(slot: usize, k: usize) -> u64 {
    let Some(at) = slot.checked_add(8 * k) else {
        return 0;
    };
    if slot != 0 && at / 4096 == slot / 4096 && at % 8 == 0 {
        // SAFETY: `slot` is the live return slot of the traced call on
        // this thread's stack; the word lies in the same page, which is
        // mapped and readable (it holds the slot).
        return unsafe { (at as *const u64).read_volatile() };
    }
    let mut word = [0u8; 8];
    sys::read_memory(at, &mut word);
    u64::from_le_bytes(word)
}

/// The string `ptr` points to, as far as it is readable.
fn string(w: &mut Writer<'_>, ptr: u64) {
    let mut buf = [0u8; MAX_STRING + 1];
    let n = sys::read_memory(ptr as usize, &mut buf);
    if n == 0 {
        w.unreadable(ptr);
        return;
    }
    match buf[..n].iter().position(|&b| b == 0) {
        Some(end) => w.string(&buf[..end], false),
        // No terminator in what was read: longer than kept, or the rest
        // is unreadable.
        None => w.string(&buf[..n.min(MAX_STRING)], true),
    };
}

/// The string of `len` bytes at `ptr` (a Rust `&str`, a `std::string`'s
/// characters), as far as it is readable and kept.
fn counted(w: &mut Writer<'_>, ptr: u64, len: u64) {
    let mut buf = [0u8; MAX_STRING];
    let want = len.min(MAX_STRING as u64) as usize;
    if want == 0 {
        w.string(&[], false);
        return;
    }
    let n = sys::read_memory(ptr as usize, &mut buf[..want]);
    if n == 0 {
        w.unreadable(ptr);
        return;
    }
    w.string(&buf[..n], (n as u64) < len);
}

/// The descriptor of the fast entry path (`asm.rs`,
/// `fntrace_fast_entry_args`) for `spec`'s arguments: when they are `arg1`
/// to `argK` in order, each an integer kind in its ABI register
/// (`fntrace_format::values::register_descriptor`). Its return value, if
/// any, is [`fast_ret_tag`]'s.
pub fn fast_descriptor(spec: &ArgSpec) -> Option<u64> {
    let mut tags = Vec::with_capacity(spec.args.len());
    for (i, item) in spec.args.iter().enumerate() {
        if item.place != Place::Reg(*INT_ARGS.get(i)?) {
            return None;
        }
        tags.push(values::tag(integer_kind(item.format)?, item.size));
    }
    values::register_descriptor(&tags)
}

/// The tag of `spec`'s return value when the fast return path
/// (`fntrace_return_to_handler`) can record it: an integer kind, in `rax`;
/// `None` if there is none or it is not one.
pub fn fast_ret_tag(spec: &ArgSpec) -> Option<u8> {
    let item = spec.retval.as_ref()?;
    let tag = values::tag(integer_kind(item.format)?, item.size);
    values::register_descriptor(&[tag])?;
    Some(tag)
}

/// What a fast entry slot's data word points at (`asm::ArgWords`): made
/// once per function and never freed (a thread may be about to read them).
pub fn fast_words(fid: u32, frame: u64, descriptor: u64) -> Option<usize> {
    static MADE: LazyLock<Mutex<HashMap<u32, &'static ArgWords>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let words = ArgWords::new(frame, descriptor)?;
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let at: &'static ArgWords = match made.get(&fid) {
        Some(&at) if *at == words => at,
        _ => {
            let at = Box::leak(Box::new(words));
            made.insert(fid, at);
            at
        }
    };
    Some(at as *const ArgWords as usize)
}

/// Every source of value specs, in the order they are trusted: the user's
/// (`-A`, `-R`, first pattern that selects the function), then with `-a`
/// the function's DWARF, then the built-in prototypes of common C library
/// functions (by the name the function is called by).
#[derive(Debug, Default)]
pub struct Specs {
    /// The user's.
    pub wanted: Vec<Wanted>,
    /// `-a`: DWARF's and the built-in prototypes are used.
    pub auto: bool,
    /// Integer return values are recorded by the fast return path
    /// (function_graph without `--time-filter`): each function's tag of
    /// one is kept (`fids::ret_tag`).
    pub fast_returns: bool,
}

/// Specs found in DWARF, by function id (`-a`), and the modules read.
type Found = (HashMap<u32, Arc<ArgSpec>>, Vec<(String, usize)>);
static FROM_DWARF: LazyLock<Mutex<Found>> = LazyLock::new(|| Mutex::new((HashMap::new(), Vec::new())));

impl Specs {
    /// Whether no function can have a spec.
    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty() && !self.auto
    }

    /// The spec of function `fid`, named `names`.
    pub fn of(&self, fid: u32, names: &Names<'_>) -> Option<Arc<ArgSpec>> {
        if let Some(w) = self.wanted.iter().find(|w| w.filter.selects(names)) {
            return Some(w.shared.clone());
        }
        if !self.auto {
            return None;
        }
        let dwarf = FROM_DWARF.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(spec) = dwarf.0.get(&fid) {
            return Some(spec.clone());
        }
        drop(dwarf);
        builtin(names.symbol)
    }

    /// With `-a`: reads the DWARF of the modules not read yet, for the
    /// specs of their functions. A module without DWARF, or whose DWARF
    /// does not parse, has none (its library functions may have built-in
    /// ones).
    pub fn read_modules(&self, state: &State) {
        if !self.auto {
            return;
        }
        for module in state.mods.iter().flatten() {
            let key = (module.loaded.path.clone(), module.loaded.bias);
            {
                let mut dwarf = FROM_DWARF.lock().unwrap_or_else(|e| e.into_inner());
                if dwarf.1.contains(&key) {
                    continue;
                }
                dwarf.1.push(key);
            }
            let Ok(data) = std::fs::read(&module.loaded.path) else {
                continue;
            };
            let Ok(params) = fntrace_sites::params::parameters(&data) else {
                continue;
            };
            let first = module.fid_base as usize;
            let by_address: HashMap<u64, u32> = state
                .functions
                .iter()
                .enumerate()
                .skip(first)
                .take_while(|(_, f)| f.module.as_ref() == module.loaded.path.as_str())
                .map(|(fid, f)| (f.address, fid as u32))
                .collect();
            let bias = module.loaded.bias as u64;
            let mut found = Vec::new();
            for p in &params {
                let Some(&fid) = by_address.get(&bias.wrapping_add(p.address)) else {
                    continue;
                };
                // A compiler's clone (`f.isra.0`, `f.constprop.1`, `f.part.2`)
                // is not called as its DWARF declares: left out.
                if state.functions[fid as usize].name.contains('.') {
                    continue;
                }
                if let Some(spec) = from_dwarf(p) {
                    found.push((fid, Arc::new(spec)));
                }
            }
            FROM_DWARF
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .0
                .extend(found);
        }
    }
}

/// `rdx` in [`fntrace_format::args::REGISTERS`]: the second return register.
const RDX: u8 = 3;

/// What a DWARF type is shown as, and how the ABI passes it.
enum Class {
    /// In the next integer register, or the next stack word.
    Int(Format, u8),
    /// In the next vector register, or the next stack word.
    Sse(u8),
    /// On the stack, in this many words (a struct larger than 16 bytes).
    Memory(u16),
    /// A Rust `&str`: its pointer and its length, each as an integer
    /// argument (returned in rax and rdx).
    StrSlice,
    /// Passed in a way this reading cannot follow (a small struct, whose
    /// fields decide its registers; `long double`; `__int128`): shown as
    /// `{...}`, and nothing after it is read.
    Unsure,
}

fn class(t: &Type, enums: &mut Vec<Vec<(i64, String)>>) -> Class {
    match t {
        Type::Int {
            size: s @ (1 | 2 | 4 | 8),
            signed,
        } => Class::Int(if *signed { Format::Signed } else { Format::Unsigned }, *s),
        Type::Bool => Class::Int(Format::Bool, 1),
        Type::Char => Class::Int(Format::Char, 1),
        Type::Pointer => Class::Int(Format::Ptr, 8),
        Type::CString => Class::Int(Format::Str, 8),
        Type::StdString => Class::Int(Format::StdString, 8),
        // Its address: shown as the struct it is.
        Type::ByAddress => Class::Int(Format::Aggregate, 8),
        Type::StrSlice => Class::StrSlice,
        Type::Enum {
            size: s @ (1 | 2 | 4 | 8),
            values,
        } if enums.len() < 255 => {
            enums.push(values.clone());
            Class::Int(Format::Enum((enums.len() - 1) as u8), *s)
        }
        Type::Float { size: s @ (4 | 8) } => Class::Sse(*s),
        Type::Aggregate { size } if *size > 16 => Class::Memory(size.div_ceil(8).min(u16::MAX as u64) as u16),
        _ => Class::Unsure,
    }
}

/// Our register number (`fntrace_format::args::REGISTERS`) of DWARF's
/// x86-64 general register `r` (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi,
/// 6 rbp, 7 rsp, 8-15 r8-r15).
fn dwarf_gp(r: u16) -> Option<u8> {
    match r {
        1 => Some(3),
        3 => Some(1),
        0 | 2 | 4..=6 | 8..=15 => Some(r as u8),
        _ => None,
    }
}

/// The spec `-a` makes of a function's DWARF: its parameters placed by the
/// SysV x86-64 classification — or where their DWARF location says they
/// are at the entry, which a compiler that changed the function's
/// convention (LLVM's dead-argument elimination on an internal function)
/// makes the truth; a parameter not in a register there is shown `?` —
/// and its return value.
pub fn from_dwarf(p: &Params) -> Option<ArgSpec> {
    let mut spec = ArgSpec {
        pattern: p.name.clone(),
        args: Vec::new(),
        retval: None,
        enums: Vec::new(),
    };
    // A struct returned in memory takes the first register for its address.
    let mut ints = usize::from(
        matches!(
            p.ret,
            Some(Type::Aggregate { size }) if size > 16
        ) || matches!(p.ret, Some(Type::StdString | Type::ByAddress)),
    );
    let (mut fps, mut stack) = (0u8, 1u16);
    // The next integer argument's place.
    let next_int = |ints: &mut usize, stack: &mut u16| {
        *ints += 1;
        match INT_ARGS.get(*ints - 1) {
            Some(&r) => Place::Reg(r),
            None => {
                *stack += 1;
                Place::Stack(*stack - 1)
            }
        }
    };
    for (i, t) in p.params.iter().enumerate().take(MAX_ITEMS) {
        let n = i as u16 + 1;
        let at_entry = p.at_entry.get(i).copied().unwrap_or(AtEntry::Abi);
        let item = match class(t, &mut spec.enums) {
            Class::StrSlice => {
                let ptr = next_int(&mut ints, &mut stack);
                let len = next_int(&mut ints, &mut stack);
                match at_entry {
                    AtEntry::Abi => Item::arg(n, ptr, Format::Slice(len), 8),
                    AtEntry::Pair(a, b) => match (dwarf_gp(a), dwarf_gp(b)) {
                        (Some(a), Some(b)) => Item::arg(n, Place::Reg(a), Format::Slice(Place::Reg(b)), 8),
                        _ => Item::arg(n, ptr, Format::Unknown, 1),
                    },
                    _ => Item::arg(n, ptr, Format::Unknown, 1),
                }
            }
            Class::Int(format, size) => {
                let place = next_int(&mut ints, &mut stack);
                match at_entry {
                    AtEntry::Abi => Item::arg(n, place, format, size),
                    AtEntry::Reg(r) => match dwarf_gp(r) {
                        Some(reg) => Item::arg(n, Place::Reg(reg), format, size),
                        None => Item::arg(n, place, Format::Unknown, 1),
                    },
                    // A struct passed by its address, in memory at the
                    // address this register holds: that is the value.
                    AtEntry::At(r) if matches!(format, Format::Aggregate | Format::StdString) => {
                        match dwarf_gp(r) {
                            Some(reg) => Item::arg(n, Place::Reg(reg), format, size),
                            None => Item::arg(n, place, Format::Unknown, 1),
                        }
                    }
                    AtEntry::Unknown | AtEntry::Pair(..) | AtEntry::At(_) => {
                        Item::arg(n, place, Format::Unknown, 1)
                    }
                }
            }
            Class::Sse(size) => {
                let place = if fps < FP_ARGS {
                    fps += 1;
                    Place::Xmm(fps - 1)
                } else {
                    stack += 1;
                    Place::Stack(stack - 1)
                };
                match at_entry {
                    AtEntry::Abi => Item::arg(n, place, Format::Float, size),
                    AtEntry::Reg(r @ 17..=24) => {
                        Item::arg(n, Place::Xmm((r - 17) as u8), Format::Float, size)
                    }
                    _ => Item::arg(n, place, Format::Unknown, 1),
                }
            }
            Class::Memory(words) => {
                let place = Place::Stack(stack);
                stack = stack.saturating_add(words);
                Item::arg(n, place, Format::Aggregate, 1)
            }
            Class::Unsure => {
                spec.args
                    .push(Item::arg(n, Place::Stack(stack), Format::Aggregate, 1));
                break;
            }
        };
        spec.args.push(item);
    }
    spec.retval = match p.ret.as_ref().map(|t| class(t, &mut spec.enums)) {
        Some(Class::Int(format, size)) => Some(Item::retval(format, size)),
        Some(Class::Sse(size)) => Some(Item::retval(Format::Float, size)),
        Some(Class::StrSlice) => Some(Item::retval(Format::Slice(Place::Reg(RDX)), 8)),
        _ => None,
    };
    (!spec.args.is_empty() || spec.retval.is_some()).then_some(spec)
}

/// Prototypes of common C library functions, for `-a` where the library
/// has no DWARF (uftrace's `-a` has such a list too): by the name the
/// program calls them by.
const BUILTIN: &[&str] = &[
    "malloc@arg1/u,retval/p",
    "calloc@arg1/u,arg2/u,retval/p",
    "realloc@arg1/p,arg2/u,retval/p",
    "free@arg1/p",
    "strlen@arg1/s,retval/u",
    "strcmp@arg1/s,arg2/s,retval/i32",
    "strncmp@arg1/s,arg2/s,arg3/u,retval/i32",
    "strcpy@arg1/p,arg2/s,retval/p",
    "strdup@arg1/s,retval/p",
    "strchr@arg1/s,arg2/c,retval/p",
    "strstr@arg1/s,arg2/s,retval/p",
    "memcpy@arg1/p,arg2/p,arg3/u,retval/p",
    "memmove@arg1/p,arg2/p,arg3/u,retval/p",
    "memset@arg1/p,arg2/i32,arg3/u,retval/p",
    "memcmp@arg1/p,arg2/p,arg3/u,retval/i32",
    "puts@arg1/s,retval/i32",
    "printf@arg1/s,retval/i32",
    "fopen@arg1/s,arg2/s,retval/p",
    "fclose@arg1/p,retval/i32",
    "fputs@arg1/s,arg2/p,retval/i32",
    "open@arg1/s,arg2/x32,retval/i32",
    "close@arg1/i32,retval/i32",
    "read@arg1/i32,arg2/p,arg3/u,retval/d",
    "write@arg1/i32,arg2/p,arg3/u,retval/d",
    "getenv@arg1/s,retval/s",
    "setenv@arg1/s,arg2/s,arg3/i32,retval/i32",
    "atoi@arg1/s,retval/i32",
    "strtol@arg1/s,arg2/p,arg3/i32,retval/d",
    "exit@arg1/i32",
    "getpid@retval/i32",
    "sleep@arg1/u32,retval/u32",
    "usleep@arg1/u32,retval/i32",
    "pthread_create@arg1/p,arg2/p,arg3/p,arg4/p,retval/i32",
    "pthread_join@arg1/x,arg2/p,retval/i32",
    "pthread_mutex_lock@arg1/p,retval/i32",
    "pthread_mutex_unlock@arg1/p,retval/i32",
];

/// The built-in prototype of the library function `name`.
fn builtin(name: &str) -> Option<Arc<ArgSpec>> {
    static PARSED: OnceLock<HashMap<String, Arc<ArgSpec>>> = OnceLock::new();
    let all = PARSED.get_or_init(|| {
        BUILTIN
            .iter()
            .filter_map(|text| {
                let spec = ArgSpec::parse(text).ok()?;
                Some((spec.pattern.clone(), Arc::new(spec)))
            })
            .collect()
    });
    all.get(name).cloned()
}
