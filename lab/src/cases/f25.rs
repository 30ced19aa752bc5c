//! F25 — the bug zoo's Z6, elapsed-rescue: the rescuer takes back a job once
//! it has run longer than a limit, heartbeats or not. A long job whose worker
//! heartbeats all along is taken back and runs twice (the fence refuses the
//! first worker's late side effect, and its work is lost). The fixed
//! rescuer reads the lease the heartbeats extend.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::zoo::Taker;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;
use std::time::Duration;

/// The bug this case puts back.
const BUG: Bug = Bug::ElapsedRescue;

/// The case.
pub const CASE: Case = Case { id: "F25", title: |_| "作业队列 Z6：按运行时长收回，不看心跳".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 一直心跳；认领一个 ttl 之后救援者来了");
    lab.reset()?;
    let (s, h) = zoo::healthy(Some(BUG), Taker::Rescuer { skew: Duration::ZERO })?;
    t.note(format!("带着这个 bug：{}", job_queue::healthy_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(s.a_alive && h.live_taken_back == 1 && h.executions == 2, "一直在心跳的作业因为跑得久被收回，又执行了一次", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::healthy(None, Taker::Rescuer { skew: Duration::ZERO })?;
    job_queue::fixed_healthy(t, &s, &h);
    Ok(())
}
