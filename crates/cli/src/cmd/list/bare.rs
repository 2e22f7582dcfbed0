//! What `list --sites` and `list --json` say of a bare site: how its
//! function would be patched, decoded from the file as the runtime will
//! decode it, or why it would not be (`docs/SITES.md`, "Functions no
//! compiler prepared").

use fntrace_arch::x86_64::bare::{analyze, Refusal};
use fntrace_sites::{Binary, Code, Site, SiteKind, Unpatchable};

/// How a bare site's function would be patched, or why not.
pub struct Verdict {
    /// `jump`, `jump+pad` (into the dead padding after a short function),
    /// `trap` or `refused`.
    pub form: &'static str,
    /// The instruction boundaries inside the 5 bytes a jump would take,
    /// as offsets from the site (1 to 4).
    pub boundaries: Vec<u64>,
    /// Why the function is left alone.
    pub refused: Option<String>,
}

impl Verdict {
    /// A function discovery left without a site.
    pub fn refused(u: &Unpatchable) -> Verdict {
        Verdict {
            form: "refused",
            boundaries: Vec::new(),
            refused: Some(u.reason.clone()),
        }
    }

    /// What follows the bytes on a `--sites` line.
    pub fn suffix(&self) -> String {
        match &self.refused {
            Some(reason) => format!(" refused: {reason}"),
            None if self.boundaries.is_empty() => String::new(),
            None => {
                let offsets: Vec<String> = self.boundaries.iter().map(|b| format!("+{b}")).collect();
                format!(" boundaries {}", offsets.join(","))
            }
        }
    }
}

/// The verdict on `site` of `binary` (whose file's code is `code`), by
/// `fntrace_arch::x86_64::bare::analyze` on its function and the padding
/// after it; `None` for the sites a compiler left.
pub fn verdict(code: &Code<'_>, binary: &Binary, site: &Site) -> Option<Verdict> {
    if site.kind != SiteKind::Bare {
        return None;
    }
    let index = site.function?;
    let f = binary.functions.get(index)?;
    let analyzed = match code.function(binary, index) {
        Some((bytes, limit)) => analyze(bytes, f.address, f.size, limit),
        None => Err(Refusal::Undecodable { at: f.address }),
    };
    Some(match analyzed {
        Ok(entry) => Verdict {
            form: if entry.trap_only {
                "trap"
            } else if entry.entry + entry.len as u64 > f.address + f.size {
                "jump+pad"
            } else {
                "jump"
            },
            boundaries: entry.starts().iter().skip(1).map(|b| b - entry.entry).collect(),
            refused: None,
        },
        Err(refusal) => Verdict {
            form: "refused",
            boundaries: Vec::new(),
            refused: Some(refusal.to_string()),
        },
    })
}
