//! The holder in the model: `holder::hold_on`, one step per statement it
//! sends or decision it makes, and nothing about its timing.
//!
//! A holder acquires, checks its local deadline before each part, writes
//! the part (one step per statement of its mode), renews once after the
//! writes and releases. It can pause anywhere: a pause is simply a stretch
//! of the path in which the holder takes no step while others do, so the
//! checker, which tries every order, tries every pause. A write delayed in
//! flight (F12) is the same shape: the write left after the check and
//! arrives later; its statements run when they run. A holder can crash
//! (SIGKILL): its open transaction is rolled back by the server, its lease
//! is left to expire, and it may be restarted under the same name (a new
//! process, F10), which acquires afresh.
//!
//! The local deadline check abstracts the clock: it passes exactly while
//! the holding has not ended by the database clock. The real check passes
//! only earlier (ttl − margin counted from the send); clocks that break
//! that are F13's, outside the model.

use super::resource::Tx;

/// Where a holder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started (or restarted): next, the acquire.
    Idle,
    /// Holding: next, the local deadline check before writing `part`
    /// (the index into its list of parts).
    Check { part: u8 },
    /// Writing its `part`-th part: statement `statement` of its mode next;
    /// `seen` is the floor CHECK_THEN_WRITE's read returned.
    Write { part: u8, statement: u8, seen: u8 },
    /// Written: next, the renewal after the writes (`RENEW_AFTER_WRITE`).
    Renew,
    /// Renewed: next, the release.
    Release,
    /// Exited: not acquired, deadline passed, lease lost, or released.
    Done,
    /// Killed (SIGKILL); may be restarted under the same name.
    Crashed,
}

/// One holder process (or, after a restart, its successor of the same name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    /// Where it is.
    pub phase: Phase,
    /// The token of its holding (0: none yet).
    pub token: u8,
    /// Its holding's index in the ghost history (`Ghost::holdings`).
    pub holding: u8,
    /// FENCED_SCOPE: its open transaction on the resource.
    pub tx: Tx,
    /// CLAIM_FIRST: the version its own last write of this holding made.
    pub claimed: Option<u8>,
}

impl Holder {
    /// A holder about to start.
    pub fn new() -> Holder {
        Holder { phase: Phase::Idle, token: 0, holding: 0, tx: Tx::default(), claimed: None }
    }

    /// Whether the holder believes it holds the lease: it has a token and
    /// has not yet learned otherwise.
    pub fn believes_it_holds(&self) -> bool {
        matches!(self.phase, Phase::Check { .. } | Phase::Write { .. } | Phase::Renew | Phase::Release)
    }

    /// The phase after its `part`-th part, whether accepted or refused: the
    /// next part's check, or the renewal after the last (a refused write
    /// does not stop the holder; the renewal will tell it the lease is gone).
    pub fn after_part(part: u8, parts: usize) -> Phase {
        if usize::from(part) + 1 < parts {
            Phase::Check { part: part + 1 }
        } else {
            Phase::Renew
        }
    }
}

impl Default for Holder {
    fn default() -> Holder {
        Holder::new()
    }
}

/// The holder's name as the lab prints it: 0 is `holder-a`.
pub fn name(holder: usize) -> String {
    format!("holder-{}", (b'a' + holder as u8) as char)
}

/// The short name used in paths: 0 is `A`.
pub fn letter(holder: usize) -> char {
    (b'A' + holder as u8) as char
}
