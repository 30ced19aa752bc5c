//! The lease service: three operations, each a single SQL statement run on an
//! autocommit connection to `lease26`.
//!
//! Autocommit matters: `now()` is the start time of the *transaction*, so in
//! autocommit it is the time of the statement itself. Inside a long
//! transaction the same statements would judge expiry by a stale clock (F2).
//! Only the database clock decides expiry; a holder's own clock is used only
//! for its local deadline, which can make it stop early but never makes it
//! valid longer.
//!
//! [`LeaseService`] is the lease as a holder uses it, whichever store keeps
//! it: [`LeaseStore`] here, or the etcd backend (`etcd_lease.rs`), which
//! implements it too. The holder process and its renewer are written once,
//! against the trait.

use crate::cluster::{credentials, Endpoint};
use crate::error::{Result, ResultExt};
use crate::{db, poll, stats};
use postgres::Client;
use std::time::{Duration, Instant};

// ANCHOR: acquire_sql
/// Grants the lease when it is free, expired or released, and issues the next
/// fencing token in the same statement.
///
/// - No row yet: the INSERT creates it with token 1.
/// - A row exists: ON CONFLICT takes the row lock, then the UPDATE branch runs
///   only if the row has expired by the database clock (`l.expires_at <=
///   now()`; a released row holds `-infinity`, so it counts as expired).
///   Concurrent acquirers queue on that row lock, and each one re-evaluates the
///   WHERE against the row the previous one committed, so exactly one wins.
/// - RETURNING yields a row only when a row was inserted or updated: a
///   returned token *is* the grant, and nothing else advances the token.
pub const ACQUIRE: &str = "
    INSERT INTO lease AS l (name, holder, token, expires_at)
    VALUES ($1, $2, 1, now() + make_interval(secs => $3::float8 / 1000))
    ON CONFLICT (name) DO UPDATE
       SET holder = EXCLUDED.holder,
           token = l.token + 1,
           expires_at = EXCLUDED.expires_at
     WHERE l.expires_at <= now()
    RETURNING l.token";
// ANCHOR_END: acquire_sql

// ANCHOR: renew_sql
/// Extends the holding identified by (name, token) while it is still valid.
///
/// `name` and `token` pick out one continuous holding (I2: a token is never
/// reused); `holder` guards against a caller passing the wrong grant;
/// `expires_at > now()` refuses a renewal after expiry even when nobody took
/// over: an expired holder must acquire again and get a new token, so that one
/// token always means one unbroken holding. The token is not touched.
pub const RENEW: &str = "
    UPDATE lease SET expires_at = now() + make_interval(secs => $1::float8 / 1000)
     WHERE name = $2 AND holder = $3 AND token = $4 AND expires_at > now()";
// ANCHOR_END: renew_sql

// ANCHOR: release_sql
/// Ends a holding early. `-infinity` is "expired" for every later `now()`, so
/// the next acquire succeeds at once; the token stays, so the next holder's
/// token is still larger than every token issued before.
pub const RELEASE: &str = "
    UPDATE lease SET expires_at = '-infinity'
     WHERE name = $1 AND holder = $2 AND token = $3";
// ANCHOR_END: release_sql

// ANCHOR: grant
/// One continuous holding of a lease, as the holder sees it.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The lease's name, e.g. `report-job`.
    pub name: String,
    /// Who holds it, e.g. `holder-a`.
    pub holder: String,
    /// The fencing token issued by the acquire; renewals keep it.
    pub token: i64,
    /// How long each acquire or renewal extends the lease, by the database clock.
    pub ttl: Duration,
    /// How much earlier than the server's expiry the holder stops by itself.
    pub margin: Duration,
    /// When the holder must stop starting new writes, by its monotonic clock.
    pub local_deadline: Instant,
}

impl Grant {
    /// The local deadline for a request *sent* at `sent`.
    ///
    /// The server computes `expires_at` from its `now()`, which is necessarily
    /// later than the moment the request left the client; counting from the
    /// send time therefore gives a deadline no later than the server's expiry
    /// (clock rate differences aside, which the margin must absorb).
    pub fn deadline_for(sent: Instant, ttl: Duration, margin: Duration) -> Instant {
        sent + ttl.saturating_sub(margin)
    }

    /// Whether the local deadline is still ahead.
    ///
    /// Passing this check says nothing about the moment of the next write: a
    /// pause between this check and the write is invisible to the holder (F4).
    pub fn within_deadline(&self) -> bool {
        Instant::now() < self.local_deadline
    }
}
// ANCHOR_END: grant

/// The lease row as the database sees it at one `now()`.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRow {
    /// The current or last holder.
    pub holder: String,
    /// The last token issued.
    pub token: i64,
    /// `expires_at` as PostgreSQL prints it.
    pub expires_at: String,
    /// `expires_at > now()`: someone holds the lease right now.
    pub held: bool,
    /// `expires_at = '-infinity'`: the last holder released it.
    pub released: bool,
    /// `expires_at` as seconds since the epoch (`-inf` once released), to
    /// compare two readings.
    pub expires_epoch: f64,
}

impl LeaseRow {
    /// `released`, `held` or `expired`, at the `now()` of the reading.
    pub fn state(&self) -> &'static str {
        if self.released {
            "released"
        } else if self.held {
            "held"
        } else {
            "expired"
        }
    }

    /// A row as the failover and partition cases compare it,
    /// `holder-a/2 held`; `free` when there is no row.
    pub fn brief(row: Option<&LeaseRow>) -> String {
        row.map_or("free".into(), |r| format!("{}/{} {}", r.holder, r.token, r.state()))
    }
}

impl std::fmt::Display for LeaseRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {} (expires_at {})", self.holder, self.token, self.state(), self.expires_at)
    }
}

/// The lease service, on one autocommit connection to `lease26`.
pub struct LeaseStore {
    /// Autocommit by construction: this type never opens a transaction.
    client: db::Session,
    /// The server it is connected to: a second session (the renewer's)
    /// goes to the same one.
    server: Endpoint,
    /// What the server said besides results: F14's cancelled synchronous
    /// commit answers with a row *and* a WARNING.
    notices: db::Notices,
}

impl LeaseStore {
    /// Connects to `lease26` on the lab's cluster; `who` names the session
    /// in `pg_stat_activity`.
    pub fn connect(who: &str) -> Result<LeaseStore> {
        LeaseStore::connect_to(&Endpoint::lab()?, who)
    }

    /// Connects to `lease26` on `server`: F14's lease store lives on a
    /// primary and, after the failover, on the promoted standby.
    pub fn connect_to(server: &Endpoint, who: &str) -> Result<LeaseStore> {
        let notices = db::Notices::default();
        let client = db::session(server, credentials::ROLE, db::LEASE_DB, who, Some(notices.clone()))?;
        Ok(LeaseStore { client, server: server.clone(), notices })
    }

    /// The server's notices on this session since the last call, oldest
    /// first. A notice that follows a statement's result (the WARNING of a
    /// commit, which the server sends after the row) reaches the driver only
    /// when it reads the session again: one empty round trip first.
    pub fn take_notices(&mut self) -> Result<Vec<String>> {
        self.client.simple_query("").context("reading the session's notices")?;
        Ok(std::mem::take(&mut *self.notices.lock()))
    }

    // ANCHOR: acquire
    /// Acquires `name` for `holder`: `Some(grant)` with a new token, or `None`
    /// while someone else holds it.
    pub fn acquire(
        &mut self,
        name: &str,
        holder: &str,
        ttl: Duration,
        margin: Duration,
    ) -> Result<Option<Grant>> {
        check_ttl(ttl, margin)?;
        // Read the monotonic clock before the request leaves: see deadline_for.
        let sent = Instant::now();
        let rows = self
            .client
            .query(ACQUIRE, &[&name, &holder, &stats::ms(ttl)])
            .context("acquire")?;
        Ok(rows.first().map(|row| Grant {
            name: name.to_owned(),
            holder: holder.to_owned(),
            token: row.get(0),
            ttl,
            margin,
            local_deadline: Grant::deadline_for(sent, ttl, margin),
        }))
    }
    // ANCHOR_END: acquire

    // ANCHOR: renew
    /// Extends `grant` by its ttl; on success moves its local deadline too.
    /// `false` means the holding is over: stop working, acquire again.
    pub fn renew(&mut self, grant: &mut Grant) -> Result<bool> {
        let sent = Instant::now();
        let renewed = self
            .client
            .execute(RENEW, &[&stats::ms(grant.ttl), &grant.name, &grant.holder, &grant.token])
            .context("renew")?
            == 1;
        if renewed {
            grant.local_deadline = Grant::deadline_for(sent, grant.ttl, grant.margin);
        }
        Ok(renewed)
    }
    // ANCHOR_END: renew

    /// Releases `grant`; `false` when the holding had already been taken over.
    pub fn release(&mut self, grant: &Grant) -> Result<bool> {
        let released = self
            .client
            .execute(RELEASE, &[&grant.name, &grant.holder, &grant.token])
            .context("release")?;
        Ok(released == 1)
    }

    /// The lease row, judged by this statement's `now()`; `None` when the
    /// lease was never acquired (free).
    pub fn row(&mut self, name: &str) -> Result<Option<LeaseRow>> {
        // Autocommit, so now() is the time of this very statement.
        let row = self
            .client
            .query_opt(
                "SELECT holder, token, expires_at::text, expires_at > now(), expires_at = '-infinity',
                        extract(epoch FROM expires_at)::float8
                   FROM lease WHERE name = $1",
                &[&name],
            )
            .context("reading the lease row")?;
        Ok(row.map(|r| LeaseRow {
            holder: r.get(0),
            token: r.get(1),
            expires_at: r.get(2),
            held: r.get(3),
            released: r.get(4),
            expires_epoch: r.get(5),
        }))
    }

    /// How long the lease has left by the server's real clock, in
    /// milliseconds (negative once expired): `clock_timestamp()`, not
    /// `now()`, so the answer is the time of this very reading.
    pub fn remaining_ms(&mut self, name: &str) -> Result<f64> {
        let row = self
            .client
            .query_one("SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 * 1000 FROM lease WHERE name = $1", &[&name])
            .context("reading the lease's remaining time")?;
        Ok(row.get(0))
    }

    /// The server process of this store's session, to find it in `pg_stat_activity`.
    pub fn backend_pid(&mut self) -> Result<i32> {
        Ok(self.client.query_one("SELECT pg_backend_pid()", &[])?.get(0))
    }

    // ANCHOR: wait_until_expired
    /// Waits until the lease has expired by the database clock.
    ///
    /// Expiry has no write of its own: it happens when `now()` passes
    /// `expires_at`. So the only honest way to wait for it is to ask the
    /// database, not to sleep for "about a ttl".
    pub fn wait_until_expired(&mut self, name: &str) -> Result<()> {
        // By design: the experiment waits for time to pass on the server.
        let expired = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::Error>(!self.row(name)?.is_some_and(|r| r.held))))?;
        if !expired {
            return Err(format!("lease {name} still held by the database clock after {:?}", poll::BOUND).into());
        }
        Ok(())
    }
    // ANCHOR_END: wait_until_expired

    /// The underlying connection, for a case that must show a misuse (F2
    /// runs the acquire statement inside a long transaction).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

// ANCHOR: lease_service
/// The lease as a holder uses it, on either store: [`LeaseStore`] (one SQL
/// statement per operation, expiry by the database clock) or etcd's
/// `EtcdLeaseStore` (an etcd lease with one key, expiry by the leader's
/// lessor, the token the key's create revision).
///
/// The contract is what the holder and the fence rest on, and nothing
/// more: an acquire returns a holding whose token is larger than every
/// token issued before (I2); a renewal keeps the token and moves the local
/// deadline only when it succeeds; a refused renewal means the holding is
/// over for good; the local deadline counts from the moment the request was
/// sent. How each store decides expiry stays inside it, and the resource
/// sees only the token, so it needs no second implementation.
pub trait LeaseService: Sized + Send + 'static {
    /// One continuous holding: its [`Grant`] (token, local deadline), plus
    /// whatever the store needs to renew and release it (etcd: the lease id).
    type Holding: AsRef<Grant> + AsMut<Grant> + Clone + Send + 'static;

    /// Acquires `name` for `holder`: `Some` with a new token, `None` while
    /// someone else holds it.
    fn acquire(&mut self, name: &str, holder: &str, ttl: Duration, margin: Duration) -> Result<Option<Self::Holding>>;

    /// Extends the holding by its ttl; `false`: the holding is over.
    fn renew(&mut self, holding: &mut Self::Holding) -> Result<bool>;

    /// Ends the holding early; `false` when it was already over.
    fn release(&mut self, holding: &Self::Holding) -> Result<bool>;

    /// A second session on the same store, named `who`, for the renewal
    /// thread: a PostgreSQL session serves one statement at a time, and the
    /// renewer must not queue behind the holder's own requests.
    fn another_session(&self, who: &str) -> Result<Self>;

    /// Whether `err` is the store not answering at all (no reply within the
    /// client's bound: unreachable, or unable to serve), rather than an
    /// answer or a failure of the client: a renewer tries again at its next
    /// period. A PostgreSQL session has no such bound (a renewal behind a
    /// partition waits in the kernel's retransmissions until the path comes
    /// back), so nothing it returns is one.
    fn unanswered(_err: &(dyn std::error::Error + 'static)) -> bool {
        false
    }
}
// ANCHOR_END: lease_service

impl LeaseService for LeaseStore {
    type Holding = Grant;

    fn acquire(&mut self, name: &str, holder: &str, ttl: Duration, margin: Duration) -> Result<Option<Grant>> {
        LeaseStore::acquire(self, name, holder, ttl, margin)
    }

    fn renew(&mut self, grant: &mut Grant) -> Result<bool> {
        LeaseStore::renew(self, grant)
    }

    fn release(&mut self, grant: &Grant) -> Result<bool> {
        LeaseStore::release(self, grant)
    }

    fn another_session(&self, who: &str) -> Result<LeaseStore> {
        LeaseStore::connect_to(&self.server, who)
    }
}

/// A PostgreSQL holding is its grant, nothing more.
impl AsRef<Grant> for Grant {
    fn as_ref(&self) -> &Grant {
        self
    }
}

impl AsMut<Grant> for Grant {
    fn as_mut(&mut self) -> &mut Grant {
        self
    }
}

/// Refuses a ttl and margin that would leave the holder no time to work.
pub fn check_ttl(ttl: Duration, margin: Duration) -> Result<()> {
    if ttl.is_zero() || margin >= ttl {
        return Err(format!("a lease needs ttl > margin >= 0 (ttl={ttl:?}, margin={margin:?})").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local deadline counts from the send time and stops `margin` early.
    #[test]
    fn deadline_counts_from_send_minus_margin() {
        let sent = Instant::now();
        let deadline = Grant::deadline_for(sent, Duration::from_millis(1500), Duration::from_millis(300));
        assert_eq!(deadline - sent, Duration::from_millis(1200));
    }

    /// A deadline in the past means the holder must stop; one ahead lets it work.
    #[test]
    fn within_deadline_compares_with_the_monotonic_clock() {
        let mut grant = Grant {
            name: "report-job".into(),
            holder: "holder-a".into(),
            token: 1,
            ttl: Duration::from_millis(1500),
            margin: Duration::from_millis(300),
            local_deadline: Instant::now() + Duration::from_secs(60),
        };
        assert!(grant.within_deadline());
        grant.local_deadline = Instant::now() - Duration::from_millis(1);
        assert!(!grant.within_deadline());
    }

    /// A margin as large as the ttl would leave no time to work: refused.
    #[test]
    fn margin_must_be_below_ttl() {
        assert!(check_ttl(Duration::from_millis(300), Duration::from_millis(300)).is_err());
        assert!(check_ttl(Duration::ZERO, Duration::ZERO).is_err());
        assert!(check_ttl(Duration::from_millis(300), Duration::from_millis(299)).is_ok());
    }

    /// The statements take milliseconds as a float, including fractions.
    #[test]
    fn ttl_is_passed_in_milliseconds() {
        assert_eq!(stats::ms(Duration::from_millis(1500)), 1500.0);
        assert_eq!(stats::ms(Duration::from_micros(2500)), 2.5);
    }
}
