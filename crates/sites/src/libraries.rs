//! The shared libraries a program loads when it starts, found as glibc's
//! dynamic loader finds them (ld.so(8)), so that `fntrace record` can
//! check a filter against the functions of the libraries too before it
//! runs anything.
//!
//! In the loader's order, breadth first: the interpreter, `LD_PRELOAD`
//! and `/etc/ld.so.preload`, then every `DT_NEEDED` of each object loaded.
//! A name with a `/` is a path; any other is looked for in the `DT_RPATH`
//! of the object that needs it and of the objects that loaded it, up to
//! the program (unless that object has a `DT_RUNPATH`, which sets its
//! `DT_RPATH` aside), then `LD_LIBRARY_PATH`, then the `DT_RUNPATH` of the
//! object that needs it, then the directories of `/etc/ld.so.conf` (what
//! `ldconfig` caches), then the system's (`/lib/TRIPLE`, `/usr/lib/TRIPLE`,
//! `/lib64`, `/usr/lib64`, `/lib`, `/usr/lib`) — these two unless the
//! object is linked with `-z nodeflib`. `$ORIGIN`, `$LIB` and `$PLATFORM`
//! are expanded; a file of another class or machine is passed over; a name
//! already loaded (by its name, path, soname or file) is not loaded again.
//! Each file is read as [`Dynamic`] reads it: a few small reads.
//!
//! What a program opens with `dlopen` cannot be known before it runs.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::elf::{Machine, EM_386, EM_AARCH64, EM_X86_64};

use crate::dynamic::Dynamic;
use fntrace_filter::Glob;

/// At most this many libraries.
const MAX_LIBRARIES: usize = 4096;
/// At most this deep `include`s of `ld.so.conf`.
const MAX_INCLUDE_DEPTH: usize = 8;

/// Where libraries are looked for besides the files' own paths: what the
/// program's environment and the system's configuration say.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// `LD_LIBRARY_PATH`, split (an empty entry is the current directory).
    pub library_path: Vec<String>,
    /// `LD_PRELOAD`, then `/etc/ld.so.preload`.
    pub preload: Vec<String>,
    /// The directories of `/etc/ld.so.conf` and the files it includes.
    pub configured: Vec<PathBuf>,
}

impl Search {
    /// For a program whose environment has `library_path` as
    /// `LD_LIBRARY_PATH` and `preload` as `LD_PRELOAD`, on this machine.
    pub fn new(library_path: Option<&OsStr>, preload: Option<&OsStr>) -> Search {
        let library_path = library_path
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.to_string_lossy()
                    .split([':', ';'])
                    .map(|d| if d.is_empty() { "." } else { d }.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut preload = words(
            &preload
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        preload.extend(words(
            &std::fs::read_to_string("/etc/ld.so.preload").unwrap_or_default(),
        ));
        let mut configured = Vec::new();
        read_conf(Path::new("/etc/ld.so.conf"), 0, &mut configured);
        let mut seen = HashSet::new();
        configured.retain(|d| seen.insert(d.clone()));
        Search {
            library_path,
            preload,
            configured,
        }
    }
}

/// The words of a preload list (spaces, tabs, newlines or colons between).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == ':')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The directories of the `ld.so.conf` file `path`, and of those it
/// includes (globs relative to its directory), into `out`.
fn read_conf(path: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let here = path.parent().unwrap_or(Path::new("/"));
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match word {
            "" | "hwcap" => {}
            "include" if depth < MAX_INCLUDE_DEPTH => {
                for pattern in rest.split_whitespace() {
                    for file in glob(&here.join(pattern)) {
                        read_conf(&file, depth + 1, out);
                    }
                }
            }
            "include" => {}
            _ => {
                for dir in line.split_whitespace() {
                    // An old `DIR=TYPE` names the libraries' type.
                    let dir = dir.split('=').next().unwrap_or(dir).trim_end_matches('/');
                    if dir.starts_with('/') {
                        out.push(PathBuf::from(dir));
                    }
                }
            }
        }
    }
}

/// The files `pattern` names, sorted (a glob in its last component only).
fn glob(pattern: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    if !name.contains(['*', '?', '[']) {
        return vec![pattern.to_path_buf()];
    }
    let Ok(glob) = Glob::new(&name) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| glob.matches(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// A library the program loads.
#[derive(Debug, Clone)]
pub struct Library {
    /// Where it was found, as the loader names it (links not resolved).
    pub path: PathBuf,
    /// How it is linked, and whether it may have sites.
    pub dynamic: Dynamic,
}

/// An object in the loader's list.
struct Loaded {
    /// The directory `$ORIGIN` stands for.
    origin: String,
    dynamic: Dynamic,
    /// The object that needed it first (`None`: the program).
    loader: Option<usize>,
}

/// The libraries `program` (linked as `dynamic` says) loads when it
/// starts, in the loader's order: the interpreter first.
pub fn libraries(program: &Path, dynamic: &Dynamic, search: &Search) -> Vec<Library> {
    // The program's `$ORIGIN` is the directory of the file itself.
    let origin = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let mut finder = Finder {
        search,
        want: dynamic,
        objects: vec![Loaded {
            origin: parent(&origin),
            dynamic: dynamic.clone(),
            loader: None,
        }],
        names: HashSet::new(),
        files: HashSet::new(),
        found: Vec::new(),
    };
    if let Ok(meta) = std::fs::metadata(program) {
        finder.files.insert((meta.dev(), meta.ino()));
    }
    if let Some(interpreter) = &dynamic.interpreter {
        finder.load(interpreter, 0);
    }
    for name in &search.preload {
        finder.load(name, 0);
    }
    let mut next = 0;
    while next < finder.objects.len() && finder.found.len() < MAX_LIBRARIES {
        for name in finder.objects[next].dynamic.needed.clone() {
            finder.load(&name, next);
        }
        next += 1;
    }
    finder.found
}

struct Finder<'a> {
    search: &'a Search,
    /// The program's: libraries must have its class and machine.
    want: &'a Dynamic,
    objects: Vec<Loaded>,
    /// Names loaded already: as needed, as found, as sonames.
    names: HashSet<String>,
    /// Files loaded already, by device and inode.
    files: HashSet<(u64, u64)>,
    found: Vec<Library>,
}

impl Finder<'_> {
    /// Loads `name`, which object `by` needs, unless it is loaded already.
    fn load(&mut self, name: &str, by: usize) {
        if self.names.contains(name) || self.found.len() >= MAX_LIBRARIES {
            return;
        }
        let Some((path, dynamic, file)) = self.find(name, by) else {
            return;
        };
        self.names.insert(name.to_string());
        if !self.files.insert(file) {
            return;
        }
        self.names.insert(path.display().to_string());
        if let Some(soname) = &dynamic.soname {
            self.names.insert(soname.clone());
        }
        self.objects.push(Loaded {
            origin: parent(&path),
            dynamic: dynamic.clone(),
            loader: Some(by),
        });
        self.found.push(Library { path, dynamic });
    }

    /// Where the loader finds `name` for object `by`.
    fn find(&self, name: &str, by: usize) -> Option<(PathBuf, Dynamic, (u64, u64))> {
        let requester = &self.objects[by];
        if name.contains('/') {
            let path = expand(name, &requester.origin, self.want.machine)?;
            return self.open(Path::new(&path));
        }
        let mut dirs: Vec<String> = Vec::new();
        let mut add = |list: &str, origin: &str| {
            dirs.extend(
                list.split(':')
                    .map(|d| if d.is_empty() { "." } else { d })
                    .filter_map(|d| expand(d, origin, self.want.machine)),
            );
        };
        if requester.dynamic.runpath.is_none() {
            let mut at = Some(by);
            while let Some(i) = at {
                let object = &self.objects[i];
                if let (Some(rpath), None) = (&object.dynamic.rpath, &object.dynamic.runpath) {
                    add(rpath, &object.origin);
                }
                at = object.loader;
            }
        }
        for dir in &self.search.library_path {
            add(dir, &self.objects[0].origin);
        }
        if let Some(runpath) = &requester.dynamic.runpath {
            add(runpath, &requester.origin);
        }
        let system = (!requester.dynamic.nodeflib)
            .then(|| {
                let configured = self.search.configured.iter().cloned();
                configured.chain(default_dirs(self.want))
            })
            .into_iter()
            .flatten();
        dirs.iter()
            .map(|d| Path::new(d).join(name))
            .chain(system.map(|d| d.join(name)))
            .find_map(|path| self.open(&path))
    }

    /// `path`, if it is an ELF file of the program's class and machine.
    fn open(&self, path: &Path) -> Option<(PathBuf, Dynamic, (u64, u64))> {
        let file = File::open(path).ok()?;
        let meta = file.metadata().ok().filter(|m| m.is_file())?;
        let dynamic = Dynamic::read(&file).ok()?;
        (dynamic.machine == self.want.machine && dynamic.is_64 == self.want.is_64)
            .then(|| (path.to_path_buf(), dynamic, (meta.dev(), meta.ino())))
    }
}

/// The directory of `path`, absolute.
fn parent(path: &Path) -> String {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    path.parent().unwrap_or(Path::new("/")).display().to_string()
}

/// The multiarch triple of a machine (Debian's library directories).
fn triple(machine: u16) -> Option<&'static str> {
    match Machine(machine) {
        EM_X86_64 => Some("x86_64-linux-gnu"),
        EM_AARCH64 => Some("aarch64-linux-gnu"),
        EM_386 => Some("i386-linux-gnu"),
        _ => None,
    }
}

/// The system's library directories.
fn default_dirs(want: &Dynamic) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(triple) = triple(want.machine) {
        dirs.push(PathBuf::from(format!("/lib/{triple}")));
        dirs.push(PathBuf::from(format!("/usr/lib/{triple}")));
    }
    if want.is_64 {
        dirs.extend(["/lib64", "/usr/lib64"].map(PathBuf::from));
    }
    dirs.extend(["/lib", "/usr/lib"].map(PathBuf::from));
    dirs
}

/// `text` with `$ORIGIN`, `$LIB` and `$PLATFORM` (or `${...}`) expanded;
/// `None` when a token has no value here.
fn expand(text: &str, origin: &str, machine: u16) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (token, tail) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced.find('}')?;
                (&braced[..end], &braced[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        match token {
            "ORIGIN" => out.push_str(origin),
            "LIB" => match triple(machine) {
                Some(triple) => out.push_str(&format!("lib/{triple}")),
                None => return None,
            },
            "PLATFORM" => out.push_str(match Machine(machine) {
                EM_X86_64 => "x86_64",
                EM_AARCH64 => "aarch64",
                EM_386 => "i686",
                _ => return None,
            }),
            _ => return None,
        }
        rest = tail;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_expand_as_the_loader_expands_them() {
        let x86 = EM_X86_64.0;
        assert_eq!(
            expand("$ORIGIN/../lib", "/opt/p/bin", x86).unwrap(),
            "/opt/p/bin/../lib"
        );
        assert_eq!(expand("${ORIGIN}/x", "/o", x86).unwrap(), "/o/x");
        assert_eq!(
            expand("/usr/$LIB/a", "/o", x86).unwrap(),
            "/usr/lib/x86_64-linux-gnu/a"
        );
        assert_eq!(expand("/p/${PLATFORM}", "/o", x86).unwrap(), "/p/x86_64");
        assert_eq!(expand("/plain", "/o", x86).unwrap(), "/plain");
        assert_eq!(expand("$UNKNOWN/x", "/o", x86), None);
        assert_eq!(expand("${ORIGIN/x", "/o", x86), None);
    }

    #[test]
    fn preload_lists_split_as_the_loader_splits_them() {
        assert_eq!(words(" a.so:b.so\tc.so\n"), ["a.so", "b.so", "c.so"]);
        assert!(words("").is_empty());
    }
}
