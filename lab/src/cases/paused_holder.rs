//! The timeline of F4 and F5, with the resource mode as its one parameter.
//!
//! Holder A, a separate process, acquires (ttl 1500 ms), renews in the
//! background every 400 ms, passes its local deadline check and stops just
//! before its write. The parent watches the lease stay valid for 3000 ms
//! (twice the ttl: only renewal can explain that), then freezes A with
//! SIGSTOP. The renewer freezes with it, the lease expires by the database
//! clock, and holder B, a second process, acquires token 2, writes, renews and
//! releases. The parent writes A's release line and sends SIGCONT: A writes
//! with token 1, and its renewal fails.
//!
//! The lease side behaves the same in every mode. Only the resource decides
//! whether A's stale report replaces B's.

use super::common::require;
use super::Lab;
use crate::error::Result;
use crate::holder::{HolderArgs, Step, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::poll;
use crate::params::{ms, LEASE, OBSERVE, PART_SUMMARY, SCOPE, TTL};
use crate::resource::FenceMode;
use crate::transcript::Transcript;

/// Whether the resource in `mode` refuses a stale token's rewrite of a part
/// that a newer token already wrote, when the two writes do not overlap in
/// time, as in this timeline. Every mode but `Unfenced` refuses that one;
/// F6 and F7 show the races and gaps that tell the others apart.
fn refuses_serial_stale_rewrite(mode: FenceMode) -> bool {
    mode != FenceMode::Unfenced
}

/// Where A is frozen, for the case titles.
pub fn pause_point(pause_before_check: bool) -> &'static str {
    if pause_before_check {
        "A 在本地截止时间检查之前被 SIGSTOP"
    } else {
        "A 通过写前检查后被 SIGSTOP"
    }
}

fn holder(name: &str, content: &str, mode: FenceMode, wait: WaitPoint) -> HolderArgs {
    // The defaults are the article's F4 parameters (params.rs).
    HolderArgs { mode, waits: vec![wait], ..HolderArgs::new(name, content) }
}

// ANCHOR: timeline
/// Runs the timeline with the resource in `mode`.
pub fn timeline(lab: &Lab, t: &mut Transcript, mode: FenceMode) -> Result<()> {
    let pause_before_check = lab.options.pause_before_check;
    let mut leases = lab.leases("lab observer")?;
    let mut view = lab.view()?;

    let wait = if pause_before_check { WaitPoint::BeforeCheck } else { WaitPoint::BeforeWrite };
    let mut a = HolderGuard::spawn(&lab.holder_bin, &holder("holder-a", "rows=200(A)", mode, wait))?;
    let acquired = a.next_line()?;
    let acquired_ok = t.check_eq_shown("A 获取租约，token=1", Step::Acquired { token: 1 }.to_string(), acquired);
    require(acquired_ok, "holder-a did not acquire token 1")?;
    if !pause_before_check {
        a.expect_step(Step::DeadlineOk)?;
    }
    let waiting = a.next_line()?;
    let stopped_where = if pause_before_check { "A 停在本地截止时间检查之前，等待放行行" } else { "A 通过本地截止时间检查，停在写入之前，等待放行行" };
    t.check_eq(stopped_where, Step::Waiting.to_string(), waiting);

    // A fixed observation window, not a synchronisation: whatever happens
    // in it, the check below asks the database whether the lease is held.
    poll::designed(|| std::thread::sleep(OBSERVE));
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    t.check(row.held && row.holder == "holder-a" && row.token == 1, format!("A 未暂停期间（等待 {}ms，TTL={}ms）续租维持租约", ms(OBSERVE), ms(TTL)), || &row);

    let state = a.stop()?;
    t.check_eq_shown("SIGSTOP 后 /proc 中 A 的状态为 T（续租线程同样停止）", 'T', state);
    t.check_eq("/proc/<pid>/task 中名为 renewer 的线程同样处于 T 状态", "T".to_owned(), a.thread_state("renewer")?);
    leases.wait_until_expired(LEASE)?;
    t.check_eq("租约按数据库时钟过期，此时 A 仍停止", 'T', a.state()?);

    let mut b = HolderGuard::spawn(&lab.holder_bin, &holder("holder-b", "rows=201(B)", mode, WaitPoint::None))?;
    let b_acquired = b.next_line()?;
    t.check_eq_shown("B 获取租约，token=2", Step::Acquired { token: 2 }.to_string(), b_acquired);
    b.expect_step(Step::DeadlineOk)?;
    t.check_eq_shown("B 写入被接受", Step::Write { accepted: true, token: 2 }.to_string(), b.next_line()?);
    let b_end = format!("{}, {}", b.next_line()?, b.next_line()?);
    let b_status = b.wait_exit()?;
    t.check_eq(
        "B 续租成功、释放并退出",
        format!("{}, {}, exit 0", Step::RenewAfterWrite { ok: true }, Step::Released),
        format!("{b_end}, exit {}", b_status.code().map_or("by signal".into(), |c| c.to_string())),
    );
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    t.check_eq("A 恢复前租约已被 B 释放：租约表此刻空闲", "released token=2".to_owned(), format!("{} token={}", if row.released { "released" } else { "not released" }, row.token));
    t.check_eq("B 运行期间 A 一直停止", 'T', a.state()?);

    // The release line goes into the pipe first; SIGCONT then lets A read it.
    a.send_line("go")?;
    a.resume()?;
    // Everything A prints until it exits: the resource is read only after
    // A is gone, so nothing A does can land after the checks below.
    let (a_lines, a_status) = a.rest_of_output()?;
    let line = |i: usize| a_lines.get(i).cloned().unwrap_or_else(|| "(nothing)".into());
    let a_writes = !pause_before_check;
    let judged = if a_writes {
        let (write, renew) = (line(0), line(1));
        t.note(format!("A 恢复后：{write}；{renew}"));
        if refuses_serial_stale_rewrite(mode) {
            t.check_eq_shown("资源端拒绝 A 的旧 token", Step::Write { accepted: false, token: 1 }.to_string(), write);
        }
        t.check_eq_shown("A 的续租失败：token 已被取代", Step::RenewAfterWrite { ok: false }.to_string(), renew);
        2
    } else {
        let gave_up = line(0);
        t.note(format!("A 恢复后：{gave_up}"));
        t.check_eq_shown("A 自己发现本地截止时间已过，放弃写入", Step::DeadlinePassed.to_string(), gave_up);
        1
    };

    let summary = view.part_text(SCOPE, PART_SUMMARY)?;
    let floor = view.floor(SCOPE)?;
    t.note(format!("最终 summary = {summary}；fence_floor={floor}"));
    let b_report = "rows=201(B) by holder-b token=2";
    if !a_writes || refuses_serial_stale_rewrite(mode) {
        t.check_eq_shown("B 的结果保留", b_report.to_owned(), summary.clone());
    } else {
        t.exposes(summary == "rows=200(A) by holder-a token=1", "资源端不检查 token 时，A 的旧结果覆盖了 B 的结果", || &summary);
    }

    let refused = view.attempts("holder-a", false)?;
    let accepted = view.attempts("holder-a", true)?;
    if !a_writes {
        t.check_eq_shown("write_attempt 中没有 A 的尝试", 0, refused + accepted);
    } else if refuses_serial_stale_rewrite(mode) {
        t.check_eq_shown("write_attempt 记录一次 A 的被拒尝试", 1, refused);
    } else {
        t.check_eq_shown("write_attempt 记录 A 的那次尝试为被接受", 1, accepted);
    }

    let mut a_end: Vec<String> = a_lines.iter().skip(judged).cloned().collect();
    a_end.push(format!("exit {}", a_status.code().map_or("by signal".into(), |c| c.to_string())));
    let expected_end = if a_writes { format!("{}, exit 0", Step::LeaseLost) } else { "exit 0".to_owned() };
    t.check_eq("A 不释放别人的租约，随后退出", expected_end, a_end.join(", "));
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    let untouched = if a_writes { "租约行最后仍是 holder-b/2（已释放）：A 的失败续租没有改动它" } else { "租约行最后仍是 holder-b/2（已释放）：A 放弃后没有再碰它" };
    t.check_eq(untouched, "holder-b/2 released".to_owned(), format!("{}/{} {}", row.holder, row.token, if row.released { "released" } else { "not released" }));
    Ok(())
}
// ANCHOR_END: timeline
