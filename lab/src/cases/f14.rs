//! F14 — the lease store fails over to an asynchronous standby, and I2
//! breaks: a token committed on the primary, not yet on the standby, is
//! issued a second time by the promoted standby, and the resource accepts
//! both holders' writes, since equal tokens pass the `<=` fence. With
//! synchronous replication the same timeline keeps the token: an acquire
//! returns only once the standby has it, and the price is that, without the
//! standby, an acquire waits (cancelled, it returns its grant anyway, with
//! a warning: the commit stays, unreplicated).
//!
//! The lease store runs on a pair of its own, `b3-26-primary` and its
//! streaming standby `b3-26-standby` (see `cluster::replica`), made with a
//! real base backup; the fault is injected the way it happens: the
//! standby's link to the primary is cut (its `primary_conninfo` now leads
//! nowhere), the primary crashes (`pg_ctl stop -m immediate`), the standby
//! is promoted (`pg_ctl promote`), and the clients move to it.
//!
//! The resource (`res26`) stays on `b3-26`, which does not fail over. That
//! is the realistic shape: fencing exists because the protected resource is
//! another system (a report store, a bucket, a downstream service) with a
//! durability of its own; a failover of the lock service rolls back the
//! lock service's memory, not the resource's `fence_floor`. So the resource
//! remembers token 2 while the lease store, having lost it, issues 2 again.
//! A reissued token below the floor would be refused (its holder stalls,
//! nothing stale gets in); one equal to the floor, as here, where the lost
//! increment is the last token the resource accepted, passes the fence.
//! Token monotonicity is a property of the lease store's durability and
//! failover, not of the acquire's SQL.

use super::common::{acquire, part_write, replayed, require, token_of};
use super::{Case, Lab};
use crate::cluster::replica::FailoverPair;
use crate::cluster::Endpoint;
use crate::db::replication::{self, Mode, ReplicationView, SYNCHRONOUS_COMMIT};
use crate::error::Result;
use crate::lease::{Grant, LeaseRow, LeaseStore};
use crate::lease_stores::{median_acquire_ms, SAMPLES};
use crate::stats::ms;
use crate::params::{margin, CRASH_TTL, LEASE, PART_DETAIL, PART_SUMMARY, SCOPE, TTL};
use crate::poll;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case {
    id: "F14",
    title: |_| "租约库主备切换：异步复制丢失已提交的 token 并再次发出；同步复制保住它，代价是等待".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

/// `pg_stat_activity`'s `wait_event_type/wait_event` of a commit waiting
/// for its synchronous standby.
const SYNC_REP: &str = "IPC/SyncRep";

/// What PostgreSQL says when a commit's wait for its synchronous standby is
/// cancelled (`SyncRepWaitForLSN` in syncrep.c): a WARNING, not an error.
/// The commit is already in the primary's WAL and is not undone; the
/// cancel only stops the waiting, and the statement returns its result.
const CANCELLED_SYNC_WAIT: &str = "WARNING: canceling wait for synchronous replication due to user request\n\
     DETAIL: The transaction has already committed locally, but might not have been replicated to the standby.";

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let pair = FailoverPair::beside(&lab.cluster)?;
    t.note(format!(
        "租约库在两台自己的服务器上：主库 {} 与它的流复制备库 {}（各用自己的端口与目录）；资源 res26 留在不做切换的 {} 上",
        pair.primary().name(),
        pair.standby().name(),
        lab.cluster.name()
    ));
    asynchronous(lab, t, &pair)?;
    lab.reset_resource()?;
    synchronous(lab, t, &pair)
}

/// The asynchronous timeline: the acquire that only the primary has is
/// issued again after the failover.
fn asynchronous(lab: &Lab, t: &mut Transcript, pair: &FailoverPair) -> Result<()> {
    let base_backup = replication::build(pair, Mode::Async)?;
    t.note(format!("（一）异步复制：pg_basebackup 建成备库，用时 {:.1}ms", ms(base_backup)));
    t.check_eq_shown("主库 pg_stat_replication 中备库的 state/sync_state", "streaming/async".to_owned(), replication::walsender_state(pair)?);
    let (primary, standby) = (pair.primary().endpoint(), pair.standby().endpoint());
    let mut leases = LeaseStore::connect_to(&primary, "lab")?;
    // By design: the timed acquires are the measurement.
    let median = poll::designed(|| median_acquire_ms(&mut leases, TTL))?;
    t.figure("async_acquire_median_ms", median);
    t.note(format!("异步复制下，主库上一次获取的延迟中位数（{SAMPLES} 次）：{median:.1}ms"));

    let mut on_primary = LeaseStore::connect_to(&primary, "lab observer")?;
    let mut on_standby = LeaseStore::connect_to(&standby, "lab observer")?;
    let x = acquire(&mut leases, "holder-x", TTL)?;
    leases.release(&x)?;
    t.check_eq_shown("holder-x 获取 token=1 并释放；备库回放之后读到同一行", "holder-x/1 released".to_owned(), replayed(&mut on_standby, "holder-x/1 released")?);

    let (mut primary_view, mut standby_view) = cut(t, pair)?;
    let received = standby_view.received_lsn()?.ok_or("the standby never received any WAL")?;
    let before = primary_view.insert_lsn()?;
    let a = acquire(&mut leases, "holder-a", CRASH_TTL)?;
    let after = primary_view.flush_lsn()?;
    t.check_eq_shown("holder-a 在主库获取，主库已提交", 2, a.token);
    t.check(
        received <= before && before < after,
        format!("这次提交的 WAL 在备库已接收的位置之后：备库收到 lsn={received}，获取之前主库插入点 lsn={before}，提交之后主库刷盘到 lsn={after}"),
        || "the standby's position is not before the acquire's WAL",
    );
    t.check_eq_shown(
        "此刻读两台服务器：主库 | 备库上的租约行",
        "holder-a/2 held | holder-x/1 released".to_owned(),
        format!("{} | {}", state(on_primary.row(LEASE)?), state(on_standby.row(LEASE)?)),
    );
    let mut a_store = lab.store(FenceMode::FencedScope, "holder-a")?;
    t.check_eq("holder-a 以 token=2 写入 summary 被接受", true, a_store.write(&part_write(&a, PART_SUMMARY, "rows=400(A)"))?);

    fail_over(t, pair)?;
    t.check_eq_shown("提升后的租约行：holder-a 的那次获取随主库一起丢了", "holder-x/1 released".to_owned(), state(on_standby.row(LEASE)?));
    let mut b_leases = LeaseStore::connect_to(&standby, "holder-b")?;
    let b = acquire(&mut b_leases, "holder-b", TTL)?;
    t.check_eq_shown("holder-b 在提升后的服务器上获取", 2, b.token);
    t.exposes(a.token == b.token, format!("I2 被打破：两个持有者拿着同一个 token={}，一次发放只记在已停掉的主库上", b.token), || {
        format!("holder-a token={}, holder-b token={}", a.token, b.token)
    });
    t.check(a.within_deadline(), "holder-a 的本地截止时间未到：在它看来自己仍持有租约，照常继续写", || "its local deadline has passed");
    let mut b_store = lab.store(FenceMode::FencedScope, "holder-b")?;
    t.check_eq("holder-b 以 token=2 写入 summary 被接受", true, b_store.write(&part_write(&b, PART_SUMMARY, "rows=401(B)"))?);
    let late = a_store.write(&part_write(&a, PART_DETAIL, "rows=400(A)"))?;
    t.exposes(late, "相等的 token 通过 <= 栅栏：holder-a 在 holder-b 之后写 detail 也被接受，资源端分不出这两个 token=2", || "refused");
    let mut view = lab.view()?;
    let writer = |part: Option<crate::vocabulary::StoredPart>| part.map_or("absent".into(), |p| p.writer);
    t.check_eq_shown(
        "资源端：fence_floor；被接受的写入的 token；summary 与 detail 的写入者",
        "2; [2, 2, 2]; holder-b, holder-a".to_owned(),
        format!(
            "{}; {:?}; {}, {}",
            view.floor(SCOPE)?,
            view.accepted_tokens(SCOPE)?,
            writer(view.part(SCOPE, PART_SUMMARY)?),
            writer(view.part(SCOPE, PART_DETAIL)?)
        ),
    );
    Ok(())
}

/// The synchronous timeline: first the price (without its standby, an
/// acquire waits; cancelled, it returns its grant anyway), then the same
/// failover as above, which now keeps the token.
fn synchronous(lab: &Lab, t: &mut Transcript, pair: &FailoverPair) -> Result<()> {
    let base_backup = replication::build(pair, Mode::Sync)?;
    t.note(format!(
        "（二）同步复制：重建备库（pg_basebackup 用时 {:.1}ms），主库 synchronous_standby_names = '{}'，synchronous_commit = {SYNCHRONOUS_COMMIT}",
        ms(base_backup),
        replication::synchronous_standby_names(pair)
    ));
    t.check_eq_shown("主库 pg_stat_replication 中备库的 state/sync_state", "streaming/sync".to_owned(), replication::walsender_state(pair)?);
    let (primary, standby) = (pair.primary().endpoint(), pair.standby().endpoint());
    let mut leases = LeaseStore::connect_to(&primary, "lab")?;
    let mut on_primary = LeaseStore::connect_to(&primary, "lab observer")?;
    let mut on_standby = LeaseStore::connect_to(&standby, "lab observer")?;
    let x = acquire(&mut leases, "holder-x", TTL)?;
    leases.release(&x)?;
    t.check_eq_shown("holder-x 获取 token=1 并释放；备库回放之后读到同一行", "holder-x/1 released".to_owned(), replayed(&mut on_standby, "holder-x/1 released")?);

    // The price: the standby is gone, and a commit has nobody to wait for.
    let (mut primary_view, _) = cut(t, pair)?;
    let (c, notices) = acquire_without_standby(t, &primary, &mut primary_view, &mut on_primary, &mut on_standby)?;
    t.check_eq_shown("取消之后，holder-c 的获取照常返回（不是错误），带着授予", "token=2".to_owned(), format!("token={}", token_of(&c)));
    t.note(format!("客户端同时收到服务器的通知：{}", if notices.is_empty() { "（没有）".to_owned() } else { notices.join("\n") }));
    t.check_eq(
        "取消只结束了等待：事务已在主库本地提交，不回滚，也不保证已复制（WARNING，不是 ERROR）",
        CANCELLED_SYNC_WAIT.to_owned(),
        notices.join("\n"),
    );
    t.check_eq_shown(
        "取消之后读两台服务器：主库 | 备库上的租约行（这个 token 只在主库）",
        "holder-c/2 held | holder-x/1 released".to_owned(),
        format!("{} | {}", state(on_primary.row(LEASE)?), state(on_standby.row(LEASE)?)),
    );
    let c = c.ok_or("holder-c's acquire returned no grant")?;
    replication::mend_standby(pair, "streaming/sync")?;
    t.note("恢复：备库的 primary_conninfo 复原（ALTER SYSTEM RESET）并 pg_reload_conf()；它重新连上主库，补上缺的 WAL");
    t.check_eq_shown(
        "备库上的租约行；主库 pg_stat_replication 中备库的 state/sync_state",
        "holder-c/2 held; streaming/sync".to_owned(),
        format!("{}; {}", replayed(&mut on_standby, "holder-c/2 held")?, replication::walsender_state(pair)?),
    );
    let mut c_leases = LeaseStore::connect_to(&primary, "holder-c")?;
    t.check_eq("holder-c 释放", true, c_leases.release(&c)?);
    // By design: the timed acquires are the measurement.
    let median = poll::designed(|| median_acquire_ms(&mut leases, TTL))?;
    t.figure("sync_acquire_median_ms", median);
    t.note(format!("同步复制（{SYNCHRONOUS_COMMIT}）下，主库上一次获取的延迟中位数（{SAMPLES} 次）：{median:.1}ms"));

    // The same failover as in the asynchronous timeline.
    let a = acquire(&mut leases, "holder-a", CRASH_TTL)?;
    t.check_eq_shown("holder-a 在主库获取", 3, a.token);
    t.check_eq_shown("获取一返回就读备库（不等待、不重试）：备库已回放这次提交", "holder-a/3 held".to_owned(), state(on_standby.row(LEASE)?));
    let mut a_store = lab.store(FenceMode::FencedScope, "holder-a")?;
    t.check_eq("holder-a 以 token=3 写入 summary 被接受", true, a_store.write(&part_write(&a, PART_SUMMARY, "rows=500(A)"))?);
    fail_over(t, pair)?;
    t.check_eq_shown("提升后的租约行：holder-a 的获取随切换保留下来", "holder-a/3 held".to_owned(), state(on_standby.row(LEASE)?));
    let mut b_leases = LeaseStore::connect_to(&standby, "holder-b")?;
    let refused = b_leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?;
    t.check_eq_shown("holder-b 在提升后的服务器上获取被拒：holder-a 仍持有", "none".to_owned(), token_of(&refused));
    let mut a_leases = LeaseStore::connect_to(&standby, "holder-a")?;
    t.check_eq("holder-a 改连提升后的服务器，释放租约", true, a_leases.release(&a)?);
    let b = acquire(&mut b_leases, "holder-b", TTL)?;
    t.check_eq_shown("holder-b 获取：token 继续递增，没有重复发出", 4, b.token);
    let mut b_store = lab.store(FenceMode::FencedScope, "holder-b")?;
    t.check_eq("holder-b 以 token=4 写入 summary 被接受", true, b_store.write(&part_write(&b, PART_SUMMARY, "rows=501(B)"))?);
    t.check_eq("holder-a 的 token=3 写入 detail 被拒绝", false, a_store.write(&part_write(&a, PART_DETAIL, "rows=500(A)"))?);
    Ok(())
}

// ANCHOR: without_standby
/// With the standby cut off, holder-c's acquire is a commit with nobody to
/// confirm it: shown waiting in `pg_stat_activity`, then cancelled. Returns
/// what the client got back: the acquire's result and the server's notices.
fn acquire_without_standby(
    t: &mut Transcript,
    primary: &Endpoint,
    primary_view: &mut ReplicationView,
    on_primary: &mut LeaseStore,
    on_standby: &mut LeaseStore,
) -> Result<(Option<Grant>, Vec<String>)> {
    let mut c_leases = LeaseStore::connect_to(primary, "holder-c")?;
    let pid = c_leases.backend_pid()?;
    std::thread::scope(|s| {
        let acquiring = s.spawn(move || {
            let grant = c_leases.acquire(LEASE, "holder-c", CRASH_TTL, margin(CRASH_TTL));
            (grant, c_leases.take_notices())
        });
        let waited = watch_the_wait(t, pid, primary_view, on_primary, on_standby, &acquiring);
        // Whatever was seen, the wait ends here, so that the thread can be
        // joined: a cancel, and if that did not end it, the session.
        let _ = primary_view.cancel(pid);
        if !poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::Error>(acquiring.is_finished())).unwrap_or(false) {
            let _ = ReplicationView::connect(primary).and_then(|mut view| view.terminate(pid));
        }
        let (grant, notices) = acquiring.join().map_err(|_| "holder-c's acquire panicked")?;
        require(waited?, "holder-c's acquire did not wait for the standby: the primary does not commit synchronously")?;
        t.note("取消：pg_cancel_backend(holder-c 的后端进程)，相当于客户端程序按下 Ctrl-C 或语句超时");
        Ok((grant?, notices?))
    })
}

/// Waits (with a bound) until holder-c's session waits for its standby, and
/// shows the wait from both servers; `true` when it waited all along.
fn watch_the_wait<T>(
    t: &mut Transcript,
    pid: i32,
    primary_view: &mut ReplicationView,
    on_primary: &mut LeaseStore,
    on_standby: &mut LeaseStore,
    acquiring: &std::thread::ScopedJoinHandle<T>,
) -> Result<bool> {
    let mut seen = None;
    // By design: the experiment waits for the commit's wait to show.
    poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            seen = primary_view.wait_event(pid)?;
            Ok(seen.as_deref() == Some(SYNC_REP) || acquiring.is_finished())
        })
    })?;
    let waiting = if acquiring.is_finished() { "已经返回，没有等待".to_owned() } else { seen.unwrap_or_else(|| "none".into()) };
    if !t.check_eq_shown("备库断开后，holder-c 的获取没有返回：它的会话在主库 pg_stat_activity 中等待", SYNC_REP.to_owned(), waiting) {
        return Ok(false);
    }
    t.check_eq_shown(
        "等待期间读两台服务器：主库 | 备库上的租约行（提交已写入主库 WAL，但别的会话还看不到它）",
        "holder-x/1 released | holder-x/1 released".to_owned(),
        format!("{} | {}", state(on_primary.row(LEASE)?), state(on_standby.row(LEASE)?)),
    );
    let again = primary_view.wait_event(pid)?.unwrap_or_else(|| "none".into());
    Ok(t.check_eq("读完之后它仍在等待：这种等待没有时限，只有备库回来或取消才能结束它", SYNC_REP.to_owned(), again) && !acquiring.is_finished())
}
// ANCHOR_END: without_standby

// ANCHOR: fail_over
/// The failover: the primary crashes, the standby is promoted and checked
/// out of recovery on both servers' word.
fn fail_over(t: &mut Transcript, pair: &FailoverPair) -> Result<()> {
    pair.crash_primary()?;
    let promote = pair.promote_standby()?;
    t.note(format!(
        "故障切换：主库 pg_ctl stop -m immediate（所有服务器进程立即退出，不做检查点）；备库 pg_ctl promote，用时 {:.1}ms；客户端改连提升后的服务器",
        ms(promote)
    ));
    t.check_eq("主库已停止（pg_ctl status）", false, pair.primary().pg_ctl_status()?);
    t.check_eq_shown("提升后备库的 pg_is_in_recovery()", false, ReplicationView::connect(&pair.standby().endpoint())?.in_recovery()?);
    Ok(())
}
// ANCHOR_END: fail_over

/// Cuts the standby's link (see [`replication::cut_standby`]) and checks on
/// both servers that it is gone; returns the two observers.
fn cut(t: &mut Transcript, pair: &FailoverPair) -> Result<(ReplicationView, ReplicationView)> {
    replication::cut_standby(pair)?;
    t.note("故障注入：备库的 primary_conninfo 改为一个不存在的地址并 pg_reload_conf()：它的 WAL 接收进程退出，之后每次重连都失败");
    let mut primary_view = ReplicationView::connect(&pair.primary().endpoint())?;
    let mut standby_view = ReplicationView::connect(&pair.standby().endpoint())?;
    t.check_eq("主库上已没有为备库服务的 walsender（pg_stat_replication）", 0, primary_view.walsenders(pair.standby().name())?);
    t.check_eq("备库上已没有 WAL 接收进程（pg_stat_wal_receiver）", 0, standby_view.wal_receivers()?);
    Ok((primary_view, standby_view))
}

/// The lease row as `holder/token state`, the form the transcript compares.
fn state(row: Option<LeaseRow>) -> String {
    LeaseRow::brief(row.as_ref())
}


