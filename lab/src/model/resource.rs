//! The resource in the model: `fence_floor` and `report_part` of one scope,
//! and the statements each [`FenceMode`] runs, one step per statement.
//!
//! What a statement may see is what READ COMMITTED lets it see:
//! - A step reads and writes only *committed* values, except its own
//!   transaction's: FENCED_SCOPE's open transaction keeps its floor and its
//!   part in [`Tx`], invisible to everyone else until its `Commit` step.
//! - An UPDATE that finds the floor row locked by another open transaction
//!   waits: its step is not enabled while that lock is held. Once the other
//!   commits, it re-evaluates its WHERE against the *new* row version
//!   (EvalPlanQual), so the step, taken then, compares with the committed
//!   floor of that moment. Its snapshot from the statement's start plays no
//!   part: that is why one conditional UPDATE is a compare-and-set.
//! - A plain SELECT (CHECK_THEN_WRITE's read) sees the floor committed when
//!   it ran, and nothing holds it still afterwards: the value it returns is
//!   history by the next step. Its decision is carried to the next step in
//!   the holder's phase, as the Rust variable `floor` carries it in
//!   `write_check_then_write`.
//! - One autocommit statement (FENCED_SCOPE_CTE, FENCED_ROW, UNFENCED) is
//!   one step: its row locks last until its own commit, at its end, so no
//!   other session sees it half done.
//! - FENCED_SCOPE_SHARED's call of `fenced_write_shared` is several steps,
//!   because others act between them: the scope's advisory lock (a step
//!   that waits while another transaction holds a conflicting mode), the
//!   raise, the statement that reads the floor and writes, and the commit
//!   that publishes the write and releases the lock. The read is a step of
//!   its own after the lock, so it sees the floor committed by then: that
//!   is the statement's fresh snapshot. Its stale-snapshot mutation reads
//!   in a step *before* the lock, as a statement's snapshot is taken before
//!   it waits for a lock inside it.
//!
//! So the modes differ only in their statements, and the check-then-write
//! race and the row-versus-scope granularity come out of those, not out of
//! a flag.

use super::mutation::ModelMutation;
use crate::vocabulary::FenceMode;

/// The parts of the scope (`report_part.part`).
pub const PARTS: [&str; 2] = ["summary", "detail"];

/// The resource's committed state, for the one scope `daily-report`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resource {
    /// `fence_floor.max_token`, committed.
    pub floor: u8,
    /// `report_part.token` of each part, committed; `None`: no row yet.
    pub parts: [Option<u8>; 2],
    /// VERSION_CAS, CLAIM_FIRST: `report_object.version` (0: no object yet).
    pub version: u8,
    /// CLAIM_FIRST: `report_object.claim`, the token in the body (0: none).
    pub claim: u8,
}

/// An open transaction (FENCED_SCOPE's, or one call of FENCED_SCOPE_SHARED):
/// what it has written and not committed, and the locks it holds until its
/// end. The floor row lock is held from the UPDATE of the floor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tx {
    /// The floor this transaction set (`Some`: it holds the floor row lock).
    pub floor: Option<u8>,
    /// The part it upserted, and the token written there.
    pub part: Option<(u8, u8)>,
    /// The scope's advisory lock, in the mode it holds it (FENCED_SCOPE_SHARED).
    pub scope_lock: Option<LockMode>,
}

/// A mode of the scope's advisory lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// `pg_advisory_xact_lock_shared`: many holders at once.
    Shared,
    /// `pg_advisory_xact_lock`: one holder, and no shared one.
    Exclusive,
}

/// One statement of a write, named as `resource/mod.rs` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Statement {
    /// FENCED_SCOPE: `ADVANCE_FENCE`, the first statement of its transaction.
    AdvanceFence,
    /// `UPSERT`: inside FENCED_SCOPE's transaction, or CHECK_THEN_WRITE's
    /// autocommit data write.
    Upsert,
    /// FENCED_SCOPE: `COMMIT`, which publishes floor and part together and
    /// releases the floor row lock.
    Commit,
    /// FENCED_SCOPE_CTE: `FENCE_AND_WRITE`, one autocommit statement.
    FenceAndWrite,
    /// FENCED_ROW: `UPSERT_IF_ROW_TOKEN`, one autocommit statement.
    UpsertIfRowToken,
    /// UNFENCED: `UNFENCED_WRITE`, one autocommit statement.
    UnfencedWrite,
    /// CHECK_THEN_WRITE: `READ_FLOOR`, then the decision in Rust.
    ReadFloor,
    /// CHECK_THEN_WRITE: `SET_FLOOR`, unconditional.
    SetFloor,
    /// FENCED_SCOPE_SHARED: the scope's advisory lock in share mode.
    ShareLock,
    /// FENCED_SCOPE_SHARED: the scope's advisory lock in exclusive mode.
    ExclusiveLock,
    /// FENCED_SCOPE_SHARED: the raise, `UPDATE fence_floor … WHERE max_token < token`.
    Raise,
    /// FENCED_SCOPE_SHARED: the statement that reads the floor, decides,
    /// writes the part and records; under the share lock, a token above the
    /// floor ends the call ('raise').
    WriteUnderLock,
    /// The stale-snapshot mutation: the read of the floor, at the start of
    /// the statement that then waits for the share lock.
    ReadFloorBeforeLock,
    /// VERSION_CAS, CLAIM_FIRST: `READ_OBJECT`, then the decision in Rust
    /// (CLAIM_FIRST: a holder with a claim reads nothing and goes to its put).
    ReadObject,
    /// CLAIM_FIRST: `CLAIM_IF_VERSION`, one autocommit statement.
    ClaimIfVersion,
    /// VERSION_CAS, CLAIM_FIRST: `PUT_PART_IF_VERSION`, one autocommit statement.
    PutPartIfVersion,
}

impl Statement {
    /// The statement's name in `resource/mod.rs` (FENCED_SCOPE_SHARED's: a
    /// step of `fenced_write_shared` in `sql/res26.sql`).
    pub fn sql_name(self) -> &'static str {
        match self {
            Statement::AdvanceFence => "ADVANCE_FENCE",
            Statement::Upsert => "UPSERT",
            Statement::Commit => "COMMIT",
            Statement::FenceAndWrite => "FENCE_AND_WRITE",
            Statement::UpsertIfRowToken => "UPSERT_IF_ROW_TOKEN",
            Statement::UnfencedWrite => "UNFENCED_WRITE",
            Statement::ReadFloor => "READ_FLOOR",
            Statement::SetFloor => "SET_FLOOR",
            Statement::ShareLock => "SHARE_LOCK",
            Statement::ExclusiveLock => "EXCLUSIVE_LOCK",
            Statement::Raise => "RAISE",
            Statement::WriteUnderLock => "WRITE_UNDER_LOCK",
            Statement::ReadFloorBeforeLock => "READ_FLOOR_BEFORE_LOCK",
            Statement::ReadObject => "READ_OBJECT",
            Statement::ClaimIfVersion => "CLAIM_IF_VERSION",
            Statement::PutPartIfVersion => "PUT_PART_IF_VERSION",
        }
    }
}

// ANCHOR: model_statements
/// The statements of one write in `mode`, in the order the code runs them.
pub fn statements(mode: FenceMode, mutation: Option<ModelMutation>) -> &'static [Statement] {
    use Statement::*;
    match mode {
        // The mutation commits after the fence and upserts on its own:
        // two autocommit statements, no lock between them.
        FenceMode::FencedScope if mutation == Some(ModelMutation::FenceCommitsBeforeWrite) => &[AdvanceFence, Upsert],
        FenceMode::FencedScope => &[AdvanceFence, Upsert, Commit],
        FenceMode::FencedScopeCte => &[FenceAndWrite],
        FenceMode::FencedRow => &[UpsertIfRowToken],
        FenceMode::Unfenced => &[UnfencedWrite],
        FenceMode::CheckThenWrite => &[ReadFloor, SetFloor, Upsert],
        // The first call (share lock) and, after 'raise', the second
        // (exclusive lock), each ending with its commit.
        FenceMode::FencedScopeShared if mutation == Some(ModelMutation::SharedReadsFloorInLockStatement) => {
            &[ReadFloorBeforeLock, ShareLock, WriteUnderLock, Commit, ExclusiveLock, Raise, WriteUnderLock, Commit]
        }
        FenceMode::FencedScopeShared => &[ShareLock, WriteUnderLock, Commit, ExclusiveLock, Raise, WriteUnderLock, Commit],
        // Read, put; a put that lost goes back to the read (the retry loop).
        FenceMode::VersionCas => &[ReadObject, PutPartIfVersion],
        // Read and claim (again after a lost claim or put), then put; a
        // holder that has claimed, or finds its own token's claim, goes
        // from the read straight to the put.
        FenceMode::ClaimFirst => &[ReadObject, ClaimIfVersion, PutPartIfVersion],
    }
}
// ANCHOR_END: model_statements

/// What a statement's step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The write goes on with its next statement.
    Next,
    /// The write is over and was accepted.
    Accepted,
    /// The write is over and was refused.
    Refused,
    /// The write goes on at this statement (FENCED_SCOPE_SHARED's 'raise':
    /// the first call ends, the second begins).
    Goto(u8),
}

/// A committed change, for the properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// `fence_floor.max_token` went from one value to another.
    Floor { from: u8, to: u8 },
    /// A part's row now holds `token` (it held `from` before).
    Part { part: u8, from: Option<u8>, token: u8 },
}

/// One write's step: a statement, with what the writer carries.
pub struct Write<'a> {
    /// The writer's token.
    pub token: u8,
    /// The part written.
    pub part: u8,
    /// CHECK_THEN_WRITE: the floor its read returned; VERSION_CAS and
    /// CLAIM_FIRST: the version READ_OBJECT returned.
    pub seen: &'a mut u8,
    /// CLAIM_FIRST: the version its own last write of this holding made
    /// (its claim, or a part); `None` before its claim.
    pub claimed: &'a mut Option<u8>,
    /// FENCED_SCOPE, FENCED_SCOPE_SHARED: its open transaction.
    pub tx: &'a mut Tx,
    /// The index of the statement being run, in [`statements`].
    pub index: u8,
}

/// Whether `statement` can run now, or waits on a lock held by another
/// writer's open transaction (`others`).
pub fn runnable(statement: Statement, part: u8, others: &[Tx], mutation: Option<ModelMutation>) -> bool {
    let share_is_free = || others.iter().all(|tx| tx.scope_lock != Some(LockMode::Exclusive));
    match statement {
        // The UPDATE queues on the floor row lock.
        Statement::AdvanceFence | Statement::Raise => others.iter().all(|tx| tx.floor.is_none()),
        // The upsert queues on the part's key, held by an uncommitted
        // insert or update of the same part.
        Statement::Upsert | Statement::WriteUnderLock => others.iter().all(|tx| tx.part.is_none_or(|(p, _)| p != part)),
        // Share mode waits only for an exclusive holder.
        Statement::ShareLock => mutation == Some(ModelMutation::SharedEqualWriteWithoutLock) || share_is_free(),
        // Exclusive mode waits for every holder, in either mode.
        Statement::ExclusiveLock if mutation == Some(ModelMutation::SharedRaiseWithoutExclusiveLock) => share_is_free(),
        Statement::ExclusiveLock => others.iter().all(|tx| tx.scope_lock.is_none()),
        _ => true,
    }
}

impl Resource {
    // ANCHOR: model_execute
    /// Runs one statement of `w`'s write in `mode`; returns what it did and
    /// what it committed.
    pub fn execute(&mut self, mode: FenceMode, mutation: Option<ModelMutation>, statement: Statement, w: Write) -> (Outcome, Vec<Effect>) {
        use ModelMutation as M;
        let (t, p) = (w.token, w.part);
        let mut effects = Vec::new();
        let outcome = match statement {
            Statement::AdvanceFence => {
                // WHERE scope = $2 AND max_token <= $1, on the committed row
                // (EvalPlanQual after any wait).
                let passes = match mutation {
                    Some(M::FenceAcceptsAnyToken) => true,
                    Some(M::FenceRefusesEqualToken) => self.floor < t,
                    _ => self.floor <= t,
                };
                if !passes {
                    // Zero rows: the transaction is rolled back, nothing locked.
                    *w.tx = Tx::default();
                    Outcome::Refused
                } else {
                    let to = if mutation == Some(M::FenceNeverAdvances) { self.floor } else { t };
                    if mutation == Some(M::FenceCommitsBeforeWrite) {
                        // Committed at once: everyone sees it, nobody waits.
                        effects.push(self.set_floor(to));
                    } else {
                        // Uncommitted, under the row lock until Commit.
                        w.tx.floor = Some(to);
                    }
                    Outcome::Next
                }
            }
            Statement::Upsert if mode == FenceMode::FencedScope && mutation != Some(M::FenceCommitsBeforeWrite) => {
                w.tx.part = Some((p, t));
                Outcome::Next
            }
            Statement::Upsert => {
                // Autocommit: the part is overwritten, whoever wrote it.
                effects.push(self.set_part(p, t));
                Outcome::Accepted
            }
            Statement::Commit => {
                let tx = std::mem::take(w.tx);
                if let Some(floor) = tx.floor {
                    effects.push(self.set_floor(floor));
                }
                if let Some((part, token)) = tx.part {
                    effects.push(self.set_part(part, token));
                }
                Outcome::Accepted
            }
            Statement::FenceAndWrite => {
                // fence: UPDATE … WHERE max_token <= $5 RETURNING; part:
                // INSERT … SELECT … FROM fence: written only if fence returned.
                let passes = mutation == Some(M::CteFenceAcceptsAnyToken) || self.floor <= t;
                if passes {
                    let to = if mutation == Some(M::CteFenceNeverAdvances) { self.floor } else { t };
                    effects.push(self.set_floor(to));
                }
                if passes || mutation == Some(M::CteWritesWithoutFence) {
                    effects.push(self.set_part(p, t));
                }
                if passes { Outcome::Accepted } else { Outcome::Refused }
            }
            Statement::UpsertIfRowToken => {
                // ON CONFLICT … DO UPDATE … WHERE r.token <= EXCLUDED.token:
                // a part with no row yet goes down the INSERT branch, with
                // nothing to compare (F7).
                let passes = mutation == Some(M::RowFenceAcceptsAnyToken) || self.parts[p as usize].is_none_or(|old| old <= t);
                if passes {
                    effects.push(self.set_part(p, t));
                    Outcome::Accepted
                } else {
                    Outcome::Refused
                }
            }
            Statement::UnfencedWrite => {
                effects.push(self.set_part(p, t));
                Outcome::Accepted
            }
            Statement::ReadFloor => {
                // A snapshot of the committed floor, decided on in Rust:
                // `if w.token < floor` refuses.
                *w.seen = self.floor;
                if t < self.floor { Outcome::Refused } else { Outcome::Next }
            }
            Statement::SetFloor => {
                // Unconditional: it can move the floor backwards (F6a).
                effects.push(self.set_floor(t));
                Outcome::Next
            }
            Statement::ShareLock => {
                if mutation != Some(M::SharedEqualWriteWithoutLock) {
                    w.tx.scope_lock = Some(LockMode::Shared);
                }
                Outcome::Next
            }
            Statement::ExclusiveLock => {
                let exclusive = mutation != Some(M::SharedRaiseWithoutExclusiveLock);
                w.tx.scope_lock = Some(if exclusive { LockMode::Exclusive } else { LockMode::Shared });
                Outcome::Next
            }
            Statement::Raise => {
                // WHERE max_token < $token, on the committed row; the raise
                // holds the floor row until its commit.
                if self.floor < t || mutation == Some(M::SharedRaiseIgnoresTheFloor) {
                    w.tx.floor = Some(t);
                }
                Outcome::Next
            }
            Statement::ReadFloorBeforeLock => {
                *w.seen = self.floor;
                Outcome::Next
            }
            Statement::ReadObject if mode == FenceMode::ClaimFirst && w.claimed.is_some() => Outcome::Goto(2),
            Statement::ReadObject => {
                *w.seen = self.version;
                if mode != FenceMode::ClaimFirst {
                    Outcome::Next
                } else if self.claim > t && mutation != Some(M::ClaimIgnoresNewerClaim) {
                    // A larger token's claim refuses it.
                    Outcome::Refused
                } else if self.claim == t {
                    // Its own token's claim: put against this version.
                    *w.claimed = Some(self.version);
                    Outcome::Goto(2)
                } else {
                    Outcome::Next
                }
            }
            Statement::ClaimIfVersion => {
                // UPDATE … SET version = version + 1, claim = $2 WHERE version = $3.
                if self.version == *w.seen || mutation == Some(M::ClaimUnconditional) {
                    self.version += 1;
                    self.claim = t;
                    *w.claimed = Some(self.version);
                    Outcome::Next
                } else {
                    // Lost to a write in between: read again.
                    Outcome::Goto(0)
                }
            }
            Statement::PutPartIfVersion => {
                // UPDATE … SET version = version + 1 WHERE version = $7, and
                // the part FROM it: against what was read (VERSION_CAS) or
                // what its own last write made (CLAIM_FIRST).
                let claim_first = mode == FenceMode::ClaimFirst;
                let expected = if claim_first { w.claimed.expect("a claim before the put") } else { *w.seen };
                if self.version == expected || (claim_first && mutation == Some(M::ClaimRereadsBeforeWrite)) {
                    self.version += 1;
                    if claim_first {
                        *w.claimed = Some(self.version);
                    }
                    effects.push(self.set_part(p, t));
                    Outcome::Accepted
                } else {
                    // VERSION_CAS retries from the read; CLAIM_FIRST claims
                    // again (and is refused there by a larger token's claim).
                    if claim_first {
                        *w.claimed = None;
                    }
                    Outcome::Goto(0)
                }
            }
            Statement::WriteUnderLock => {
                // The floor this statement reads: its own call's raise, or
                // the committed one at this step (after the lock); under the
                // stale-snapshot mutation, in share mode, the one read before
                // the lock.
                let list = statements(mode, mutation);
                let exclusive_at = list.iter().position(|s| *s == Statement::ExclusiveLock).expect("the exclusive call") as u8;
                // The first call, under the share lock (or none, mutated).
                let share = w.index < exclusive_at;
                let floor = match w.tx.floor {
                    Some(own) => own,
                    None if share && mutation == Some(M::SharedReadsFloorInLockStatement) => *w.seen,
                    None => self.floor,
                };
                let accepted = if mutation == Some(M::SharedFenceAcceptsAnyToken) { floor >= t } else { floor == t };
                if accepted {
                    w.tx.part = Some((p, t));
                    Outcome::Next
                } else if floor > t || !share {
                    // Refused: the transaction ends, its locks with it.
                    *w.tx = Tx::default();
                    Outcome::Refused
                } else {
                    // 'raise': this call ends; the next one asks exclusively.
                    *w.tx = Tx::default();
                    Outcome::Goto(exclusive_at)
                }
            }
        };
        (outcome, effects)
    }
    // ANCHOR_END: model_execute

    fn set_floor(&mut self, to: u8) -> Effect {
        let from = std::mem::replace(&mut self.floor, to);
        Effect::Floor { from, to }
    }

    fn set_part(&mut self, part: u8, token: u8) -> Effect {
        let from = std::mem::replace(&mut self.parts[part as usize], Some(token));
        Effect::Part { part, from, token }
    }
}
