//! What the bug zoo's cases (F20–F28) share: the line that introduces a
//! bug, and the lines that describe a staged run of the job queue and the
//! harm it left (see `queue::zoo`).

use crate::queue::zoo::{Harm, HealthySteps, StaleSteps};
use crate::queue::Bug;
use crate::transcript::Transcript;

/// The bug's row, name and where it was seen, as the case's first line.
pub fn introduce(t: &mut Transcript, bug: Bug, shape: &str) {
    t.note(format!("{} {}（{}）：{shape}", bug.row(), bug.name(), bug.seen_in()));
}

/// An optional step's outcome: `accepted=true`, or `none` when it was not made.
fn step(outcome: Option<bool>) -> String {
    outcome.map_or("none".into(), |ok| format!("accepted={ok}"))
}

/// What the workers of a stale-claim run were told.
pub fn stale_steps(s: &StaleSteps) -> String {
    format!(
        "B 认领 token={}，副作用 accepted={}；A 恢复后心跳 {}，副作用 {}，完成 {}；B 完成 accepted={}",
        s.b.token,
        s.b_effect,
        step(s.a_heartbeat),
        step(s.a_effect),
        step(s.a_complete),
        s.b_complete
    )
}

/// What a healthy-job run saw.
pub fn healthy_steps(s: &HealthySteps) -> String {
    format!(
        "收回时 A 的租约仍有效={}；收回的作业 {:?}；B 认领 {}；A 的心跳 lost={}；A 的副作用 accepted={}",
        s.a_alive,
        s.taken_back,
        s.b.as_ref().map_or("none".into(), |b| format!("token={}", b.token)),
        s.a_heartbeat.lost,
        s.a_effect
    )
}

/// The harm, counted from `job_event` and `write_attempt`.
pub fn harm(h: &Harm) -> String {
    format!(
        "执行 {} 次；被接受的副作用：{}；留下 {}；被接受的过期心跳 {}、过期完成 {}；完成 {} 次；活着被收回 {}；作业 {}",
        h.executions, h.effects(), h.kept, h.stale_heartbeats, h.stale_completions, h.completions, h.live_taken_back, h.state
    )
}

/// The fixed queue's run of a stale claim: A's writes after resuming are
/// refused; the job, its side effect and its completion are B's alone.
/// `executions`: how many workers ran the handler (1 when A stopped at its
/// refused heartbeat, 2 when A does not heartbeat first and ran it anyway).
pub fn fixed_stale(t: &mut Transcript, s: &StaleSteps, h: &Harm, b: &str, executions: usize) {
    t.note(format!("修好之后：{}", stale_steps(s)));
    t.check_eq_shown("修好之后：被接受的过期心跳、过期完成", "0 0".to_owned(), format!("{} {}", h.stale_heartbeats, h.stale_completions));
    t.check_eq_shown(
        "修好之后：执行的次数；被接受的副作用只有 B 的，作业由 B 完成",
        format!("{executions}; {b} token={}; done by {b}; done", s.b.token),
        format!("{}; {}; {}; {}", h.executions, h.effects(), h.kept, h.state),
    );
}

/// The fixed queue's run of a healthy job: nobody takes it; A finishes it.
pub fn fixed_healthy(t: &mut Transcript, s: &HealthySteps, h: &Harm) {
    t.note(format!("修好之后：{}", healthy_steps(s)));
    t.check_eq_shown("修好之后：收回时 A 的租约仍有效，没有作业被收回，B 没有认领到", "true [] none".to_owned(), format!("{} {:?} {}", s.a_alive, s.taken_back, s.b.as_ref().map_or("none".into(), |b| b.token.to_string())));
    t.check_eq_shown("修好之后：作业只执行一次，A 的副作用被接受", "1 true done".to_owned(), format!("{} {} {}", h.executions, s.a_effect, h.state));
}
