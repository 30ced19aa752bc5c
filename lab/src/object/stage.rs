//! The staged runs of F29–F31: holder A acquires the lease and reads the
//! object, then stops (the case does not call it again until it says so);
//! its lease runs out by the database's clock; holder B acquires and reads.
//! Each holder may claim first. What happens next is each case's own order.

use super::writer::{Guard, Writer};
use super::ObjectStore;
use crate::error::Result;
use crate::lease::LeaseStore;
use crate::params::{margin, LEASE, SHORT_TTL, TTL};
use crate::poll;
use std::time::Duration;

/// The object of F29 and F31: the report.
pub const REPORT: &str = "daily-report";

/// The object of F30: the job's status, which goes from idle to running
/// and back.
pub const STATUS: &str = "job-status";

/// The two holders after the takeover, and the lease store.
pub struct Takeover {
    /// The holder whose lease ran out while it stood still.
    pub a: Writer,
    /// The holder that acquired after it.
    pub b: Writer,
    /// The lease store, for readings by the database's clock.
    pub leases: LeaseStore,
}

/// B's lease: longer than A's, so that it outlasts the lock-delay B waits
/// out in F31 (B never renews).
pub const B_TTL: Duration = TTL;

/// Creates `key` with `body` (after `lab.reset()`), then: A acquires
/// (SHORT_TTL) and reads, claims if `claim_first`; its lease runs out; B
/// acquires (B_TTL), reads, claims if `claim_first`.
pub fn takeover(key: &str, body: &str, guard: Guard, claim_first: bool) -> Result<Takeover> {
    ObjectStore::reset(key, body)?;
    let mut leases = LeaseStore::connect("lab objects")?;
    let a_grant = leases.acquire(LEASE, "holder-a", SHORT_TTL, margin(SHORT_TTL))?.ok_or("holder-a could not acquire a free lease")?;
    let mut a = Writer::start("holder-a", a_grant.token, key, guard)?;
    if claim_first && !a.claim()? {
        return Err("holder-a's claim was refused on an object nobody else had touched".into());
    }
    leases.wait_until_expired(LEASE)?;
    let b_grant = leases.acquire(LEASE, "holder-b", B_TTL, margin(B_TTL))?.ok_or("holder-b could not acquire the expired lease")?;
    let mut b = Writer::start("holder-b", b_grant.token, key, guard)?;
    if claim_first && !b.claim()? {
        return Err("holder-b's claim was refused right after its acquire".into());
    }
    Ok(Takeover { a, b, leases })
}

// ANCHOR: lock_delay
/// How long a holder waits after its acquire before its first write when
/// the resource checks nothing (Chubby's lock-delay, moved from the lock
/// service's grant to the new holder's first write): the old lease's ttl,
/// well inside the new holder's own (B_TTL).
pub const LOCK_DELAY: Duration = SHORT_TTL;

/// Waits, by the database's clock, until LOCK_DELAY has passed since B's
/// lease was granted (its `expires_at` minus B_TTL).
pub fn wait_lock_delay(leases: &mut LeaseStore) -> Result<()> {
    let (ttl_ms, delay_ms) = (B_TTL.as_secs_f64() * 1000.0, LOCK_DELAY.as_secs_f64() * 1000.0);
    let client = leases.client();
    // By design: the lock-delay is the experiment's own wait.
    let waited = poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || {
            let row = client.query_one(
                "SELECT now() >= expires_at - make_interval(secs => $2::float8 / 1000) + make_interval(secs => $3::float8 / 1000) FROM lease WHERE name = $1",
                &[&LEASE, &ttl_ms, &delay_ms],
            )?;
            Ok::<_, crate::Error>(row.get::<_, bool>(0))
        })
    })?;
    if !waited {
        return Err(format!("the lock-delay did not pass by the database clock within {:?}", poll::BOUND).into());
    }
    Ok(())
}
// ANCHOR_END: lock_delay

/// How long after B's grant `writer`'s first accepted write on `key` was
/// recorded, by the database's clock.
pub fn first_write_after_grant(leases: &mut LeaseStore, key: &str, writer: &str) -> Result<Duration> {
    let ttl_ms = B_TTL.as_secs_f64() * 1000.0;
    let row = leases.client().query_one(
        "SELECT extract(epoch FROM expires_at - make_interval(secs => $2::float8 / 1000))::float8 FROM lease WHERE name = $1",
        &[&LEASE, &ttl_ms],
    )?;
    let granted: f64 = row.get(0);
    let mut res = crate::db::connect(crate::db::RES_DB, "lab objects")?;
    let first: Option<f64> = res.query_one("SELECT extract(epoch FROM min(at))::float8 FROM object_attempt WHERE key = $1 AND writer = $2 AND accepted", &[&key, &writer])?.get(0);
    let first = first.ok_or_else(|| format!("{writer} has no accepted write on {key}"))?;
    Ok(Duration::from_secs_f64((first - granted).max(0.0)))
}
