//! Real job-queue crates under the nemesis (`lab queues`): graphile_worker
//! and apalis-postgres, unmodified, each job's handler writing a side
//! effect into the lab's resource, unfenced and then fenced by a token
//! taken from the crate's claim. The crates' side is the workspace member
//! `lab-queues` (queues/); this side makes the database, runs the worker
//! processes, deals the faults and judges the record.
//!
//! - [`nemesis`]: which job meets which fault, and each job's work time,
//!   from the seed;
//! - [`process`]: one `lab-queues` process, from spawn to reap;
//! - [`run`]: one crate and fence, from a fresh database to the record;
//! - [`judge`]: the counts, from the record;
//! - [`report`]: every crate and fence in turn, the table, its data.

pub mod judge;
pub mod nemesis;
pub mod process;
pub mod report;
pub mod run;

pub use report::{QueuesData, QueuesOptions};
pub use run::{CrateName, HandlerFence};
