//! F9 — a side effect that takes no fencing token. The downstream publisher
//! deduplicates by business key, so each key is published at most once, but
//! it keeps whichever publication arrived first: when the stale holder gets
//! there first, the stale content is what stays. The remedy shown last is
//! the downstream comparing the data's source version: a per-row fence, moved
//! into the business rule.

use super::common::stale_and_fresh;
use super::{Case, Lab};
use crate::error::Result;
use crate::lease::Grant;
use crate::publish::{PublishRule, Publisher};
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F9", title: |_| "不支持栅栏的外部副作用：发布替身只按业务键去重".into(), run, mode: None, modes: &[], needs: &[] };

/// The business key of one day's report.
const KEY: &str = "daily-report:2026-10-19";

/// Publishes in the given order; returns (A stored, B stored, content kept).
fn publish(publisher: &mut Publisher, first: &(&Grant, &str), second: &(&Grant, &str)) -> Result<(bool, bool, String)> {
    publisher.clear()?;
    let mut stored = Vec::new();
    for (grant, content) in [first, second] {
        stored.push((grant.holder.as_str(), publisher.publish(KEY, content, &grant.holder, grant.token)?));
    }
    let a = stored.iter().any(|(who, ok)| *who == "holder-a" && *ok);
    let b = stored.iter().any(|(who, ok)| *who == "holder-b" && *ok);
    Ok((a, b, publisher.kept(KEY)?.unwrap_or_else(|| "nothing".into())))
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let (a, b) = stale_and_fresh(lab, t)?;
    let stale = (&a, "A-stale");
    let fresh = (&b, "B-fresh");

    let mut first_wins = Publisher::connect(PublishRule::FirstWins)?;
    let (a_ok, b_ok, kept) = publish(&mut first_wins, &fresh, &stale)?;
    t.check(b_ok && !a_ok, "顺序 B→A：A 的重复发布被业务键去重", || format!("B stored={b_ok}, A stored={a_ok}"));
    t.check_eq("顺序 B→A：保留的是 B-fresh", "B-fresh".to_owned(), kept);
    let (a_ok, b_ok, kept) = publish(&mut first_wins, &stale, &fresh)?;
    t.note(format!("顺序 A→B：A accepted={a_ok}，B accepted={b_ok}，保留 {kept}"));
    t.exposes(a_ok && !b_ok && kept == "A-stale", "幂等只保证一次，旧持有者先到时保留的是旧内容", || format!("kept {kept}"));

    let mut newest = Publisher::connect(PublishRule::NewestVersion)?;
    let (_, b_ok, kept) = publish(&mut newest, &stale, &fresh)?;
    t.check_eq("下游改为按源数据版本（token）取舍后，顺序 A→B 也保留 B-fresh", "B true, kept B-fresh".to_owned(), format!("B {b_ok}, kept {kept}"));
    let (a_ok, _, kept) = publish(&mut newest, &fresh, &stale)?;
    t.check_eq("同一规则下顺序 B→A：A 的旧版本被拒绝", "A false, kept B-fresh".to_owned(), format!("A {a_ok}, kept {kept}"));
    Ok(())
}
