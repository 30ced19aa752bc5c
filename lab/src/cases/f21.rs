//! F21 — the bug zoo's Z2, late-heartbeat: a heartbeat extends whatever claim
//! of the job is running. The paused worker's late heartbeat, after the job
//! went to another worker, is accepted, so it goes on as if it held the job
//! and the job runs twice; the fixed heartbeat matches the claim's token.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::LateHeartbeat;

/// The case.
pub const CASE: Case = Case { id: "F21", title: |_| "作业队列 Z2：迟到的心跳续上已被接管的租约".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 暂停，租约过期被收回，worker-2 认领，worker-1 恢复后先心跳");
    lab.reset()?;
    let (s, h) = zoo::stale_claim(Some(BUG), false, true)?;
    t.note(format!("带着这个 bug：{}", job_queue::stale_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(h.stale_heartbeats == 1 && h.executions == 2, "迟到的心跳续上了 B 的租约，A 以为自己仍持有作业，作业执行了两次", || job_queue::harm(&h));
    t.check_eq_shown("带着这个 bug：A 的旧副作用仍被资源端的 token 比较拒绝", "accepted=false".to_owned(), format!("accepted={}", s.a_effect.unwrap_or(true)));
    lab.reset()?;
    let (s, h) = zoo::stale_claim(None, false, true)?;
    t.check_eq_shown("修好之后：A 恢复后的心跳按 token 被拒，A 停下", "accepted=false".to_owned(), format!("accepted={}", s.a_heartbeat.unwrap_or(true)));
    job_queue::fixed_stale(t, &s, &h, "worker-2#1", 1);
    Ok(())
}
