//! F8 — a database crash: immediate shutdown (no checkpoint) and restart
//! through WAL recovery. The lease row comes back as it was, holder and
//! token and expiry (the ttl kept running while the server was down), and
//! still held; the fence floor comes back; after the holder releases, the
//! next acquire gets token 3, never a reused 2; a write that was in flight,
//! uncommitted, at the crash is gone. (A crash of the server process: the
//! operating system's page cache survives it, so F8 says nothing about
//! fsync or power loss.)

use super::common::{acquire, part_write, pause_in_gap, require};
use super::{Case, Lab};
use crate::error::Result;
use crate::latch::BOUND;
use crate::lease::Grant;
use crate::params::{CRASH_TTL, LEASE, PART_DETAIL, PART_SUMMARY, SCOPE, TTL};
use crate::poll;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F8", title: |_| "数据库崩溃：立即停机（无检查点）后经 WAL 恢复".into(), run, mode: None, modes: &[], needs: &[] };

/// What PostgreSQL logs when a start finds the cluster not shut down cleanly.
const RECOVERY_MESSAGE: &str = "database system was not properly shut down; automatic recovery in progress";

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let x = acquire(&mut leases, "holder-x", TTL)?;
    leases.release(&x)?;
    let a = acquire(&mut leases, "holder-a", CRASH_TTL)?;
    t.check_eq_shown("holder-x 释放后 holder-a 获取", 2, a.token);
    let mut report = lab.store(FenceMode::FencedScope, "holder-a")?;
    t.check_eq("holder-a 以 token=2 写入 summary 被接受", true, report.write(&part_write(&a, PART_SUMMARY, "rows=300(A)"))?);
    let before = leases.row(LEASE)?.ok_or("no lease row")?;

    crash_with_a_write_in_flight(lab, t, &a)?;

    // Every old session died with the server: reconnect.
    let mut leases = lab.leases("lab")?;
    let mut view = lab.view()?;
    let row = leases.row(LEASE)?.ok_or("the lease row did not survive")?;
    t.check_eq_shown("租约行恢复：holder-a 仍持有 token=2（租约不随数据库连接断开而失效）", "holder-a/2".to_owned(), format!("{}/{}", row.holder, row.token));
    t.check(row.held, "按数据库时钟，holder-a 的租约此刻仍处于持有中（expires_at > now()）", || &row);
    t.check(row.expires_epoch == before.expires_epoch, "expires_at 与崩溃前相同：停机时间计入租约，没有暂停计时", || format!("{before} → {row}"));
    t.check_eq_shown("fence_floor 恢复为 2", 2, view.floor(SCOPE)?);
    t.check_eq("崩溃时未提交的 detail 写入不存在", "absent".to_owned(), view.part_text(SCOPE, PART_DETAIL)?);
    t.check_eq("write_attempt 只有崩溃前提交的那一次", 1, view.attempts("holder-a", true)? + view.attempts("holder-a", false)?);

    t.check_eq("holder-a 释放恢复后的租约", true, leases.release(&a)?);
    let b = acquire(&mut leases, "holder-b", TTL)?;
    t.check_eq_shown("重启后的下一次获取得到 token=3，不复用", 3, b.token);
    let mut b_store = lab.store(FenceMode::FencedScope, "holder-b")?;
    t.check_eq("holder-b 以 token=3 写入被接受", true, b_store.write(&part_write(&b, PART_SUMMARY, "rows=301(B)"))?);
    let mut a_store = lab.store(FenceMode::FencedScope, "holder-a")?;
    t.check_eq("holder-a 的 token=2 写入被拒绝", false, a_store.write(&part_write(&a, PART_SUMMARY, "rows=300(A) again"))?);
    Ok(())
}

// ANCHOR: crash
/// Crash-stops the server while a write by `a` is in flight: its transaction
/// has advanced the floor and waits in the gap, uncommitted. Then starts the
/// server again, which must recover from the WAL.
fn crash_with_a_write_in_flight(lab: &Lab, t: &mut Transcript, a: &Grant) -> Result<()> {
    let (mut inflight, in_gap, crashed) = pause_in_gap(lab.store(FenceMode::FencedScope, "holder-a in flight")?);
    let log_from = lab.cluster.log_len()?;
    let (state, inflight_result) = std::thread::scope(|s| -> Result<_> {
        let writer = s.spawn(|| inflight.write(&part_write(a, PART_DETAIL, "uncommitted(A)")));
        require(in_gap.wait(BOUND), "the in-flight write never reached the gap")?;
        // The crash: pg_ctl -m immediate sends the postmaster SIGQUIT; every
        // server process exits at once, with no shutdown checkpoint.
        poll::designed(|| lab.cluster.stop_immediate())?;
        let state = lab.cluster.control_state()?;
        crashed.open();
        let result = writer.join().map_err(|_| "the in-flight writer panicked")?;
        Ok((state, result))
    })?;
    t.check_eq_shown("立即停机后 pg_controldata 的集群状态（没有关机检查点）", "in production".to_owned(), state);
    t.check(inflight_result.is_err(), "停机时未提交的写入在客户端报错：服务器断开了连接", || format!("{inflight_result:?}"));
    poll::designed(|| lab.cluster.start())?;
    let log = lab.cluster.log_since(log_from)?;
    t.check(log.contains(RECOVERY_MESSAGE), "重启时服务器从 WAL 恢复（日志：automatic recovery in progress）", || format!("a log without it: {}", log.trim_end()));
    Ok(())
}
// ANCHOR_END: crash
