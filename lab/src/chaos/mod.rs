//! The chaos run (case F15, and `lab chaos`), in the manner of Jepsen's
//! lock tests: K holder processes loop acquire → write several parts of
//! one scope → renew → release, with random work times, while a seeded
//! nemesis pauses holders (shorter and longer than the ttl), kills and
//! restarts them, delays their links in a proxy, cuts their hosts off the
//! network (`crate::hosts`) and crash-restarts the database. The same workload and the same fault schedule run against
//! each resource mode.
//!
//! The run does not judge itself while it runs: it only records. Afterwards
//! one pure function reads the whole record and counts what went wrong. So
//! the judge is tested on hand-made histories, with no database and no
//! timing, and the run's verdict depends on what happened, not on when a
//! check happened to look.
//!
//! - [`schedule`]: the fault schedule, drawn up front from the seed by a
//!   small PRNG of the lab's own: the same seed, the same schedule.
//! - [`workload`]: the holder slots, one thread each, the one owner of
//!   every holder process it starts, each slot a network host; each
//!   slot's link to the server (a `DelayProxy` on the server's host); the
//!   grants the holders report.
//! - [`nemesis`]: the thread that walks the schedule and injects each fault
//!   from outside (SIGSTOP/SIGCONT, SIGKILL, a slow link, a partition in
//!   the switch, an immediate restart of the server), and heals at the end.
//! - [`run`]: one mode's run, from fresh tables to the verdict.
//! - [`checker`]: the history as it reads it (write attempts, grants, final
//!   parts, faults), taken from the run's whole record (`crate::history`,
//!   which the run writes as JSON lines and a page), [`checker::check`],
//!   which turns it into a [`Verdict`](crate::vocabulary::Verdict), and
//!   [`checker::findings`], each thing a count counted, with its reason.
//! - [`report`]: the table of verdicts, one column per mode.
//! - [`command`]: `lab chaos`: every mode in turn, the table, the files
//!   (each mode's history among them), and whether each verdict is the
//!   expected one.

pub mod checker;
pub mod command;
pub mod nemesis;
pub mod report;
pub mod results;
pub mod run;
pub mod schedule;
pub mod workload;

pub use checker::{check, Fault, GrantRecord, CheckerInput};
pub use run::{network, run_mode, Config, ModeRun};
pub use schedule::Schedule;
