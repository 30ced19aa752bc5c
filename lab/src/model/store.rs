//! The lease store in the model: the one `lease` row of `lease26`, on one
//! server, or on a primary with a standby that may be promoted.
//!
//! Each step stands for one statement of `lease.rs`, and does what that
//! statement's WHERE clause lets it do. A statement is one step because it
//! is one autocommit statement on one row: concurrent acquirers queue on the
//! row lock, and each re-evaluates its WHERE against the row the previous
//! one committed (see `ACQUIRE`), so no other session ever sees half of one.
//! Time is abstract: the row is `live` (`expires_at > now()`) until the
//! store takes its [`Store::expire`] step, which the checker may take at any
//! moment a holding is live, that is whenever every renewal may have stopped
//! (a paused holder's renewer pauses with it, F4).

use super::mutation::ModelMutation;

/// The `lease` row, as one `now()` judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// `lease.holder`: the holder's index (0 is holder-a).
    pub holder: u8,
    /// `lease.token`: the last token issued.
    pub token: u8,
    /// `expires_at > now()`. A released row holds `-infinity`: not live.
    pub live: bool,
}

/// Where the lease row lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// One server (the article's `b3-26`).
    Single,
    /// A primary and an asynchronous standby (F14's first timeline): a
    /// commit returns before the standby has it; the standby receives it
    /// in a step of its own ([`Store::replicate`]), or never.
    Async,
    /// A primary and a synchronous standby, `synchronous_commit =
    /// remote_apply` (F14's second timeline): a commit returns only once
    /// the standby has applied it.
    Sync,
}

impl StoreKind {
    /// Every lease store the table checks, the article's first.
    pub const ALL: [StoreKind; 3] = [StoreKind::Single, StoreKind::Sync, StoreKind::Async];

    /// The table's name of the store.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Single => "one server",
            StoreKind::Sync => "sync standby",
            StoreKind::Async => "async standby",
        }
    }

    /// The spelling on the command line (`--store async`).
    pub fn cli_name(self) -> &'static str {
        match self {
            StoreKind::Single => "single",
            StoreKind::Sync => "sync",
            StoreKind::Async => "async",
        }
    }
}

/// The lease store's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Store {
    /// The row on the server clients talk to (after a promotion: the
    /// promoted standby's); `None` until the first acquire inserts it.
    pub primary: Option<Row>,
    /// The standby's copy, as far as it has replayed the primary's WAL.
    pub standby: Option<Row>,
    /// The primary has crashed and the standby was promoted (once).
    pub promoted: bool,
}

impl Store {
    /// The store before the first acquire: no row anywhere.
    pub fn new() -> Store {
        Store { primary: None, standby: None, promoted: false }
    }

    /// Whether a commit on the primary waits for the standby: a sync
    /// standby not yet promoted, unless the mutation commits locally.
    fn synchronous(kind: StoreKind, mutation: Option<ModelMutation>) -> bool {
        kind == StoreKind::Sync && mutation != Some(ModelMutation::LeaseStoreCommitsLocally)
    }

    /// After a statement changed the primary's row: a synchronous standby
    /// has it too before the statement returns (remote_apply).
    fn committed(&mut self, kind: StoreKind, mutation: Option<ModelMutation>) {
        if !self.promoted && Store::synchronous(kind, mutation) {
            self.standby = self.primary;
        }
    }

    // ANCHOR: model_acquire
    /// `ACQUIRE` for `holder`: the token it returns, or `None` while the
    /// row is live (`WHERE l.expires_at <= now()` refuses the update).
    pub fn acquire(&mut self, holder: u8, kind: StoreKind, mutation: Option<ModelMutation>) -> Option<u8> {
        use ModelMutation as M;
        let row = match self.primary {
            // No row yet: the INSERT creates it with token 1.
            None => Row { holder, token: 1, live: true },
            Some(old) => {
                // ON CONFLICT … DO UPDATE … WHERE l.expires_at <= now().
                let takes = !old.live
                    || mutation == Some(M::AcquireWhileHeld)
                    || (mutation == Some(M::AcquireReentrantByName) && old.holder == holder);
                if !takes {
                    return None;
                }
                Row {
                    // SET holder = EXCLUDED.holder
                    holder: if mutation == Some(M::AcquireKeepsOldHolder) { old.holder } else { holder },
                    // token = l.token + 1: the only place a token advances.
                    token: if mutation == Some(M::AcquireReusesToken) { old.token } else { old.token + 1 },
                    // expires_at = EXCLUDED.expires_at: now() + ttl.
                    live: if mutation == Some(M::AcquireKeepsOldExpiry) { old.live } else { true },
                }
            }
        };
        self.primary = Some(row);
        self.committed(kind, mutation);
        Some(row.token)
    }
    // ANCHOR_END: model_acquire

    // ANCHOR: model_renew
    /// `RENEW` of (`holder`, `token`): `WHERE holder = $3 AND token = $4
    /// AND expires_at > now()`; extends the row and keeps the token.
    pub fn renew(&mut self, holder: u8, token: u8, kind: StoreKind, mutation: Option<ModelMutation>) -> bool {
        let Some(row) = self.primary.as_mut() else { return false };
        let live = row.live || mutation == Some(ModelMutation::RenewAfterExpiry);
        if row.holder != holder || row.token != token || !live {
            return false;
        }
        // SET expires_at = now() + ttl: live again, if the mutation let an
        // expired row through.
        row.live = true;
        self.committed(kind, mutation);
        true
    }
    // ANCHOR_END: model_renew

    /// `RELEASE` of (`holder`, `token`): `expires_at = '-infinity'` where
    /// holder and token match; the token stays.
    pub fn release(&mut self, holder: u8, token: u8, kind: StoreKind, mutation: Option<ModelMutation>) -> bool {
        let Some(row) = self.primary.as_mut() else { return false };
        if row.holder != holder || row.token != token {
            return false;
        }
        row.live = false;
        self.committed(kind, mutation);
        true
    }

    /// Time passes beyond every `expires_at`: on the primary and on the
    /// standby alike (both judge by their own `now()`).
    pub fn expire(&mut self) {
        for row in [&mut self.primary, &mut self.standby].into_iter().flatten() {
            row.live = false;
        }
    }

    /// Whether the asynchronous standby lags: the primary has a commit it
    /// has not replayed.
    pub fn lags(&self, kind: StoreKind, mutation: Option<ModelMutation>) -> bool {
        kind != StoreKind::Single && !self.promoted && !Store::synchronous(kind, mutation) && self.standby != self.primary
    }

    /// The standby replays the primary's WAL up to now.
    pub fn replicate(&mut self) {
        self.standby = self.primary;
    }

    /// The primary crashes (`pg_ctl stop -m immediate`) and the standby is
    /// promoted: from now on clients talk to it, with the row it has.
    pub fn promote(&mut self) {
        self.primary = self.standby;
        self.promoted = true;
    }
}

impl Default for Store {
    fn default() -> Store {
        Store::new()
    }
}
