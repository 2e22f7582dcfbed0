//! What `/proc` and the ELF files say about the target, read before and
//! between the calls: its state, machine, threads, mappings and the
//! addresses of `dlopen` and `dlerror`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{elf, Endianness, Object, ObjectSymbol, SymbolKind};

use super::InjectError;

/// A file as `/proc/PID/maps` identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileId {
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

impl FileId {
    /// The file `std::fs::metadata` describes (`st_dev` split as glibc's
    /// `major()` and `minor()` do).
    pub fn of(meta: &std::fs::Metadata) -> Self {
        let dev = meta.dev();
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
        let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
        Self {
            major: major as u32,
            minor: minor as u32,
            inode: meta.ino(),
        }
    }
}

/// One line of `/proc/PID/maps` that maps a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub offset: u64,
    /// Mapped executable.
    pub exec: bool,
    pub id: FileId,
    pub path: String,
}

/// Where `dlopen` and `dlerror` are in the target.
#[derive(Debug)]
pub(super) struct Loader {
    pub dlopen: u64,
    pub dlerror: Option<u64>,
}

/// System calls a thread sleeps in without holding `malloc`'s or the
/// loader's locks: `read`, `poll`, `select`, `pause`, `nanosleep`,
/// `accept`, `recvfrom`, `recvmsg`, `wait4`... (x86-64 numbers).
const SLEEPING_SYSCALLS: [i64; 17] = [
    35, 230, 34, 7, 271, 23, 270, 232, 281, 441, 0, 43, 288, 45, 47, 61, 247,
];
/// `futex` and `restart_syscall`: blocked, but perhaps waiting for a lock
/// inside `malloc` or the loader with another lock held.
const FUTEX_SYSCALLS: [i64; 2] = [202, 219];

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> InjectError {
    move |error| InjectError::Io { what, error }
}

/// The checks of [`super::inject`] on the process itself.
pub(super) fn check_process(pid: i32) -> Result<(), InjectError> {
    let status = match (pid > 0).then(|| std::fs::read_to_string(format!("/proc/{pid}/status"))) {
        Some(Ok(status)) => status,
        Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(InjectError::Io {
                what: format!("cannot read /proc/{pid}/status"),
                error: e,
            })
        }
        _ => return Err(InjectError::NoProcess { pid }),
    };
    let field = |name: &str| -> Option<i32> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().parse().ok()
    };
    let tgid = field("Tgid:").unwrap_or(pid);
    if tgid == std::process::id() as i32 {
        return Err(InjectError::OwnProcess { pid });
    }
    if tgid != pid {
        return Err(InjectError::Thread { tid: pid, pid: tgid });
    }
    match state(&format!("/proc/{pid}/stat")) {
        None | Some('X' | 'x') => return Err(InjectError::NoProcess { pid }),
        Some('T' | 't') => return Err(InjectError::Stopped { pid }),
        // The main thread stays a zombie while other threads run on.
        Some('Z') if live_threads(pid).is_empty() => return Err(InjectError::Zombie { pid }),
        _ => {}
    }
    match field("TracerPid:") {
        Some(tracer) if tracer != 0 => return Err(InjectError::Traced { pid, tracer }),
        _ => {}
    }
    check_executable(pid)
}

/// The state letter of `/proc/.../stat` (after the command name, which may
/// contain spaces and parentheses).
pub(super) fn state(stat_path: &str) -> Option<char> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Whether process `pid` is still there (not a zombie).
pub fn alive(pid: i32) -> bool {
    state(&format!("/proc/{pid}/stat")).is_some_and(|c| c != 'Z' && c != 'X')
}

/// The system call thread `tid` of `pid` is blocked in, if any.
pub(super) fn syscall_of(pid: i32, tid: i32) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The target's executable must be x86-64 (and not an emulator).
fn check_executable(pid: i32) -> Result<(), InjectError> {
    let exe = format!("/proc/{pid}/exe");
    let denied = |e: &std::io::Error| e.kind() == std::io::ErrorKind::PermissionDenied;
    let target = match std::fs::read_link(&exe) {
        Err(e) if denied(&e) => {
            return Err(InjectError::Permission {
                pid,
                ptrace_scope: ptrace_scope(),
            })
        }
        other => other.map_err(io_error(format!("cannot read {exe} (a kernel thread?)")))?,
    };
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    if name.starts_with("qemu-") {
        return Err(InjectError::Qemu {
            pid,
            emulator: target.display().to_string(),
        });
    }
    let mut header = [0u8; 20];
    let read =
        std::fs::File::open(&exe).and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut header, 0));
    match read {
        Err(e) if denied(&e) => Err(InjectError::Permission {
            pid,
            ptrace_scope: ptrace_scope(),
        }),
        Err(e) => Err(InjectError::Io {
            what: format!("cannot read {exe}"),
            error: e,
        }),
        Ok(()) => match machine(&header) {
            None => Ok(()),
            Some(machine) => Err(InjectError::Machine { pid, machine }),
        },
    }
}

/// The ELF machine of this build (64-bit, little-endian), whose programs
/// the runtime runs in.
const NATIVE: Option<elf::Machine> = if cfg!(target_arch = "x86_64") {
    Some(elf::EM_X86_64)
} else if cfg!(target_arch = "aarch64") {
    Some(elf::EM_AARCH64)
} else {
    None
};

/// `None` for an ELF64 little-endian header of this build's machine
/// (x86-64 or AArch64), else what it is, for the message (`attach` and
/// `record` refuse what the runtime cannot run in).
pub fn machine(header: &[u8; 20]) -> Option<String> {
    if header[..4] != *b"\x7fELF" {
        return Some("non-ELF".to_string());
    }
    let class = header[4];
    let e_machine = match header[5] {
        2 => u16::from_be_bytes([header[18], header[19]]),
        _ => u16::from_le_bytes([header[18], header[19]]),
    };
    let e_machine = elf::Machine(e_machine);
    if class == 2 && header[5] == 1 && Some(e_machine) == NATIVE {
        return None;
    }
    if e_machine == elf::EM_X86_64 {
        return Some(
            if class == 2 {
                "x86-64"
            } else {
                "x32 (32-bit x86-64 ABI)"
            }
            .to_string(),
        );
    }
    const NAMES: [(elf::Machine, &str); 10] = [
        (elf::EM_386, "32-bit x86"),
        (elf::EM_AARCH64, "AArch64"),
        (elf::EM_ARM, "32-bit ARM"),
        (elf::EM_RISCV, "RISC-V"),
        (elf::EM_PPC64, "PowerPC64"),
        (elf::EM_PPC, "PowerPC"),
        (elf::EM_S390, "s390x"),
        (elf::EM_MIPS, "MIPS"),
        (elf::EM_LOONGARCH, "LoongArch"),
        (elf::EM_SPARCV9, "SPARC64"),
    ];
    Some(match NAMES.iter().find(|(machine, _)| *machine == e_machine) {
        Some((_, name)) => name.to_string(),
        None => format!("ELF machine {} ({e_machine})", e_machine.0),
    })
}

/// `/proc/sys/kernel/yama/ptrace_scope`, if Yama is there.
pub(super) fn ptrace_scope() -> Option<String> {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?;
    Some(scope.trim().to_string())
}

/// The file a path in the target's maps names, seen through its root
/// (another mount namespace, a chroot), or as is if that cannot be read.
pub fn target_file(pid: i32, path: &str) -> PathBuf {
    let through_root = Path::new(&format!("/proc/{pid}/root")).join(path.trim_start_matches('/'));
    if through_root.exists() {
        through_root
    } else {
        PathBuf::from(path)
    }
}

/// The file mappings of process `pid`.
pub fn maps(pid: i32) -> Result<Vec<Mapping>, InjectError> {
    let path = format!("/proc/{pid}/maps");
    let text = std::fs::read_to_string(&path).map_err(io_error(format!("cannot read {path}")))?;
    Ok(text.lines().filter_map(parse_map_line).collect())
}

/// `start-end perms offset major:minor inode   path` (hexadecimal but the
/// inode); `None` for anonymous mappings and malformed lines.
pub(super) fn parse_map_line(line: &str) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || {
        let (field, tail) = rest.split_once(' ')?;
        rest = tail;
        Some(field)
    };
    let (start, _end) = field()?.split_once('-')?;
    let perms = field()?;
    let offset = field()?;
    let (major, minor) = field()?.split_once(':')?;
    let inode: u64 = field()?.parse().ok()?;
    let path = rest.trim_start();
    if inode == 0 || path.is_empty() {
        return None;
    }
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        exec: perms.contains('x'),
        id: FileId {
            major: u32::from_str_radix(major, 16).ok()?,
            minor: u32::from_str_radix(minor, 16).ok()?,
            inode,
        },
        path: path.to_string(),
    })
}

/// `dlopen` (and `dlerror`) in the first mapped `libc.so.6` or
/// `libdl.so.2` that defines it (also the `libc-2.NN.so` names of old glibc).
pub(super) fn find_loader(pid: i32) -> Result<Loader, InjectError> {
    let maps = maps(pid)?;
    let is_loader_lib = |path: &str| {
        let name = path.rsplit('/').next().unwrap_or(path);
        ["libc.so.6", "libdl.so.2"].contains(&name)
            || ((name.starts_with("libc-") || name.starts_with("libdl-")) && name.ends_with(".so"))
    };
    for lib in maps.iter().filter(|m| m.offset == 0 && is_loader_lib(&m.path)) {
        let start = maps
            .iter()
            .filter(|m| m.id == lib.id && m.offset == 0)
            .map(|m| m.start)
            .min();
        let Ok(data) = std::fs::read(target_file(pid, &lib.path)) else {
            continue;
        };
        let Ok(elf) = Elf::parse(&data) else { continue };
        let (Some(start), Ok(first_vaddr)) = (start, elf.first_vaddr()) else {
            continue;
        };
        let bias = start.wrapping_sub(first_vaddr);
        if let Some(dlopen) = elf.function("dlopen") {
            let dlerror = elf.function("dlerror").map(|v| bias.wrapping_add(v));
            return Ok(Loader {
                dlopen: bias.wrapping_add(dlopen),
                dlerror,
            });
        }
    }
    Err(InjectError::NoLoader { pid })
}

/// The threads of `pid` that are not zombies or dead.
fn live_threads(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut tids: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|tid| {
            !matches!(
                state(&format!("/proc/{pid}/task/{tid}/stat")),
                None | Some('Z' | 'X' | 'x')
            )
        })
        .collect();
    tids.sort_unstable();
    tids
}

/// The thread to run the calls in; see [`super::inject`] for the order.
pub(super) fn choose_thread(pid: i32) -> i32 {
    let rank = |tid: i32| match syscall_of(pid, tid) {
        Some(nr) if SLEEPING_SYSCALLS.contains(&nr) => 0,
        Some(nr) if FUTEX_SYSCALLS.contains(&nr) => 1,
        _ => 2,
    };
    // The lowest rank first, the main thread first among equals.
    let mut threads: Vec<(u8, i32)> = live_threads(pid)
        .into_iter()
        .map(|tid| (rank(tid), tid))
        .collect();
    threads.sort_by_key(|&(rank, tid)| (rank, tid != pid));
    match threads.first() {
        Some(&(rank, tid)) if rank < 2 => tid,
        // The main thread, unless it is a zombie whose threads live on.
        _ if threads.iter().any(|&(_, tid)| tid == pid) => pid,
        Some(&(_, tid)) => tid,
        None => pid,
    }
}

/// The little the injection needs from an ELF64 file.
pub(super) struct Elf<'data> {
    file: ElfFile64<'data, Endianness>,
}

impl<'data> Elf<'data> {
    pub fn parse(data: &'data [u8]) -> Result<Self, String> {
        let file = ElfFile64::parse(data).map_err(|e| format!("not an ELF64 file ({e})"))?;
        Ok(Self { file })
    }

    /// A shared object (or PIE) for x86-64.
    pub fn is_x86_64_dyn(&self) -> bool {
        let header = self.file.elf_header();
        let endian = self.file.endian();
        header.e_machine(endian) == elf::EM_X86_64 && header.e_type(endian) == elf::ET_DYN
    }

    /// `p_vaddr` (page-aligned) of the loadable segment at file offset 0,
    /// which the lowest mapping at offset 0 maps: load bias = its start - this.
    pub fn first_vaddr(&self) -> Result<u64, String> {
        let endian = self.file.endian();
        let segment = self
            .file
            .elf_program_headers()
            .iter()
            .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
            .find(|ph| ph.p_offset(endian) < 0x1000)
            .ok_or("no loadable segment at file offset 0")?;
        Ok(segment.p_vaddr(endian) & !0xfff)
    }

    /// `st_value` of a function defined in `.dynsym` under this name.
    pub fn function(&self, name: &str) -> Option<u64> {
        self.file
            .dynamic_symbols()
            .find(|s| s.is_definition() && s.kind() == SymbolKind::Text && s.name() == Ok(name))
            .map(|s| s.address())
    }
}
