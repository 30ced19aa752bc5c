//! The whole test suite, run in parallel: what `./run.sh test` and CI run.
//!
//! Almost all of the suite's time is designed waiting: TTLs running out,
//! holders paused, elections, the chaos run's minutes. Run one after
//! another, those waits took 39 minutes on a 2-core machine that sat idle
//! most of the time. Waits are sleeps, so the suite runs several *groups*
//! at once, each waiting on its own:
//!
//! - a group is one test process: a test binary, a slice of the cases'
//!   snapshots, or one chapter of the book's commands ([`groups`]);
//! - each group gets an environment of its own ([`schedule`]): a cluster
//!   place in a fresh folder, an etcd folder, and a range of ports from
//!   which every port it picks comes (`LAB_FREE_PORTS`), so no two groups
//!   can meet on a port or a folder;
//! - chapters that break guards in a scratch copy (`./run.sh try`) take one
//!   of three scratch copies, which stay warm between groups and between runs;
//! - the longest groups start first (by how long each took the last time on
//!   this machine, else by `times.tsv`: every group's time in a run of the
//!   whole suite from a fresh clone on a 2-core machine);
//! - progress is printed as groups start and end, and every minute; at the
//!   end, a table of the slowest groups and the counts of what was checked,
//!   as the runners say them ([`checked`]): a group that passed without
//!   checking anything has failed.
//!
//! Nothing runs twice to check the same thing: the mutation table's runs
//! are the book's `./run.sh try NAME` commands (each is the same judgement
//! of one mutant as `lab mutants`), and `tests/mutants.rs` checks that the
//! book tries every mutation in the table.
//!
//! After each group the suite checks that it left nothing running in its
//! place (a server, etcd members): a leftover fails the group, and is
//! stopped. Ctrl-C passes SIGINT to every group's processes, waits for
//! their own cleanup, and then clears their places.

pub mod book;
pub mod checked;
pub mod groups;
pub mod schedule;

pub use groups::{groups, Group, TestBinaries};
pub use schedule::{run, SuiteOptions};
