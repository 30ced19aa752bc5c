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
//!
//! `--mode fenced-scope-cte` runs (b) with the one-statement form. Having no
//! gap hook, its first writer is stopped inside its statement by a session
//! that holds the part's key (`common::AfterFence`); the transcript names
//! who blocks whom.

use super::common::{part_write, pause_in_gap, require, stale_and_fresh, wait_for_lock_wait, AfterFence};
use super::{Case, Lab, Options};
use crate::error::Result;
use crate::latch::BOUND;
use crate::lease::Grant;
use crate::params::{PART_DETAIL, PART_SUMMARY, SCOPE};
use crate::resource::FenceMode;
use crate::transcript::Transcript;

/// The mode of (b) unless the reader picks the other scope fence with `--mode`.
const MODE: FenceMode = FenceMode::FencedScope;

/// The case.
pub const CASE: Case = Case { id: "F6", title, run, mode: Some(MODE), modes: &FenceMode::SCOPE_FENCES };

fn title(options: &Options) -> String {
    let mut title = "先检查后写入的竞态（a），与作用域级条件更新（b）".to_owned();
    if let Some(mode) = CASE.mode_in_force(options).filter(|m| *m != MODE) {
        title.push_str(&format!("，(b) 的资源端模式={mode}"));
    }
    title
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mode = CASE.mode_in_force(&lab.options).unwrap_or(MODE);
    let (a, b) = stale_and_fresh(lab, t)?;

    check_then_write(lab, t, &a, &b, mode)?;
    // (b) starts from a fresh resource; the grants stay as they are.
    lab.reset_resource()?;
    fenced_a_first(lab, t, &a, &b, mode)?;
    lab.reset_resource()?;
    fenced_b_first(lab, t, &a, &b, mode)
}

// ANCHOR: f6a
fn check_then_write(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, fence: FenceMode) -> Result<()> {
    let mut view = lab.view()?;
    let (mut a_store, a_in_gap, a_go) = pause_in_gap(lab.store(FenceMode::CheckThenWrite, "holder-a")?);
    let mut b_store = lab.store(FenceMode::CheckThenWrite, "holder-b")?;
    let (a_ok, b_ok, floor_after_b) = std::thread::scope(|s| -> Result<_> {
        // 1. A reads floor=0, passes its check, stops in the gap.
        let a_thread = s.spawn(|| a_store.write(&part_write(a, PART_SUMMARY, "old(A)")));
        require(a_in_gap.wait(BOUND), "holder-a never reached the gap")?;
        // 2. B reads floor=0 too, passes, writes floor=2 and new(B).
        let b_ok = b_store.write(&part_write(b, PART_SUMMARY, "new(B)"))?;
        let floor_after_b = view.floor(SCOPE)?;
        // 3. A goes on with its stale decision.
        a_go.open();
        let a_ok = a_thread.join().map_err(|_| "holder-a's writer panicked")??;
        Ok((a_ok, b_ok, floor_after_b))
    })?;
    t.check_eq_shown("B 写完时 fence_floor", 2, floor_after_b);
    let summary = view.part_text(SCOPE, PART_SUMMARY)?;
    let floor = view.floor(SCOPE)?;
    t.note(format!("check-then-write：B accepted={b_ok}，A accepted={a_ok}，最终 {summary}，fence_floor={floor}"));
    t.exposes(
        a_ok && summary == "old(A) by holder-a token=1" && floor_after_b == 2 && floor == 1,
        "A 的检查结果在写入时已过时：旧 token 覆盖新结果，fence_floor 从 2 回退到 1",
        || format!("A accepted={a_ok}, {summary}, floor {floor_after_b} → {floor}"),
    );
    // The lowered floor outlives the race: even the real fence now takes token 1.
    let mut fenced = lab.store(fence, "holder-a")?;
    let later = fenced.write(&part_write(a, PART_DETAIL, "old(A) detail"))?;
    t.exposes(later, "floor 回退之后，连作用域级条件更新也接受 token=1 写 detail：I3 被破坏后无法自愈", || "the token=1 write refused");
    Ok(())
}
// ANCHOR_END: f6a

// ANCHOR: f6b
/// What one forced race between two scope-fenced writers showed.
struct Race {
    /// Who blocked the first writer while it was stopped after its fence
    /// (FENCED_SCOPE_CTE only; the gap hook blocks nobody).
    first_blocked_by: Option<String>,
    /// Who blocked the second writer while it queued (FENCED_SCOPE_CTE only).
    second_blocked_by: Option<String>,
    /// The floor other sessions read while the first writer sat in its gap.
    floor_while_first_in_gap: i64,
    /// The second writer's wait event while the first held the floor row lock.
    second_waited_on: String,
    /// Whether the second writer's call had returned before the first committed.
    second_returned_early: bool,
    /// What each write returned.
    first_ok: bool,
    second_ok: bool,
}

/// The first writer advances the floor and stops after its fence (see
/// `AfterFence`), transaction open and floor row locked; the second writer
/// starts and must queue on that lock; then the first is let go and both
/// finish.
fn race(lab: &Lab, mode: FenceMode, first: (&Grant, &str), second: (&Grant, &str)) -> Result<Race> {
    let mut view = lab.view()?;
    let mut first_store = lab.store(mode, &first.0.holder)?;
    let first_pid = first_store.backend_pid()?;
    let (mut first_store, stop) = AfterFence::arm(mode, first_store, PART_SUMMARY)?;
    let mut second_store = lab.store(mode, &second.0.holder)?;
    let second_pid = second_store.backend_pid()?;
    std::thread::scope(|s| {
        let first_thread = s.spawn(|| first_store.write(&part_write(first.0, PART_SUMMARY, first.1)));
        let first_blocked_by = stop.wait_stopped(&mut view, first_pid)?;
        let floor_while_first_in_gap = view.floor(SCOPE)?;
        let second_thread = s.spawn(|| second_store.write(&part_write(second.0, PART_SUMMARY, second.1)));
        let second_waited_on = wait_for_lock_wait(&mut view, second_pid)?;
        let second_blocked_by = if first_blocked_by.is_some() { Some(view.blocked_by(second_pid)?) } else { None };
        let second_returned_early = second_thread.is_finished();
        stop.go()?;
        let first_ok = first_thread.join().map_err(|_| "the first writer panicked")??;
        let second_ok = second_thread.join().map_err(|_| "the second writer panicked")??;
        Ok(Race { first_blocked_by, second_blocked_by, floor_while_first_in_gap, second_waited_on, second_returned_early, first_ok, second_ok })
    })
}

/// FENCED_SCOPE_CTE only (the gap hook blocks nobody): who stopped the
/// first writer inside its statement.
fn first_stopped_by_hold(t: &mut Transcript, race: &Race, first: &str) {
    if let Some(by) = &race.first_blocked_by {
        let line = format!("{first} 的语句推进 floor 后停在 upsert 上：lab part holder 以未提交的插入占住 summary，{first} 在等它（pg_blocking_pids）");
        t.check_eq(line, "lab part holder".to_owned(), by.clone());
    }
}

/// FENCED_SCOPE_CTE only: whose lock the second writer queued on.
fn second_queued_on(t: &mut Transcript, race: &Race, second: &str, first: &Grant) {
    if let Some(by) = &race.second_blocked_by {
        let line = format!("{second} 排队等的是 floor 行锁：阻塞它的是 {} 的会话（pg_blocking_pids），不是 lab part holder", first.holder);
        t.check_eq(line, first.holder.clone(), by.clone());
    }
}

fn fenced_a_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    let race = race(lab, mode, (a, "old(A)"), (b, "new(B)"))?;
    let mut view = lab.view()?;
    first_stopped_by_hold(t, &race, "A");
    t.check_eq("A 推进 floor 后尚未提交：其他会话读到的 fence_floor 仍为 0", 0, race.floor_while_first_in_gap);
    t.check_eq("B 的 UPDATE 在 pg_stat_activity 中显示为等锁：wait_event_type = Lock", "Lock".to_owned(), race.second_waited_on.clone());
    second_queued_on(t, &race, "B", a);
    t.check(!race.second_returned_early, "B 的写入在 A 提交前没有返回", || "B's write had returned");
    t.check_eq("顺序 A→B：A 提交后 B 对新版本行求值 1 <= 2 成立，两次写入都被接受", "true true".to_owned(), format!("{} {}", race.first_ok, race.second_ok));
    let summary = view.part_text(SCOPE, PART_SUMMARY)?;
    t.check_eq_shown("顺序 A→B：最终内容来自 token=2", "new(B) by holder-b token=2".to_owned(), summary);
    t.check_eq_shown("顺序 A→B：接受顺序里的 token 单调不减（I3）", "1,2".to_owned(), tokens(&view.accepted_tokens(SCOPE)?));
    Ok(())
}

fn fenced_b_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    let race = race(lab, mode, (b, "new(B)"), (a, "old(A)"))?;
    let mut view = lab.view()?;
    first_stopped_by_hold(t, &race, "B");
    t.check_eq("顺序 B→A：A 的 UPDATE 排队等 B 的行锁：wait_event_type = Lock", "Lock".to_owned(), race.second_waited_on.clone());
    second_queued_on(t, &race, "A", b);
    t.check_eq("顺序 B→A：B 提交后 A 对新版本行求值 2 <= 1 不成立，token=1 被拒", "B true, A false".to_owned(), format!("B {}, A {}", race.first_ok, race.second_ok));
    let summary = view.part_text(SCOPE, PART_SUMMARY)?;
    t.check_eq_shown("顺序 B→A：最终内容来自 token=2", "new(B) by holder-b token=2".to_owned(), summary);
    t.check_eq_shown("顺序 B→A：接受顺序里的 token 单调不减（I3）", "2".to_owned(), tokens(&view.accepted_tokens(SCOPE)?));
    t.check_eq("顺序 B→A：fence_floor 为 2", 2, view.floor(SCOPE)?);
    Ok(())
}
// ANCHOR_END: f6b

fn tokens(list: &[i64]) -> String {
    list.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}
