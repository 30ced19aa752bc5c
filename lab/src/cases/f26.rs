//! F26 — the bug zoo's Z7, app-clock: the lease is stored by the database's
//! clock and judged by the rescuer's own, which here runs two ttls ahead. A
//! job whose worker heartbeats all along looks expired to it and runs twice.
//! The fixed rescuer compares with the database's `now()`. The skew is the
//! rescuer's clock as the case hands it in (F13 makes a clock wrong with
//! libfaketime).

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::params::TTL;
use crate::queue::zoo::Taker;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::AppClock;

/// The case.
pub const CASE: Case = Case { id: "F26", title: |_| "作业队列 Z7：用应用的时钟判断数据库时钟存下的租约".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 一直心跳；救援者的时钟比数据库快两个 ttl");
    let skew = TTL * 2;
    lab.reset()?;
    let (s, h) = zoo::healthy(Some(BUG), Taker::Rescuer { skew })?;
    t.note(format!("带着这个 bug：{}", job_queue::healthy_steps(&s)));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(s.a_alive && h.live_taken_back == 1 && h.executions == 2, "快了的应用时钟把活着的作业判成过期，它又执行了一次", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::healthy(None, Taker::Rescuer { skew })?;
    job_queue::fixed_healthy(t, &s, &h);
    Ok(())
}
