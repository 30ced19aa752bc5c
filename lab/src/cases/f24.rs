//! F24 — the bug zoo's Z5, token-given-back: the rescuer hands the attempt
//! back, so the next claim's token equals the one it replaced. Every check
//! of the token then lets the stale claim through, the resource's fence
//! included (equal tokens pass): the stale side effect replaces the new
//! one. A token that can go down is no token; the fixed rescuer leaves it.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::TokenGivenBack;

/// The case.
pub const CASE: Case = Case { id: "F24", title: |_| "作业队列 Z5：救援者退回一次尝试，新旧认领的 token 相同".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 暂停，租约过期被收回（token 被退回），worker-2 认领，worker-1 恢复");
    lab.reset()?;
    let (s, h) = zoo::stale_claim(Some(BUG), false, true)?;
    t.note(format!("带着这个 bug：{}", job_queue::stale_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(s.b.token == 1 && h.kept == "done by worker-1#1" && h.stale_completions == 1, "B 拿到与 A 相同的 token 1，资源端也接受了 A 的旧副作用，留下的是 A 的结果", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::stale_claim(None, false, true)?;
    t.check_eq_shown("修好之后：收回不动 token，B 的认领拿到更大的 token", 2, s.b.token);
    job_queue::fixed_stale(t, &s, &h, "worker-2#1", 1);
    Ok(())
}
