//! F6 — check-then-write races; the conditional UPDATE does not.
//!
//! (a) CHECK_THEN_WRITE reads the floor, decides, and only then writes, each
//! step on its own. Latches force the interleaving: A (token 1) passes its
//! check and stops; B (token 2) checks, raises the floor to 2 and writes;
//! A resumes and writes old data *and* moves the floor back to 1.
//!
//! (b) FENCED_SCOPE under the same interleaving, in both orders: the second
//! writer's UPDATE queues on the floor row lock (`pg_stat_activity` shows
//! `wait_event_type = Lock`), and when the first commits it re-evaluates its
//! WHERE against the new floor. Both orders keep I3.

use super::common::{acquire, part_write, require, wait_for_lock_wait, EXPIRY_BOUND, LEASE, SCOPE, SHORT_TTL, DETAIL, SUMMARY, TTL};
use super::{Case, Lab};
use crate::db;
use crate::error::Result;
use crate::latch::{Latch, BOUND};
use crate::lease::Grant;
use crate::report::{FenceMode, ReportStore};
use crate::transcript::Transcript;
use std::sync::Arc;

/// The case.
pub const CASE: Case = Case { id: "F6", title: |_| "先检查后写入的竞态（a），与作用域级条件更新（b）".into(), run };

/// A gap hook that says "I am in the gap" and waits to be let go.
fn pause_in_gap(store: ReportStore) -> (ReportStore, Arc<Latch>, Arc<Latch>) {
    let (inside, go) = (Arc::new(Latch::new()), Arc::new(Latch::new()));
    let (signal, wait) = (Arc::clone(&inside), Arc::clone(&go));
    let store = store.with_gap(move || {
        signal.open();
        // Bounded: if the case fails before opening it, the writer goes on.
        wait.wait(BOUND);
    });
    (store, inside, go)
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let a = acquire(&mut leases, "holder-a", SHORT_TTL)?;
    leases.wait_until_expired(LEASE, EXPIRY_BOUND)?;
    let b = acquire(&mut leases, "holder-b", TTL)?;
    t.expect("A 持 token=1 且租约已过期，B 获取 token=2", "1/2".to_owned(), format!("{}/{}", a.token, b.token));

    check_then_write(lab, t, &a, &b)?;
    // (b) starts from a fresh resource; the grants stay as they are.
    db::reset_schema(&mut db::connect(db::RES_DB, "lab reset")?, db::RES_SCHEMA)?;
    fenced_a_first(lab, t, &a, &b)?;
    db::reset_schema(&mut db::connect(db::RES_DB, "lab reset")?, db::RES_SCHEMA)?;
    fenced_b_first(lab, t, &a, &b)
}

// ANCHOR: f6a
fn check_then_write(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant) -> Result<()> {
    let mut view = lab.resource()?;
    let (mut a_store, a_in_gap, a_go) = pause_in_gap(lab.report(FenceMode::CheckThenWrite, "holder-a")?);
    let mut b_store = lab.report(FenceMode::CheckThenWrite, "holder-b")?;
    let (a_ok, b_ok, floor_after_b) = std::thread::scope(|s| -> Result<_> {
        // 1. A reads floor=0, passes its check, stops in the gap.
        let a_thread = s.spawn(|| a_store.write(&part_write(a, SUMMARY, "old(A)")));
        require(a_in_gap.wait(BOUND), "holder-a never reached the gap")?;
        // 2. B reads floor=0 too, passes, writes floor=2 and new(B).
        let b_ok = b_store.write(&part_write(b, SUMMARY, "new(B)"))?;
        let floor_after_b = view.floor(SCOPE)?;
        // 3. A goes on with its stale decision.
        a_go.open();
        let a_ok = a_thread.join().map_err(|_| "holder-a's writer panicked")??;
        Ok((a_ok, b_ok, floor_after_b))
    })?;
    t.check_eq("B 写完时 fence_floor", 2, floor_after_b);
    let summary = view.part(SCOPE, SUMMARY)?.map_or("absent".into(), |p| p.to_string());
    let floor = view.floor(SCOPE)?;
    t.note(format!("check-then-write：B accepted={b_ok}，A accepted={a_ok}，最终 {summary}，fence_floor={floor}"));
    t.exposes(
        a_ok && summary == "old(A) by holder-a token=1" && floor_after_b == 2 && floor == 1,
        "A 的检查结果在写入时已过时：旧 token 覆盖新结果，fence_floor 从 2 回退到 1",
    );
    // The lowered floor outlives the race: even the real fence now takes token 1.
    let mut fenced = lab.report(FenceMode::FencedScope, "holder-a")?;
    let later = fenced.write(&part_write(a, DETAIL, "old(A) detail"))?;
    t.exposes(later, "floor 回退之后，连作用域级条件更新也接受 token=1 写 detail：I3 被破坏后无法自愈");
    Ok(())
}
// ANCHOR_END: f6a

// ANCHOR: f6b
fn fenced_a_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant) -> Result<()> {
    let mut view = lab.resource()?;
    let (mut a_store, a_in_gap, a_go) = pause_in_gap(lab.report(FenceMode::FencedScope, "holder-a")?);
    let mut b_store = lab.report(FenceMode::FencedScope, "holder-b")?;
    let b_pid = b_store.backend_pid()?;
    let (a_ok, b_ok) = std::thread::scope(|s| -> Result<_> {
        // A advances the floor to 1 and stops before its data write,
        // transaction open, floor row locked.
        let a_thread = s.spawn(|| a_store.write(&part_write(a, SUMMARY, "old(A)")));
        require(a_in_gap.wait(BOUND), "holder-a never reached the gap")?;
        t.check_eq("A 推进 floor 后尚未提交：其他会话读到的 fence_floor 仍是", 0, view.floor(SCOPE)?);
        let b_thread = s.spawn(|| b_store.write(&part_write(b, SUMMARY, "new(B)")));
        let waiting = wait_for_lock_wait(&mut view, b_pid)?;
        t.check_eq("B 的 UPDATE 在 pg_stat_activity 中排队等锁 wait_event_type", "Lock".to_owned(), waiting);
        t.check(!b_thread.is_finished(), "B 的写入在 A 提交前没有返回");
        a_go.open();
        let a_ok = a_thread.join().map_err(|_| "holder-a's writer panicked")??;
        let b_ok = b_thread.join().map_err(|_| "holder-b's writer panicked")??;
        Ok((a_ok, b_ok))
    })?;
    t.expect("顺序 A→B：A 提交后 B 对新版本行求值 1 <= 2 成立，两次写入都被接受", "true true".to_owned(), format!("{a_ok} {b_ok}"));
    let summary = view.part(SCOPE, SUMMARY)?.map_or("absent".into(), |p| p.to_string());
    t.check_eq("顺序 A→B：最终内容来自 token=2", "new(B) by holder-b token=2".to_owned(), summary);
    t.check_eq("顺序 A→B：接受顺序里的 token 单调不减（I3）", "1,2".to_owned(), tokens(&view.accepted_tokens(SCOPE)?));
    Ok(())
}

fn fenced_b_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant) -> Result<()> {
    let mut view = lab.resource()?;
    let (mut b_store, b_in_gap, b_go) = pause_in_gap(lab.report(FenceMode::FencedScope, "holder-b")?);
    let mut a_store = lab.report(FenceMode::FencedScope, "holder-a")?;
    let a_pid = a_store.backend_pid()?;
    let (a_ok, b_ok) = std::thread::scope(|s| -> Result<_> {
        let b_thread = s.spawn(|| b_store.write(&part_write(b, SUMMARY, "new(B)")));
        require(b_in_gap.wait(BOUND), "holder-b never reached the gap")?;
        let a_thread = s.spawn(|| a_store.write(&part_write(a, SUMMARY, "old(A)")));
        let waiting = wait_for_lock_wait(&mut view, a_pid)?;
        t.check_eq("顺序 B→A：A 的 UPDATE 排队等 B 的行锁 wait_event_type", "Lock".to_owned(), waiting);
        b_go.open();
        let b_ok = b_thread.join().map_err(|_| "holder-b's writer panicked")??;
        let a_ok = a_thread.join().map_err(|_| "holder-a's writer panicked")??;
        Ok((a_ok, b_ok))
    })?;
    t.expect("顺序 B→A：B 提交后 A 对新版本行求值 2 <= 1 不成立，token=1 被拒", "B true, A false".to_owned(), format!("B {b_ok}, A {a_ok}"));
    let summary = view.part(SCOPE, SUMMARY)?.map_or("absent".into(), |p| p.to_string());
    t.check_eq("顺序 B→A：最终内容来自 token=2", "new(B) by holder-b token=2".to_owned(), summary);
    t.check_eq("顺序 B→A：接受顺序里的 token 单调不减（I3）", "2".to_owned(), tokens(&view.accepted_tokens(SCOPE)?));
    t.check_eq("顺序 B→A：fence_floor", 2, view.floor(SCOPE)?);
    Ok(())
}
// ANCHOR_END: f6b

fn tokens(list: &[i64]) -> String {
    list.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}
