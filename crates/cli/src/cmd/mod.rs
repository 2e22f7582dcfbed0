//! One module per subcommand.

pub mod attach;
pub mod ctl;
pub mod dump;
pub mod flamegraph;
pub mod graph;
pub mod info;
pub mod list;
pub mod live;
pub mod record;
pub mod recordmcount;
pub mod replay;
pub mod report;
pub mod tui;
