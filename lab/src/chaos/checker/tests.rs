//! The checker judged on hand-made histories: no database, no timing.

use super::*;
use crate::vocabulary::{Gap, Judgement, Operation, Outcome, StoredPart, WriteAttempt};
use crate::vocabulary::FenceMode;

const DAILY: &str = "daily-report";
const WEEKLY: &str = "weekly-report";

/// Builds a history a line at a time, the way a run would record it.
#[derive(Default)]
struct Run {
    /// The history so far.
    history: CheckerInput,
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
        self.history.attempts.push(WriteAttempt { id, scope: scope.into(), part: part.into(), writer: writer.into(), token, mode, accepted, floor_after, at_ms: 0.0 });
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
        self.history.final_parts.push(StoredPart { scope: scope.into(), part: part.into(), content: format!("by {writer}"), writer: writer.into(), token });
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

/// The findings are the counts item by item: as many of each kind as the
/// verdict counts, each on the attempt (or the token) it is about, with
/// the tokens that make it one in its reason.
#[test]
fn findings_are_the_counts_one_by_one() {
    let run = Run::default()
        .grant("holder-a", 1, 1)
        .grant_in("holder-b", 1, 1, 1)
        .attempt(CheckThenWrite, "summary", "holder-b", 2, true, Some(2))
        .attempt(CheckThenWrite, "summary", "holder-a", 1, true, Some(1))
        .attempt(CheckThenWrite, "detail", "holder-b", 2, true, Some(2))
        .kept("summary", "holder-a", 1);
    let v = run.verdict();
    assert_eq!(wrongs(&v), (1, 1, 1, 2));
    let found = findings(&run.history);
    let of = |kind: FindingKind| found.iter().filter(|f| f.kind == kind).collect::<Vec<_>>();
    assert_eq!(
        [FindingKind::Stale, FindingKind::Reused, FindingKind::Regression, FindingKind::Lost].map(|k| of(k).len()),
        [v.stale_accepted, v.tokens_reused, v.floor_regressions, v.lost_writes]
    );
    assert_eq!(of(FindingKind::Stale)[0].on, Target::Attempt(2));
    assert!(of(FindingKind::Stale)[0].reason.contains("token 1 小于作用域 daily-report 此前已接受的 token 2（write_attempt 1，holder-b）"), "{found:?}");
    assert_eq!(of(FindingKind::Reused)[0].on, Target::Token(1));
    assert!(of(FindingKind::Reused)[0].reason.contains("holder-a#0 第 1 段、holder-b#1 第 1 段"), "{found:?}");
    assert!(of(FindingKind::Regression)[0].reason.contains("floor 1 小于作用域 daily-report 上一次记下的 2（write_attempt 1）"));
    let lost: Vec<Target> = of(FindingKind::Lost).iter().map(|f| f.on).collect();
    assert_eq!(lost, [Target::Attempt(1), Target::Attempt(3)]);
    assert!(of(FindingKind::Lost)[1].reason.contains("分片 detail 最后不见了"));
}

/// The checker's view of a recorded history reads its attempt rows, its
/// granted acquires and its faults, of every kind the schedule has (a
/// kind it does not know is an error naming it, not a skipped fault).
#[test]
fn a_record_is_read_as_the_checker_reads_a_history() {
    use crate::history::{FaultSpan, Op, Record};
    let mut record = Record::empty("chaos-unfenced", FenceMode::Unfenced);
    let op = |id: u64, f: Operation, token: i64| Op {
        id,
        holder: "holder-a".into(),
        incarnation: 1,
        process: 3,
        f,
        invoke_ms: Some(id as f64),
        complete_ms: Some(id as f64 + 0.5),
        outcome: Outcome::Ok,
        token: Some(token),
        part: None,
        tries: None,
        code: None,
        holding: Some(2).filter(|_| f == Operation::Acquire),
        attempt: None,
    };
    let row = WriteAttempt {
        id: 7,
        scope: DAILY.into(),
        part: "summary".into(),
        writer: "holder-a".into(),
        token: 4,
        mode: Unfenced,
        accepted: true,
        floor_after: Some(0),
        at_ms: 2.2,
    };
    record.ops = vec![op(1, Operation::Acquire, 4), Op { attempt: Some(row), part: Some("summary".into()), ..op(2, Operation::Write, 4) }, op(3, Operation::Renew, 4)];
    record.faults = FaultKind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| FaultSpan { id: i as u64 + 1, kind: *k, targets: Vec::new(), start_ms: 0.0, end_ms: None })
        .collect();
    let history = CheckerInput::from_record(&record).unwrap();
    assert_eq!(history.grants, [GrantRecord { holder: "holder-a".into(), incarnation: 1, holding: 2, token: 4 }]);
    assert_eq!((history.attempts.len(), history.attempts[0].id, history.attempts[0].mode), (1, 7, Unfenced));
    assert_eq!(history.faults.iter().map(|f| f.kind).collect::<Vec<_>>(), FaultKind::ALL);
    // A kind the lab does not know does not even read as a history.
    let jsonl = record.to_jsonl().replacen("\"kind\":\"db-restart\"", "\"kind\":\"meteor\"", 1);
    let err = crate::error::chain(Record::from_jsonl(&jsonl).unwrap_err().as_ref());
    assert!(err.contains("line ") && err.contains("meteor"), "{err}");
}
