//! The history built from hand-made calls and rows, written and read back,
//! and drawn: no database, no browser.

use super::*;
use crate::call_log::Heard;
use crate::holder::{Call, Invoke, Return};
use crate::vocabulary::{FaultKind, FenceMode, Outcome, StoredPart, WriteAttempt};
use std::collections::BTreeSet;

/// The run's start on the wall clock, in the hand-made logs.
const T0: f64 = 1_000_000.0;

fn heard(at: f64, process: u64, holder: &str, incarnation: u32, call: Call) -> Heard {
    Heard { at_ms: T0 + at, process, holder: holder.into(), incarnation, call }
}

fn invoke(id: u32, invoke: Invoke) -> Call {
    Call::Invoke { id, invoke }
}

fn ret(id: u32, outcome: Outcome, token: Option<i64>) -> Call {
    Call::Return { id, ret: Return { outcome, token, tries: Some(1).filter(|_| token.is_some()), code: None } }
}

fn row(id: i64, writer: &str, token: i64, accepted: bool, at: f64) -> WriteAttempt {
    WriteAttempt {
        id,
        scope: "daily-report".into(),
        part: "summary".into(),
        writer: writer.into(),
        token,
        mode: FenceMode::Unfenced,
        accepted,
        floor_after: Some(0),
        at_ms: at,
    }
}

/// F5's shape: A acquires, is paused past its lease, B acquires and writes,
/// A's late write is accepted; A's renewer had a renewal in flight.
fn f5_calls() -> Vec<Heard> {
    let write = |token| Invoke::Write { token, part: "summary".into() };
    vec![
        heard(10.0, 1, "holder-a", 0, invoke(1, Invoke::Acquire)),
        heard(12.0, 1, "holder-a", 0, ret(1, Outcome::Ok, Some(1))),
        heard(400.0, 1, "holder-a", 0, invoke(2, Invoke::Renew { token: 1 })),
        heard(2000.0, 2, "holder-b", 0, invoke(1, Invoke::Acquire)),
        heard(2003.0, 2, "holder-b", 0, ret(1, Outcome::Ok, Some(2))),
        heard(2004.0, 2, "holder-b", 0, invoke(2, write(2))),
        heard(2006.0, 2, "holder-b", 0, ret(2, Outcome::Ok, None)),
        heard(3000.0, 1, "holder-a", 0, invoke(3, write(1))),
        heard(3001.0, 1, "holder-a", 0, ret(2, Outcome::Fail, None)),
        heard(3002.0, 1, "holder-a", 0, ret(3, Outcome::Ok, None)),
    ]
}

fn f5_rows() -> Vec<WriteAttempt> {
    vec![row(1, "holder-b", 2, true, 2005.0), row(2, "holder-a", 1, true, 3001.5)]
}

fn f5_record() -> Record {
    let mut record = Record::empty("F5", FenceMode::Unfenced);
    record.run.holders = vec!["holder-a".into(), "holder-b".into()];
    record.run.fault_kinds = vec![FaultKind::PauseLong, FaultKind::PartitionSplit];
    record.run.end_ms = 3500.0;
    record.ops = ops_from_calls(&f5_calls(), f5_rows(), T0).unwrap();
    record.faults = vec![
        FaultSpan { id: 1, kind: FaultKind::PauseLong, targets: vec!["holder-a".into()], start_ms: 500.0, end_ms: Some(2999.0) },
        FaultSpan { id: 2, kind: FaultKind::PartitionSplit, targets: vec!["holder-a".into(), "holder-b".into()], start_ms: 100.0, end_ms: None },
        FaultSpan { id: 3, kind: FaultKind::DbRestart, targets: Vec::new(), start_ms: 3100.0, end_ms: Some(3300.0) },
    ];
    record.finals = vec![StoredPart { scope: "daily-report".into(), part: "summary".into(), content: "rows=1".into(), writer: "holder-a".into(), token: 1 }];
    record
}

/// Calls pair by process and id, in invoke order; each write gets its row;
/// a granted acquire its holding number; a call never returned is `info`.
#[test]
fn calls_pair_into_operations() {
    let ops = ops_from_calls(&f5_calls(), f5_rows(), T0).unwrap();
    let shape: Vec<(u64, &str, &str, &str, Option<i64>, Option<f64>)> =
        ops.iter().map(|o| (o.id, o.holder.as_str(), o.f.name(), o.outcome.name(), o.token, o.complete_ms)).collect();
    assert_eq!(
        shape,
        [
            (1, "holder-a", "acquire", "ok", Some(1), Some(12.0)),
            (2, "holder-a", "renew", "fail", Some(1), Some(3001.0)),
            (3, "holder-b", "acquire", "ok", Some(2), Some(2003.0)),
            (4, "holder-b", "write", "ok", Some(2), Some(2006.0)),
            (5, "holder-a", "write", "ok", Some(1), Some(3002.0)),
        ]
    );
    assert_eq!((ops[0].holding, ops[2].holding), (Some(1), Some(1)));
    assert_eq!(ops[3].attempt.as_ref().map(|a| a.id), Some(1));
    assert_eq!(ops[4].attempt.as_ref().map(|a| a.id), Some(2));
    let mut open = f5_calls();
    open.pop();
    let ops = ops_from_calls(&open, vec![row(1, "holder-b", 2, true, 2005.0)], T0).unwrap();
    assert_eq!((ops[4].outcome, ops[4].complete_ms, ops[4].attempt.is_none()), (Outcome::Info, None, true));
}

/// A record that is not whole is refused, saying what is missing.
#[test]
fn an_incomplete_record_is_refused() {
    let err = |calls: &[Heard], rows: Vec<WriteAttempt>| ops_from_calls(calls, rows, T0).unwrap_err().to_string();
    assert!(err(&f5_calls()[1..], f5_rows()).contains("never made"));
    assert!(err(&f5_calls(), f5_rows()[..1].to_vec()).contains("has no row for it"));
    let mut extra = f5_rows();
    extra.push(row(3, "holder-c", 3, true, 3200.0));
    assert!(err(&f5_calls(), extra).contains("write_attempt 3 (holder-c token 3 part summary) has no call"));
    let mut twice = f5_calls();
    twice.push(heard(3003.0, 1, "holder-a", 0, ret(3, Outcome::Ok, None)));
    assert!(err(&twice, f5_rows()).contains("twice"));
}

/// The JSON lines read back to the same record; the run comes first,
/// absent optional fields read as none, and a line that is no entry is
/// named.
#[test]
fn json_lines_round_trip() {
    let record = f5_record();
    let text = record.to_jsonl();
    assert_eq!(Record::from_jsonl(&text).unwrap(), record);
    assert_eq!(text.lines().count(), 1 + record.ops.len() + record.faults.len() + record.finals.len());
    assert!(text.lines().next().unwrap().starts_with("{\"type\":\"run\",\"schema\":2,"));
    assert!(text.contains("{\"type\":\"op\",\"id\":2,\"holder\":\"holder-a\",\"incarnation\":0,\"process\":1,\"f\":\"renew\""));
    assert!(!text.lines().nth(2).unwrap().contains("\"part\""), "an absent field is left out");
    let ops_first: String = text.lines().skip(1).chain(text.lines().take(1)).map(|l| format!("{l}\n")).collect();
    assert!(Record::from_jsonl(&ops_first).unwrap_err().to_string().contains("the first line must be the run"));
    let broken = text.replacen("\"type\":\"fault\"", "\"type\":\"faults\"", 1);
    assert!(Record::from_jsonl(&broken).unwrap_err().to_string().starts_with("line "));
    assert!(Record::from_jsonl("").is_err());
}

/// A history file is read as hostile: a run name that is a path or a URL
/// scheme is refused before anything is written, and every string of the
/// file lands on the page as text, never as markup.
#[test]
fn a_hostile_history_is_text_or_refused() {
    let record = f5_record();
    for name in ["../../../../tmp/x", "javascript:alert(1)", ".hidden", "a b", ""] {
        let mut hostile = record.clone();
        hostile.run.name = name.into();
        let err = Record::from_jsonl(&hostile.to_jsonl()).unwrap_err().to_string();
        assert!(err.contains("is not a run name"), "{name:?}: {err}");
    }
    let mut hostile = record.clone();
    let script = "<script>alert(1)</script>\"'&";
    hostile.run.command = script.into();
    hostile.run.holders = vec![script.into()];
    for op in &mut hostile.ops {
        op.holder = script.into();
    }
    for fault in &mut hostile.faults {
        fault.targets = vec![script.into()];
    }
    hostile.finals[0].content = script.into();
    hostile.finals[0].writer = script.into();
    let read = Record::from_jsonl(&hostile.to_jsonl()).unwrap();
    let html = page::render(&read, &[]);
    assert!(!html.contains("<script>alert"), "a string of the file became markup");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the string is not shown as text");
    assert!(!html.contains("href=\"javascript:"), "a link to a script");
}

/// Every `data-<what>` value in `html`.
fn values(html: &str, what: &str) -> Vec<String> {
    let key = format!("data-{what}=\"");
    html.match_indices(&key).map(|(at, _)| html[at + key.len()..].split('"').next().unwrap().to_owned()).collect()
}

/// The page draws each operation once and each fault at least once, in the
/// lanes of the holders it hit, a kind the run's list does not name first
/// included; marks
/// the checker's finding on its operation with the reason in its tooltip;
/// and escapes what it is given.
#[test]
fn the_page_draws_every_operation_and_fault() {
    let mut record = f5_record();
    record.run.command = "lab run F5 <&>".into();
    let stale = Finding { kind: FindingKind::Stale, on: Target::Attempt(2), reason: "token 1 < 2".into() };
    let html = page::render(&record, &[stale]);
    let ops = values(&html, "op");
    assert_eq!(ops.len(), record.ops.len());
    assert_eq!(ops.iter().collect::<BTreeSet<_>>().len(), record.ops.len());
    let faults: BTreeSet<String> = values(&html, "fault").into_iter().collect();
    assert_eq!(faults, ["1", "2", "3"].map(String::from).into_iter().collect());
    // Fault 2 hit two holders: a band in each lane.
    assert_eq!(values(&html, "fault").iter().filter(|f| *f == "2").count(), 2);
    assert!(html.contains("<rect class=\"op write acc stale\" data-op=\"5\""), "{html}");
    assert!(html.contains("检查器：token 1 &lt; 2"));
    assert!(html.contains("lab run F5 &lt;&amp;&gt;"));
    assert!(html.contains("<a class=\"finding\" href=\"#only=stale\">被接受的过期写入 1</a>"));
    assert!(html.contains("partition-split"));
    assert!(!html.contains("http://") && !html.contains("https://"), "the page names no address");
}
