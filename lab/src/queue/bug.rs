//! The bugs of the zoo: each a lease bug that published job queues (and
//! similar projects) shipped, as a switch on the lab's queue that puts it back.

/// One bug of the zoo. With none switched on, the queue is the fixed one:
/// a token per claim, checked on every write the claim makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Z1: the claim is identified by the worker's name, which a restarted
    /// worker reuses, so the old incarnation's heartbeat and completion
    /// count for the new one.
    NameAsIdentity,
    /// Z2: a heartbeat extends whatever claim is running, so a late
    /// heartbeat re-extends a lease that was already taken over and its
    /// worker goes on as if it held the job.
    LateHeartbeat,
    /// Z3: the rescuer selects the expired jobs, then updates them by id:
    /// a job completed in between is made available again and runs twice.
    RescueOverwrites,
    /// Z4: a completion is matched by the job's id only: an expired claim
    /// completes a job another worker now holds.
    CompleteWithoutClaim,
    /// Z5: the rescuer gives the attempt back (the token goes down by one),
    /// so the next claim's token equals the superseded one and every check
    /// of the token lets the stale claim through.
    TokenGivenBack,
    /// Z6: a job is rescued once it has run longer than a limit, heartbeats
    /// or not: a long healthy job runs twice.
    ElapsedRescue,
    /// Z7: the rescuer judges a lease stored by the database's clock with
    /// the application's clock: a clock that runs ahead rescues live jobs.
    AppClock,
    /// Z8: the heartbeat waits for the one connection the job's work is
    /// using, so a busy job misses its heartbeats and is rescued.
    StarvedHeartbeat,
    /// Z9: the pruner releases the jobs of a worker its registry thinks
    /// dead, without reading the jobs' own leases.
    PrunedWhileAlive,
}

impl Bug {
    /// Every bug, in the zoo's order (Z1 … Z9).
    pub const ALL: [Bug; 9] = [
        Bug::NameAsIdentity,
        Bug::LateHeartbeat,
        Bug::RescueOverwrites,
        Bug::CompleteWithoutClaim,
        Bug::TokenGivenBack,
        Bug::ElapsedRescue,
        Bug::AppClock,
        Bug::StarvedHeartbeat,
        Bug::PrunedWhileAlive,
    ];

    /// The bug's row in the zoo: `Z1` … `Z9`.
    pub fn row(self) -> String {
        format!("Z{}", Bug::ALL.iter().position(|b| *b == self).expect("every bug is in ALL") + 1)
    }

    /// The bug's name in transcripts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Bug::NameAsIdentity => "name-as-identity",
            Bug::LateHeartbeat => "late-heartbeat",
            Bug::RescueOverwrites => "rescue-overwrites",
            Bug::CompleteWithoutClaim => "complete-without-claim",
            Bug::TokenGivenBack => "token-given-back",
            Bug::ElapsedRescue => "elapsed-rescue",
            Bug::AppClock => "app-clock",
            Bug::StarvedHeartbeat => "starved-heartbeat",
            Bug::PrunedWhileAlive => "pruned-while-alive",
        }
    }

    /// Where it happened: the projects' issues and pull requests.
    pub fn seen_in(self) -> &'static str {
        match self {
            Bug::NameAsIdentity => "procrastinate#1518, kubernetes#22775, aegra#502",
            Bug::LateHeartbeat => "aegra#502, hatchet#4784",
            Bug::RescueOverwrites => "river#1302, quartz#107",
            Bug::CompleteWithoutClaim => "pg-boss#555",
            Bug::TokenGivenBack => "temporal#11097, redislock#94, yugabyte-db#33507",
            Bug::ElapsedRescue => "hexpm#1825",
            Bug::AppClock => "db-scheduler#402, #432, #433",
            Bug::StarvedHeartbeat => "pgqueuer#323, #430, #431",
            Bug::PrunedWhileAlive => "solid_queue#589, #761",
        }
    }
}

impl std::fmt::Display for Bug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows and names are distinct and in the zoo's order.
    #[test]
    fn rows_and_names_are_distinct() {
        let rows: Vec<String> = Bug::ALL.iter().map(|b| b.row()).collect();
        assert_eq!(rows, ["Z1", "Z2", "Z3", "Z4", "Z5", "Z6", "Z7", "Z8", "Z9"]);
        let mut names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Bug::ALL.len());
    }
}
