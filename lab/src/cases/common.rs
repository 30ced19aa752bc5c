//! Steps that several cases share.

use super::Lab;
use crate::etcd_client::Leader;
use crate::db;
use crate::holder::{HolderArgs, Step, Steps};
use crate::vocabulary::LeaseStoreKind;
use crate::holder_guard::{ending, exit_text, HolderGuard};
use crate::error::{Result, ResultExt};
use crate::latch::{Latch, BOUND};
use crate::lease::{Grant, LeaseRow, LeaseStore};
use crate::params::{margin, ETCD_RENEW_EVERY, ETCD_TTL, LEASE, SCOPE, SHORT_TTL, TTL};
use crate::poll;
use crate::stats::ms;
use crate::resource::{PartWrite, ResourceStore, ResourceView};
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use std::sync::Arc;
use std::time::Duration;

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
    leases.wait_until_expired(LEASE)?;
    let b = acquire(&mut leases, "holder-b", TTL)?;
    t.check_eq("A 持 token=1 且租约已过期，B 获取 token=2", "1/2".to_owned(), format!("{}/{}", a.token, b.token));
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

/// Renews and releases `grant`, which the case expects both to refuse, and
/// reads the `watched` lease's row before and after: returns the expected
/// and the actual outcome, for one `check_eq` line.
pub fn renew_and_release_refused(leases: &mut LeaseStore, grant: &Grant, watched: &str) -> Result<(String, String)> {
    let before = leases.row(watched)?.ok_or("the watched lease has no row")?;
    let mut grant = grant.clone();
    let renewed = leases.renew(&mut grant)?;
    let released = leases.release(&grant)?;
    let after = leases.row(watched)?.ok_or("the watched lease's row vanished")?;
    Ok((format!("renew false, release false, {before}"), format!("renew {renewed}, release {released}, {after}")))
}

/// Waits until a standby's lease row reads `wanted` (`holder-x/1
/// released`: replication is asynchronous, or the standby has just come
/// back); returns what it read last, so the check line shows the
/// standby's own answer.
pub fn replayed(on_standby: &mut LeaseStore, wanted: &str) -> Result<String> {
    let mut seen = String::new();
    // By design: the experiment waits for the standby's replay.
    poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            seen = LeaseRow::brief(on_standby.row(LEASE)?.as_ref());
            Ok(seen == wanted)
        })
    })?;
    Ok(seen)
}

/// The Unix socket of the lab's cluster, for a delay proxy to forward to
/// (the cluster listens on nothing else).
pub fn lab_socket() -> Result<std::path::PathBuf> {
    crate::cluster::Endpoint::lab()?.socket_file().ok_or_else(|| "the lab's cluster has no Unix socket".into())
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
/// (`Lock`, or what it was instead). It stops early once `returned` says
/// the write the process runs has come back: a write that did not wait
/// will never queue (a broken mode), and saying so at once is the answer.
pub fn wait_for_lock_wait(view: &mut ResourceView, pid: i32, returned: impl Fn() -> bool) -> Result<String> {
    let mut seen = String::new();
    poll::poll_until(poll::BOUND, poll::EVERY, || {
        let gone = returned();
        seen = view.wait_event_type(pid)?.unwrap_or_else(|| "none".into());
        Ok::<_, crate::Error>(seen == "Lock" || gone)
    })?;
    Ok(seen)
}

/// Installs a gap hook on `store` that says "I am in the gap" (the first
/// latch) and waits to be let go (the second). In the fenced write the gap
/// lies after the floor UPDATE, with the transaction open and the floor row
/// locked; in check-then-write, after the check. F6 and F8 force their
/// interleavings with it.
pub fn pause_in_gap(store: ResourceStore) -> (ResourceStore, Arc<Latch>, Arc<Latch>) {
    let (inside, go) = (Arc::new(Latch::new()), Arc::new(Latch::new()));
    let (signal, wait) = (Arc::clone(&inside), Arc::clone(&go));
    let store = store.with_gap(move || {
        signal.open();
        // Bounded: if the case fails before opening it, the writer goes on.
        wait.wait(BOUND);
    });
    (store, inside, go)
}

// ANCHOR: part_hold
/// Takes a part's key with an upsert that stays uncommitted: a part not yet
/// written gets an uncommitted row, one already written an uncommitted new
/// version and its row lock. An upsert of the same (scope, part) by another
/// session can then neither insert nor update until this transaction ends,
/// so it waits for it, whatever its own statement did before. The content
/// and the token 0 never become visible: the hold ends with a rollback.
const HOLD_PART: &str = "
    INSERT INTO report_part (scope, part, content, writer, token)
    VALUES ($1, $2, '(held)', 'lab part holder', 0)
    ON CONFLICT (scope, part) DO UPDATE SET content = EXCLUDED.content, writer = EXCLUDED.writer, token = EXCLUDED.token";
// ANCHOR_END: part_hold

/// A session that holds one part's key in an open transaction (see HOLD_PART).
pub struct PartHold {
    /// Inside an explicit transaction from `begin` until `release`.
    client: crate::db::Session,
}

impl PartHold {
    /// Opens a transaction and takes the key of `part` in `SCOPE`.
    pub fn begin(part: &str) -> Result<PartHold> {
        let mut client = db::connect(db::RES_DB, "lab part holder")?;
        client.batch_execute("BEGIN").context("opening the part holder's transaction")?;
        client.execute(HOLD_PART, &[&SCOPE, &part]).context("holding the part's key")?;
        Ok(PartHold { client })
    }

    /// Rolls the hold back: the waiting upsert goes on, as if nobody had been there.
    pub fn release(mut self) -> Result<()> {
        self.client.batch_execute("ROLLBACK").context("releasing the part holder's hold")
    }
}

/// How a case stops a scope-fenced write right after its fence: the floor
/// advanced, its row lock held, nothing committed.
///
/// FENCED_SCOPE stops in its gap hook ([`pause_in_gap`]). FENCED_SCOPE_CTE
/// and FENCED_SCOPE_SHARED are one statement, with no place for a hook: a
/// [`PartHold`] takes the part's key first, so the statement's upsert waits
/// on it after the fence has run (the `fence` CTE, or the scope's advisory
/// lock and the floor's read, and its raise). The write is then stopped inside its statement by a real
/// lock, the way a competing session would stop it, and `go` ends the hold.
pub enum AfterFence {
    /// Stopped in the gap hook, inside the fence before the commit.
    Gap {
        /// Opened by the writer once it is in the gap.
        inside: Arc<Latch>,
        /// Lets it go on.
        go: Arc<Latch>,
    },
    /// Stopped inside its statement by a held part key.
    Held(Box<PartHold>),
}

impl AfterFence {
    /// Prepares to stop `store`'s next write of `part` (in `store`'s mode,
    /// one of the scope fences) right after its fence.
    pub fn arm(mode: FenceMode, store: ResourceStore, part: &str) -> Result<(ResourceStore, AfterFence)> {
        match mode {
            FenceMode::FencedScope => {
                let (store, inside, go) = pause_in_gap(store);
                Ok((store, AfterFence::Gap { inside, go }))
            }
            FenceMode::FencedScopeCte | FenceMode::FencedScopeShared => Ok((store, AfterFence::Held(Box::new(PartHold::begin(part)?)))),
            other => Err(format!("{other} has no fence to stop after").into()),
        }
    }

    /// Waits until the writer (server process `pid`) has stopped; returns
    /// who blocks it when a held key stops it (`None` for the gap hook).
    pub fn wait_stopped(&self, view: &mut ResourceView, pid: i32) -> Result<Option<String>> {
        match self {
            AfterFence::Gap { inside, .. } => {
                require(inside.wait(BOUND), "the first writer never reached the gap")?;
                Ok(None)
            }
            AfterFence::Held(_) => {
                let waited = wait_for_lock_wait(view, pid, || false)?;
                require(waited == "Lock", "the first writer never queued on the held part")?;
                Ok(Some(view.blocked_by(pid)?))
            }
        }
    }

    /// Lets the writer go on.
    pub fn go(self) -> Result<()> {
        match self {
            AfterFence::Gap { go, .. } => {
                go.open();
                Ok(())
            }
            AfterFence::Held(hold) => hold.release(),
        }
    }
}


// ANCHOR: lead
/// How much earlier than the server's expiry a grant's local deadline lies,
/// as far as one reading can tell.
pub struct Lead {
    /// A lower bound on expiry − local deadline, in milliseconds.
    pub at_least_ms: f64,
    /// How much larger it may really be: the reading's round trip.
    pub uncertainty_ms: f64,
}

impl Lead {
    /// Whether the local deadline can lie at least `margin` before the expiry.
    pub fn covers(&self, margin: std::time::Duration) -> bool {
        self.at_least_ms + self.uncertainty_ms >= ms(margin)
    }
}
// ANCHOR_END: lead

impl Lead {
    /// What a failed check saw, in words that survive the redaction of the
    /// measured numbers: whether the local deadline falls after the expiry,
    /// or before it by less than the margin.
    pub fn describe(&self, margin: std::time::Duration) -> String {
        let most = self.at_least_ms + self.uncertainty_ms;
        let verdict = if most < 0.0 {
            "本地截止时间晚于 expires_at".to_owned()
        } else {
            format!("本地截止时间早于 expires_at，但不足 margin={}ms", margin.as_millis())
        };
        format!("{verdict}: lead ≥ {:.1}ms, +{:.1}ms uncertainty", self.at_least_ms, self.uncertainty_ms)
    }
}

// ANCHOR: deadline_lead
/// Reads the lease's remaining time from the server's real clock and
/// compares it with `grant`'s local deadline on this process's monotonic
/// clock. The server read its clock at some moment between `t1` and `t2`,
/// so its expiry lies at least `t1 + remaining` on our clock; both clocks
/// belong to one machine and tick at one rate over these few milliseconds.
/// A reading whose round trip is longer than `LEAD_ROUND_TRIP` is taken
/// again: a round trip as long as the margin could hide which side of the
/// expiry the deadline falls on (on a busy machine, once in a suite run).
pub fn deadline_lead(leases: &mut LeaseStore, grant: &Grant) -> Result<Lead> {
    for _ in 0..LEAD_READINGS {
        let t1 = std::time::Instant::now();
        let remaining = leases.remaining_ms(&grant.name)?;
        let t2 = std::time::Instant::now();
        if t2 - t1 > LEAD_ROUND_TRIP {
            continue;
        }
        let local_remaining = if grant.local_deadline >= t1 {
            ms(grant.local_deadline - t1)
        } else {
            -ms(t1 - grant.local_deadline)
        };
        return Ok(Lead { at_least_ms: remaining - local_remaining, uncertainty_ms: ms(t2 - t1) });
    }
    Err(format!("no reading of the lease's remaining time came back within {LEAD_ROUND_TRIP:?} in {LEAD_READINGS} tries").into())
}

/// The longest round trip a lead's reading may take: well under the margin
/// of the grants it reads (`margin(TTL)`, 300 ms), so that a lead a margin
/// away from the one judged cannot look like it (a unit test holds this).
pub const LEAD_ROUND_TRIP: Duration = Duration::from_millis(40);

/// How many readings `deadline_lead` takes at most before it gives up.
pub const LEAD_READINGS: usize = 100;
// ANCHOR_END: deadline_lead

/// A holder's parameters on etcd (F16, F19): its backend, and etcd's ttl,
/// keep-alive period and margin (see `params.rs`).
pub fn on_etcd(args: HolderArgs) -> HolderArgs {
    HolderArgs {
        lease_backend: LeaseStoreKind::Etcd,
        ttl_ms: ms(ETCD_TTL) as u64,
        renew_ms: ms(ETCD_RENEW_EVERY) as u64,
        margin_ms: ms(margin(ETCD_TTL)) as u64,
        ..args
    }
}

/// An etcd leader as the transcript shows it (redacted: which member wins
/// an election, its id and its term vary from run to run).
pub fn leader_text(l: &Leader) -> String {
    format!("leader={} id={:016x} term={}", l.name, l.id, l.term)
}

/// Protocol lines as one comparable text, with a clean exit.
pub fn lines_of<const N: usize>(steps: [Step; N]) -> String {
    ending(&Steps::from(steps), "exit 0")
}

/// Everything a holder prints until it exits, and how it exited.
pub fn rest(holder: &mut HolderGuard) -> Result<String> {
    let (steps, status) = holder.rest_of_output()?;
    Ok(ending(&steps, &exit_text(status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lead's reading cannot blur the margin it judges: its round trip
    /// stays under a quarter of it.
    #[test]
    fn a_lead_reading_is_much_shorter_than_the_margin() {
        assert!(LEAD_ROUND_TRIP * 4 <= margin(TTL), "{LEAD_ROUND_TRIP:?} against {:?}", margin(TTL));
    }
}
