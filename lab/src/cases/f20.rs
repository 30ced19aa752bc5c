//! F20 — the bug zoo's Z1, name-as-identity: the queue finds a claim by the
//! worker's name, and a restarted worker comes back under the same name. The
//! old incarnation, resumed after its lease ran out and the job went to the
//! new one, heartbeats and completes as if it were the new one; the fixed
//! queue matches the claim's token and refuses both.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::NameAsIdentity;

/// The case.
pub const CASE: Case = Case { id: "F20", title: |_| "作业队列 Z1：按名字认领，重启的 worker 复用名字".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 暂停，租约过期被收回，重启后的 worker-1 用同一个名字认领");
    lab.reset()?;
    let (s, h) = zoo::stale_claim(Some(BUG), true, true)?;
    t.note(format!("带着这个 bug：{}", job_queue::stale_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(h.stale_heartbeats == 1 && h.stale_completions == 1 && !s.b_complete, "重启前那个 worker-1 的心跳和完成按名字算成了重启后的，重启后的完成反被拒绝", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::stale_claim(None, true, true)?;
    t.check_eq_shown("修好之后：重启前的 worker-1 恢复后的心跳按 token 被拒（token 1 已被 token 2 取代）", "accepted=false".to_owned(), format!("accepted={}", s.a_heartbeat.unwrap_or(true)));
    job_queue::fixed_stale(t, &s, &h, "worker-1#2", 1);
    Ok(())
}
