//! F2 — the edges of the lease: an equal token may write again; a renewal
//! after expiry is refused even when nobody took over, and so is one with a
//! stale token of the same holder; the renewer stops at its first refusal;
//! `now()` inside a long transaction is the transaction's start time, so a
//! lease statement run there judges expiry by a stale clock; and a response
//! that arrives late cannot move the local deadline past the expiry. The
//! article stops at the acquire path; this case also builds the renewal
//! path it only reasons about.

use super::common::{acquire, deadline_lead, part_write, renew_and_release_refused, require};
use super::{Case, Lab};
use crate::error::Result;
use crate::lease::{self, Grant, LeaseStore};
use crate::params::{margin, LEASE, PART_SUMMARY, RENEW_EVERY, SCOPE, SHORT_TTL, TTL};
use crate::stats::ms;
use crate::poll;
use crate::renewer::Renewer;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use postgres::types::ToSql;

/// The case.
pub const CASE: Case = Case { id: "F2", title: |_| "边界：相等 token 重写、过期后续租、长事务里的 now()、迟到的响应".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let a = equal_token_rewrite(lab, t, &mut leases)?;
    renew_after_expiry(t, &mut leases, a)?;
    let mut long = lab.leases("long transaction")?;
    acquire_in_long_transaction(t, &mut leases, &mut long)?;
    renew_in_long_transaction(t, &mut leases, &mut long)?;
    slow_response(lab, t, &mut leases)
}

/// One grant, two writes with the same token: both accepted.
fn equal_token_rewrite(lab: &Lab, t: &mut Transcript, leases: &mut LeaseStore) -> Result<Grant> {
    let mut report = lab.store(FenceMode::FencedScope, "holder-a")?;
    let a = acquire(leases, "holder-a", SHORT_TTL)?;
    t.check_eq_shown(format!("holder-a 获取租约（TTL={}ms）", ms(SHORT_TTL)), 1, a.token);
    let first = report.write(&part_write(&a, PART_SUMMARY, "rows=100(A)"))?;
    let again = report.write(&part_write(&a, PART_SUMMARY, "rows=100(A) 重算"))?;
    t.check_eq("同一 token 的第二次写入也被接受（floor 比较用 <=，一次持有可写多次）", "true true".to_owned(), format!("{first} {again}"));
    t.check_eq_shown("相等 token 不推进 fence_floor", 1, lab.view()?.floor(SCOPE)?);
    Ok(a)
}

// ANCHOR: renew_after_expiry
/// The lease expires with nobody taking over: the renewal is still refused,
/// the renewer stops at its first refusal, and only a new acquire, with a
/// new token, brings the holder back; its old grant then renews and
/// releases nothing.
fn renew_after_expiry(t: &mut Transcript, leases: &mut LeaseStore, mut a: Grant) -> Result<()> {
    leases.wait_until_expired(LEASE)?;
    // Where the local deadline stands is judged on holder-f's late response
    // (slow_response), where a deadline counted from the wrong moment must
    // show: this acquire answered at once, and how soon is the machine's.
    let deadline = a.local_deadline;
    t.check_eq("过期后续租被拒，即使无人接手", false, leases.renew(&mut a)?);
    t.check(a.local_deadline == deadline, "被拒的续租没有推迟 holder-a 的本地截止时间", || {
        if a.local_deadline > deadline { "the local deadline moved ahead" } else { "the local deadline moved back" }
    });
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("被拒的续租没有改动租约行", format!("holder-a token={} expired", a.token), describe(&row));

    // The renewer on the expired grant: its first renewal, one period after
    // the start, is refused; it must stop there. A bound of ten periods
    // leaves it nine to spare.
    let renewer = Renewer::start(&*leases, &a, RENEW_EVERY)?;
    let stopped = poll::designed(|| poll::poll_until(RENEW_EVERY * 10, poll::EVERY, || Ok::<_, crate::Error>(renewer.is_finished())))?;
    let state = renewer.stop();
    t.check_eq(
        "后台续租线程的第一次续租即被拒：它报告租约已丢失，并自行停止",
        // Whether it renewed, not how often: a count would vary with timing.
        "lost=true stopped=true renewed=false error=none".to_owned(),
        format!("lost={} stopped={stopped} renewed={} error={}", state.lost, state.renewals > 0, state.error.as_deref().unwrap_or("none")),
    );

    // Expired by the database's clock before the new acquire. Here it is
    // already (nothing renewed it), so this returns at once; with a renewal
    // that ignores expiry (the mutation renew-after-expiry) the renewer's
    // last renewal may still hold it for up to one SHORT_TTL, and the broken
    // run must read the same whatever the machine's load.
    leases.wait_until_expired(LEASE)?;
    // TTL, not SHORT_TTL: the new holding must stay valid while its old
    // grant is tried, so that only the token condition can refuse it.
    let again = acquire(leases, "holder-a", TTL)?;
    t.check_eq_shown("过期后 holder-a 只能重新获取，得到新 token", a.token + 1, again.token);
    let (expected, actual) = renew_and_release_refused(leases, &a, LEASE)?;
    t.check_eq(
        format!("holder-a 用旧授予（token={}）续租和释放都被拒（token 条件），它新的持有（token={}）不受影响", a.token, again.token),
        expected,
        actual,
    );
    t.check_eq("holder-a 用新授予释放成功", true, leases.release(&again)?);
    Ok(())
}
// ANCHOR_END: renew_after_expiry

fn describe(row: &lease::LeaseRow) -> String {
    format!("{} token={} {}", row.holder, row.token, if row.held { "held" } else { "expired" })
}

// ANCHOR: acquire_in_long_transaction
/// The acquire statement, misused inside a long transaction, judges expiry
/// by the transaction's start time.
fn acquire_in_long_transaction(t: &mut Transcript, leases: &mut LeaseStore, long: &mut LeaseStore) -> Result<()> {
    let mut tx = long.client().transaction()?;
    // The transaction's first statement fixes its now(). It runs *before*
    // holder-b acquires, so that now() is earlier than b's expires_at however
    // slowly the machine runs.
    let started: String = tx.query_one("SELECT now()::text", &[])?.get(0);
    let b = acquire(leases, "holder-b", SHORT_TTL)?;
    t.check_eq_shown(format!("长事务开始后 holder-b 获取租约（TTL={}ms）", ms(SHORT_TTL)), 3, b.token);
    leases.wait_until_expired(LEASE)?;
    let later: String = tx.query_one("SELECT now()::text", &[])?.get(0);
    t.check_eq_shown("同一事务内 now() 不随时间前进", started, later);
    let moved: bool = tx.query_one("SELECT clock_timestamp() > now()", &[])?.get(0);
    t.check(moved, "clock_timestamp() 已越过 now()", || "clock_timestamp() <= now()");
    let expired_outside = !leases.row(LEASE)?.ok_or("the lease row vanished")?.held;
    // The very statement LeaseStore::acquire runs, inside the transaction.
    let inside = tx.query(lease::ACQUIRE, &[&LEASE, &"holder-c", &ms(SHORT_TTL)])?;
    t.check(expired_outside && inside.is_empty(), "自动提交连接已判定过期，但长事务内的获取仍按事务开始时间判为未过期而拒绝", || {
        format!("expired outside: {expired_outside}, rows returned inside: {}", inside.len())
    });
    // ON CONFLICT locked the row although it did not update it: end the
    // transaction before anyone else acquires.
    tx.rollback()?;
    Ok(())
}
// ANCHOR_END: acquire_in_long_transaction

// ANCHOR: renew_in_long_transaction
/// The renewal path, which the article only reasons about: inside a long
/// transaction `expires_at > now()` compares with the transaction's start,
/// so a lease that has expired by the database clock is renewed — and, when
/// the transaction started late in the lease, really comes back to life.
/// Once the holder has acquired again, with a new token, the token
/// condition alone still refuses its old grant.
fn renew_in_long_transaction(t: &mut Transcript, leases: &mut LeaseStore, long: &mut LeaseStore) -> Result<()> {
    let c = acquire(leases, "holder-c", TTL)?;
    t.check_eq("自动提交模式下获取成功，token=4", 4, c.token);
    // Start the transaction in the second half of the lease (asked of the
    // database clock), so that its now() + ttl lies well past the expiry.
    let half = ms(TTL) / 2.0;
    wait_for_yes(leases, "SELECT expires_at - now() < $2::float8 * interval '1 millisecond' FROM lease WHERE name = $1", &[&LEASE, &half])?;
    let mut tx = long.client().transaction()?;
    let valid_at_start: bool = tx.query_one("SELECT expires_at > now() FROM lease WHERE name = $1", &[&LEASE])?.get(0);
    leases.wait_until_expired(LEASE)?;
    let past_deadline = !c.within_deadline();
    let stale = tx.execute(lease::RENEW, &[&ms(TTL), &LEASE, &"holder-c", &c.token])?;
    tx.commit()?;
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check(valid_at_start, "长事务在 holder-c 的租约后半段开始，此刻租约仍有效", || "expires_at <= now() at the transaction's start");
    t.check(past_deadline, "续租发出时 holder-c 的本地截止时间早已过去：按约定它本该停手", || "the local deadline still ahead");
    t.exposes(
        stale == 1 && row.held && row.holder == "holder-c",
        "数据库时钟下已过期（尚无人接手）的租约，被长事务里的续租续活了：expires_at > now() 按事务开始时间判断，I1 的判断时刻退回到事务开始",
        || format!("{stale} row renewed, lease {row}"),
    );

    // The same holder acquires again: its old grant differs from the row
    // only in the token, and the transaction's stale now() lets the expiry
    // condition pass, so only the token condition can refuse the renewal.
    leases.wait_until_expired(LEASE)?;
    let mut tx = long.client().transaction()?;
    tx.query_one("SELECT now()", &[])?;
    let d = acquire(leases, "holder-d", SHORT_TTL)?;
    leases.wait_until_expired(LEASE)?;
    let again = acquire(leases, "holder-d", TTL)?;
    let superseded = tx.execute(lease::RENEW, &[&ms(SHORT_TTL), &LEASE, &"holder-d", &d.token])?;
    tx.commit()?;
    t.check_eq(
        "holder-d 重新获取（token=6）后，长事务里它旧的授予（token=5）续租失败：只有 token 条件能拒绝它，旧的持有没有被续活",
        "5/6 renewed 0".to_owned(),
        format!("{}/{} renewed {superseded}", d.token, again.token),
    );
    t.check_eq("holder-d 用新授予释放成功", true, leases.release(&again)?);
    Ok(())
}
// ANCHOR_END: renew_in_long_transaction

// ANCHOR: slow_response
/// A response that arrives late. Another session holds the lease row's lock
/// while holder-f acquires; its statement queues on the lock, and the lab
/// lets go only once the server's clock says it has waited twice the margin.
/// How long holder-f's acquire queues on the row lock before its answer
/// comes: twice the margin, so a deadline counted from the response would
/// land past the expiry by more than the margin could absorb.
pub fn slow_response_wait() -> std::time::Duration {
    margin(TTL) * 2
}

/// The server computes `expires_at` from the statement's start; the holder
/// counts its local deadline from the moment it *sent* the request, so the
/// late response cannot carry the deadline past the expiry.
fn slow_response(lab: &Lab, t: &mut Transcript, leases: &mut LeaseStore) -> Result<()> {
    let mut blocker = lab.leases("row lock holder")?;
    let mut holder_f = lab.leases("holder-f")?;
    let f_pid = holder_f.backend_pid()?;
    let wait = slow_response_wait();
    let mut tx = blocker.client().transaction()?;
    // The row lock that acquire's ON CONFLICT must take; kept to commit.
    tx.query_one("SELECT 1 FROM lease WHERE name = $1 FOR UPDATE", &[&LEASE])?;
    let f = std::thread::scope(|s| -> Result<Grant> {
        let acquiring = s.spawn(|| holder_f.acquire(LEASE, "holder-f", TTL, margin(TTL)));
        // now() of holder-f's statement is its transaction's start (autocommit).
        let waited = ms(wait);
        wait_for_yes(
            leases,
            // wait_event_type is NULL while the session runs, and
            // xact_start is NULL while it is idle. The two are not read at
            // one moment: the row's fields come from a copy of the session's
            // status taken once, its wait event from the session itself as
            // the row is made, so a row can say 'Lock' with no transaction
            // yet (`true AND NULL`: NULL, once on a busy machine). coalesce:
            // not yet, never NULL.
            "SELECT coalesce(wait_event_type = 'Lock' AND clock_timestamp() - xact_start > $2::float8 * interval '1 millisecond', false)
               FROM pg_stat_activity WHERE pid = $1",
            &[&f_pid, &waited],
        )?;
        tx.commit()?;
        acquiring.join().map_err(|_| "holder-f's acquire panicked")??.ok_or_else(|| "holder-f could not acquire".into())
    })?;
    let lead = deadline_lead(leases, &f)?;
    t.check(
        lead.covers(margin(TTL)),
        format!(
            "holder-f 的获取在行锁上排队超过 {}ms 才返回：本地截止时间从请求发出时刻起算，仍比 expires_at 早至少 margin={}ms",
            ms(wait),
            ms(margin(TTL))
        ),
        || lead.describe(margin(TTL)),
    );
    // The same order seen at the expiry: once the database judges the lease
    // expired, holder-f's own deadline has passed, however late the
    // response came (counted from the response, it would still be 300 ms ahead).
    // Seen by holder-f, and by the server's countdown: a poll that comes
    // back late sees any deadline passed (on a busy machine, a deadline
    // 300 ms after the expiry too), so a reading with a short round trip
    // decides whether the deadline lay after the expiry.
    leases.wait_until_expired(LEASE)?;
    let seen_ahead = f.within_deadline();
    let at_expiry = deadline_lead(leases, &f)?;
    let after_expiry = at_expiry.at_least_ms + at_expiry.uncertainty_ms < 0.0;
    t.check(!seen_ahead && !after_expiry, "数据库判定过期时，holder-f 的本地截止时间已经过去（起点取在请求发出前，且提前 margin）", || "the local deadline still ahead");
    Ok(())
}
// ANCHOR_END: slow_response

/// Polls a yes/no question to the database until it answers yes.
fn wait_for_yes(leases: &mut LeaseStore, question: &str, params: &[&(dyn ToSql + Sync)]) -> Result<()> {
    // By design: each question waits for a moment on the server's clock.
    let yes = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || {
        // try_get: an answer that is not a boolean is an error, not a panic.
        Ok::<_, crate::Error>(leases.client().query_one(question, params)?.try_get::<_, bool>(0)?)
    }))?;
    require(yes, &format!("the database never answered yes to: {question}"))
}
