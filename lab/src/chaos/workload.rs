//! The workload: K holder *slots*, each running holder processes one after
//! another, and the one owner of every process it starts.
//!
//! A slot is one instance of the report job, as a deployment would run it:
//! a named holder (`holder-a`, `holder-b`, …) that holds the lease once per
//! process — acquire (waiting its turn), write the report's parts with work
//! between them, each after its own deadline check, renew, release — and
//! is started again when that process ends. A holder the nemesis kills, or
//! one that fails (its server restarted under it), comes back as a new
//! *incarnation*: it remembers nothing of its earlier life, so its holdings
//! are counted afresh, as the checker's grants expect.
//!
//! Each slot is a machine of its own: a host of the run's network
//! ([`crate::hosts`]), where its holders run. It reaches the database
//! server through a link of its own, a
//! [`DelayProxy`](crate::fault::DelayProxy) that listens on the server's
//! host (`db`) and forwards to the server: the network path of one machine
//! of the job, which the nemesis can slow down while the others' stay
//! fast, and which a partition in the switch can cut. That is what lets a
//! write go stale in flight (F12): the slow holder's write is on the wire
//! while its lease expires and a holder on a fast link takes over and
//! writes.
//!
//! One thread per slot owns its holder process from spawn to reap: it
//! reads the holder's protocol lines, records every `ACQUIRED token=N` as a
//! grant, and carries out the nemesis's orders (pause, kill), which reach
//! it through a channel. So only that thread ever signals or reaps the
//! holder, and a pid is never signalled after it was reaped. The nemesis
//! sees a slot only through its [`SlotView`], which the thread keeps up to
//! date. At the end the thread resumes its holder if it is stopped, kills
//! it and reaps it; on Ctrl-C the interrupt module kills every registered
//! holder, and a holder whose slot thread is gone gets SIGKILL from the
//! kernel (`PR_SET_PDEATHSIG`, set by the holder guard).
//!
//! The parts, one concept a file:
//!
//! - `plan`: what a slot's holders run, and each holder's command line;
//! - `orders`: the nemesis's orders to a slot, and what it sees of the
//!   slot;
//! - `record`: the fault log, and the tally of grants and failures;
//! - `slot`: one slot, its link and the handle of its thread;
//! - `slot_thread`: the slot's thread, which drives its holders;
//! - here: the [`Workload`], the set of slots and the flag that ends them.

mod orders;
mod plan;
mod record;
mod slot;
mod slot_thread;

pub use orders::{Order, SlotView};
pub use plan::{SlotPlan, ACQUIRE_EVERY, IDLE_TIMEOUT, PARTS, WORK};
pub use record::{Fate, FaultId, FaultLog, Injected, Tally};
pub use slot::{holder_name, Slot, DEFAULT_HOLDERS, MAX_HOLDERS, SERVER_HOST};
pub use slot_thread::{AIM_BOUND, BEFORE_WRITE, RESTART_AFTER};

use crate::error::Result;
use crate::hosts::Network;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The slots of one run, and the flag that ends them: dropping it, on any
/// path, sets the flag and waits for every slot's thread, so no holder
/// outlives the run, and then closes the links.
pub struct Workload {
    /// The slots, `holder-a` first.
    slots: Vec<Slot>,
    /// Set when the run ends; every slot's thread reads it.
    stop: Arc<AtomicBool>,
}

impl Workload {
    /// Starts `holders` slots.
    pub fn start(holders: usize, plan: &SlotPlan, net: &Network, log: &Arc<FaultLog>, tally: &Arc<Tally>, start: Instant) -> Result<Workload> {
        let mut workload = Workload { slots: Vec::new(), stop: Arc::new(AtomicBool::new(false)) };
        for index in 0..holders {
            // On an error the slots started so far are ended by the drop.
            workload.slots.push(Slot::start(index, plan, net, &workload.stop, log, tally, start)?);
        }
        Ok(workload)
    }

    /// The slots.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Ends every slot (each resumes, kills and reaps its holder) and
    /// closes the links: held bytes are dropped with them, never delivered.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for slot in &self.slots {
            slot.join();
        }
    }
}
