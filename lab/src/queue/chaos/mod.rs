//! The queue under the nemesis (`lab queue-chaos`): N workers claim,
//! heartbeat, work, write a side effect and complete jobs of the zoo's
//! queue, a rescuer and a pruner take claims back, and a seeded nemesis
//! deals the claims faults (pauses short and long, a worker replaced by
//! one of the same name, kills, a completion that meets the rescuer
//! between its read and its write, long jobs, a busy connection, a skewed
//! rescuer clock). The same run is made with the fixed queue and with each
//! bug of the zoo put back; afterwards one pure function counts, from the
//! database's record and the nemesis's list of the claims it disturbed,
//! the harm each switch let through.
//!
//! - [`nemesis`]: which fault each claim meets, from the seed;
//! - [`worker`]: the worker slots and their processes;
//! - [`keeper`]: the rescuer, the pruner, and the gap where a late
//!   completion meets the rescuer;
//! - [`run`]: one switch's run, from fresh tables to the counts;
//! - [`judge`]: the counts, from the record;
//! - [`report`]: every switch in turn, the table, its data.

pub mod judge;
pub mod keeper;
pub mod nemesis;
pub mod report;
pub mod run;
pub mod worker;

pub use report::{QueueChaosData, QueueChaosOptions};
pub use run::QueueConfig;
