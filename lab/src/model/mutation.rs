//! The mutation table, applied to the model: each patch in `mutants/` that
//! breaks a guard the model has is also a [`ModelMutation`], which switches
//! off the same guard in the model's step; every other patch is listed in
//! [`NO_COUNTERPART`] with the reason the model cannot have it. A test
//! checks that the two lists cover `mutants::MUTATIONS` exactly, so a new
//! patch must be placed in one of them.

use super::store::StoreKind;
use crate::vocabulary::FenceMode;

/// A guard of the model switched off, as a patch switches it off in the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelMutation {
    /// `acquire-while-held`: ACQUIRE's `WHERE l.expires_at <= now()` is `WHERE true`.
    AcquireWhileHeld,
    /// `acquire-reentrant-by-name`: `OR l.holder = EXCLUDED.holder`.
    AcquireReentrantByName,
    /// `acquire-reuses-token`: `token = l.token`.
    AcquireReusesToken,
    /// `acquire-keeps-old-holder`: `holder = l.holder`.
    AcquireKeepsOldHolder,
    /// `acquire-keeps-old-expiry`: `expires_at = l.expires_at`.
    AcquireKeepsOldExpiry,
    /// `renew-after-expiry`: RENEW without `expires_at > now()`.
    RenewAfterExpiry,
    /// `fence-accepts-any-token`: ADVANCE_FENCE's compare always holds.
    FenceAcceptsAnyToken,
    /// `fence-refuses-equal-token`: `<` instead of `<=`.
    FenceRefusesEqualToken,
    /// `fence-never-advances`: `SET max_token = max_token`.
    FenceNeverAdvances,
    /// `fence-commits-before-write`: a commit between the fence and the upsert.
    FenceCommitsBeforeWrite,
    /// `cte-fence-accepts-any-token`: the fence CTE's compare always holds.
    CteFenceAcceptsAnyToken,
    /// `cte-fence-never-advances`: the fence CTE sets the floor to itself.
    CteFenceNeverAdvances,
    /// `cte-writes-without-fence`: the part CTE inserts from VALUES, not FROM fence.
    CteWritesWithoutFence,
    /// `row-fence-accepts-any-token`: the conflict branch's compare always holds.
    RowFenceAcceptsAnyToken,
    /// `shared-fence-accepts-any-token`: `max_token >= token` accepts.
    SharedFenceAcceptsAnyToken,
    /// `shared-raise-without-exclusive-lock`: the raise takes the share lock.
    SharedRaiseWithoutExclusiveLock,
    /// `shared-raise-ignores-the-floor`: the raise sets the floor whatever it was.
    SharedRaiseIgnoresTheFloor,
    /// `shared-equal-write-without-lock`: the first call takes no lock.
    SharedEqualWriteWithoutLock,
    /// `shared-reads-floor-in-the-lock-statement`: the first call reads the
    /// floor in the statement that then waits for the share lock.
    SharedReadsFloorInLockStatement,
    /// `holder-skips-deadline-check`: the holder writes past its local deadline.
    HolderSkipsDeadlineCheck,
    /// `lease-store-commits-locally`: the sync standby's commits stop waiting for it.
    LeaseStoreCommitsLocally,
    /// `claim-first-ignores-newer-claim`: a larger token's claim refuses nobody.
    ClaimIgnoresNewerClaim,
    /// `claim-first-claims-unconditionally`: CLAIM_IF_VERSION without `version = $3`.
    ClaimUnconditional,
    /// `claim-first-rereads-before-write`: a claimed holder's put against
    /// the version it reads again, not the one its own last write made.
    ClaimRereadsBeforeWrite,
}

/// One patch of `mutants/` and its counterpart in the model.
pub struct Counterpart {
    /// The patch, `mutants/<name>.patch`.
    pub patch: &'static str,
    /// The guard switched off in the model.
    pub mutation: ModelMutation,
    /// The resource mode the model is checked in with it.
    pub mode: FenceMode,
    /// The lease store the model is checked on with it.
    pub store: StoreKind,
}

// ANCHOR: counterparts
/// Every patch that has a counterpart in the model, with the configuration
/// whose unmutated verdict is safe for the properties the guard carries.
pub const COUNTERPARTS: &[Counterpart] = &[
    Counterpart { patch: "acquire-while-held", mutation: ModelMutation::AcquireWhileHeld, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "acquire-reentrant-by-name", mutation: ModelMutation::AcquireReentrantByName, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "acquire-reuses-token", mutation: ModelMutation::AcquireReusesToken, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "acquire-keeps-old-holder", mutation: ModelMutation::AcquireKeepsOldHolder, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "acquire-keeps-old-expiry", mutation: ModelMutation::AcquireKeepsOldExpiry, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "renew-after-expiry", mutation: ModelMutation::RenewAfterExpiry, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "fence-accepts-any-token", mutation: ModelMutation::FenceAcceptsAnyToken, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "fence-refuses-equal-token", mutation: ModelMutation::FenceRefusesEqualToken, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "fence-never-advances", mutation: ModelMutation::FenceNeverAdvances, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "fence-commits-before-write", mutation: ModelMutation::FenceCommitsBeforeWrite, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "cte-fence-accepts-any-token", mutation: ModelMutation::CteFenceAcceptsAnyToken, mode: FenceMode::FencedScopeCte, store: StoreKind::Single },
    Counterpart { patch: "cte-fence-never-advances", mutation: ModelMutation::CteFenceNeverAdvances, mode: FenceMode::FencedScopeCte, store: StoreKind::Single },
    Counterpart { patch: "cte-writes-without-fence", mutation: ModelMutation::CteWritesWithoutFence, mode: FenceMode::FencedScopeCte, store: StoreKind::Single },
    Counterpart { patch: "row-fence-accepts-any-token", mutation: ModelMutation::RowFenceAcceptsAnyToken, mode: FenceMode::FencedRow, store: StoreKind::Single },
    Counterpart { patch: "shared-fence-accepts-any-token", mutation: ModelMutation::SharedFenceAcceptsAnyToken, mode: FenceMode::FencedScopeShared, store: StoreKind::Single },
    Counterpart { patch: "shared-raise-without-exclusive-lock", mutation: ModelMutation::SharedRaiseWithoutExclusiveLock, mode: FenceMode::FencedScopeShared, store: StoreKind::Single },
    Counterpart { patch: "shared-raise-ignores-the-floor", mutation: ModelMutation::SharedRaiseIgnoresTheFloor, mode: FenceMode::FencedScopeShared, store: StoreKind::Single },
    Counterpart { patch: "shared-equal-write-without-lock", mutation: ModelMutation::SharedEqualWriteWithoutLock, mode: FenceMode::FencedScopeShared, store: StoreKind::Single },
    Counterpart { patch: "shared-reads-floor-in-the-lock-statement", mutation: ModelMutation::SharedReadsFloorInLockStatement, mode: FenceMode::FencedScopeShared, store: StoreKind::Single },
    Counterpart { patch: "holder-skips-deadline-check", mutation: ModelMutation::HolderSkipsDeadlineCheck, mode: FenceMode::FencedScope, store: StoreKind::Single },
    Counterpart { patch: "lease-store-commits-locally", mutation: ModelMutation::LeaseStoreCommitsLocally, mode: FenceMode::FencedScope, store: StoreKind::Sync },
    // etcd's acquire txn without its compare is the same guard as ACQUIRE's
    // WHERE: put over a held key (and keep its create_revision, the token).
    Counterpart { patch: "claim-first-ignores-newer-claim", mutation: ModelMutation::ClaimIgnoresNewerClaim, mode: FenceMode::ClaimFirst, store: StoreKind::Single },
    Counterpart { patch: "claim-first-claims-unconditionally", mutation: ModelMutation::ClaimUnconditional, mode: FenceMode::ClaimFirst, store: StoreKind::Single },
    Counterpart { patch: "claim-first-rereads-before-write", mutation: ModelMutation::ClaimRereadsBeforeWrite, mode: FenceMode::ClaimFirst, store: StoreKind::Single },
    Counterpart { patch: "etcd-acquire-without-compare", mutation: ModelMutation::AcquireWhileHeld, mode: FenceMode::FencedScope, store: StoreKind::Single },
];
// ANCHOR_END: counterparts

// ANCHOR: no_counterpart
/// Why the bug zoo's mutations have no counterpart yet.
const QUEUE_NOT_MODELLED: &str = "the job queue (F20–F28) is not in the model yet: its claims, heartbeats, rescuer and pruner have no counterpart among the model's steps, which are a lease, holders and a resource";

/// Why the object store's mutations have no counterpart yet.
const OBJECT_NOT_MODELLED: &str = "the object store of F29–F33 is not in the model: its ETags, lock-delay, probe and lost answers have no counterpart among the model's steps; its version compare is there, as the report's modes VERSION_CAS and CLAIM_FIRST (F34)";

/// The patches the model has no counterpart for, and why.
pub const NO_COUNTERPART: &[(&str, &str)] = &[
    ("renew-ignores-name", "the model has one lease; F1 renews with a grant of a second one (cleanup-job)"),
    ("renew-ignores-holder", "a model holder renews only its own grant; F1 passes another holder's token by hand"),
    ("renew-ignores-token", "a model holder has one grant per holding and never keeps an old one; F2 renews with a stale grant by hand"),
    ("release-ignores-name", "the model has one lease (see renew-ignores-name)"),
    ("release-ignores-holder", "a model holder releases only its own grant (see renew-ignores-holder)"),
    ("release-ignores-token", "a model holder never keeps an old grant (see renew-ignores-token)"),
    ("fence-ignores-scope", "the model has one scope; F7 watches a second scope's floor"),
    ("cte-fence-ignores-scope", "the model has one scope (see fence-ignores-scope)"),
    ("cte-records-refusal-as-accepted", "the model has no audit row (write_attempt): it judges what was written, not what was recorded"),
    ("resource-ignores-idle-timeout", "a stall that never ends is about time and liveness; the model has no clock and checks safety only (F11)"),
    ("publish-keeps-any-version", "the model has no downstream publisher (F9)"),
    ("deadline-without-margin", "the model's deadline check is exact: it has no clocks, so no margin (F1, F13 measure it)"),
    ("deadline-from-response", "the model has no clocks: when a deadline is counted from is a timing matter (F2)"),
    ("renew-refused-moves-deadline", "the model has no clocks and no background renewer: a refused renewal ends the holding (F2)"),
    ("renewer-keeps-going", "the model has no background renewer; a renewer that never stops is liveness, not safety (F2)"),
    ("record-omits-floor", "the chaos run's record, not the protocol: the model's properties read its state, not write_attempt"),
    ("checker-blind-to-stale", "the chaos run's checker, not the protocol; the model's own check is proven by a planted state (model::properties tests)"),
    ("etcd-token-is-lease-id", "the model's tokens come from one counter; an id that is unique but unordered has no counterpart"),
    ("delay-off-the-wire", "a fault not injected is the experiment's defect: the model's steps happen by construction"),
    ("clock-fault-not-preloaded", "a fault not injected is the experiment's defect; the model has no clocks (F13)"),
    ("model-blind-to-stale", "it breaks the model itself (its I3 property), not the code: `lab model`'s verdict lines catch it"),
    ("partition-not-applied", "a fault not injected is the experiment's defect: the model has no network, its steps happen by construction"),
    ("standby-left-connected", "a fault placed wrong is the experiment's defect: the model's async standby may never receive a commit by construction (and its primary crashes: two live primaries are F18's alone)"),
    ("follower-isolated-instead", "a fault placed wrong is the experiment's defect; the model has no etcd members to isolate"),
    ("nemesis-cuts-nothing", "a fault not injected is the chaos run's defect: the model's steps happen by construction"),
    ("queue-heartbeat-by-name", QUEUE_NOT_MODELLED),
    ("queue-heartbeat-ignores-claim", QUEUE_NOT_MODELLED),
    ("queue-complete-ignores-claim", QUEUE_NOT_MODELLED),
    ("queue-rescue-select-then-update", QUEUE_NOT_MODELLED),
    ("queue-rescue-gives-token-back", QUEUE_NOT_MODELLED),
    ("queue-rescue-ignores-heartbeats", QUEUE_NOT_MODELLED),
    ("queue-rescue-by-app-clock", QUEUE_NOT_MODELLED),
    ("queue-heartbeat-shares-work-connection", QUEUE_NOT_MODELLED),
    ("queue-release-ignores-lease", QUEUE_NOT_MODELLED),
    ("object-if-version-ignored", OBJECT_NOT_MODELLED),
    ("object-version-not-bumped", OBJECT_NOT_MODELLED),
    ("object-if-match-ignored", OBJECT_NOT_MODELLED),
    ("object-claim-without-token", OBJECT_NOT_MODELLED),
    ("lock-delay-not-waited", OBJECT_NOT_MODELLED),
    ("object-put-checks-then-writes", OBJECT_NOT_MODELLED),
    ("unknown-outcome-not-read-back", OBJECT_NOT_MODELLED),
];
// ANCHOR_END: no_counterpart


#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::MUTATIONS;

    /// Every patch of the mutation table is either given a counterpart or
    /// said to have none, exactly once, and nothing else is named.
    #[test]
    fn every_patch_is_placed_once() {
        for m in MUTATIONS {
            let placed = COUNTERPARTS.iter().filter(|c| c.patch == m.name).count() + NO_COUNTERPART.iter().filter(|(n, _)| *n == m.name).count();
            assert_eq!(placed, 1, "{} is placed {placed} times in the model's mutation table", m.name);
        }
        for name in COUNTERPARTS.iter().map(|c| c.patch).chain(NO_COUNTERPART.iter().map(|(n, _)| *n)) {
            assert!(crate::mutants::find(name).is_some(), "{name} is no patch of mutants/");
        }
    }
}
