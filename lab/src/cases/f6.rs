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
//! WHERE against the new floor. Both orders keep I3. Then a write under the
//! floor's own token on either side of a raise: A (token 1, the floor) is in
//! flight when B raises, and B must wait for A's commit; B's raise is in
//! flight when A writes under the old floor, and A must wait for B's commit
//! and then be refused.
//!
//! `--mode fenced-scope-cte` runs (b) with the one-statement form, and
//! `--mode fenced-scope-shared` with the reader/writer discipline, where
//! writers queue on the scope's advisory lock instead of the floor row (the
//! transcript says which, from `pg_stat_activity`, and who holds the lock in
//! which mode, from `pg_locks`). Having no gap hook, their first writer is
//! stopped inside its statement by a session that holds the part's key
//! (`common::AfterFence`); the transcript names who blocks whom.

use super::common::{part_write, pause_in_gap, require, stale_and_fresh, wait_for_lock_wait, AfterFence};
use super::{Case, Lab, CaseOptions};
use crate::error::Result;
use crate::latch::BOUND;
use crate::lease::Grant;
use crate::params::{PART_DETAIL, PART_SUMMARY, SCOPE};
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The mode of (b) unless the reader picks another scope fence with `--mode`.
const MODE: FenceMode = FenceMode::FencedScope;

/// The case.
pub const CASE: Case = Case { id: "F6", title, run, mode: Some(MODE), modes: &FenceMode::SCOPE_FENCES, needs: &[] };

fn title(options: &CaseOptions) -> String {
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
    fenced_b_first(lab, t, &a, &b, mode)?;
    lab.reset_resource()?;
    raise_waits_for_equal(lab, t, &a, &b, mode)?;
    lab.reset_resource()?;
    equal_waits_for_raise(lab, t, &a, &b, mode)?;
    if mode == FenceMode::FencedScopeShared {
        lab.reset_resource()?;
        raise_between_calls(lab, t, &a, &b)?;
    }
    Ok(())
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
/// One writer of a forced race: its grant, the part it writes, and what.
struct Racer<'a> {
    grant: &'a Grant,
    part: &'static str,
    content: &'static str,
}

/// What one forced race between two scope-fenced writers showed.
struct Race {
    /// Who blocked the first writer while it was stopped after its fence
    /// (FENCED_SCOPE_CTE, FENCED_SCOPE_SHARED; the gap hook blocks nobody).
    first_blocked_by: Option<String>,
    /// Who blocked the second writer while it queued (the same modes).
    second_blocked_by: Option<String>,
    /// The floor other sessions read while the first writer sat in its gap.
    floor_while_first_in_gap: i64,
    /// The second writer's wait event type while the first held its lock.
    second_waited_on: String,
    /// Its `wait_event_type/wait_event` at the same moment.
    second_wait_event: String,
    /// The scope's advisory lock in `pg_locks` at that moment (FENCED_SCOPE_SHARED).
    scope_lock: Option<String>,
    /// Whether the second writer's call had returned before the first committed.
    second_returned_early: bool,
    /// What each write returned.
    first_ok: bool,
    second_ok: bool,
}

/// The first writer passes its fence and stops before its commit (see
/// `AfterFence`), holding what its mode holds there: the floor row lock,
/// or the scope's advisory lock; the second writer starts and must queue
/// on it; then the first is let go and both finish.
fn race(lab: &Lab, mode: FenceMode, first: Racer, second: Racer) -> Result<Race> {
    let mut view = lab.view()?;
    let mut first_store = lab.store(mode, &first.grant.holder)?;
    let first_pid = first_store.backend_pid()?;
    let (mut first_store, stop) = AfterFence::arm(mode, first_store, first.part)?;
    let mut second_store = lab.store(mode, &second.grant.holder)?;
    let second_pid = second_store.backend_pid()?;
    std::thread::scope(|s| {
        let first_thread = s.spawn(|| first_store.write(&part_write(first.grant, first.part, first.content)));
        let first_blocked_by = stop.wait_stopped(&mut view, first_pid)?;
        let floor_while_first_in_gap = view.floor(SCOPE)?;
        let second_thread = s.spawn(|| second_store.write(&part_write(second.grant, second.part, second.content)));
        let second_waited_on = wait_for_lock_wait(&mut view, second_pid, || second_thread.is_finished())?;
        let second_wait_event = view.wait_event(second_pid)?;
        let second_blocked_by = if first_blocked_by.is_some() { Some(view.blocked_by(second_pid)?) } else { None };
        let scope_lock = if mode == FenceMode::FencedScopeShared { Some(view.scope_lock(SCOPE)?) } else { None };
        let second_returned_early = second_thread.is_finished();
        stop.go()?;
        let first_ok = first_thread.join().map_err(|_| "the first writer panicked")??;
        let second_ok = second_thread.join().map_err(|_| "the second writer panicked")??;
        Ok(Race {
            first_blocked_by,
            second_blocked_by,
            floor_while_first_in_gap,
            second_waited_on,
            second_wait_event,
            scope_lock,
            second_returned_early,
            first_ok,
            second_ok,
        })
    })
}

/// FENCED_SCOPE_CTE and FENCED_SCOPE_SHARED (the gap hook blocks nobody):
/// who stopped the first writer inside its statement, after what.
fn first_stopped_by_hold(t: &mut Transcript, race: &Race, first: &str, part: &str, after: &str) {
    if let Some(by) = &race.first_blocked_by {
        let line = format!("{first} 的语句{after}停在 upsert 上：lab part holder 以未提交的写入占住 {part}，{first} 在等它（pg_blocking_pids）");
        t.check_eq(line, "lab part holder".to_owned(), by.clone());
    }
}

/// The same modes: whose lock the second writer queued on.
fn second_queued_on(t: &mut Transcript, race: &Race, mode: FenceMode, second: &str, first: &Grant) {
    if let Some(by) = &race.second_blocked_by {
        // (A space before a Latin word, none between Chinese characters.)
        let lock = if mode == FenceMode::FencedScopeShared { "作用域的咨询锁" } else { " floor 行锁" };
        let line = format!("{second} 排队等的是{lock}：阻塞它的是 {} 的会话（pg_blocking_pids），不是 lab part holder", first.holder);
        t.check_eq(line, first.holder.clone(), by.clone());
    }
}

/// The second writer queued: on the floor row (`row_label`, the
/// transaction forms: its wait event type is `Lock`) or on the scope's
/// advisory lock (`shared_label`, FENCED_SCOPE_SHARED: `Lock/advisory`,
/// and `pg_locks` shows who holds the lock in which mode).
fn second_queued(t: &mut Transcript, race: &Race, row_label: &str, shared_label: &str, (lock_label, lock): (&str, &str)) {
    if let Some(held) = &race.scope_lock {
        t.check_eq(shared_label, "Lock/advisory".to_owned(), race.second_wait_event.clone());
        t.check_eq_shown(lock_label, lock.to_owned(), held.clone());
    } else {
        t.check_eq(row_label, "Lock".to_owned(), race.second_waited_on.clone());
    }
}

/// The accepted tokens of the scope in `write_attempt` order.
fn accepted(view: &mut crate::resource::ResourceView) -> Result<String> {
    Ok(tokens(&view.accepted_tokens(SCOPE)?))
}

/// What a forced race must show, in the order every race prints it: the
/// first writer stopped after its fence (and by whom), the floor others
/// read meanwhile, the second writer queued (on what, behind whom) and not
/// returned, both outcomes, the parts, the order of acceptance, the floor
/// at the end. A line a race does not print is `None`.
struct Expect<'a> {
    /// The first writer's letter, the part it stops on, and what its
    /// statement did before it stopped (for the hold's line).
    first: (&'a str, &'a str, &'a str),
    /// The second writer's letter, and the grant it queues behind.
    second: (&'a str, &'a Grant),
    /// The floor other sessions read while the first is stopped.
    gap_floor: Option<(&'a str, i64)>,
    /// The second writer queued: on the floor row, on the scope's lock,
    /// and who holds that lock in which mode (see `second_queued`).
    queued: (&'a str, &'a str, (&'a str, &'a str)),
    /// That the second writer's call had not returned before the first committed.
    not_early: Option<&'a str>,
    /// Both outcomes: the line, what it must read, and the writers' letters
    /// when it reads them as `B true, A false` (`None`: as `true true`).
    outcome: (&'a str, &'a str, Option<(&'a str, &'a str)>),
    /// Each part that must be there afterwards: the line, the part, what it holds.
    parts: &'a [(&'a str, &'a str, &'a str)],
    /// The accepted tokens in `write_attempt` order: the line, and what.
    accepted: (&'a str, &'a str),
    /// The floor at the end, 2: the line.
    floor: Option<&'a str>,
}

/// Checks that `race` showed what `e` expects, line by line.
fn judge(lab: &Lab, t: &mut Transcript, race: &Race, mode: FenceMode, e: &Expect) -> Result<()> {
    let mut view = lab.view()?;
    first_stopped_by_hold(t, race, e.first.0, e.first.1, e.first.2);
    if let Some((line, floor)) = e.gap_floor {
        t.check_eq(line, floor, race.floor_while_first_in_gap);
    }
    second_queued(t, race, e.queued.0, e.queued.1, e.queued.2);
    second_queued_on(t, race, mode, e.second.0, e.second.1);
    if let Some(line) = e.not_early {
        t.check(!race.second_returned_early, line, || format!("{}'s write had returned", e.second.0));
    }
    let outcomes = match e.outcome.2 {
        Some((first, second)) => format!("{first} {}, {second} {}", race.first_ok, race.second_ok),
        None => format!("{} {}", race.first_ok, race.second_ok),
    };
    t.check_eq(e.outcome.0, e.outcome.1.to_owned(), outcomes);
    for (line, part, holds) in e.parts {
        t.check_eq_shown(*line, (*holds).to_owned(), view.part_text(SCOPE, part)?);
    }
    t.check_eq_shown(e.accepted.0, e.accepted.1.to_owned(), accepted(&mut view)?);
    if let Some(line) = e.floor {
        t.check_eq(line, 2, view.floor(SCOPE)?);
    }
    Ok(())
}

fn fenced_a_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    let race = race(lab, mode, Racer { grant: a, part: PART_SUMMARY, content: "old(A)" }, Racer { grant: b, part: PART_SUMMARY, content: "new(B)" })?;
    let both = if mode == FenceMode::FencedScopeShared {
        "顺序 A→B：A 提交后 B 拿到锁，读到 floor=1 < 2，以排他锁推进后写入：两次写入都被接受"
    } else {
        "顺序 A→B：A 提交后 B 对新版本行求值 1 <= 2 成立，两次写入都被接受"
    };
    judge(lab, t, &race, mode, &Expect {
        first: ("A", PART_SUMMARY, "推进 floor 后"),
        second: ("B", a),
        gap_floor: Some(("A 推进 floor 后尚未提交：其他会话读到的 fence_floor 仍为 0", 0)),
        queued: (
            "B 的 UPDATE 在 pg_stat_activity 中显示为等锁：wait_event_type = Lock",
            "B 在 pg_stat_activity 中显示为等作用域的咨询锁：wait_event = Lock/advisory",
            ("pg_locks：A 持排他锁、B 等共享锁", "holder-a ExclusiveLock granted, holder-b ShareLock waiting"),
        ),
        not_early: Some("B 的写入在 A 提交前没有返回"),
        outcome: (both, "true true", None),
        parts: &[("顺序 A→B：最终内容来自 token=2", PART_SUMMARY, "new(B) by holder-b token=2")],
        accepted: ("顺序 A→B：接受顺序里的 token 单调不减（I3）", "1,2"),
        floor: None,
    })
}

fn fenced_b_first(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    let race = race(lab, mode, Racer { grant: b, part: PART_SUMMARY, content: "new(B)" }, Racer { grant: a, part: PART_SUMMARY, content: "old(A)" })?;
    let refused = if mode == FenceMode::FencedScopeShared {
        "顺序 B→A：B 提交后 A 拿到共享锁，读到 floor=2 > 1，token=1 被拒"
    } else {
        "顺序 B→A：B 提交后 A 对新版本行求值 2 <= 1 不成立，token=1 被拒"
    };
    judge(lab, t, &race, mode, &Expect {
        first: ("B", PART_SUMMARY, "推进 floor 后"),
        second: ("A", b),
        gap_floor: None,
        queued: (
            "顺序 B→A：A 的 UPDATE 排队等 B 的行锁：wait_event_type = Lock",
            "顺序 B→A：A 排队等 B 的排他咨询锁：wait_event = Lock/advisory",
            ("顺序 B→A：pg_locks：B 持排他锁、A 等共享锁", "holder-b ExclusiveLock granted, holder-a ShareLock waiting"),
        ),
        not_early: None,
        outcome: (refused, "B true, A false", Some(("B", "A"))),
        parts: &[("顺序 B→A：最终内容来自 token=2", PART_SUMMARY, "new(B) by holder-b token=2")],
        accepted: ("顺序 B→A：接受顺序里的 token 单调不减（I3）", "2"),
        floor: Some("顺序 B→A：fence_floor 为 2"),
    })
}

// ANCHOR_END: f6b

// ANCHOR: f6c
/// The start of the two races around a raise: A has written once with
/// token 1, so the floor is 1 and A's next write is under the floor's own
/// token, the normal path of one holding writing many parts.
fn floor_at_a(lab: &Lab, t: &mut Transcript, a: &Grant, mode: FenceMode, label: &str) -> Result<()> {
    let first = lab.store(mode, &a.holder)?.write(&part_write(a, PART_SUMMARY, "old(A)"))?;
    let floor = lab.view()?.floor(SCOPE)?;
    t.check_eq(label, "true, floor=1".to_owned(), format!("{first}, floor={floor}"));
    Ok(())
}

/// A writes `detail` under the floor's own token and stops before its
/// commit; B comes to raise the floor to 2: the raise must wait until A's
/// write has committed, or A's token-1 write would land after the floor
/// moved past it.
fn raise_waits_for_equal(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    floor_at_a(lab, t, a, mode, "A 在途、B 推进：A 先以 token=1 写 summary 被接受，floor=1")?;
    let race = race(lab, mode, Racer { grant: a, part: PART_DETAIL, content: "old(A)" }, Racer { grant: b, part: PART_SUMMARY, content: "new(B)" })?;
    judge(lab, t, &race, mode, &Expect {
        first: ("A", PART_DETAIL, "不推进 floor（token 等于 floor），"),
        second: ("B", a),
        gap_floor: Some(("A 在途、B 推进：A 以 token=1 写 detail 尚未提交，fence_floor 仍为 1", 1)),
        queued: (
            "A 在途、B 推进：B 的 UPDATE 排队等 A 的行锁：wait_event_type = Lock",
            "A 在途、B 推进：B 的推进排队等 A 的共享咨询锁：wait_event = Lock/advisory",
            ("A 在途、B 推进：pg_locks：A 持共享锁、B 等排他锁", "holder-a ShareLock granted, holder-b ExclusiveLock waiting"),
        ),
        not_early: Some("A 在途、B 推进：B 的写入在 A 提交前没有返回"),
        outcome: ("A 在途、B 推进：A 提交后 B 才推进 floor，两次写入都被接受", "A true, B true", Some(("A", "B"))),
        parts: &[
            ("A 在途、B 推进：detail 来自 token=1", PART_DETAIL, "old(A) by holder-a token=1"),
            ("A 在途、B 推进：summary 来自 token=2", PART_SUMMARY, "new(B) by holder-b token=2"),
        ],
        accepted: ("A 在途、B 推进：接受顺序里的 token 单调不减（I3）", "1,1,2"),
        floor: Some("A 在途、B 推进：fence_floor 为 2"),
    })
}

/// B raises the floor to 2 and stops before its commit; A comes to write
/// `detail` under token 1, still the floor that every other session reads:
/// A must wait for B's commit and then see the new floor, not the one it
/// read before it waited.
fn equal_waits_for_raise(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant, mode: FenceMode) -> Result<()> {
    floor_at_a(lab, t, a, mode, "B 推进在途、A 写入：A 先以 token=1 写 summary 被接受，floor=1")?;
    let race = race(lab, mode, Racer { grant: b, part: PART_SUMMARY, content: "new(B)" }, Racer { grant: a, part: PART_DETAIL, content: "old(A)" })?;
    judge(lab, t, &race, mode, &Expect {
        first: ("B", PART_SUMMARY, "推进 floor 后"),
        second: ("A", b),
        gap_floor: Some(("B 推进在途、A 写入：B 推进 floor 后尚未提交，其他会话读到的 fence_floor 仍为 1", 1)),
        queued: (
            "B 推进在途、A 写入：A 的 UPDATE 排队等 B 的行锁：wait_event_type = Lock",
            "B 推进在途、A 写入：A 排队等 B 的排他咨询锁：wait_event = Lock/advisory",
            ("B 推进在途、A 写入：pg_locks：B 持排他锁、A 等共享锁", "holder-b ExclusiveLock granted, holder-a ShareLock waiting"),
        ),
        not_early: Some("B 推进在途、A 写入：A 的写入在 B 提交前没有返回"),
        outcome: ("B 推进在途、A 写入：B 提交后 A 看到 floor=2，token=1 被拒", "B true, A false", Some(("B", "A"))),
        parts: &[
            ("B 推进在途、A 写入：detail 不存在", PART_DETAIL, "absent"),
            ("B 推进在途、A 写入：summary 来自 token=2", PART_SUMMARY, "new(B) by holder-b token=2"),
        ],
        accepted: ("B 推进在途、A 写入：接受顺序里的 token 单调不减（I3）", "1,2"),
        floor: Some("B 推进在途、A 写入：fence_floor 为 2"),
    })
}

/// FENCED_SCOPE_SHARED only: A (token 1) finds the floor (0) below its token
/// under the share lock and stops between that call and its exclusive one,
/// holding nothing; B raises the floor to 2 meanwhile. A's exclusive call
/// must decide afresh: refuse, never lower the floor to 1.
fn raise_between_calls(lab: &Lab, t: &mut Transcript, a: &Grant, b: &Grant) -> Result<()> {
    let mode = FenceMode::FencedScopeShared;
    let mut view = lab.view()?;
    let (mut a_store, a_in_gap, a_go) = pause_in_gap(lab.store(mode, &a.holder)?);
    let mut b_store = lab.store(mode, &b.holder)?;
    let (a_ok, b_ok, lock_between) = std::thread::scope(|s| -> Result<_> {
        let a_thread = s.spawn(|| a_store.write(&part_write(a, PART_SUMMARY, "old(A)")));
        require(a_in_gap.wait(BOUND), "holder-a never came back from its share-lock call")?;
        let lock_between = view.scope_lock(SCOPE)?;
        let b_ok = b_store.write(&part_write(b, PART_SUMMARY, "new(B)"))?;
        a_go.open();
        let a_ok = a_thread.join().map_err(|_| "holder-a's writer panicked")??;
        Ok((a_ok, b_ok, lock_between))
    })?;
    t.check_eq_shown("A 的两次调用之间：A 发现 floor=0 低于 token=1，共享锁随第一次调用结束，pg_locks 里没有人持有作用域的锁", "none".to_owned(), lock_between);
    t.check_eq("A 的两次调用之间：B 推进到 2 并提交；A 以排他锁再来时重新读 floor，token=1 被拒", "B true, A false".to_owned(), format!("B {b_ok}, A {a_ok}"));
    t.check_eq_shown("A 的两次调用之间：最终内容来自 token=2", "new(B) by holder-b token=2".to_owned(), view.part_text(SCOPE, PART_SUMMARY)?);
    t.check_eq_shown("A 的两次调用之间：接受顺序里的 token 单调不减（I3）", "2".to_owned(), accepted(&mut view)?);
    t.check_eq("A 的两次调用之间：fence_floor 仍为 2，推进从不降低它", 2, view.floor(SCOPE)?);
    Ok(())
}
// ANCHOR_END: f6c

fn tokens(list: &[i64]) -> String {
    list.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}
