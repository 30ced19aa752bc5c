//! The bug zoo's job queue: a small queue on PostgreSQL, written the way
//! the published ones are (a jobs table, a claim with `FOR UPDATE SKIP
//! LOCKED`, heartbeats, a rescuer, completion, a side effect into a
//! resource), with each lease bug those queues shipped as a switch that
//! puts it back ([`Bug`]).
//!
//! A job queue is a lease store. A claim is a lease on one job; a heartbeat
//! renews it; the rescuer takes back a claim whose lease ran out, as an
//! acquire takes back an expired lease. So the article's rule applies to it
//! whole: with every switch off, each claim issues a token (`job.claim`, +1
//! in the claiming statement) and every write the claim makes carries it —
//! the heartbeat, the completion, the rescuer's take-back, and the side
//! effect, which the resource fences by the same token (scope `job-<id>`).
//!
//! Every operation is recorded in `job_event`, accepted or not, with the
//! incarnation that asked and the one holding the job afterwards: the
//! cases count harm from there and from the resource's `write_attempt`.
//! The queue's own statements never read either.

pub mod bug;
pub mod chaos;
pub mod crates;
pub mod zoo;

pub use bug::Bug;

use crate::db;
use crate::error::{Result, ResultExt};
use crate::poll;
use postgres::Client;
use std::time::{Duration, SystemTime};

/// One claim of one job: the job, the claim's token, and who made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The job claimed.
    pub job: i64,
    /// The claim's token (`job.claim` as the claiming statement set it).
    pub token: i64,
    /// The worker's name, as the queue records it.
    pub worker: String,
    /// The worker process that made the claim (`worker-1#2`: the second
    /// incarnation of worker-1): the lab's observation, not the queue's.
    pub incarnation: String,
}

/// A worker process of the queue: a name (what the queue knows) and an
/// incarnation (which start of that name this is).
#[derive(Clone, Debug)]
pub struct Worker {
    /// The name the queue records, reused when the worker restarts.
    pub name: String,
    /// `name#n`: the n-th start of the worker called `name`.
    pub incarnation: String,
}

impl Worker {
    /// The `n`-th start of the worker called `name`.
    pub fn new(name: &str, n: u32) -> Worker {
        Worker { name: name.to_owned(), incarnation: format!("{name}#{n}") }
    }
}

// ANCHOR: claim_sql
/// Claims the oldest available job. `FOR UPDATE SKIP LOCKED` lets
/// concurrent claimers pass over a row another is claiming instead of
/// queueing on it; `claim + 1` issues the claim's token in the same
/// statement that grants it, so two claims never share a token (unless a
/// rescuer gives one back: the bug token-given-back). The lease runs from
/// the database's `now()`.
const CLAIM: &str = "
    UPDATE job SET state = 'running', worker = $1, claim = claim + 1,
                   started_at = now(), locked_until = now() + make_interval(secs => $2::float8 / 1000),
                   incarnation = $3
     WHERE id = (SELECT id FROM job WHERE state = 'available' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id, claim";
// ANCHOR_END: claim_sql

// ANCHOR: heartbeat_sql
/// Extends the claim's lease, only for the claim that holds the job now:
/// a heartbeat from a superseded claim changes nothing and tells its worker
/// to stop.
const HEARTBEAT: &str = "
    UPDATE job SET locked_until = now() + make_interval(secs => $3::float8 / 1000)
     WHERE id = $1 AND claim = $2 AND state = 'running'";
/// The bug name-as-identity (procrastinate#1518, kubernetes#22775): the
/// claim is found by the worker's name, which a restarted worker reuses.
const HEARTBEAT_BY_NAME: &str = "
    UPDATE job SET locked_until = now() + make_interval(secs => $3::float8 / 1000)
     WHERE id = $1 AND worker = $2 AND state = 'running'";
/// The bug late-heartbeat (aegra#502): the heartbeat extends whatever claim
/// is running now, its own or the one that replaced it.
const HEARTBEAT_ANY: &str = "
    UPDATE job SET locked_until = now() + make_interval(secs => $2::float8 / 1000)
     WHERE id = $1 AND state = 'running'";
// ANCHOR_END: heartbeat_sql

// ANCHOR: complete_sql
/// Marks the job done for the claim that holds it now; a superseded claim's
/// completion is refused.
const COMPLETE: &str = "
    UPDATE job SET state = 'done', done_claim = $2
     WHERE id = $1 AND claim = $2 AND state = 'running'";
/// The bug name-as-identity: the completion is matched by worker name.
const COMPLETE_BY_NAME: &str = "
    UPDATE job SET state = 'done', done_claim = $2
     WHERE id = $1 AND worker = $3 AND state = 'running'";
/// The bug complete-without-claim (pg-boss#555): the completion is matched
/// by the job's id only, whoever holds it now.
const COMPLETE_BY_ID: &str = "
    UPDATE job SET state = 'done', done_claim = $2
     WHERE id = $1";
// ANCHOR_END: complete_sql

// ANCHOR: rescue_sql
/// Takes back every claim whose lease ran out by the database's clock, in
/// one statement: the condition is judged on the row as it is when the
/// statement updates it, so a job completed a moment earlier is not
/// touched. The claim's token stays: the next claim gets a newer one.
const RESCUE: &str = "
    UPDATE job SET state = 'available', worker = NULL
     WHERE state = 'running' AND locked_until < now()
    RETURNING id, claim, locked_until >= now()";
/// The bug rescue-overwrites (river#1302, quartz#107): the expired jobs are
/// selected first, then updated by id, with nothing re-checked.
const RESCUE_SELECT: &str = "SELECT id, claim FROM job WHERE state = 'running' AND locked_until < now() ORDER BY id";
const RESCUE_BY_ID: &str = "UPDATE job SET state = 'available', worker = NULL WHERE id = ANY($1) RETURNING id, claim, locked_until >= now()";
/// The bug token-given-back (temporal#11097):
/// the rescuer hands the attempt back, so the next claim's token equals the
/// superseded one.
const RESCUE_GIVES_BACK: &str = "
    UPDATE job SET state = 'available', worker = NULL, claim = claim - 1
     WHERE state = 'running' AND locked_until < now()
    RETURNING id, claim, locked_until >= now()";
/// The bug elapsed-rescue (hexpm#1825): a job is rescued once it has run
/// longer than a limit, heartbeats or not.
const RESCUE_ELAPSED: &str = "
    UPDATE job SET state = 'available', worker = NULL
     WHERE state = 'running' AND started_at + make_interval(secs => $1::float8 / 1000) < now()
    RETURNING id, claim, locked_until >= now()";
/// The bug app-clock (db-scheduler#402): the lease, stored by the
/// database's clock, is judged against the application's clock.
const RESCUE_APP_CLOCK: &str = "
    UPDATE job SET state = 'available', worker = NULL
     WHERE state = 'running' AND locked_until < $1
    RETURNING id, claim, locked_until >= now()";
// ANCHOR_END: rescue_sql

// ANCHOR: prune_sql
/// Registers or beats a worker process in the registry.
const BEAT: &str = "
    INSERT INTO queue_worker AS w (name, beat_at) VALUES ($1, now())
    ON CONFLICT (name) DO UPDATE SET beat_at = now()";
/// The pruner: workers silent for longer than the limit leave the registry.
const PRUNE: &str = "DELETE FROM queue_worker WHERE beat_at < now() - make_interval(secs => $1::float8 / 1000) RETURNING name";
/// Releases a pruned worker's jobs whose own lease ran out: a job whose
/// claim is still heartbeating stays with it, whatever the registry says.
const RELEASE: &str = "
    UPDATE job SET state = 'available', worker = NULL
     WHERE worker = $1 AND state = 'running' AND locked_until < now()
    RETURNING id, claim, locked_until >= now()";
/// The bug pruned-while-alive (solid_queue#589): the pruned worker's jobs
/// are released because the registry says so, their leases unread.
const RELEASE_BY_REGISTRY: &str = "
    UPDATE job SET state = 'available', worker = NULL
     WHERE worker = $1 AND state = 'running'
    RETURNING id, claim, locked_until >= now()";
// ANCHOR_END: prune_sql

// ANCHOR: record_sql
/// Records one operation and the incarnation of the job's latest claim
/// once it is done (read in the same transaction, after the operation).
const RECORD: &str = "
    INSERT INTO job_event (job, kind, incarnation, token, accepted, holder, live)
    SELECT $1, $2, $3, $4, $5, (SELECT incarnation FROM job WHERE id = $1), $6";
// ANCHOR_END: record_sql

/// A session of the queue, with at most one bug put back.
pub struct Queue {
    /// Autocommit outside the transactions this type opens itself.
    client: crate::db::Session,
    /// The bug this session runs with, if any.
    bug: Option<Bug>,
    /// How long a claim's lease runs from a claim or heartbeat.
    ttl: Duration,
}

impl Queue {
    /// Connects to `lease26`; `who` names the session in `pg_stat_activity`.
    pub fn connect(who: &str, bug: Option<Bug>, ttl: Duration) -> Result<Queue> {
        Ok(Queue { client: db::connect(db::LEASE_DB, who)?, bug, ttl })
    }

    /// Enqueues `jobs` jobs, ids 1 …, into the queue's tables, which every
    /// load of `lease26` makes (see [`db::LEASE_SCHEMA`]) and the lease
    /// schema's reset empties: so after a reset, these are the only jobs.
    pub fn reset(&mut self, jobs: i64) -> Result<()> {
        // Enqueue: one row per job, available.
        self.client.execute("INSERT INTO job (id) SELECT generate_series(1, $1::bigint)", &[&jobs])?;
        Ok(())
    }

    fn ttl_ms(&self) -> f64 {
        self.ttl.as_secs_f64() * 1000.0
    }

    /// Runs `op` and records it, in one transaction; `op` says how many
    /// rows it changed.
    fn recorded(&mut self, job: i64, kind: &str, who: &str, token: Option<i64>, op: impl FnOnce(&mut postgres::Transaction) -> Result<u64>) -> Result<bool> {
        let mut tx = self.client.transaction()?;
        let accepted = op(&mut tx)? > 0;
        tx.execute(RECORD, &[&job, &kind, &who, &token, &accepted, &None::<bool>])?;
        tx.commit()?;
        Ok(accepted)
    }

    /// Claims the next available job for `worker`.
    pub fn claim(&mut self, worker: &Worker) -> Result<Option<Claim>> {
        let ttl = self.ttl_ms();
        let mut tx = self.client.transaction()?;
        let row = tx.query_opt(CLAIM, &[&worker.name, &ttl, &worker.incarnation])?;
        let claim = row.map(|r| Claim { job: r.get(0), token: r.get(1), worker: worker.name.clone(), incarnation: worker.incarnation.clone() });
        if let Some(c) = &claim {
            tx.execute(RECORD, &[&c.job, &"claim", &c.incarnation, &c.token, &true, &None::<bool>])?;
        }
        tx.commit()?;
        Ok(claim)
    }

    /// A heartbeat of `claim`: `true` when the lease was extended.
    pub fn heartbeat(&mut self, claim: &Claim) -> Result<bool> {
        let ttl = self.ttl_ms();
        let bug = self.bug;
        self.recorded(claim.job, "heartbeat", &claim.incarnation, Some(claim.token), |tx| {
            Ok(match bug {
                Some(Bug::NameAsIdentity) => tx.execute(HEARTBEAT_BY_NAME, &[&claim.job, &claim.worker, &ttl])?,
                Some(Bug::LateHeartbeat) => tx.execute(HEARTBEAT_ANY, &[&claim.job, &ttl])?,
                _ => tx.execute(HEARTBEAT, &[&claim.job, &claim.token, &ttl])?,
            })
        })
        .context("a heartbeat")
    }

    /// Completes `claim`'s job: `true` when the completion was accepted.
    pub fn complete(&mut self, claim: &Claim) -> Result<bool> {
        let bug = self.bug;
        self.recorded(claim.job, "complete", &claim.incarnation, Some(claim.token), |tx| {
            Ok(match bug {
                Some(Bug::NameAsIdentity) => tx.execute(COMPLETE_BY_NAME, &[&claim.job, &claim.token, &claim.worker])?,
                Some(Bug::CompleteWithoutClaim) => tx.execute(COMPLETE_BY_ID, &[&claim.job, &claim.token])?,
                _ => tx.execute(COMPLETE, &[&claim.job, &claim.token])?,
            })
        })
        .context("a completion")
    }

    /// The rescuer: takes back the claims whose lease ran out; returns the
    /// jobs it made available again. `gap` runs where the bug
    /// rescue-overwrites reads and then writes (F22 completes the job
    /// there); `app_clock` is the rescuer's own clock, which only the bug
    /// app-clock reads; `limit` is the run time after which the bug
    /// elapsed-rescue takes a job back.
    pub fn rescue(&mut self, gap: impl FnOnce() -> Result<()>, app_clock: SystemTime, limit: Duration) -> Result<Vec<i64>> {
        let limit_ms = limit.as_secs_f64() * 1000.0;
        match self.bug {
            Some(Bug::RescueOverwrites) => {
                let seen: Vec<i64> = self.client.query(RESCUE_SELECT, &[])?.iter().map(|r| r.get(0)).collect();
                gap()?;
                self.taken_back("rescue", "rescuer", |tx| Ok(tx.query(RESCUE_BY_ID, &[&seen])?))
            }
            bug => {
                gap()?;
                self.taken_back("rescue", "rescuer", |tx| {
                    Ok(match bug {
                        Some(Bug::TokenGivenBack) => tx.query(RESCUE_GIVES_BACK, &[])?,
                        Some(Bug::ElapsedRescue) => tx.query(RESCUE_ELAPSED, &[&limit_ms])?,
                        Some(Bug::AppClock) => tx.query(RESCUE_APP_CLOCK, &[&app_clock])?,
                        _ => tx.query(RESCUE, &[])?,
                    })
                })
            }
        }
    }

    /// Takes claims back with `take` (a rescue's or a release's statement)
    /// and records each in the same transaction; returns the jobs. In one
    /// transaction, each record's holder is the claim taken back: its row
    /// stays locked until the records commit, so no claimer (who skips
    /// locked rows) can claim the job between the two and be recorded as
    /// the one it was taken from.
    fn taken_back(&mut self, kind: &str, who: &str, take: impl FnOnce(&mut postgres::Transaction) -> Result<Vec<postgres::Row>>) -> Result<Vec<i64>> {
        let mut tx = self.client.transaction()?;
        let rows = take(&mut tx)?;
        let mut jobs = Vec::new();
        for row in &rows {
            let (job, token, live): (i64, i64, bool) = (row.get(0), row.get(1), row.get(2));
            tx.execute(RECORD, &[&job, &kind, &who, &token, &true, &Some(live)])?;
            jobs.push(job);
        }
        tx.commit()?;
        Ok(jobs)
    }

    /// Beats `worker`'s row in the registry of live workers.
    pub fn beat(&mut self, worker: &Worker) -> Result<()> {
        self.client.execute(BEAT, &[&worker.name])?;
        Ok(())
    }

    /// The pruner: removes the workers silent for longer than `limit` and
    /// releases their jobs (see RELEASE); returns the jobs released.
    pub fn prune(&mut self, limit: Duration) -> Result<Vec<i64>> {
        let pruned: Vec<String> = self.client.query(PRUNE, &[&(limit.as_secs_f64() * 1000.0)])?.iter().map(|r| r.get(0)).collect();
        let release = if self.bug == Some(Bug::PrunedWhileAlive) { RELEASE_BY_REGISTRY } else { RELEASE };
        let mut released = Vec::new();
        for name in pruned {
            released.extend(self.taken_back("release", "pruner", |tx| Ok(tx.query(release, &[&name])?))?);
        }
        Ok(released)
    }

    /// Waits until `job`'s current lease has run out by the database's clock.
    pub fn wait_until_expired(&mut self, job: i64) -> Result<()> {
        let client = &mut self.client;
        // By design: the experiment waits for time to pass on the server.
        let expired = poll::designed(|| {
            poll::poll_until(poll::BOUND, poll::EVERY, || {
                let row = client.query_one("SELECT locked_until < now() FROM job WHERE id = $1", &[&job])?;
                Ok::<_, crate::Error>(row.get::<_, Option<bool>>(0).unwrap_or(false))
            })
        })?;
        if !expired {
            return Err(format!("job {job}'s lease still held by the database clock after {:?}", poll::BOUND).into());
        }
        Ok(())
    }

    /// The underlying connection, for the zoo's readings.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}
