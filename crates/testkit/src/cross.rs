//! fntrace built for another machine (`docs/CROSS.md`): Debian's own
//! Rust (`rustc-web`, `/usr/bin/cargo`) with that machine's prebuilt
//! standard library (AArch64) or one built from Debian's `rust-web-src`
//! (`-Zbuild-std`: MIPS), the cross gcc as linker, into `target/cross`;
//! its runtime beside it where it has one. Run under qemu-user with the
//! machine's libc (no binfmt needed where qemu is named; the programs a
//! foreign `record` starts need it: [`no_binfmt`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use std::process::Stdio;
use std::time::Instant;

/// A machine fntrace is built for here: its Rust target, its cross
/// linker, its qemu-user, and where its multiarch libc's loader lives.
#[derive(Debug, PartialEq, Eq)]
pub struct Machine {
    /// `std::env::consts::ARCH` there.
    pub arch: &'static str,
    pub target: &'static str,
    /// Its C compiler, the linker of its Rust programs.
    pub linker: &'static str,
    /// Its C++ compiler.
    pub cxx: &'static str,
    pub qemu: &'static str,
    /// The dynamic loader its programs name.
    pub loader: &'static str,
    /// Where qemu finds that loader and libc (`-L`): none for multiarch.
    pub sysroot: Option<&'static str>,
    /// Debian ships no prebuilt standard library for it: built from source.
    pub build_std: bool,
    /// The runtime is built for it (and beside its fntrace).
    pub runtime: bool,
}

/// 64-bit little-endian, prebuilt std, arm64 multiarch libc.
pub const AARCH64: Machine = Machine {
    arch: "aarch64",
    target: "aarch64-unknown-linux-gnu",
    linker: "aarch64-linux-gnu-gcc",
    cxx: "aarch64-linux-gnu-g++",
    qemu: "qemu-aarch64",
    loader: "/lib/ld-linux-aarch64.so.1",
    sysroot: None,
    build_std: false,
    runtime: true,
};

/// 32-bit big-endian (o32): Debian 12 has no multiarch libc for it, the
/// cross compiler's sysroot serves.
pub const MIPS: Machine = Machine {
    arch: "mips",
    target: "mips-unknown-linux-gnu",
    linker: "mips-linux-gnu-gcc",
    cxx: "mips-linux-gnu-g++",
    qemu: "qemu-mips",
    loader: "/usr/mips-linux-gnu/lib/ld.so.1",
    sysroot: Some("/usr/mips-linux-gnu"),
    build_std: true,
    runtime: false,
};

/// How long the build may take (a clean one is minutes on 2 cores).
const BUILD: Duration = Duration::from_secs(1800);

/// What is missing to build and run fntrace for `m`, if anything.
fn missing(m: &Machine) -> Option<String> {
    let std_lib = match m.build_std {
        true => PathBuf::from("/usr/lib/rustlib/src/rust/library"),
        false => Path::new("/usr/lib/rustlib").join(m.target),
    };
    let tools = [("/usr/bin/cargo", "cargo-web"), ("/usr/bin/rustc", "rustc-web")];
    if let Some((_, package)) = tools.iter().find(|(p, _)| !Path::new(p).exists()) {
        return Some(format!("Debian's Rust ({package}) is not installed"));
    }
    if !std_lib.exists() {
        return Some(format!(
            "the {} standard library is not installed ({})",
            m.target,
            std_lib.display()
        ));
    }
    for tool in [m.linker, m.qemu] {
        if !have(tool) {
            return Some(format!("{tool} is not installed"));
        }
    }
    if !Path::new(m.loader).exists() {
        return Some(format!("{}'s libc (multiarch) is not installed", m.target));
    }
    None
}

/// fntrace built for `m` (once per test binary), or why not (the caller
/// skips, and under `CI` fails).
pub fn fntrace_for(m: &'static Machine) -> Result<PathBuf, String> {
    static BUILT: OnceLock<Mutex<HashMap<&'static str, Result<PathBuf, String>>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    built.entry(m.target).or_insert_with(|| build(m)).clone()
}

fn build(m: &Machine) -> Result<PathBuf, String> {
    if let Some(why) = missing(m) {
        return Err(why);
    }
    // The workspace: this crate's parent's parent.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target_dir = root.join("target/cross");
    let mut cmd = Command::new("/usr/bin/cargo");
    cmd.current_dir(&root)
        .env("RUSTC", "/usr/bin/rustc")
        .env("CARGO_TARGET_DIR", &target_dir)
        // No debug info: the build is 1.6 GB with it (std's included), on
        // a CI disk the other tests fill too.
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .args([
            "build", "--quiet", "--locked", "-p", "fntrace", "--bin", "fntrace",
        ])
        .args(["--target", m.target])
        .args(if m.runtime {
            &["-p", "fntrace-runtime", "--lib"][..]
        } else {
            &[]
        })
        .arg("--config")
        .arg(format!("target.{}.linker=\"{}\"", m.target, m.linker));
    if m.build_std {
        cmd.env("RUSTC_BOOTSTRAP", "1").arg("-Zbuild-std=std,panic_abort");
    }
    let out = with_deadline(&mut cmd, BUILD);
    assert!(
        out.status.success(),
        "building fntrace for {}: {}",
        m.target,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(target_dir.join(m.target).join("debug/fntrace"))
}

/// `fntrace ARGS` of machine `m`, under its qemu.
pub fn command(m: &Machine, fntrace: &Path) -> Command {
    let mut cmd = Command::new(m.qemu);
    if let Some(root) = m.sysroot {
        cmd.args(["-L", root]);
    }
    cmd.arg(fntrace);
    cmd
}

/// Whether `tool` is on `PATH`.
fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()))
}

/// Runs `cmd` to its end, or kills it and fails at `limit`.
fn with_deadline(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    // The pipes are read while it runs (a full pipe would stall it).
    let out = child.stdout.take().map(|mut p| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut p, &mut v);
            v
        })
    });
    let err = child.stderr.take().map(|mut p| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut p, &mut v);
            v
        })
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{cmd:?} ran longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let take = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    };
    std::process::Output {
        status,
        stdout: take(out),
        stderr: take(err),
    }
}

/// Why `m`'s programs cannot run as if native here (started by `exec`,
/// as `fntrace record` starts them), if they cannot: no binfmt_misc rule.
pub fn no_binfmt(m: &Machine) -> Option<String> {
    let rule = Path::new("/proc/sys/fs/binfmt_misc").join(format!("qemu-{}", m.arch));
    (!rule.exists()).then(|| {
        format!(
            "{} is not registered (binfmt_misc, qemu-user-binfmt)",
            rule.display()
        )
    })
}

/// The runtime built for `m` beside its fntrace ([`fntrace_for`]).
pub fn runtime_for(m: &'static Machine) -> Result<PathBuf, String> {
    if !m.runtime {
        return Err(format!("fntrace has no runtime for {} yet", m.target));
    }
    Ok(fntrace_for(m)?.with_file_name("libfntrace_runtime.so"))
}
