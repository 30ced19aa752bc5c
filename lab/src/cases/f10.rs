//! F10 — a holder killed (`SIGKILL`) inside its fenced write. Holder A has
//! advanced the floor, written its part and its audit row, and not
//! committed, when the parent kills it. Nothing of the half-done write is
//! ever visible: the server sees the connection close, rolls the
//! transaction back and frees the floor row lock (how soon is measured). The
//! lease is another matter: a crash does not release it. It stays held by
//! the database clock until it expires — even a restarted instance with the
//! same name is refused until then — and only then does B acquire a larger
//! token and write.

use super::common::require;
use super::{Case, Lab};
use crate::error::Result;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint, EXIT_NOT_ACQUIRED};
use crate::holder_guard::{ending, exit_text, HolderGuard};
use crate::params::{LEASE, PART_SUMMARY, SCOPE};
use crate::poll;
use crate::resource::ResourceView;
use crate::transcript::Transcript;
use std::time::Instant;

/// The case.
pub const CASE: Case = Case {
    id: "F10",
    title: |_| "持有者在栅栏事务里被 SIGKILL：写了一半的东西不留痕迹，租约不因崩溃而释放".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

/// What the resource shows of A's write: the floor, the part, A's attempts.
fn traces(view: &mut ResourceView) -> Result<String> {
    Ok(format!("floor={} summary={} attempts(A)={}", view.floor(SCOPE)?, view.part_text(SCOPE, PART_SUMMARY)?, view.attempts_by("holder-a")?))
}

// ANCHOR: f10_timeline
fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab observer")?;
    let mut view = lab.view()?;
    let nothing = "floor=0 summary=absent attempts(A)=0".to_owned();

    let args = HolderArgs { waits: vec![WaitPoint::InsideFence], ..HolderArgs::new("holder-a", "rows=400(A)") };
    let mut a = HolderGuard::spawn(&lab.holder_bin, &args)?;
    let steps = a.next_steps(3)?;
    let inside = t.check_eq(
        "A 获取 token=1、通过本地检查，停在栅栏事务里：floor 已推进，分片和审计行已写入，尚未提交",
        Steps::from([Step::Acquired { token: 1 }, Step::DeadlineOk, Step::InFence]),
        steps,
    );
    require(inside, "holder-a did not stop inside its fenced write")?;
    let a_session = view.session_of("holder-a")?.ok_or("holder-a has no session on res26")?;
    let state = view.session_state(a_session)?.map_or("gone".into(), |(state, _)| state);
    t.check_eq("A 的资源会话在 pg_stat_activity 里处于 idle in transaction", "idle in transaction".to_owned(), state);
    t.check_eq("floor 行被 A 的事务锁住（另一会话 FOR UPDATE NOWAIT 得到 55P03）", true, view.floor_locked(SCOPE)?);
    t.check_eq("其他会话看不到 A 写了一半的东西", nothing.clone(), traces(&mut view)?);

    // The crash: SIGKILL, no cleanup of A's own. The server is left to
    // notice that the connection closed.
    let killed_at = Instant::now();
    let status = a.kill()?;
    t.check_eq("A 被 SIGKILL 结束", "signal 9".to_owned(), exit_text(status));
    let mut seen = String::new();
    let rolled_back = poll::poll_until(poll::BOUND, std::time::Duration::from_millis(1), || {
        let (gone, locked) = (view.session_of("holder-a")?.is_none(), view.floor_locked(SCOPE)?);
        seen = format!("session gone={gone}, floor row locked={locked}");
        Ok::<_, crate::Error>(gone && !locked)
    })?;
    let took = killed_at.elapsed().as_millis();
    t.figure("took_ms", took as f64);
    t.check(rolled_back, format!("服务器发现连接断开，回滚 A 的事务并释放 floor 行锁 (took={took}ms)"), || &seen);
    t.check_eq("回滚之后仍然看不到 A 写了一半的东西：崩溃的写入不留痕迹", nothing, traces(&mut view)?);

    // The lease: a crash does not release it.
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    t.check(row.held && row.holder == "holder-a" && row.token == 1, "崩溃没有释放租约：按数据库时钟它仍由 holder-a 持有，token=1", || &row);
    let mut restarted = HolderGuard::spawn(&lab.holder_bin, &HolderArgs::new("holder-a", "rows=401(A 重启后)"))?;
    let (lines, exit) = restarted.rest_of_output()?;
    t.check_eq(
        "重启的 holder-a 在租约过期前获取被拒：崩溃不让出租约，同名的新实例也不行",
        ending(&Steps::from([Step::NotAcquired]), &format!("exit {EXIT_NOT_ACQUIRED}")),
        ending(&lines, &exit_text(exit)),
    );
    leases.wait_until_expired(LEASE)?;
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    t.check_eq("租约只在按数据库时钟过期之后才空出来", "holder-a/1 expired".to_owned(), format!("{}/{} {}", row.holder, row.token, if row.held { "held" } else { "expired" }));

    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs::new("holder-b", "rows=402(B)"))?;
    let (lines, _) = b.rest_of_output()?;
    t.check_eq(
        "B 获取更大的 token=2 并写入",
        Steps::from([Step::Acquired { token: 2 }, Step::DeadlineOk, Step::Write { accepted: true, token: 2 }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        lines,
    );
    t.check_eq("最后：fence_floor=2，summary 是 B 的，write_attempt 里没有 A 的行", "floor=2 summary=rows=402(B) by holder-b token=2 attempts(A)=0".to_owned(), traces(&mut view)?);
    Ok(())
}
// ANCHOR_END: f10_timeline
