//! F28 — the bug zoo's Z9, pruned-while-alive: the pruner removes the
//! workers whose registry beat is old and releases their jobs, without
//! reading the jobs' own leases. A worker whose registry beat stalled but
//! whose job heartbeats all along loses the job, which runs twice. The
//! fixed release takes only jobs whose lease ran out.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::zoo::Taker;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::PrunedWhileAlive;

/// The case.
pub const CASE: Case = Case { id: "F28", title: |_| "作业队列 Z9：清理者按登记表判死，释放了活着的 worker 的作业".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 只在登记表里登记一次，作业的心跳一直在；一个 ttl 之后清理者来了");
    lab.reset()?;
    let (s, h) = zoo::healthy(Some(BUG), Taker::Pruner)?;
    t.note(format!("带着这个 bug：{}", job_queue::healthy_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(s.a_alive && h.live_taken_back == 1 && h.executions == 2, "登记表说 worker-1 死了，它仍在心跳的作业被释放，又执行了一次", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::healthy(None, Taker::Pruner)?;
    job_queue::fixed_healthy(t, &s, &h);
    Ok(())
}
