//! F11 — a holder paused *inside* the fence. Holder A is frozen (SIGSTOP)
//! after its fence UPDATE and before its commit, so its transaction holds the
//! scope's floor row lock. Its lease expires; B acquires and tries to write,
//! and B's write waits on that lock for as long as A is stopped
//! (`pg_stat_activity`, `pg_blocking_pids`). That is a liveness failure, not
//! a safety one: when A resumes, its commit lands first (it passed the fence
//! while it held the lease) and B's write follows, so the floor's order
//! holds. The remedy, second half: the resource's sessions run with
//! `idle_in_transaction_session_timeout` chosen from the lease's ttl. The
//! server then ends A's stalled session itself (its write rolled back, the
//! lock freed), B writes at once, and A's resumed commit fails.

use super::common::require;
use super::{Case, Lab};
use crate::error::Result;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::params::{LEASE, PART_SUMMARY, SCOPE, TTL};
use crate::stats::ms;
use crate::poll;
use crate::transcript::Transcript;
use std::time::{Duration, Instant};

/// The case.
pub const CASE: Case = Case {
    id: "F11",
    title: |_| "持有者停在栅栏事务里：floor 行锁挡住所有写入者（活性），以及空闲事务超时这一补救".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

/// The idle-in-transaction timeout of the remedy: the lease's ttl. A fenced
/// transaction takes milliseconds; one idle for a whole ttl belongs to a
/// holder whose lease has, by then, expired unless it kept renewing.
const IDLE_TIMEOUT: Duration = TTL;

/// What the server logs when it ends a session for sitting idle inside a
/// transaction (SQLSTATE 25P03).
const IDLE_TIMEOUT_MESSAGE: &str = "terminating connection due to idle-in-transaction timeout";

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    without_timeout(lab, t)?;
    with_timeout(lab, t)
}

/// A holder that stops inside its fenced write, with or without the remedy.
fn holder_in_fence(name: &str, content: &str, idle_timeout: Option<Duration>) -> HolderArgs {
    HolderArgs {
        waits: vec![WaitPoint::InsideFence],
        idle_timeout_ms: idle_timeout.map_or(0, |d| ms(d) as u64),
        ..HolderArgs::new(name, content)
    }
}

/// A starts its fenced write and is frozen there; the lab waits, asking
/// the database, until A's lease has expired. Returns when A said it was
/// inside the fence: from then on its session sits idle in its transaction.
fn freeze_a_inside_the_fence(lab: &Lab, t: &mut Transcript, a: &mut HolderGuard, token: i64) -> Result<Instant> {
    let steps = a.next_steps(3)?;
    let inside_at = Instant::now();
    let inside = t.check_eq(
        format!("A 获取 token={token}，停在栅栏事务里（floor 已推进，未提交），随后被 SIGSTOP"),
        format!("{}, T", Steps::from([Step::Acquired { token }, Step::DeadlineOk, Step::InFence])),
        format!("{steps}, {}", a.stop()?),
    );
    require(inside, "holder-a is not frozen inside its fenced write")?;
    lab.leases("lab observer")?.wait_until_expired(LEASE)?;
    Ok(inside_at)
}

// ANCHOR: f11_stall
fn without_timeout(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut view = lab.view()?;
    let mut a = HolderGuard::spawn(&lab.holder_bin, &holder_in_fence("holder-a", "rows=500(A)", None))?;
    freeze_a_inside_the_fence(lab, t, &mut a, 1)?;
    let a_session = view.session_of("holder-a")?.ok_or("holder-a has no session on res26")?;

    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs::new("holder-b", "rows=501(B)"))?;
    t.check_eq("A 的租约按数据库时钟过期后，B 获取 token=2 并通过本地检查", Steps::from([Step::Acquired { token: 2 }, Step::DeadlineOk]), b.next_steps(2)?);
    let b_session = view.session_of("holder-b")?.ok_or("holder-b has no session on res26")?;
    // B's write queues on the floor row lock; the lab waits until the
    // server's clock says it has queued for longer than a whole ttl.
    let mut seen = String::new();
    let waited = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || {
        let wait = view.wait_event_type(b_session)?.unwrap_or_else(|| "none".into());
        let (_, for_ms) = view.session_state(b_session)?.unwrap_or_default();
        seen = format!("wait_event_type={wait} for {for_ms:.0}ms");
        Ok::<_, crate::Error>(wait == "Lock" && for_ms > ms(TTL))
    }))?;
    t.check(waited, format!("B 的写入在 floor 行锁上排队，已超过一个 TTL（{}ms），A 停着，它就一直等", ms(TTL)), || &seen);
    t.check_eq("阻塞 B 的正是 A 的会话（pg_blocking_pids）", format!("[{a_session}]"), format!("{:?}", view.blocking_pids(b_session)?));
    t.check_eq("此刻 A 仍停着（/proc 状态 T）", 'T', a.state()?);

    // A resumes: its commit lands first, then B's write goes through.
    a.send_line("go")?;
    a.resume()?;
    let (a_lines, _) = a.rest_of_output()?;
    let (b_lines, _) = b.rest_of_output()?;
    t.check_eq(
        "A 恢复后它的提交先落地：它在持有租约时通过了栅栏",
        Steps::from([Step::Write { accepted: true, token: 1 }, Step::RenewAfterWrite { ok: false }, Step::LeaseLost]),
        a_lines,
    );
    t.check_eq("B 的写入随后被接受", Steps::from([Step::Write { accepted: true, token: 2 }, Step::RenewAfterWrite { ok: true }, Step::Released]), b_lines);
    t.check_eq("接受顺序里的 token 为 1,2：floor 的顺序成立，失败的是活性而不是安全", "[1, 2]".to_owned(), format!("{:?}", view.accepted_tokens(SCOPE)?));
    t.check_eq("summary 是 B 的", "rows=501(B) by holder-b token=2".to_owned(), view.part_text(SCOPE, PART_SUMMARY)?);
    Ok(())
}
// ANCHOR_END: f11_stall

// ANCHOR: f11_remedy
fn with_timeout(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut view = lab.view()?;
    let log_from = lab.cluster.log_len()?;
    let mut a = HolderGuard::spawn(&lab.holder_bin, &holder_in_fence("holder-a", "rows=502(A)", Some(IDLE_TIMEOUT)))?;
    let inside_at = freeze_a_inside_the_fence(lab, t, &mut a, 3)?;
    // The server ends A's session once it has sat idle in its transaction
    // for the timeout; asked of pg_stat_activity and the row lock. The
    // floor then still reads 2: A's advance to 3 was rolled back, not
    // committed.
    let mut seen = String::new();
    let ended = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || {
        let (gone, locked, floor) = (view.session_of("holder-a")?.is_none(), view.floor_locked(SCOPE)?, view.floor(SCOPE)?);
        seen = format!("session gone={gone}, floor row locked={locked}, floor={floor}");
        Ok::<_, crate::Error>(gone && !locked && floor == 2)
    }))?;
    let took = inside_at.elapsed().as_millis();
    t.figure("took_ms", took as f64);
    t.check(
        ended,
        format!(
            "资源会话设了 idle_in_transaction_session_timeout={}ms：服务器结束了停住的 A 的会话，它的事务回滚（fence_floor 仍为 2），floor 行锁释放 (took={took}ms)",
            ms(IDLE_TIMEOUT)
        ),
        || &seen,
    );

    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs { idle_timeout_ms: ms(IDLE_TIMEOUT) as u64, ..HolderArgs::new("holder-b", "rows=503(B)") })?;
    let (b_lines, _) = b.rest_of_output()?;
    t.check_eq(
        "B 获取 token=4，立即写入，不用排队",
        Steps::from([Step::Acquired { token: 4 }, Step::DeadlineOk, Step::Write { accepted: true, token: 4 }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        b_lines,
    );
    a.send_line("go")?;
    a.resume()?;
    let (a_lines, _) = a.rest_of_output()?;
    // What the client sees depends on its driver (the server's FATAL
    // message, or only a closed connection); the server's log says why.
    let shown: Vec<String> = a_lines.iter().map(|s| if let Step::WriteFailed { .. } = s { "WRITE failed".into() } else { s.to_string() }).collect();
    t.note(format!("A 恢复后：{}", shown.join("；")));
    t.check(matches!(a_lines.first(), Some(Step::WriteFailed { .. })), "A 恢复后的提交失败：它的会话已经不在了", || a_lines.at(0));
    let log = lab.cluster.log_since(log_from)?;
    t.check(
        log.contains(IDLE_TIMEOUT_MESSAGE),
        "服务器日志说明了原因：terminating connection due to idle-in-transaction timeout",
        || "the server log has no such line since A started",
    );
    t.check_eq("接受顺序里的 token 为 1,2,4：token=3 的写入从未生效", "[1, 2, 4]".to_owned(), format!("{:?}", view.accepted_tokens(SCOPE)?));
    t.check_eq("summary 是 B 的，fence_floor=4", "rows=503(B) by holder-b token=4, floor 4".to_owned(), format!("{}, floor {}", view.part_text(SCOPE, PART_SUMMARY)?, view.floor(SCOPE)?));
    Ok(())
}
// ANCHOR_END: f11_remedy
