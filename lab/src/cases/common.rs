//! Names and steps that several cases share.

use crate::error::Result;
use crate::lease::{Grant, LeaseStore};
use crate::report::{PartWrite, ResourceView};
use crate::transcript::Transcript;
use super::Lab;
use std::time::Duration;

/// The lease the report job's instances compete for.
pub const LEASE: &str = "report-job";
/// The fenced scope: one daily report.
pub const SCOPE: &str = "daily-report";
/// The first part of the report.
pub const SUMMARY: &str = "summary";
/// The second part, which F7's newer holder never writes.
pub const DETAIL: &str = "detail";

/// The article's ttl for holders that must stay valid through a case.
pub const TTL: Duration = Duration::from_millis(1500);
/// The article's shortest ttl, for leases a case lets expire.
pub const SHORT_TTL: Duration = Duration::from_millis(300);
/// The bound on waiting for a lease to expire by the database clock.
pub const EXPIRY_BOUND: Duration = Duration::from_secs(20);

/// The local safety margin for `ttl`: a fifth, the article's 300 ms for 1500 ms.
pub fn margin(ttl: Duration) -> Duration {
    ttl / 5
}

/// Acquires a lease that the case expects to be free; refusal is an error.
pub fn acquire(leases: &mut LeaseStore, holder: &str, ttl: Duration) -> Result<Grant> {
    leases
        .acquire(LEASE, holder, ttl, margin(ttl))?
        .ok_or_else(|| format!("{holder} could not acquire {LEASE}, which this case expects to be free").into())
}

/// The usual pair of F6, F7-like cases: holder-a's grant (token 1), already
/// expired by the database clock, and holder-b's (token 2), which took over.
pub fn stale_and_fresh(lab: &Lab, t: &mut Transcript) -> Result<(Grant, Grant)> {
    let mut leases = lab.leases("lab")?;
    let a = acquire(&mut leases, "holder-a", SHORT_TTL)?;
    leases.wait_until_expired(LEASE, EXPIRY_BOUND)?;
    let b = acquire(&mut leases, "holder-b", TTL)?;
    t.expect("A 持 token=1 且租约已过期，B 获取 token=2", "1/2".to_owned(), format!("{}/{}", a.token, b.token));
    Ok((a, b))
}

/// The write of `part` with `grant`'s holder and token.
pub fn part_write<'a>(grant: &'a Grant, part: &'a str, content: &'a str) -> PartWrite<'a> {
    PartWrite { scope: SCOPE, part, content, writer: &grant.holder, token: grant.token }
}

/// An acquire's token for a transcript line, or `none` when it was refused.
pub fn token_of(grant: &Option<Grant>) -> String {
    grant.as_ref().map_or("none".into(), |g| g.token.to_string())
}

/// Ends the case when a step it cannot go on without did not happen.
pub fn require(held: bool, what: &str) -> Result<()> {
    if held {
        Ok(())
    } else {
        Err(format!("cannot go on: {what}").into())
    }
}

/// Waits until the server process `pid` queues for a lock, as
/// `pg_stat_activity` shows it; returns the wait event type last seen
/// (`Lock`, or what it was instead when the bound ran out).
pub fn wait_for_lock_wait(view: &mut ResourceView, pid: i32) -> Result<String> {
    let mut seen = String::new();
    crate::latch::poll_until(crate::latch::BOUND, crate::lease::POLL, || {
        seen = view.wait_event_type(pid)?.unwrap_or_else(|| "none".into());
        Ok::<_, crate::Error>(seen == "Lock")
    })?;
    Ok(seen)
}
