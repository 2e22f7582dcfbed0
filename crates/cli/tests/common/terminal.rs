//! A real terminal for the tests of `fntrace tui`: a detached tmux session
//! on its own server, keys sent with `send-keys`, the screen read with
//! `capture-pane`. Every read waits for what the test expects to be on
//! the screen (never for a time), up to a deadline that only a hang
//! reaches.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::procs::{self, text};

/// How long a screen may take to show what is expected.
const DEADLINE: Duration = Duration::from_secs(90);

/// A tmux session running one command.
pub struct Terminal {
    /// The tmux server's socket name (`-L`): this terminal's alone.
    socket: String,
}

impl Terminal {
    /// Starts `command` (run by the shell, in `dir`) in a terminal of
    /// `width` × `height`; after it exits, the shell says its status.
    pub fn start(name: &str, dir: &Path, command: &str, width: u16, height: u16) -> Terminal {
        let socket = format!("fntrace-test-{name}-{}", std::process::id());
        let term = Terminal { socket };
        term.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "-c",
            dir.to_str().unwrap(),
            "sh",
            "-c",
            &format!("{command}; echo \"[exited $?]\"; sleep 600"),
        ]);
        term
    }

    fn tmux(&self, args: &[&str]) -> Output {
        let out = procs::run(
            Command::new("tmux").arg("-L").arg(&self.socket).args(args),
            DEADLINE,
        );
        assert!(out.status.success(), "tmux {args:?}: {}", text(&out.stderr));
        out
    }

    /// Sends keys by tmux's names (`Down`, `Enter`, `C-u`, `q`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend(keys);
        self.tmux(&args);
    }

    /// Types `text` as it is.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", "--", text]);
    }

    /// The screen's lines, trailing blanks dropped.
    pub fn screen(&self) -> Vec<String> {
        let out = self.tmux(&["capture-pane", "-p", "-t", "0"]);
        text(&out.stdout)
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect()
    }

    /// The screen once `ready` holds of it; the test fails, showing the
    /// last screen, if it never does.
    pub fn wait(&self, what: &str, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the terminal never showed {what}; its screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The screen once its last non-blank line (the status line) holds
    /// `status`.
    pub fn wait_status(&self, status: &str) -> Vec<String> {
        self.wait(&format!("the status '{status}'"), |s| {
            s.iter()
                .rev()
                .find(|l| !l.is_empty())
                .is_some_and(|l| l.contains(status))
        })
    }

    /// Waits for the command to exit; its exit status, and the screen it
    /// left.
    pub fn wait_exit(&self) -> (i32, Vec<String>) {
        let screen = self.wait("the command's exit", |s| {
            s.iter().any(|l| l.starts_with("[exited "))
        });
        let line = screen.iter().find(|l| l.starts_with("[exited ")).unwrap();
        let status = line["[exited ".len()..line.len() - 1].parse().unwrap();
        (status, screen)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
