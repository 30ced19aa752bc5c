//! F15 — chaos: eight holders, faults drawn from a seed, and a checker over
//! the whole history. A short fixed-seed run of `lab chaos` (see
//! [`crate::chaos`]): the same workload and the same fault schedule, first
//! against `FENCED_SCOPE`, then against `UNFENCED` as the negative control.
//! The nemesis pauses holders shorter and longer than the ttl (SIGSTOP,
//! SIGCONT), kills them (SIGKILL; each comes back as a new incarnation),
//! slows their links (each slot reaches the server through a delaying
//! proxy of its own) and partitions them (each slot is a host of the lab's
//! network, and the switch cuts one or a few off for a while); the run records, and only afterwards does the checker
//! read the history — every write attempt with the floor it saw, the final
//! parts, the grants the holders reported, the faults — and count what went
//! wrong. The real fence keeps every count at zero; without it, the same
//! schedule lets stale writes in.
//!
//! How many attempts, holdings and faults a run has depends on the
//! machine's timing, not only on the seed: those counts are printed as
//! `count=N`, which the evidence redacts. The schedule is the seed's alone
//! and is locked as it is; so are the zeros.

use crate::chaos::workload::Fate;
use super::{Case, Lab, Need};
use crate::vocabulary::FaultKind;
use crate::chaos::{network, run_mode, Config, ModeRun, Schedule};
use crate::vocabulary::Gap;
use crate::error::Result;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use std::time::Duration;
use crate::hosts::Network;

/// The case.
pub const CASE: Case = Case {
    id: "F15",
    title: |_| format!("混沌：{HOLDERS} 个持有者，按种子 {SEED} 注入的故障，检查器读整段历史"),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Hosts],
};

/// The seed: the book's long run uses it too, so this run's schedule is
/// the first seconds of that one's.
pub const SEED: u64 = 1;

/// The holder slots; the long run's number.
pub const HOLDERS: usize = 8;

/// How long each mode runs: long enough that the negative control meets
/// about twenty long pauses (most aimed at the writer, half of those in
/// F4's window) and several slow links of the writer, each of which can let
/// a stale write in; 14 s once let UNFENCED through with none in a stress
/// run under load. Short enough for the suite. Each long pause of the
/// writer lasts until its successor has written (`OUTLAST_BOUND`): 20 s
/// once let UNFENCED through with none beside two busy loops before that.
pub const DURATION: Duration = Duration::from_secs(20);

// ANCHOR: f15_run
fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let config = Config { seed: SEED, holders: HOLDERS, duration: DURATION, holder_bin: lab.holder_bin.clone(), trace: false, case: Some("F15") };
    let schedule = Schedule::generate(SEED, DURATION);
    t.figure("plan_faults", schedule.len() as f64);
    t.figure("plan_aimed", schedule.aimed() as f64);
    t.figure("plan_pause_long", schedule.counts().get(&crate::vocabulary::FaultKind::PauseLong).copied().unwrap_or(0) as f64);
    t.note(format!("故障计划只由种子决定：{schedule}"));
    t.note("注入方式：暂停是发给持有者进程的真实 SIGSTOP 和 SIGCONT，kill 是真实的 SIGKILL（槽位随即启动新的一代），延迟发生在每个槽位自己的 TCP 代理上；每个槽位在自己的网络主机上，分区是虚拟交换机把一台（partition-isolate）或几台（partition-split）槽位主机与其余主机隔开，到时再恢复");

    // One network for both modes.
    let net = network(&config)?;
    let fenced = chaos_run(lab, t, &config, &schedule, FenceMode::FencedScope, &net)?;
    let v = &fenced.verdict;
    t.check_eq("FENCED_SCOPE：被接受的过期写入 0（I3：同一作用域的接受顺序里 token 从不变小）", 0, v.stale_accepted);
    t.check_eq("FENCED_SCOPE：重复发出的 token 0（I2：没有两次持有拿到同一个 token）", 0, v.tokens_reused);
    t.check_eq("FENCED_SCOPE：floor 倒退 0（I3：按 id 顺序，每次尝试看到的 floor 从不变小）", 0, v.floor_regressions);
    t.check_eq("FENCED_SCOPE：丢失的写入 0（被接受的写入都还在，或被更大的 token 覆盖）", 0, v.lost_writes);

    let unfenced = chaos_run(lab, t, &config, &schedule, FenceMode::Unfenced, &net)?;
    let v = &unfenced.verdict;
    t.exposes(
        v.stale_accepted > 0,
        format!("UNFENCED：同一份故障计划下，检查器数出被接受的过期写入 count={}（丢失的写入 count={}）", v.stale_accepted, v.lost_writes),
        || format!("被接受的过期写入 {}，写入尝试 count={}", v.stale_accepted, v.attempts),
    );
    Ok(())
}
// ANCHOR_END: f15_run

/// One mode's run, its counts in a note, and the checks that the history
/// has something to judge.
fn chaos_run(lab: &Lab, t: &mut Transcript, config: &Config, schedule: &Schedule, mode: FenceMode, net: &Network) -> Result<ModeRun> {
    let run = run_mode(&lab.cluster, config, schedule, mode, net, &mut |_| {})?;
    // The mode's history, beside the other cases' (F15-fenced-scope.html …).
    crate::chaos::command::save_history(&crate::history::dir(), &run)?;
    let v = &run.verdict;
    // Every kind the schedule has, injected or not: the line keeps its shape.
    let faults: Vec<String> =
        schedule.counts().into_keys().map(|kind| format!("{kind} count={}", v.faults.get(&kind).copied().unwrap_or(0))).collect();
    t.note(format!(
        "{mode}：写入尝试 count={}，接受 count={}，拒绝 count={}，持有 count={}；注入的故障 {}，没找到目标的 count={}",
        v.attempts,
        v.accepted,
        v.refused,
        v.holdings,
        faults.join("，"),
        run.fated(Fate::NoTarget)
    ));
    // The verdict's own gaps, in two checks: what a failure shows goes
    // through the same `count=` redaction, so a broken run's transcript can
    // be locked too (evidence/26/try/). Together they hold only when the
    // checker's judgement is not "nothing to judge".
    let gaps = v.gaps();
    t.check(
        ![Gap::NoHoldings, Gap::NoAcceptedWrite, Gap::NoFault].iter().any(|g| gaps.contains(g)),
        format!("{mode}：历史里有持有、有被接受的写入、有注入的故障"),
        || format!("持有 count={}，被接受的写入 count={}，注入的故障 count={}", v.holdings, v.accepted, v.faults.values().sum::<usize>()),
    );
    // Partitions made, not just asked for: the nemesis confirms each cut
    // (a connection from the cut host hears nothing) before it counts it.
    let partitions: usize = [FaultKind::PartitionIsolate, FaultKind::PartitionSplit].iter().map(|k| v.faults.get(k).copied().unwrap_or(0)).sum();
    t.check(
        partitions > 0 && run.fated(Fate::DidNotCut) == 0,
        format!("{mode}：分区真的切断了网络：每做完一个分区，从被切的主机连它在数据库主机上的链路，都没有回音"),
        || format!("确认切断的分区 count={partitions}，没有切断的 count={}", run.fated(Fate::DidNotCut)),
    );
    t.check(
        !gaps.contains(&Gap::FloorsUnrecorded),
        format!("{mode}：每次写入尝试都记下了它看到的 floor（write_attempt.floor_after）"),
        || format!("记下 floor 的尝试 count={}，写入尝试 count={}", v.floors_recorded, v.attempts),
    );
    Ok(run)
}
