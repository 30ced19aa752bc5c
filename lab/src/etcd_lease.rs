//! The lease service over etcd: the same three operations as [`crate::lease`]
//! (acquire, renew, release), on the three-member cluster `etcd-26`, through
//! etcd's v3 JSON gateway.
//!
//! A holding is an etcd *lease* (a TTL kept by the cluster) with one *key*
//! attached to it, `/lab26/lease/<name>`, whose value is the holder. The key
//! exists exactly while the lease lives: when the lease expires or is
//! revoked, etcd deletes the key in the same raft entry. The fencing token is
//! the key's **create revision**: etcd's revision is one counter for the
//! whole cluster, raised by every write and kept in the replicated log, so a
//! key created later has a larger create revision, whichever member led when
//! it was written and however many leaders died in between. Renewals do not
//! touch the key, so the token stays for one continuous holding (I2), as a
//! PostgreSQL token does. It is an `i64`, like `Grant::token`, so the same
//! resource fence judges both.
//!
//! Which clock decides: only the etcd *leader's* (its monotonic clock, in
//! its lessor). The leader starts a lease's countdown when it applies the
//! grant or a keep-alive; every 500 ms it looks for expired leases and
//! proposes their revocation through raft; the revocation is what deletes
//! the key. So the key disappears between TTL and about TTL + 0.5 s after
//! the last renewal the leader handled. A new leader does not know the old
//! one's countdowns: it restarts every lease at its full TTL plus an
//! election timeout. Both effects only make a holding *longer* than the
//! holder counted. The holder's local deadline counts from its own send
//! time, before the leader's countdown starts, so it never ends later than
//! etcd's expiry (clock rate differences aside, which the margin absorbs);
//! and the resource's fence relies on none of this, only on the token.
//!
//! TTLs are whole seconds in etcd; etcd raises a TTL below its minimum
//! ([`crate::cluster::etcd::MIN_TTL`]) and never lowers one.

use crate::etcd_client::{b64, code, unb64, Gateway, Leader};
use crate::etcd_client::reply;
use crate::error::{Result, ResultExt};
use crate::lease::{check_ttl, Grant, LeaseService};
use crate::{cluster, poll};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Where the lock keys live: `/lab26/lease/report-job`.
pub const KEY_PREFIX: &str = "/lab26/lease/";

/// The lock key of lease `name`.
pub fn key(name: &str) -> String {
    format!("{KEY_PREFIX}{name}")
}

// ANCHOR: grant_request
/// `POST /v3/lease/grant`: a new etcd lease of `ttl` seconds, no key yet.
///
/// Goes through raft (a follower forwards it to the leader). The countdown
/// starts when the leader applies it, by the leader's clock: after this
/// request left the holder, which is why the local deadline counts from the
/// send. A lease with no key holds nothing: if the txn below never comes
/// (the holder dies, the call fails), it simply expires.
pub fn grant_request(ttl: Duration) -> Value {
    json!({ "TTL": ttl.as_secs().to_string() })
}
// ANCHOR_END: grant_request

// ANCHOR: acquire_txn
/// `POST /v3/kv/txn`: creates the lock key, with the lease attached, only
/// if no key exists; answers with the key either way.
///
/// - compare: the key's `create_revision` is 0, which is how etcd describes
///   a key that does not exist. A txn is one raft entry applied atomically
///   at one revision: of two acquirers, exactly one compare sees no key.
///   A key whose lease expired is gone once the revocation is applied; an
///   expired lease whose revocation is not applied yet still holds its key,
///   so the next acquire waits for etcd to act, never for a clock.
/// - success: put the key (value: the holder) with the lease attached, then
///   read it back in the same txn: its `create_revision` is this txn's
///   revision, the fencing token.
/// - failure: read the key: who holds it, and under which lease. If that is
///   our own lease, an earlier attempt of this same txn committed and only
///   its answer was lost (a member died mid-request): the holding is ours.
pub fn acquire_txn(key: &str, holder: &str, lease_id: i64) -> Value {
    let key = b64(key);
    json!({
        "compare": [{ "key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
        "success": [
            { "request_put": { "key": key, "value": b64(holder), "lease": lease_id.to_string() } },
            { "request_range": { "key": key } }
        ],
        "failure": [{ "request_range": { "key": key } }]
    })
}
// ANCHOR_END: acquire_txn

// ANCHOR: keepalive_request
/// `POST /v3/lease/keepalive`: one keep-alive of the lease.
///
/// The leader (a follower forwards it) restarts the lease's countdown at its
/// full TTL, by the leader's clock, when it handles the request: after the
/// send. The answer's TTL is 0 when the lease is not found: revoked, or
/// expired, even if the revocation is not applied yet (etcd refuses to renew
/// an expired lease). The holding is then over for good: the key is gone or
/// going, and only a new acquire, with a new token, brings it back. The key
/// is not touched, so its create revision (the token) stays.
pub fn keepalive_request(lease_id: i64) -> Value {
    json!({ "ID": lease_id.to_string() })
}
// ANCHOR_END: keepalive_request

// ANCHOR: revoke_request
/// `POST /v3/lease/revoke`: ends the lease and deletes every key attached to
/// it, in one raft entry: the next acquire's compare sees no key at once.
/// The delete is a write, so the revision rises: the next token is still
/// larger than every token issued before. NotFound: the lease had already
/// expired or been revoked.
pub fn revoke_request(lease_id: i64) -> Value {
    json!({ "ID": lease_id.to_string() })
}
// ANCHOR_END: revoke_request

/// `POST /v3/kv/range`: the lock key. Linearizable (etcd's default): the
/// member first confirms with the leader that it has applied everything
/// committed before the read, so a key shown here was not already deleted
/// by a committed revocation. The header's revision is the cluster's
/// current revision.
pub fn range_request(key: &str) -> Value {
    json!({ "key": b64(key) })
}

/// `POST /v3/lease/timetolive`: the lease's remaining seconds, truncated,
/// from the leader's lessor (a follower forwards it); -1 once it is gone.
pub fn timetolive_request(lease_id: i64) -> Value {
    json!({ "ID": lease_id.to_string() })
}

// ANCHOR: etcd_grant
/// One continuous holding of an etcd lease, as the holder sees it.
#[derive(Clone, Debug)]
pub struct EtcdGrant {
    /// The holding as for PostgreSQL: the token is the key's create
    /// revision; `ttl` is the TTL asked for (etcd may grant more, never
    /// less), and the local deadline counts from the send time.
    pub grant: Grant,
    /// The etcd lease the key is attached to: what keep-alive and revoke name.
    pub lease_id: i64,
}
// ANCHOR_END: etcd_grant

impl AsRef<Grant> for EtcdGrant {
    fn as_ref(&self) -> &Grant {
        &self.grant
    }
}

impl AsMut<Grant> for EtcdGrant {
    fn as_mut(&mut self) -> &mut Grant {
        &mut self.grant
    }
}

/// The lock key as etcd shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EtcdHolding {
    /// The key's value: who holds it.
    pub holder: String,
    /// The key's create revision: the holder's token.
    pub token: i64,
    /// The lease the key is attached to.
    pub lease_id: i64,
}

/// What the parent sees of a lease on etcd at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct EtcdLeaseView {
    /// The current holding; `None` when the key does not exist (free).
    pub holding: Option<EtcdHolding>,
    /// The cluster's current revision: the next token will be larger.
    pub revision: i64,
    /// The leader etcd agrees on, if any.
    pub leader: Option<Leader>,
}

/// The lease service on the etcd cluster.
#[derive(Debug)]
pub struct EtcdLeaseStore {
    /// The members' client ports; every call tries the next member when one is down.
    gateway: Gateway,
}

impl EtcdLeaseStore {
    /// The lease service over `gateway`.
    pub fn new(gateway: Gateway) -> EtcdLeaseStore {
        EtcdLeaseStore { gateway }
    }

    /// The lease service on the lab's cluster (`LAB_ETCD_PORT_BASE`), for a
    /// process that does not own the cluster (a holder).
    pub fn locate() -> Result<EtcdLeaseStore> {
        Ok(EtcdLeaseStore::new(cluster::etcd::gateway()?))
    }

    /// The lease service on the lab's cluster through these members only
    /// (a holder on a host of the lab's network, F19).
    pub fn at(members: Vec<std::net::SocketAddr>) -> Result<EtcdLeaseStore> {
        Ok(EtcdLeaseStore::new(cluster::etcd::gateway_at(members)?))
    }

    /// The client side, e.g. for the leader.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    // ANCHOR: acquire
    /// Acquires `name` for `holder`: `Some(grant)` with a new token, or `None`
    /// while someone else holds it. `ttl` must be whole seconds.
    pub fn acquire(&self, name: &str, holder: &str, ttl: Duration, margin: Duration) -> Result<Option<EtcdGrant>> {
        check_ttl(ttl, margin)?;
        if ttl.subsec_nanos() != 0 {
            return Err(format!("etcd lease TTLs are whole seconds, not {ttl:?}").into());
        }
        // A holder's first call logs in, and etcd checks the password with
        // bcrypt: on a busy machine that alone can outlast the margin. It is
        // no part of the lease, so it is done before the clock is read.
        self.gateway.log_in()?;
        // Read the monotonic clock before the grant leaves: the leader's
        // countdown starts later (see grant_request).
        let sent = Instant::now();
        let granted: reply::Granted = self.gateway.call_as("/v3/lease/grant", &grant_request(ttl))?.context("granting an etcd lease")?;
        let lease_id = granted.id;
        let txn: reply::Txn = match self.gateway.call_as("/v3/kv/txn", &acquire_txn(&key(name), holder, lease_id)) {
            Ok(answer) => answer.context("the acquire txn")?,
            Err(e) => {
                // Unknown whether the txn committed: revoke the lease, so that
                // a key it might have created goes with it. The txn's error
                // is the one to report; a failed revoke is said beside it.
                if let Err(revoke) = self.revoke(lease_id) {
                    eprintln!("lab: revoking lease {lease_id} after a failed acquire txn: {}", crate::error::chain(revoke.as_ref()));
                }
                return Err(e).context("the acquire txn");
            }
        };
        // One read in either branch: the last response holds the key.
        let kv = txn
            .responses
            .last()
            .and_then(|r| r.response_range.as_ref())
            .and_then(|range| range.kvs.first())
            .ok_or_else(|| format!("the acquire txn answered without the key: {txn:?}"))?;
        let ours = kv.lease == Some(lease_id);
        if txn.succeeded && !ours {
            return Err(format!("the acquire txn put the key but reads another lease: {txn:?}").into());
        }
        if !ours {
            // Someone else holds it: give back the lease we took, at once,
            // rather than leave it to expire.
            self.revoke(lease_id)?;
            return Ok(None);
        }
        Ok(Some(EtcdGrant {
            grant: Grant {
                name: name.to_owned(),
                holder: holder.to_owned(),
                token: kv.create_revision,
                ttl,
                margin,
                local_deadline: Grant::deadline_for(sent, ttl, margin),
            },
            lease_id,
        }))
    }
    // ANCHOR_END: acquire

    // ANCHOR: renew
    /// Keeps the lease alive once; on success moves the local deadline.
    /// `false` means the holding is over: stop working, acquire again.
    pub fn renew(&self, grant: &mut EtcdGrant) -> Result<bool> {
        let sent = Instant::now();
        let renewed = match self.gateway.call_as::<reply::KeptAlive>("/v3/lease/keepalive", &keepalive_request(grant.lease_id))? {
            Ok(answer) if answer.id != grant.lease_id => {
                return Err(format!("a keep-alive of lease {} was answered for lease {}", grant.lease_id, answer.id).into())
            }
            // No TTL: etcd found no such lease (see keepalive_request).
            Ok(answer) => answer.ttl.is_some_and(|ttl| ttl > 0),
            Err(status) if status.code == code::NOT_FOUND => false,
            Err(status) => return Err(status).context("keep-alive"),
        };
        if renewed {
            let g = &mut grant.grant;
            g.local_deadline = Grant::deadline_for(sent, g.ttl, g.margin);
        }
        Ok(renewed)
    }
    // ANCHOR_END: renew

    /// Releases the holding: revokes its lease, and the key goes with it.
    /// `false` when the lease was already gone (expired, or revoked before;
    /// also when an earlier attempt of this revoke committed and only its
    /// answer was lost).
    pub fn release(&self, grant: &EtcdGrant) -> Result<bool> {
        self.revoke(grant.lease_id)
    }

    fn revoke(&self, lease_id: i64) -> Result<bool> {
        match self.gateway.call("/v3/lease/revoke", &revoke_request(lease_id))? {
            Ok(_) => Ok(true),
            Err(status) if status.code == code::NOT_FOUND => Ok(false),
            Err(status) => Err(status).context("revoking an etcd lease"),
        }
    }

    /// The lock key and the cluster's revision, in one linearizable read.
    pub fn holding(&self, name: &str) -> Result<(Option<EtcdHolding>, i64)> {
        let answer: reply::Range = self.gateway.call_as("/v3/kv/range", &range_request(&key(name)))?.context("reading the lock key")?;
        let holding = match answer.kvs.first() {
            Some(kv) => Some(EtcdHolding {
                holder: unb64(&kv.value)?,
                token: kv.create_revision,
                lease_id: kv.lease.ok_or_else(|| format!("the lock key of {name} has no lease attached: it would never expire"))?,
            }),
            None => None,
        };
        Ok((holding, answer.header.revision))
    }

    /// The parent's view: the holding, the cluster's revision, the leader.
    pub fn view(&self, name: &str) -> Result<EtcdLeaseView> {
        let (holding, revision) = self.holding(name)?;
        Ok(EtcdLeaseView { holding, revision, leader: self.gateway.leader()? })
    }

    /// The lease's remaining TTL by the leader's lessor, truncated to whole
    /// seconds; `None` once it is gone.
    pub fn remaining_ttl(&self, lease_id: i64) -> Result<Option<Duration>> {
        let answer: reply::TimeToLive =
            self.gateway.call_as("/v3/lease/timetolive", &timetolive_request(lease_id))?.context("asking a lease's time to live")?;
        // Left out: 0 seconds left.
        let ttl = answer.ttl.unwrap_or(0);
        Ok((ttl >= 0).then(|| Duration::from_secs(ttl as u64)))
    }

    // ANCHOR: wait_until_free
    /// Waits until the lock key is gone, within [`poll::BOUND`]: expiry
    /// happens on the leader's clock and shows as the revocation's delete,
    /// so the only honest way to wait for it is to ask etcd.
    pub fn wait_until_free(&self, name: &str) -> Result<()> {
        // Waited by design, like the expiry by the database clock (see poll::designed).
        let free = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::Error>(self.holding(name)?.0.is_none())))?;
        if !free {
            return Err(format!("etcd still holds the key of lease {name} after {:?}", poll::BOUND).into());
        }
        Ok(())
    }
    // ANCHOR_END: wait_until_free
}

/// The holder's lease on etcd: the same operations, the same contract.
impl LeaseService for EtcdLeaseStore {
    type Holding = EtcdGrant;

    fn acquire(&mut self, name: &str, holder: &str, ttl: Duration, margin: Duration) -> Result<Option<EtcdGrant>> {
        EtcdLeaseStore::acquire(self, name, holder, ttl, margin)
    }

    fn renew(&mut self, grant: &mut EtcdGrant) -> Result<bool> {
        EtcdLeaseStore::renew(self, grant)
    }

    fn release(&mut self, grant: &EtcdGrant) -> Result<bool> {
        EtcdLeaseStore::release(self, grant)
    }

    /// A gateway of its own over the same members: a request is one
    /// connection anyway, but each gateway remembers the member that
    /// answered last, and the renewer's should not move the holder's.
    fn another_session(&self, _who: &str) -> Result<EtcdLeaseStore> {
        Ok(EtcdLeaseStore::new(self.gateway.another()))
    }

    /// A call no member answered within the gateway's bound (a holder cut
    /// off from every member it knows, or from all but a member without a
    /// leader: F19's old leader).
    fn unanswered(err: &(dyn std::error::Error + 'static)) -> bool {
        crate::etcd_client::is_unanswered(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The acquire compares the key's existence and attaches the lease to the put.
    #[test]
    fn the_acquire_txn_creates_only_a_missing_key() {
        let txn = acquire_txn("/lab26/lease/report-job", "holder-a", 7);
        let compare = &txn["compare"][0];
        assert_eq!((compare["target"].as_str(), compare["create_revision"].as_str()), (Some("CREATE"), Some("0")));
        let put = &txn["success"][0]["request_put"];
        assert_eq!((put["lease"].as_str(), put["value"].as_str()), (Some("7"), Some("aG9sZGVyLWE=")));
        assert_eq!(unb64(put["key"].as_str().unwrap()).unwrap(), "/lab26/lease/report-job");
        // Both branches end with a read of the key: the token, or the holder.
        assert!(txn["success"][1]["request_range"].is_object() && txn["failure"][0]["request_range"].is_object());
    }

    /// etcd counts TTLs in whole seconds.
    #[test]
    fn the_grant_asks_for_whole_seconds() {
        assert_eq!(grant_request(Duration::from_secs(2))["TTL"], "2");
    }
}
