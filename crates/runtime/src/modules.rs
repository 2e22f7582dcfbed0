//! The modules loaded in the process (executable and shared libraries), as
//! the dynamic linker lists them.

use std::ffi::CStr;

/// A loaded ELF module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Path of the file (the executable's from `/proc/self/exe`).
    pub path: String,
    /// Load bias: runtime address minus link-time address.
    pub bias: usize,
    /// Executable segments: (start, end, `PROT_*`), runtime addresses.
    pub exec: Vec<(usize, usize, i32)>,
    /// The program itself (not a library).
    pub main: bool,
}

impl Loaded {
    /// The file name, for `:mod:` filters.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// The code range `[lo, hi)` covering every executable segment.
    pub fn code_span(&self) -> Option<(usize, usize)> {
        let lo = self.exec.iter().map(|e| e.0).min()?;
        let hi = self.exec.iter().map(|e| e.1).max()?;
        Some((lo, hi))
    }

    /// Whether `addr` is in one of its executable segments.
    pub fn contains(&self, addr: usize) -> bool {
        self.exec.iter().any(|&(s, e, _)| addr >= s && addr < e)
    }
}

/// Every loaded module with executable code, in the dynamic linker's order.
pub fn loaded() -> Vec<Loaded> {
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: dl_iterate_phdr calls `collect` with valid info for each
    // module, holding the loader's lock; `data` is our Vec for that time.
    unsafe { libc::dl_iterate_phdr(Some(collect), &mut out as *mut Vec<Loaded> as *mut libc::c_void) };
    out
}

unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> i32 {
    // SAFETY: see `loaded`.
    let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<Loaded>)) };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader gives dlpi_phnum headers at dlpi_phdr.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let bias = info.dlpi_addr as usize;
    let exec: Vec<(usize, usize, i32)> = phdrs
        .iter()
        .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0)
        .map(|p| {
            let mut prot = libc::PROT_EXEC;
            if p.p_flags & libc::PF_R != 0 {
                prot |= libc::PROT_READ;
            }
            if p.p_flags & libc::PF_W != 0 {
                prot |= libc::PROT_WRITE;
            }
            let start = bias + p.p_vaddr as usize;
            (start, start + p.p_memsz as usize, prot)
        })
        .collect();
    if exec.is_empty() {
        return 0;
    }
    let main = name.is_empty() && out.is_empty();
    let path = if main {
        std::fs::read_link("/proc/self/exe").map_or(name, |p| p.to_string_lossy().into_owned())
    } else {
        name
    };
    out.push(Loaded {
        path,
        bias,
        exec,
        main,
    });
    0
}
