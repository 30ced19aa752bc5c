//! F27 — the bug zoo's Z8, starved-heartbeat: the heartbeat shares the one
//! connection the job's work is using. The work waits inside a statement
//! (on a lock the case holds) past the ttl, the heartbeat waits for the
//! connection, the lease runs out and the job runs twice. The fixed worker
//! heartbeats on a connection of its own.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::StarvedHeartbeat;

/// The case.
pub const CASE: Case = Case { id: "F27", title: |_| "作业队列 Z8：心跳等不到连接，健康的作业被收回".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 的工作在一条等锁的语句里超过一个 ttl");
    lab.reset()?;
    let (s, h) = zoo::starved(Some(BUG))?;
    t.note(format!("带着这个 bug：{}", job_queue::healthy_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(!s.a_alive && s.taken_back == [zoo::JOB] && h.executions == 2, "心跳等不到连接，租约过期，没有暂停过的作业被收回、又执行了一次", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::starved(None)?;
    job_queue::fixed_healthy(t, &s, &h);
    Ok(())
}
