//! The checker: a pure function from a chaos run's history to a [`Verdict`],
//! a handful of counts, each defined over the record alone.
//!
//! The history has four sources. The resource records every write attempt
//! (`write_attempt`) and holds the final parts (`report_part`); [`load`]
//! reads both. The holders report their grants and the nemesis its faults,
//! in their own logs, which the run collects.
//!
//! What the counts mean in the article's terms:
//! - a *stale write accepted* is I3 broken as chapter 2 states it: in a
//!   scope's acceptance order the tokens never go down;
//! - a *token reused* is I2 broken: a token that two holdings were given;
//! - a *floor regression* is I3 seen from the fence's side: the scope's
//!   `fence_floor` going down (F6a: from 2 to 1);
//! - a *lost write* is what the report pays: an accepted write whose effect
//!   vanished without a larger token overwriting it.
//!
//! Acceptance order. For `FENCED_SCOPE` an accepted attempt is recorded
//! inside the write's own transaction, under the `fence_floor` row lock, so
//! `write_attempt.id` order *is* acceptance order, and the stale count is
//! exact; so it is for `FENCED_SCOPE_CTE`, whose record is drawn in the
//! fence's own statement, under the same lock. The broken modes record in
//! the write's own statement (`FENCED_ROW`, `UNFENCED`) or in one of its
//! own after it (`CHECK_THEN_WRITE`), with no lock that orders writers;
//! when two writers race, id order is then the order of recording, which
//! can differ from the order in which the writes took effect. The
//! checker uses id order for every mode all the same: against the real
//! fence it raises no false alarm, and for a broken mode a stale count is a
//! symptom of the race the run exists to expose (it may count a write that
//! took effect before the larger token's). Lost writes compare tokens only,
//! so they do not depend on the order at all. Floor regressions are exact
//! when the floor is read as [`Attempt::floor_after`] asks.

use super::schedule::FaultKind;
use crate::error::{Result, ResultExt};
use crate::resource::FenceMode;
use postgres::{Client, IsolationLevel};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One write attempt, as `write_attempt` records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// `write_attempt.id`: the order of recording, which for an accepted
    /// `FENCED_SCOPE` attempt is the order of acceptance.
    pub id: i64,
    /// The fenced scope, e.g. `daily-report`.
    pub scope: String,
    /// The part within the scope, e.g. `summary`.
    pub part: String,
    /// The holder that wrote, e.g. `holder-a`.
    pub writer: String,
    /// The fencing token the write carried.
    pub token: i64,
    /// The resource mode that judged it.
    pub mode: FenceMode,
    /// Whether the resource accepted it.
    pub accepted: bool,
    /// The scope's `fence_floor.max_token` as read by the statement that
    /// recorded the attempt; `None` when it was not recorded. For id order
    /// to be the order of these reads, the recording statement must read the
    /// floor under a share lock of the floor row (`FOR SHARE`); otherwise a
    /// refused attempt recorded while an accepted one has not yet committed
    /// would read the older floor after the newer one (a false regression).
    pub floor_after: Option<i64>,
}

/// One successful acquire, as the holder that got it reports it.
///
/// A holding is named by (holder, incarnation, holding): a restarted holder
/// starts counting its holdings again, so the incarnation keeps its second
/// life's first holding apart from its first life's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    /// The holder, e.g. `holder-a`.
    pub holder: String,
    /// Which start of that holder's process: 0 for the first, 1 after the
    /// nemesis's first kill and restart, and so on.
    pub incarnation: u32,
    /// The holding's number within the incarnation: 1 for its first
    /// successful acquire, 2 for the next, …
    pub holding: u32,
    /// The fencing token the acquire returned.
    pub token: i64,
}

/// One row of `report_part` after the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalPart {
    /// The scope, e.g. `daily-report`.
    pub scope: String,
    /// The part, e.g. `summary`; (scope, part) is the table's primary key.
    pub part: String,
    /// Who wrote the row that stayed.
    pub writer: String,
    /// With which token.
    pub token: i64,
}

/// One fault the nemesis injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What it was: a pause shorter or longer than the ttl (SIGSTOP), a
    /// kill (SIGKILL and restart), a delay (a write held in the proxy), a
    /// database restart (an immediate stop and a start).
    pub kind: FaultKind,
}

/// Everything a chaos run leaves behind, as the checker reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Every write attempt, accepted or refused, in `write_attempt.id`
    /// order ([`check`] sorts by id anyway).
    pub attempts: Vec<Attempt>,
    /// Every successful acquire the holders reported.
    pub grants: Vec<GrantRecord>,
    /// The resource's rows after the run, one per (scope, part).
    pub final_parts: Vec<FinalPart>,
    /// The nemesis's faults, in the order it injected them.
    pub faults: Vec<Fault>,
}

/// What the checker found in one history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Write attempts recorded.
    pub attempts: usize,
    /// Attempts the resource accepted.
    pub accepted: usize,
    /// Attempts the resource refused.
    pub refused: usize,
    /// Distinct holdings the holders reported: zero here means the grants
    /// log is missing, and the reuse count below has nothing to judge.
    pub holdings: usize,
    /// Accepted attempts whose token is smaller than a token the same scope
    /// had already accepted earlier in id order. An equal token is not
    /// stale: the fence compares with `<=`, so one grant may write many
    /// times. Refused attempts never count and never raise the bar.
    pub stale_accepted: usize,
    /// Distinct tokens granted to more than one holding (I2). A holding
    /// reported twice is still one holding.
    pub tokens_reused: usize,
    /// Attempts that recorded a `floor_after`: zero means the column was not
    /// recorded, and the regression count below has nothing to judge.
    pub floors_recorded: usize,
    /// Times a scope's recorded `floor_after` went down compared with the
    /// previous recorded value for that scope, in id order, over all
    /// attempts that recorded one (accepted or refused).
    pub floor_regressions: usize,
    /// Accepted writes whose effect vanished without a larger token
    /// overwriting it. Per (scope, part): the accepted attempts whose token
    /// is larger than the final row's token; when the part has no final row,
    /// all its accepted attempts. A stale write that creates a part nobody
    /// else wrote loses nothing (F7); one that overwrites a newer token's
    /// row loses that write (F5).
    pub lost_writes: usize,
    /// The nemesis's faults, counted by kind.
    pub faults: BTreeMap<FaultKind, usize>,
}

/// What a history lacks for a zero count to mean anything: each gap leaves
/// some count with nothing to judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// No holder reported a holding: the reuse count (I2) saw no grant.
    NoHoldings,
    /// The resource accepted no write: the stale and lost counts saw none.
    NoAcceptedWrite,
    /// No attempt, or an attempt without its `floor_after`: the regression
    /// count saw no floor, or not every one.
    FloorsUnrecorded,
    /// The nemesis injected no fault: whatever held, held undisturbed.
    NoFault,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Gap::NoHoldings => "no holding granted",
            Gap::NoAcceptedWrite => "no write accepted",
            Gap::FloorsUnrecorded => "not every write attempt recorded its floor",
            Gap::NoFault => "no fault injected",
        })
    }
}

/// The checker's conclusion from a [`Verdict`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Every count judged something, and every one is zero.
    Clean,
    /// Some count found what it looks for: evidence, whatever else the
    /// history lacks.
    NotClean,
    /// Every count is zero, but some of them saw nothing to count: the
    /// zeros prove nothing, and the run is neither clean nor caught.
    NothingToJudge(Vec<Gap>),
}

impl Judgement {
    /// The conclusion in a word or three, as a table's cell shows it.
    pub fn word(&self) -> &'static str {
        match self {
            Judgement::Clean => "clean",
            Judgement::NotClean => "NOT clean",
            Judgement::NothingToJudge(_) => "nothing to judge",
        }
    }
}

/// The word, and for nothing to judge what was missing.
impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())?;
        if let Judgement::NothingToJudge(gaps) = self {
            let gaps: Vec<String> = gaps.iter().map(Gap::to_string).collect();
            write!(f, " ({})", gaps.join(", "))?;
        }
        Ok(())
    }
}

impl Verdict {
    /// What the history lacks; empty when every count had something to judge.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut gaps = Vec::new();
        if self.holdings == 0 {
            gaps.push(Gap::NoHoldings);
        }
        if self.accepted == 0 {
            gaps.push(Gap::NoAcceptedWrite);
        }
        if self.attempts == 0 || self.floors_recorded < self.attempts {
            gaps.push(Gap::FloorsUnrecorded);
        }
        if self.faults.values().sum::<usize>() == 0 {
            gaps.push(Gap::NoFault);
        }
        gaps
    }

    /// Not clean when a stale write was accepted, a token reused, a floor
    /// regressed or a write lost; otherwise clean only when nothing is
    /// missing from the history. The fault counts say what the run
    /// survived, not whether it survived it.
    pub fn judgement(&self) -> Judgement {
        let gaps = self.gaps();
        if self.stale_accepted > 0 || self.tokens_reused > 0 || self.floor_regressions > 0 || self.lost_writes > 0 {
            Judgement::NotClean
        } else if gaps.is_empty() {
            Judgement::Clean
        } else {
            Judgement::NothingToJudge(gaps)
        }
    }
}

// ANCHOR: check
/// Judges a history; see [`Verdict`] for what each count means.
pub fn check(history: &History) -> Verdict {
    let mut attempts: Vec<&Attempt> = history.attempts.iter().collect();
    attempts.sort_by_key(|a| a.id);
    let accepted = attempts.iter().filter(|a| a.accepted).count();
    let holdings: BTreeSet<(&str, u32, u32)> =
        history.grants.iter().map(|g| (g.holder.as_str(), g.incarnation, g.holding)).collect();
    Verdict {
        attempts: attempts.len(),
        accepted,
        refused: attempts.len() - accepted,
        holdings: holdings.len(),
        stale_accepted: stale_accepted(&attempts),
        tokens_reused: tokens_reused(&history.grants),
        floors_recorded: attempts.iter().filter(|a| a.floor_after.is_some()).count(),
        floor_regressions: floor_regressions(&attempts),
        lost_writes: lost_writes(&attempts, &history.final_parts),
        faults: faults_by_kind(&history.faults),
    }
}
// ANCHOR_END: check

// ANCHOR: stale_accepted
/// Accepted attempts below the largest token their scope accepted before them.
fn stale_accepted(attempts: &[&Attempt]) -> usize {
    let mut largest: BTreeMap<&str, i64> = BTreeMap::new();
    let mut stale = 0;
    for a in attempts.iter().filter(|a| a.accepted) {
        match largest.get_mut(a.scope.as_str()) {
            Some(bar) if a.token < *bar => stale += 1,
            Some(bar) => *bar = a.token,
            None => {
                largest.insert(&a.scope, a.token);
            }
        }
    }
    stale
}
// ANCHOR_END: stale_accepted

/// Tokens that more than one distinct holding reported.
fn tokens_reused(grants: &[GrantRecord]) -> usize {
    let mut holdings: BTreeMap<i64, BTreeSet<(&str, u32, u32)>> = BTreeMap::new();
    for g in grants {
        holdings.entry(g.token).or_default().insert((&g.holder, g.incarnation, g.holding));
    }
    holdings.values().filter(|h| h.len() > 1).count()
}

/// Steps down between consecutive recorded floors of one scope.
fn floor_regressions(attempts: &[&Attempt]) -> usize {
    let mut previous: BTreeMap<&str, i64> = BTreeMap::new();
    let mut regressions = 0;
    for a in attempts {
        if let Some(floor) = a.floor_after {
            if previous.insert(&a.scope, floor).is_some_and(|before| floor < before) {
                regressions += 1;
            }
        }
    }
    regressions
}

// ANCHOR: lost_writes
/// Accepted writes above their part's final token, or on a part that vanished.
fn lost_writes(attempts: &[&Attempt], final_parts: &[FinalPart]) -> usize {
    let finals: BTreeMap<(&str, &str), i64> =
        final_parts.iter().map(|p| ((p.scope.as_str(), p.part.as_str()), p.token)).collect();
    attempts
        .iter()
        .filter(|a| a.accepted)
        .filter(|a| finals.get(&(a.scope.as_str(), a.part.as_str())).is_none_or(|&kept| a.token > kept))
        .count()
}
// ANCHOR_END: lost_writes

fn faults_by_kind(faults: &[Fault]) -> BTreeMap<FaultKind, usize> {
    let mut counts = BTreeMap::new();
    for f in faults {
        *counts.entry(f.kind).or_insert(0) += 1;
    }
    counts
}

/// The verdict as a transcript prints it: one measure a line, always in
/// this order, faults last by kind in alphabetical order.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: [(&str, usize, String); 9] = [
            ("write attempts", self.attempts, String::new()),
            ("accepted", self.accepted, String::new()),
            ("refused", self.refused, String::new()),
            ("holdings granted", self.holdings, String::new()),
            ("stale writes accepted (I3)", self.stale_accepted, "below a token its scope had accepted".into()),
            ("tokens reused (I2)", self.tokens_reused, "granted to more than one holding".into()),
            ("floor regressions (I3)", self.floor_regressions, format!("of {} recorded floors", self.floors_recorded)),
            ("lost writes", self.lost_writes, "overwritten by a smaller token, or gone".into()),
            ("faults injected", self.faults.values().sum(), String::new()),
        ];
        for (label, count, why) in lines {
            writeln!(f, "{}", row(label, count, &why))?;
        }
        for (kind, count) in &self.faults {
            writeln!(f, "{}", row(&format!("  {kind}"), *count, ""))?;
        }
        write!(f, "verdict: {}", self.judgement())
    }
}

/// `label ....... count  why`, aligned.
fn row(label: &str, count: usize, why: &str) -> String {
    format!("{label:<28}{count:>6}  {why}").trim_end().to_owned()
}

// ANCHOR: load_sql
/// Every write attempt, in the order of recording.
///
/// `floor_after` is the scope's floor as the recording statement read it
/// (see [`Attempt::floor_after`]); the workload adds that column to
/// `write_attempt`. Run in the same snapshot as [`FINAL_PARTS`].
pub const ATTEMPTS: &str = "
    SELECT id, scope, part, writer, token, mode, accepted, floor_after
      FROM write_attempt
     ORDER BY id";

/// The rows of the report that stayed: one per (scope, part), the primary key.
pub const FINAL_PARTS: &str = "
    SELECT scope, part, writer, token
      FROM report_part
     ORDER BY scope, part";
// ANCHOR_END: load_sql

// ANCHOR: load
/// Reads the resource's half of a history of a run in `mode` from `res26`:
/// the attempts and the final parts. An attempt judged by another mode
/// means the tables were not the run's own, and is an error. Grants and
/// faults come from the holders' and the nemesis's logs; they are left
/// empty here for the run to fill in (and an empty grants log leaves the
/// verdict with nothing to judge).
pub fn load(client: &mut Client, mode: FenceMode) -> Result<History> {
    // One REPEATABLE READ snapshot for both reads: a write that commits while
    // the checker reads (a holder the run failed to stop) is then in both or
    // in neither, and cannot show up as an attempt above a final row that the
    // first read already took (a false lost write).
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .context("starting the history snapshot")?;
    let mut attempts = Vec::new();
    for r in tx.query(ATTEMPTS, &[]).context("reading write_attempt")? {
        let (id, judged_by): (i64, String) = (r.get(0), r.get(5));
        if judged_by != mode.name() {
            return Err(format!("write_attempt {id} was judged by {judged_by}, not by this run's {mode}").into());
        }
        attempts.push(Attempt {
            id,
            scope: r.get(1),
            part: r.get(2),
            writer: r.get(3),
            token: r.get(4),
            mode,
            accepted: r.get(6),
            floor_after: r.get(7),
        });
    }
    let final_parts = tx
        .query(FINAL_PARTS, &[])
        .context("reading report_part")?
        .iter()
        .map(|r| FinalPart { scope: r.get(0), part: r.get(1), writer: r.get(2), token: r.get(3) })
        .collect();
    tx.commit().context("ending the history snapshot")?;
    Ok(History { attempts, grants: Vec::new(), final_parts, faults: Vec::new() })
}
// ANCHOR_END: load

#[cfg(test)]
mod tests {
    use super::*;

    const DAILY: &str = "daily-report";
    const WEEKLY: &str = "weekly-report";

    /// Builds a history a line at a time, the way a run would record it.
    #[derive(Default)]
    struct Run {
        /// The history so far.
        history: History,
    }

    impl Run {
        /// An attempt on `DAILY`, recorded with the next id.
        fn attempt(self, mode: FenceMode, part: &str, writer: &str, token: i64, accepted: bool, floor: Option<i64>) -> Run {
            self.attempt_in(DAILY, mode, part, writer, token, accepted, floor)
        }

        /// An attempt on `scope`, recorded with the next id.
        #[allow(clippy::too_many_arguments)]
        fn attempt_in(
            mut self,
            scope: &str,
            mode: FenceMode,
            part: &str,
            writer: &str,
            token: i64,
            accepted: bool,
            floor_after: Option<i64>,
        ) -> Run {
            let id = self.history.attempts.len() as i64 + 1;
            self.history.attempts.push(Attempt {
                id,
                scope: scope.into(),
                part: part.into(),
                writer: writer.into(),
                token,
                mode,
                accepted,
                floor_after,
            });
            self
        }

        /// A grant to `holder`'s first incarnation.
        fn grant(self, holder: &str, holding: u32, token: i64) -> Run {
            self.grant_in(holder, 0, holding, token)
        }

        /// A grant to one incarnation of `holder`.
        fn grant_in(mut self, holder: &str, incarnation: u32, holding: u32, token: i64) -> Run {
            self.history.grants.push(GrantRecord { holder: holder.into(), incarnation, holding, token });
            self
        }

        /// A final row of `DAILY`.
        fn kept(self, part: &str, writer: &str, token: i64) -> Run {
            self.kept_in(DAILY, part, writer, token)
        }

        /// A final row of `scope`.
        fn kept_in(mut self, scope: &str, part: &str, writer: &str, token: i64) -> Run {
            self.history.final_parts.push(FinalPart { scope: scope.into(), part: part.into(), writer: writer.into(), token });
            self
        }

        /// A fault of `kind`.
        fn fault(mut self, kind: FaultKind) -> Run {
            self.history.faults.push(Fault { kind });
            self
        }

        /// The checker's verdict on the history.
        fn verdict(&self) -> Verdict {
            check(&self.history)
        }
    }

    use FenceMode::{CheckThenWrite, FencedRow, FencedScope, Unfenced};

    /// The counts of the four things that can go wrong, for one-line asserts:
    /// (stale accepted, tokens reused, floor regressions, lost writes).
    fn wrongs(v: &Verdict) -> (usize, usize, usize, usize) {
        (v.stale_accepted, v.tokens_reused, v.floor_regressions, v.lost_writes)
    }

    /// A fenced run with a takeover and a refused stale writer is clean.
    #[test]
    fn clean_fenced_history() {
        let run = Run::default()
            .grant("holder-a", 1, 1)
            .attempt(FencedScope, "summary", "holder-a", 1, true, Some(1))
            .attempt(FencedScope, "detail", "holder-a", 1, true, Some(1))
            .grant("holder-b", 1, 2)
            .attempt(FencedScope, "summary", "holder-b", 2, true, Some(2))
            .attempt(FencedScope, "detail", "holder-b", 2, true, Some(2))
            .attempt(FencedScope, "summary", "holder-a", 1, false, Some(2))
            .grant("holder-c", 1, 3)
            .attempt(FencedScope, "summary", "holder-c", 3, true, Some(3))
            .kept("summary", "holder-c", 3)
            .kept("detail", "holder-b", 2)
            .fault(FaultKind::PauseLong);
        let v = run.verdict();
        assert_eq!((v.attempts, v.accepted, v.refused, v.holdings, v.floors_recorded), (6, 5, 1, 3, 6));
        assert_eq!(wrongs(&v), (0, 0, 0, 0));
        assert_eq!(v.judgement(), Judgement::Clean);
    }

    /// A history with no holder at all (zero holders, a run that ended
    /// before anything happened) has nothing to judge: its zeros are not
    /// a clean verdict.
    #[test]
    fn an_empty_history_has_nothing_to_judge() {
        let v = Run::default().verdict();
        assert_eq!(wrongs(&v), (0, 0, 0, 0));
        assert_eq!(
            v.judgement(),
            Judgement::NothingToJudge(vec![Gap::NoHoldings, Gap::NoAcceptedWrite, Gap::FloorsUnrecorded, Gap::NoFault])
        );
        assert!(v.to_string().ends_with(
            "verdict: nothing to judge (no holding granted, no write accepted, not every write attempt recorded its floor, no fault injected)"
        ));
    }

    /// Each thing a history can lack is named on its own: writes without
    /// their floor, or a fenced run the nemesis never touched, are not clean.
    #[test]
    fn each_missing_source_is_named() {
        let full = || {
            Run::default()
                .grant("holder-a", 1, 1)
                .attempt(FencedScope, "summary", "holder-a", 1, true, Some(1))
                .kept("summary", "holder-a", 1)
                .fault(FaultKind::Kill)
        };
        assert_eq!(full().verdict().judgement(), Judgement::Clean);
        let unrecorded = full().attempt(FencedScope, "detail", "holder-a", 1, false, None);
        assert_eq!(unrecorded.verdict().judgement(), Judgement::NothingToJudge(vec![Gap::FloorsUnrecorded]));
        let mut undisturbed = full();
        undisturbed.history.faults.clear();
        assert_eq!(undisturbed.verdict().judgement(), Judgement::NothingToJudge(vec![Gap::NoFault]));
        let refused_only = Run::default().grant("holder-a", 1, 1).attempt(FencedScope, "summary", "holder-a", 1, false, Some(2)).fault(FaultKind::Kill);
        assert_eq!(refused_only.verdict().judgement(), Judgement::NothingToJudge(vec![Gap::NoAcceptedWrite]));
    }

    /// What a count found is evidence even when the history lacks
    /// something else: a stale write with no fault recorded is not clean.
    #[test]
    fn a_finding_is_not_clean_whatever_is_missing() {
        let run = Run::default()
            .attempt(Unfenced, "summary", "holder-b", 2, true, None)
            .attempt(Unfenced, "summary", "holder-a", 1, true, None)
            .kept("summary", "holder-a", 1);
        assert_eq!(run.verdict().judgement(), Judgement::NotClean);
    }

    /// F5 without a fence: A's stale rewrite is accepted and B's newer part is lost.
    #[test]
    fn stale_overwrite_is_stale_and_lost() {
        let run = Run::default()
            .attempt(Unfenced, "summary", "holder-a", 1, true, Some(0))
            .attempt(Unfenced, "summary", "holder-b", 2, true, Some(0))
            .attempt(Unfenced, "detail", "holder-b", 2, true, Some(0))
            .attempt(Unfenced, "summary", "holder-a", 1, true, Some(0))
            .kept("summary", "holder-a", 1)
            .kept("detail", "holder-b", 2);
        let v = run.verdict();
        assert_eq!(wrongs(&v), (1, 0, 0, 1));
        assert_eq!(v.judgement(), Judgement::NotClean);
    }

    /// F6(a) check-then-write: the floor goes 2 → 1, a regression, and A's
    /// stale write lands over B's.
    #[test]
    fn check_then_write_regresses_the_floor() {
        let run = Run::default()
            .attempt(CheckThenWrite, "summary", "holder-b", 2, true, Some(2))
            .attempt(CheckThenWrite, "summary", "holder-a", 1, true, Some(1))
            .kept("summary", "holder-a", 1);
        let v = run.verdict();
        assert_eq!(wrongs(&v), (1, 0, 1, 1));
    }

    /// F7 fenced-row: a stale token creates a part the newer holder never
    /// wrote: stale, but nothing was overwritten, so nothing is lost.
    #[test]
    fn stale_new_part_is_stale_but_not_lost() {
        let run = Run::default()
            .attempt(FencedRow, "summary", "holder-a", 1, true, Some(0))
            .attempt(FencedRow, "summary", "holder-b", 2, true, Some(0))
            .attempt(FencedRow, "detail", "holder-a", 1, true, Some(0))
            .attempt(FencedRow, "summary", "holder-a", 1, false, Some(0))
            .kept("summary", "holder-b", 2)
            .kept("detail", "holder-a", 1);
        let v = run.verdict();
        assert_eq!((v.accepted, v.refused), (3, 1));
        assert_eq!(wrongs(&v), (1, 0, 0, 0));
    }

    /// Two holdings given the same token count as one reused token.
    #[test]
    fn same_token_twice_is_reuse() {
        let run = Run::default().grant("holder-a", 1, 1).grant("holder-b", 1, 2).grant("holder-c", 1, 2).grant("holder-a", 2, 3);
        let v = run.verdict();
        assert_eq!(v.holdings, 4);
        assert_eq!(wrongs(&v), (0, 1, 0, 0));
    }

    /// A restarted holder's first holding is not its first life's, but the
    /// same holding reported twice is still one holding.
    #[test]
    fn holdings_are_named_by_incarnation() {
        let restarted = Run::default().grant_in("holder-a", 0, 1, 4).grant_in("holder-a", 1, 1, 4);
        assert_eq!(restarted.verdict().tokens_reused, 1);
        let repeated = Run::default().grant_in("holder-a", 0, 1, 4).grant_in("holder-a", 0, 1, 4);
        assert_eq!((repeated.verdict().holdings, repeated.verdict().tokens_reused), (1, 0));
    }

    /// One grant writing again with the same token is not stale: the fence uses `<=`.
    #[test]
    fn equal_tokens_are_not_stale() {
        let run = Run::default()
            .attempt(FencedScope, "summary", "holder-a", 1, true, Some(1))
            .attempt(FencedScope, "summary", "holder-b", 2, true, Some(2))
            .attempt(FencedScope, "summary", "holder-b", 2, true, Some(2))
            .attempt(FencedScope, "detail", "holder-b", 2, true, Some(2))
            .kept("summary", "holder-b", 2)
            .kept("detail", "holder-b", 2);
        assert_eq!(wrongs(&run.verdict()), (0, 0, 0, 0));
    }

    /// Refused attempts are neither stale nor lost, and do not raise the bar
    /// for later accepted ones.
    #[test]
    fn refused_attempts_never_count() {
        let run = Run::default()
            .attempt(FencedScope, "summary", "holder-b", 2, true, Some(2))
            .attempt(FencedScope, "summary", "holder-a", 1, false, Some(2))
            .attempt(FencedScope, "detail", "holder-a", 1, false, Some(2))
            .attempt(FencedScope, "detail", "holder-c", 9, false, Some(2))
            .attempt(FencedScope, "detail", "holder-b", 2, true, Some(2))
            .kept("summary", "holder-b", 2)
            .kept("detail", "holder-b", 2);
        let v = run.verdict();
        assert_eq!((v.accepted, v.refused), (2, 3));
        assert_eq!(wrongs(&v), (0, 0, 0, 0));
    }

    /// An accepted write on a part that has no final row is lost.
    #[test]
    fn vanished_part_loses_every_accepted_write() {
        let run = Run::default()
            .attempt(Unfenced, "summary", "holder-a", 1, true, None)
            .attempt(Unfenced, "detail", "holder-a", 1, true, None)
            .attempt(Unfenced, "detail", "holder-b", 2, true, None)
            .kept("summary", "holder-a", 1);
        let v = run.verdict();
        assert_eq!((v.lost_writes, v.floors_recorded), (2, 0));
    }

    /// Faults are counted by kind, in the kinds' alphabetical order, and
    /// count nothing wrong.
    #[test]
    fn faults_counted_by_kind() {
        use FaultKind::{DbRestart, Delay, Kill, PauseLong, PauseShort};
        let run = [Kill, PauseLong, DbRestart, Kill, Delay, PauseShort, Kill].into_iter().fold(Run::default(), Run::fault);
        let v = run.verdict();
        let counted: Vec<(&str, usize)> = v.faults.iter().map(|(k, n)| (k.name(), *n)).collect();
        assert_eq!(counted, [("db-restart", 1), ("delay", 1), ("kill", 3), ("pause-long", 1), ("pause-short", 1)]);
        assert_eq!(wrongs(&v), (0, 0, 0, 0));
    }

    /// Scopes are judged apart: a smaller token or floor in another scope,
    /// or a part of the same name there, is nobody's stale write or loss;
    /// a stale write in one scope counts there only.
    #[test]
    fn scopes_are_judged_independently() {
        let interleaved = |weekly_kept: i64| {
            Run::default()
                .attempt_in(DAILY, FencedScope, "summary", "holder-a", 5, true, Some(5))
                .attempt_in(WEEKLY, FencedScope, "summary", "holder-b", 3, true, Some(3))
                .attempt_in(DAILY, FencedScope, "summary", "holder-a", 6, true, Some(6))
                .attempt_in(WEEKLY, FencedScope, "summary", "holder-b", 4, true, Some(4))
                .kept_in(DAILY, "summary", "holder-a", 6)
                .kept_in(WEEKLY, "summary", if weekly_kept == 4 { "holder-b" } else { "holder-c" }, weekly_kept)
        };
        assert_eq!(wrongs(&interleaved(4).verdict()), (0, 0, 0, 0));
        let broken = interleaved(2).attempt_in(WEEKLY, CheckThenWrite, "summary", "holder-c", 2, true, Some(2));
        assert_eq!(wrongs(&broken.verdict()), (1, 0, 1, 2));
    }

    /// Attempts are judged in id order, whatever order they were handed in.
    #[test]
    fn attempts_are_judged_in_id_order() {
        let mut run = Run::default()
            .attempt(CheckThenWrite, "summary", "holder-a", 1, true, Some(1))
            .attempt(CheckThenWrite, "summary", "holder-b", 2, true, Some(2))
            .kept("summary", "holder-b", 2);
        run.history.attempts.reverse();
        assert_eq!(wrongs(&run.verdict()), (0, 0, 0, 0));
    }

    /// The rendering: one measure a line, in a fixed order, faults by kind last.
    #[test]
    fn verdict_renders_as_a_table() {
        let run = Run::default()
            .grant("holder-b", 1, 2)
            .attempt(CheckThenWrite, "summary", "holder-b", 2, true, Some(2))
            .attempt(CheckThenWrite, "summary", "holder-a", 1, true, Some(1))
            .attempt(CheckThenWrite, "detail", "holder-a", 1, false, Some(1))
            .kept("summary", "holder-a", 1)
            .fault(FaultKind::PauseLong)
            .fault(FaultKind::DbRestart);
        let expected = "\
write attempts                   3
accepted                         2
refused                          1
holdings granted                 1
stale writes accepted (I3)       1  below a token its scope had accepted
tokens reused (I2)               0  granted to more than one holding
floor regressions (I3)           1  of 3 recorded floors
lost writes                      1  overwritten by a smaller token, or gone
faults injected                  2
  db-restart                     1
  pause-long                     1
verdict: NOT clean";
        assert_eq!(run.verdict().to_string(), expected);
    }
}
