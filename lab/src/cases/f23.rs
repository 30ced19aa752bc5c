//! F23 — the bug zoo's Z4, complete-without-claim: a completion is matched by
//! the job's id alone. A worker whose lease ran out, and whose job another
//! worker now holds, finishes and completes it; the fixed completion matches
//! the claim's token and refuses the stale one.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::CompleteWithoutClaim;

/// The case.
pub const CASE: Case = Case { id: "F23", title: |_| "作业队列 Z4：完成不检查认领，过期的 worker 完成了别人的作业".into(), run, mode: None, modes: &[], needs: &[] };

/// An optional step's outcome, as the line shows it.
fn step(outcome: Option<bool>) -> String {
    outcome.map_or("none".into(), |ok| format!("accepted={ok}"))
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 暂停，租约过期被收回，worker-2 认领；worker-1 恢复后不心跳，直接写副作用、完成");
    lab.reset()?;
    let (s, h) = zoo::stale_claim(Some(BUG), false, false)?;
    t.note(format!("带着这个 bug：{}", job_queue::stale_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(h.stale_completions == 1, "过期的 A 的完成被接受：B 还在执行时，作业已记为 A 完成", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::stale_claim(None, false, false)?;
    t.check_eq_shown("修好之后：A 的副作用和完成都被拒（token 1 已被 token 2 取代）", "effect accepted=false complete accepted=false".to_owned(), format!("effect {} complete {}", step(s.a_effect), step(s.a_complete)));
    job_queue::fixed_stale(t, &s, &h, "worker-2#1", 2);
    Ok(())
}
