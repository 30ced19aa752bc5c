//! What the parent does to a holder, and what happens to a host or to the
//! store on a run's pictures: the events a timeline draws beside the
//! database's own.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One kind of event the parent stamps (see `events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Act {
    /// The holder process was started.
    Spawn,
    /// SIGSTOP: the holder is frozen.
    Stop,
    /// SIGCONT: it runs again.
    Cont,
    /// SIGKILL.
    Kill,
    /// The delay proxy holds the holder's bytes (F12).
    Hold,
    /// The proxy lets them go.
    Release,
    /// The host was cut off by a partition.
    Cut,
    /// Its partition was healed.
    Heal,
    /// The lease expired (a model's counterexample drawn as a timeline).
    Expire,
    /// The primary crashed and its standby was promoted (a model's).
    Promote,
}

impl Act {
    /// The label the pictures show.
    pub fn label(self) -> &'static str {
        match self {
            Act::Spawn => "spawn",
            Act::Stop => "SIGSTOP",
            Act::Cont => "SIGCONT",
            Act::Kill => "SIGKILL",
            Act::Hold => "hold",
            Act::Release => "release",
            Act::Cut => "cut",
            Act::Heal => "heal",
            Act::Expire => "到期",
            Act::Promote => "主库崩溃，备库提升",
        }
    }
}

impl fmt::Display for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}
