//! # The lease + fencing lab
//!
//! A daily report job runs as several instances; a lease table in PostgreSQL
//! lets one of them work at a time, and a fencing token issued with every
//! acquire lets the report store refuse a holder that paused past its lease.
//! This crate runs the experiments (cases F1–F9) against a real, throw-away
//! PostgreSQL cluster and prints their transcripts.
//!
//! # Layout
//!
//! The lease side (database `lease26`):
//! - [`lease`]: `LeaseStore` (acquire, renew, release: single autocommit
//!   statements) and `Grant`, with the holder's local deadline.
//! - [`renewer`]: the background renewal thread a holder runs.
//!
//! The resource side (database `res26`), which never reads the lease table:
//! - [`report`]: `ReportStore::write` in the fenced mode and the three broken
//!   modes kept for the negative controls.
//! - [`publish`]: F9's stand-in for an external publisher that takes no token.
//!
//! Processes and the cluster:
//! - [`holder`]: the holder process (the `holder` binary) and its protocol lines.
//! - [`holder_process`]: the parent's guard on one holder: signals, `/proc`
//!   state, bounded reads, and no holder outliving its case.
//! - [`cluster`]: the `b3-26` cluster's lifecycle (init, start, stop,
//!   immediate shutdown) and the run's ownership of it.
//! - [`db`]: how every client reaches the cluster, and the schema reset.
//! - [`interrupt`]: Ctrl-C and friends: stop holders and the cluster, then exit.
//!
//! The experiments and their evidence:
//! - [`cases`]: one module per case, `F1` … `F9`, and what they share.
//! - [`latch`]: the one-shot latch the cases use to force interleavings.
//! - [`transcript`]: the `ok`/`note`/`FAIL` format and the redactions shared
//!   by the snapshot tests and by `lab diff`.
//! - [`evidence`]: where the locked transcripts live, and `lab diff`.
//! - [`error`]: the crate's one error type; [`paths`]: where things live.

pub mod cases;
pub mod cluster;
pub mod db;
pub mod error;
pub mod evidence;
pub mod holder;
pub mod holder_process;
pub mod interrupt;
pub mod latch;
pub mod lease;
pub mod paths;
pub mod publish;
pub mod renewer;
pub mod report;
pub mod transcript;

pub use error::{Error, Result};
