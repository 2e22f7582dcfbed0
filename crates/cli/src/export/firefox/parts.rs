//! The pieces of the Firefox profile that do not depend on the events: the
//! marker types, the functions' libraries and frames, and the [`Sampler`]
//! that turns stack changes into weighted samples.

use crate::trace::Demangle;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use fntrace_format::read::Process;
use fntrace_format::FunctionEntry;
use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, LibraryInfo, Marker, MarkerFieldFlags, MarkerFieldFormat,
    MarkerHandle, MarkerLocations, MarkerTiming, MarkerTypeHandle, Profile, RuntimeSchemaMarkerField,
    RuntimeSchemaMarkerSchema, StackHandle, StringHandle, Symbol, SymbolTable, ThreadHandle, Timestamp,
};

/// A marker field value.
#[derive(Clone, Copy)]
pub enum Value {
    S(StringHandle),
    N(f64),
}

/// The marker types.
#[derive(Clone, Copy)]
pub enum Kind {
    /// A call: `end`, `depth`, `args`, `retval` (recorded values, as
    /// `replay` writes them; empty when none were).
    Call,
    /// An entry of the `function` tracer: `caller`.
    Entry,
    /// Lost events: `count`, `detail`.
    Lost,
    /// Tracing turned on or off.
    Mark,
    /// A process: `command`, `exe`, `tracer`, `clock`, `started`, `lost`,
    /// `sites`, `patched`.
    Info,
}

/// A marker of a registered type; `values` follow its fields.
struct Mark<'a> {
    kind: MarkerTypeHandle,
    name: StringHandle,
    category: CategoryHandle,
    values: &'a [Value],
}

impl Marker for Mark<'_> {
    fn marker_type(&self, _: &mut Profile) -> MarkerTypeHandle {
        self.kind
    }
    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, i: u32) -> StringHandle {
        match self.values.get(i as usize) {
            Some(Value::S(s)) => *s,
            _ => self.name,
        }
    }
    fn number_field_value(&self, i: u32) -> f64 {
        match self.values.get(i as usize) {
            Some(Value::N(n)) => *n,
            _ => 0.0,
        }
    }
}

/// The categories and marker types of a profile.
pub struct Types {
    /// Functions' frames and calls.
    pub function: CategoryHandle,
    /// fntrace's own notes: lost events, marks, process information.
    pub note: CategoryHandle,
    /// Indexed by [`Kind`].
    types: [MarkerTypeHandle; 5],
}

impl Types {
    /// Registers them in `profile`.
    pub fn new(profile: &mut Profile) -> Types {
        use MarkerFieldFormat::{Integer, String as Str};
        let function = profile.add_category("function", CategoryColor::Blue);
        let note = profile.add_category("fntrace", CategoryColor::Red);
        // Calls stay out of the timeline (they can be millions); notes show there.
        let call = (
            Kind::Call,
            "FunctionCall",
            "{marker.name} ({marker.data.end})",
            false,
        );
        let entry = (
            Kind::Entry,
            "FunctionEntry",
            "{marker.name} from {marker.data.caller}",
            false,
        );
        let lost = (
            Kind::Lost,
            "EventsLost",
            "{marker.name}: {marker.data.detail}",
            true,
        );
        let mark = (Kind::Mark, "TraceMark", "{marker.name}", true);
        let info = (
            Kind::Info,
            "TraceInfo",
            "{marker.name}: {marker.data.command}",
            true,
        );
        let types = [call, entry, lost, mark, info].map(|(kind, name, table, timeline)| {
            let fields: &[(&str, &str, MarkerFieldFormat)] = match kind {
                Kind::Call => &[
                    ("end", "Ended", Str),
                    ("depth", "Depth", Integer),
                    ("args", "Arguments", Str),
                    ("retval", "Returned", Str),
                ],
                Kind::Entry => &[("caller", "Caller", Str)],
                Kind::Lost => &[("count", "Events", Integer), ("detail", "Detail", Str)],
                Kind::Mark => &[],
                Kind::Info => &[
                    ("command", "Command", Str),
                    ("exe", "Executable", Str),
                    ("tracer", "Tracer", Str),
                    ("clock", "Clock source", Str),
                    ("started", "Started (UTC)", Str),
                    ("lost", "Events lost", Integer),
                    ("sites", "Sites", Integer),
                    ("patched", "Sites patched", Integer),
                ],
            };
            let mut locations = MarkerLocations::MARKER_CHART | MarkerLocations::MARKER_TABLE;
            if timeline {
                locations |= MarkerLocations::TIMELINE_OVERVIEW;
            }
            profile.register_marker_type(RuntimeSchemaMarkerSchema {
                type_name: name.to_string(),
                description: None,
                locations,
                chart_label: Some("{marker.name}".to_string()),
                tooltip_label: None,
                table_label: Some(table.to_string()),
                fields: fields
                    .iter()
                    .map(|(key, label, format)| RuntimeSchemaMarkerField {
                        key: key.to_string(),
                        label: label.to_string(),
                        format: format.clone(),
                        flags: MarkerFieldFlags::SEARCHABLE,
                    })
                    .collect(),
                graphs: Vec::new(),
            })
        });
        Types {
            function,
            note,
            types,
        }
    }

    /// Adds a marker of `kind` named `name` to `thread`.
    pub fn add(
        &self,
        profile: &mut Profile,
        thread: ThreadHandle,
        timing: MarkerTiming,
        kind: Kind,
        name: StringHandle,
        values: &[Value],
    ) -> MarkerHandle {
        let category = match kind {
            Kind::Call | Kind::Entry => self.function,
            Kind::Lost | Kind::Mark | Kind::Info => self.note,
        };
        let kind = self.types[kind as usize];
        profile.add_marker(
            thread,
            timing,
            Mark {
                kind,
                name,
                category,
                values,
            },
        )
    }
}

/// A function of a process: its (marker) name and its frame.
#[derive(Clone)]
pub struct Func {
    pub name: StringHandle,
    pub frame: Frame,
}

/// Names and frames of every function of `process`: one library per
/// module, whose symbol table resolves each function's address (the
/// address minus the module's bias; with no bias known, minus the module's
/// lowest page). A function whose address does not fit in 32 bits, or that
/// the table would name otherwise (an alias at the same address), gets a
/// label frame.
pub fn functions(profile: &mut Profile, process: &Process, demangle: Demangle) -> HashMap<u32, Func> {
    let mut modules: BTreeMap<&str, Vec<&FunctionEntry>> = BTreeMap::new();
    for f in process.functions.iter() {
        modules.entry(f.module.as_str()).or_default().push(f);
    }
    let mut funcs = HashMap::new();
    for (module, entries) in modules {
        let bias = match process.info.modules.iter().find(|m| m.path == module) {
            Some(m) => m.bias,
            None => entries.iter().map(|f| f.address).min().unwrap_or(0) & !0xfff,
        };
        let rva = |f: &FunctionEntry| f.address.checked_sub(bias).and_then(|a| u32::try_from(a).ok());
        let shown = |f: &&FunctionEntry| demangle.show(&f.name);
        let names: Vec<String> = entries.iter().map(shown).collect();
        let symbols = entries.iter().zip(&names).filter_map(|(f, name)| {
            let size = u32::try_from(f.size).ok().filter(|&s| s > 0);
            Some(Symbol {
                address: rva(f)?,
                size,
                name: name.clone(),
            })
        });
        let table = Arc::new(SymbolTable::new(symbols.collect()));
        let file = module.rsplit('/').next().unwrap_or(module).to_string();
        let lib = profile.add_lib(LibraryInfo {
            name: file.clone(),
            debug_name: file,
            path: module.to_string(),
            debug_path: module.to_string(),
            debug_id: DebugId::nil(),
            code_id: None,
            arch: None,
            symbol_table: Some(Arc::clone(&table)),
        });
        for (f, name) in entries.into_iter().zip(names) {
            let handle = profile.intern_string(&name);
            let frame = match rva(f) {
                Some(a) if table.lookup(a).is_some_and(|s| s.name == name) => {
                    Frame::RelativeAddressFromInstructionPointer(lib, a)
                }
                _ => Frame::Label(handle),
            };
            funcs.insert(f.fid, Func { name: handle, frame });
        }
    }
    funcs
}

/// The samples a whole profile may add to split stretches longer than a
/// weight can say (`i32::MAX` ns, 2.1 s): 2^20 of them, 26 days of
/// stretches. Past that a stretch weighs at most 2.1 s, so that a damaged
/// time (a `TIME` event 584 years on) cannot make billions of samples.
pub const SPLIT_BUDGET: u64 = 1 << 20;

/// Turns the stack changes of a thread into samples: a sample is added
/// once the next change is known, weighted by the time (ns) until then.
pub struct Sampler {
    thread: ThreadHandle,
    /// The monotonic time (ns) of profile time 0.
    origin: u64,
    /// The current stack and since when.
    current: Option<(u64, Option<StackHandle>)>,
    /// Nanoseconds of the previous sample if it had a stack (its CPU
    /// delta), plus the sub-microsecond rest of earlier ones.
    busy_ns: u64,
    /// Samples added.
    pub samples: u64,
    /// Samples left for splitting stretches (from [`SPLIT_BUDGET`]).
    pub budget: u64,
    /// Stretches cut short when the budget was spent.
    pub cut: u64,
}

impl Sampler {
    /// The sampler of `thread`, with `budget` samples to split stretches.
    pub fn new(thread: ThreadHandle, origin: u64, budget: u64) -> Sampler {
        Sampler {
            thread,
            origin,
            current: None,
            busy_ns: 0,
            samples: 0,
            budget,
            cut: 0,
        }
    }

    /// The damage note of thread file `label` when stretches were cut.
    pub fn note(&self, label: &str) -> Option<String> {
        let (n, what) = match self.cut {
            0 => return None,
            1 => (1, "stretch with one stack weighs"),
            n => (n, "stretches with one stack weigh"),
        };
        Some(format!(
            "{label}: {n} {what} only {} ns in the Firefox profile \
             (longer than its {SPLIT_BUDGET} samples for long stretches can say)",
            i32::MAX
        ))
    }

    /// The stack is `stack` from `ns` on (a time that goes back is raised).
    pub fn at(&mut self, profile: &mut Profile, ns: u64, stack: Option<StackHandle>) {
        match self.current {
            None if stack.is_none() => {}
            None => self.current = Some((ns, stack)),
            Some((_, now)) if now == stack => {}
            Some((since, now)) => {
                let ns = ns.max(since);
                if ns > since {
                    self.add(profile, since, now, ns - since);
                }
                self.current = Some((ns, stack));
            }
        }
    }

    /// Adds the last sample, with weight 0: it marks where the one before
    /// ends.
    pub fn finish(&mut self, profile: &mut Profile) {
        if let Some((since, stack)) = self.current.take() {
            self.add(profile, since, stack, 0);
        }
    }

    /// Samples of `stack` from `since` for `ns`, in pieces that fit a
    /// weight, as many as the budget allows.
    fn add(&mut self, profile: &mut Profile, since: u64, stack: Option<StackHandle>, ns: u64) {
        let (mut at, mut left) = (since, ns);
        let pieces = ns.div_ceil(i32::MAX as u64).max(1);
        if pieces - 1 > self.budget {
            self.cut += 1;
            left = left.min(i32::MAX as u64);
        } else {
            self.budget -= pieces - 1;
        }
        loop {
            let weight = left.min(i32::MAX as u64);
            let cpu = CpuDelta::from_nanos(self.busy_ns);
            self.busy_ns = self.busy_ns % 1000 + if stack.is_some() { weight } else { 0 };
            let ts = Timestamp::from_nanos_since_reference(at.saturating_sub(self.origin));
            profile.add_sample(self.thread, ts, stack, cpu, weight as i32);
            self.samples += 1;
            (at, left) = (at + weight, left - weight);
            if left == 0 {
                break;
            }
        }
    }
}
