//! The faults the chaos run's nemesis injects.

use serde::{Deserialize, Serialize};

/// The faults the nemesis injects, as the checker counts them. Counts are
/// keyed by the kind itself; its order (the variants' order, which is their
/// names' alphabetical order) is the order of every table's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The database server crash-stops and starts again (F8).
    DbRestart,
    /// The slot's link delays every chunk it carries for a span: a write
    /// stale in flight (F12), renewals that arrive late.
    Delay,
    /// SIGKILL; the slot starts a new incarnation of the holder (F10).
    Kill,
    /// A partition that cuts one holder's host off from every other host,
    /// the server's included, for its length (F17): the holder runs on, and
    /// what it sends meanwhile goes nowhere; once healed, its renewals and
    /// writes arrive late.
    PartitionIsolate,
    /// A partition that cuts a group of holders' hosts off from the
    /// server's host and the other holders together, for its length: a rack
    /// that lost its uplink.
    PartitionSplit,
    /// SIGSTOP for longer than the ttl (F4's pause): the lease expires
    /// under the stopped holder, and another takes over.
    PauseLong,
    /// SIGSTOP for less than the ttl, then SIGCONT: the lease may survive.
    PauseShort,
}

impl FaultKind {
    /// Every kind, in order (their names' alphabetical order).
    pub const ALL: [FaultKind; 7] = [
        FaultKind::DbRestart,
        FaultKind::Delay,
        FaultKind::Kill,
        FaultKind::PartitionIsolate,
        FaultKind::PartitionSplit,
        FaultKind::PauseLong,
        FaultKind::PauseShort,
    ];

    /// The name the checker, the tables and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::PauseShort => "pause-short",
            FaultKind::PauseLong => "pause-long",
            FaultKind::Kill => "kill",
            FaultKind::PartitionIsolate => "partition-isolate",
            FaultKind::PartitionSplit => "partition-split",
            FaultKind::Delay => "delay",
            FaultKind::DbRestart => "db-restart",
        }
    }
}

spelled!(FaultKind, shown by FaultKind::name, read by FaultKind::name, as "fault kind");

#[cfg(test)]
mod tests {
    use super::*;

    /// The variants' order is their names' order, and the JSON is the name.
    #[test]
    fn order_and_spelling() {
        let mut names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        assert_eq!(names, FaultKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        for kind in FaultKind::ALL {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        }
    }
}
