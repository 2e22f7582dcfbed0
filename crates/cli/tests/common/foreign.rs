//! fntrace built for another machine (`docs/CROSS.md`): Debian's own
//! Rust (`rustc-web`, `/usr/bin/cargo`) with that machine's prebuilt
//! standard library, the cross gcc as linker; run under qemu-user with the
//! machine's multiarch libc (no binfmt needed: qemu is named).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::procs::{self, have, text};

/// A machine fntrace is built for here: its Rust target, its cross
/// linker, its qemu-user, and where its multiarch libc's loader lives.
pub struct Machine {
    pub target: &'static str,
    pub linker: &'static str,
    pub qemu: &'static str,
    pub loader: &'static str,
}

pub const AARCH64: Machine = Machine {
    target: "aarch64-unknown-linux-gnu",
    linker: "aarch64-linux-gnu-gcc",
    qemu: "qemu-aarch64",
    loader: "/lib/ld-linux-aarch64.so.1",
};

/// How long the build may take (a clean one is minutes on 2 cores).
const BUILD: Duration = Duration::from_secs(1800);

/// What is missing to build and run fntrace for `m`, if anything.
fn missing(m: &Machine) -> Option<String> {
    let std_lib = Path::new("/usr/lib/rustlib").join(m.target);
    let tools = [("/usr/bin/cargo", "cargo-web"), ("/usr/bin/rustc", "rustc-web")];
    if let Some((_, package)) = tools.iter().find(|(p, _)| !Path::new(p).exists()) {
        return Some(format!("Debian's Rust ({package}) is not installed"));
    }
    if !std_lib.exists() {
        return Some(format!("the {} standard library is not installed", m.target));
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
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(why) = missing(m) {
                return Err(why);
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let target_dir = root.join("target/cross");
            let mut cmd = Command::new("/usr/bin/cargo");
            cmd.current_dir(&root)
                .env("RUSTC", "/usr/bin/rustc")
                .env("CARGO_TARGET_DIR", &target_dir)
                .env_remove("RUSTUP_TOOLCHAIN")
                .env_remove("CARGO")
                .args([
                    "build", "--quiet", "--locked", "-p", "fntrace", "--bin", "fntrace", "--target", m.target,
                ])
                .arg("--config")
                .arg(format!("target.{}.linker=\"{}\"", m.target, m.linker));
            let out = procs::run(&mut cmd, BUILD);
            assert!(
                out.status.success(),
                "building fntrace for {}: {}",
                m.target,
                text(&out.stderr)
            );
            Ok(target_dir.join(m.target).join("debug/fntrace"))
        })
        .clone()
}

/// `fntrace ARGS` of machine `m`, under its qemu.
pub fn command(m: &Machine, fntrace: &Path) -> Command {
    let mut cmd = Command::new(m.qemu);
    cmd.arg(fntrace);
    cmd
}
