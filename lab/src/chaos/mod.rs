//! The chaos run (the coming case F15), in the manner of Jepsen's lock tests:
//! K holder processes loop acquire → write several parts of one scope →
//! renew → release, with random work times, while a seeded nemesis pauses
//! holders (shorter and longer than the ttl), kills and restarts them,
//! delays their writes in a proxy and crash-restarts the database. The same
//! workload runs against each resource mode.
//!
//! The run does not judge itself while it runs: it only records. Afterwards
//! one pure function reads the whole record and counts what went wrong. So
//! the judge is tested on hand-made histories, with no database and no
//! timing, and the run's verdict depends on what happened, not on when a
//! check happened to look.
//!
//! - [`checker`]: the history (write attempts, grants, final parts, faults),
//!   [`checker::load`] of its resource half from `res26`, and
//!   [`checker::check`], which turns it into a [`checker::Verdict`].
//!
//! Still a room: the nemesis, `chaos/nemesis.rs` (its fault schedule from a
//! seed, one owner for each holder it starts, every fault injected from
//! outside the way a real one happens), and the workload that drives the
//! holders and collects their grants and the nemesis's faults.

pub mod checker;

pub use checker::{check, Attempt, Fault, FinalPart, GrantRecord, History, Verdict};
