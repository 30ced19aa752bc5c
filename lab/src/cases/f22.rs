//! F22 — the bug zoo's Z3, rescue-overwrites: the rescuer selects the jobs
//! whose lease ran out, then updates them by id. A job its worker completes
//! in between is made available again, claimed and run a second time. The
//! fixed rescuer is one statement whose condition is judged on the row it
//! updates: there is no point between reading and writing.

use super::job_queue;
use super::{Case, Lab};
use crate::error::Result;
use crate::queue::{zoo, Bug};
use crate::transcript::Transcript;

/// The bug this case puts back.
const BUG: Bug = Bug::RescueOverwrites;

/// The case.
pub const CASE: Case = Case { id: "F22", title: |_| "作业队列 Z3：救援者先查后改，覆盖了刚完成的作业".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    job_queue::introduce(t, BUG, "worker-1 写完副作用、租约过期后才完成；它完成时救援者正在工作");
    lab.reset()?;
    let (s, h) = zoo::rescue_race(Some(BUG))?;
    t.note(format!("带着这个 bug：A 完成 accepted={}；救援者收回 {:?}；B 认领 {}", s.a_complete, s.rescued, s.b.as_ref().map_or("none".into(), |b| format!("token={}", b.token))));
    t.note(format!("带着这个 bug：{}", job_queue::harm(&h)));
    t.exposes(s.a_complete && h.completions == 2 && h.executions == 2, "救援者把刚完成的作业改回可认领，它又被认领、执行、完成了一次", || job_queue::harm(&h));
    lab.reset()?;
    let (s, h) = zoo::rescue_race(None)?;
    t.note(format!("修好之后：A 完成 accepted={}；救援者收回 {:?}；B 认领 {}", s.a_complete, s.rescued, s.b.as_ref().map_or("none".into(), |b| format!("token={}", b.token))));
    t.check_eq_shown("修好之后：救援者的一条语句看到作业已完成，什么也没收回，B 没有认领到", "[] none".to_owned(), format!("{:?} {}", s.rescued, s.b.as_ref().map_or("none".into(), |b| b.token.to_string())));
    t.check_eq_shown("修好之后：作业只执行、完成一次", "1 1 done".to_owned(), format!("{} {} {}", h.executions, h.completions, h.state));
    Ok(())
}
