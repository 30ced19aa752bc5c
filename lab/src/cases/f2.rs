//! F2 — the edges of the lease: an equal token may write again, a renewal
//! after expiry is refused even when nobody took over, and `now()` inside a
//! long transaction is the transaction's start time, so a lease statement
//! run there judges expiry by a stale clock. The article stops at the
//! acquire path; this case also builds the renewal path it only reasons about.

use super::common::{acquire, part_write, require};
use super::{Case, Lab};
use crate::error::Result;
use crate::lease::{self, Grant, LeaseStore};
use crate::params::{ms, LEASE, PART_SUMMARY, SCOPE, SHORT_TTL, TTL};
use crate::poll;
use crate::resource::FenceMode;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F2", title: |_| "边界：相等 token 重写、过期后续租、长事务里的 now()".into(), run };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let a = equal_token_rewrite(lab, t, &mut leases)?;
    renew_after_expiry(t, &mut leases, a)?;
    let mut long = lab.leases("long transaction")?;
    acquire_in_long_transaction(t, &mut leases, &mut long)?;
    renew_in_long_transaction(t, &mut leases, &mut long)
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
/// and only a new acquire, with a new token, brings the holder back.
fn renew_after_expiry(t: &mut Transcript, leases: &mut LeaseStore, mut a: Grant) -> Result<()> {
    leases.wait_until_expired(LEASE)?;
    t.check(!a.within_deadline(), "数据库判定过期时，holder-a 的本地截止时间已经过去（起点取在请求发出前，且提前 margin）");
    t.check_eq("过期后续租被拒，即使无人接手", false, leases.renew(&mut a)?);
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("被拒的续租没有改动租约行", format!("holder-a token={} expired", a.token), describe(&row));
    let again = acquire(leases, "holder-a", SHORT_TTL)?;
    t.check_eq_shown("过期后 holder-a 只能重新获取，得到新 token", a.token + 1, again.token);
    leases.release(&again)?;
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
    t.check(moved, "clock_timestamp() 已越过 now()");
    let expired_outside = !leases.row(LEASE)?.ok_or("the lease row vanished")?.held;
    // The very statement LeaseStore::acquire runs, inside the transaction.
    let inside = tx.query(lease::ACQUIRE, &[&LEASE, &"holder-c", &lease::millis(SHORT_TTL)])?;
    t.check(expired_outside && inside.is_empty(), "自动提交连接已判定过期，但长事务内的获取仍按事务开始时间判为未过期而拒绝");
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
/// Once somebody has taken over, the token condition still refuses it.
fn renew_in_long_transaction(t: &mut Transcript, leases: &mut LeaseStore, long: &mut LeaseStore) -> Result<()> {
    let c = acquire(leases, "holder-c", TTL)?;
    t.check_eq("自动提交模式下获取成功，token=4", 4, c.token);
    // Start the transaction in the second half of the lease (asked of the
    // database clock), so that its now() + ttl lies well past the expiry.
    wait_for_db(leases, "SELECT expires_at - now() < $2::float8 * interval '1 millisecond' FROM lease WHERE name = $1", lease::millis(TTL) / 2.0)?;
    let mut tx = long.client().transaction()?;
    let valid_at_start: bool = tx.query_one("SELECT expires_at > now() FROM lease WHERE name = $1", &[&LEASE])?.get(0);
    leases.wait_until_expired(LEASE)?;
    let past_deadline = !c.within_deadline();
    let stale = tx.execute(lease::RENEW, &[&lease::millis(TTL), &LEASE, &"holder-c", &c.token])?;
    tx.commit()?;
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check(valid_at_start, "长事务在 holder-c 的租约后半段开始，此刻租约仍有效");
    t.check(past_deadline, "续租发出时 holder-c 的本地截止时间早已过去：按约定它本该停手");
    t.exposes(
        stale == 1 && row.held && row.holder == "holder-c",
        "数据库时钟下已过期（尚无人接手）的租约，被长事务里的续租续活了：expires_at > now() 按事务开始时间判断，I1 的判断时刻退回到事务开始",
    );

    leases.wait_until_expired(LEASE)?;
    let mut tx = long.client().transaction()?;
    tx.query_one("SELECT now()", &[])?;
    let d = acquire(leases, "holder-d", SHORT_TTL)?;
    leases.wait_until_expired(LEASE)?;
    let e = acquire(leases, "holder-e", SHORT_TTL)?;
    require(e.token == d.token + 1, "holder-e did not take over from holder-d")?;
    let superseded = tx.execute(lease::RENEW, &[&lease::millis(SHORT_TTL), &LEASE, &"holder-d", &d.token])?;
    tx.commit()?;
    t.check_eq("已有人接手（token=6）时，长事务里 holder-d（token=5）的续租因 token 条件失败，I3 不受影响", 0, superseded);
    Ok(())
}

/// Polls a yes/no question to the database until it answers yes.
fn wait_for_db(leases: &mut LeaseStore, question: &str, arg: f64) -> Result<()> {
    let yes = poll::poll_until(poll::BOUND, poll::EVERY, || {
        Ok::<_, crate::Error>(leases.client().query_one(question, &[&LEASE, &arg])?.get::<_, bool>(0))
    })?;
    require(yes, &format!("the database never answered yes to: {question}"))
}
// ANCHOR_END: renew_in_long_transaction
