//! The narrowing options every reader takes (`replay`, `report`, `graph`,
//! `dump`, `flamegraph`), with uftrace's letters, turned into a
//! [`Narrowing`] at the edge.

use fntrace_filter::{first_unmatched_as, Filter, Syntax};
use fntrace_format::read::Process;
use fntrace_format::units::parse_duration;

use super::Narrowing;
use crate::output::UsageError;
use crate::range::{self, TimeRange};
use crate::trace::{Demangle, Names};

/// How patterns are read (`--match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Match {
    /// ftrace's globs, matching the whole name: `parse_*`, `ns::f`.
    #[default]
    Glob,
    /// Regular expressions, matching anywhere in the name (uftrace's default): `^parse`, `::f$`.
    Regex,
}

/// What to keep of a recording when reading it.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Narrowing (as uftrace's)")]
pub struct NarrowFlags {
    /// Only these functions and what they call; repeatable.
    #[arg(short = 'F', long = "filter", value_name = "PATTERN")]
    pub filter: Vec<String>,
    /// Not these functions, nor what they call; repeatable.
    #[arg(short = 'N', long = "notrace", value_name = "PATTERN")]
    pub notrace: Vec<String>,
    /// Not these functions, but what they call (uftrace's -H); repeatable.
    #[arg(short = 'H', long = "hide", value_name = "PATTERN")]
    pub hide: Vec<String>,
    /// Only the calls of these functions (not what they call) and the calls that led to them (uftrace's -C); repeatable.
    #[arg(short = 'C', long = "caller-filter", value_name = "PATTERN")]
    pub callers: Vec<String>,
    /// Calls nested at most N deep (from the first call kept: with -F, the call it selects).
    #[arg(short = 'D', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Only calls that lasted at least DURATION (10us, 1ms), and the calls that led to them.
    #[arg(short = 't', long = "time-filter", value_name = "DURATION", value_parser = parse_duration)]
    pub threshold: Option<u64>,
    /// Only the calls that began between START and STOP: timestamps (as replay -f time shows them) or, with a unit, times since the process began (20ms~30ms); either may be left out.
    #[arg(short = 'r', long = "time-range", value_name = "START~STOP", value_parser = range::parse)]
    pub range: Option<TimeRange>,
    /// How -F, -N, -H and -C patterns are read: glob (ftrace's, whole names) or regex (uftrace's, anywhere in the name).
    #[arg(long = "match", value_enum, value_name = "TYPE", default_value = "glob")]
    pub syntax: Match,
}

impl NarrowFlags {
    fn syntax(&self) -> Syntax {
        match self.syntax {
            Match::Glob => Syntax::Glob,
            Match::Regex => Syntax::Regex,
        }
    }

    /// Each pattern option with its patterns.
    fn patterns(&self) -> [(&'static str, &Vec<String>); 4] {
        [
            ("-F", &self.filter),
            ("-N", &self.notrace),
            ("-H", &self.hide),
            ("-C", &self.callers),
        ]
    }

    /// The options as a command line would give them (`-F main -D 2`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (option, patterns) in self.patterns() {
            for p in patterns {
                args.extend([option.to_string(), p.clone()]);
            }
        }
        if let Some(d) = self.depth {
            args.extend(["-D".to_string(), d.to_string()]);
        }
        if let Some(t) = self.threshold {
            args.extend(["-t".to_string(), format!("{t}ns")]);
        }
        if let Some(r) = self.range {
            args.extend(["-r".to_string(), r.to_string()]);
        }
        if self.syntax == Match::Regex {
            args.extend(["--match".to_string(), "regex".to_string()]);
        }
        args
    }

    /// The options, each pattern checked (a bad one is an error naming it).
    pub fn narrowing(&self) -> anyhow::Result<Narrowing> {
        let syntax = self.syntax();
        let parse = |option: &str, patterns: &[String]| {
            Filter::parse_as(patterns, syntax).map_err(|e| UsageError(format!("{option}: {e}")))
        };
        Ok(Narrowing {
            filter: parse("-F", &self.filter)?,
            notrace: parse("-N", &self.notrace)?,
            hide: parse("-H", &self.hide)?,
            callers: parse("-C", &self.callers)?,
            depth: self.depth.map(|d| d as usize),
            range: self.range,
            threshold_ns: self.threshold,
            ..Narrowing::default()
        })
    }

    /// The first pattern that matches no function of `processes`, as a
    /// typo would, with its option: an error to stop on.
    pub fn check_patterns<'p>(
        &self,
        processes: impl Iterator<Item = &'p Process> + Clone,
        dir: &std::path::Path,
    ) -> anyhow::Result<()> {
        let syntax = self.syntax();
        // Each process's names, made once (demangled on first use) for
        // every pattern.
        let mut all: Vec<(&Process, Names<'_>)> = Vec::new();
        for (option, patterns) in self.patterns() {
            if patterns.is_empty() {
                continue;
            }
            if all.is_empty() {
                all = processes
                    .clone()
                    .map(|p| (p, Names::of(p, Demangle::No)))
                    .collect();
            }
            let unmatched = first_unmatched_as(patterns, syntax, |filter| {
                all.iter_mut().any(|(process, names)| {
                    process.functions.iter().any(|f| names.get(f.fid).matches(filter))
                })
            });
            if let Some(pattern) = unmatched {
                anyhow::bail!("{option} '{pattern}' matches no function in {}", dir.display());
            }
        }
        Ok(())
    }
}
