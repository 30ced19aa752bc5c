//! The takeover cell: what a new holder waits from its grant to its first
//! accepted write, in the three designs of chapter 31 that a reader can
//! choose between when the lease changes hands.
//!
//! - `fenced-scope`: the first write raises the floor: one transaction.
//! - `claim-first`: the first write reads the report object, claims it with
//!   the token and then puts: three statements on a version store.
//! - `lock-delay`: the resource checks nothing, so the holder waits the
//!   lock-delay after its grant (by the database's clock, as F31 does) and
//!   then writes unfenced. Every later write costs what `unfenced` costs in
//!   the write table; the wait is paid at every change of holder.
//!
//! Each takeover is a fresh holding (a new token after the last holder's
//! release), timed by the client from the grant's return to the write's.

use super::HandoverSample;
use crate::error::Result;
use crate::lease::LeaseStore;
use crate::object::stage::{wait_lock_delay, B_TTL};
use crate::params::{margin, LEASE};
use crate::resource::{PartWrite, ResourceStore};
use crate::stats::quantile;
use crate::vocabulary::FenceMode;
use std::time::Instant;

/// How a takeover's first write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// The first write is a write in this resource mode.
    Mode(FenceMode),
    /// Wait the lock-delay, then write unfenced.
    LockDelay,
}

impl Takeover {
    /// The three designs, in table order.
    pub const ALL: [Takeover; 3] = [Takeover::Mode(FenceMode::FencedScope), Takeover::Mode(FenceMode::ClaimFirst), Takeover::LockDelay];

    /// The name in the table and the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Takeover::Mode(mode) => mode.cli_name(),
            Takeover::LockDelay => "lock-delay",
        }
    }
}

/// How many takeovers each design is timed for, per run.
pub const TAKEOVERS: usize = 20;

/// Times `TAKEOVERS` takeovers in `design` on the seeded scope.
pub fn measure(design: Takeover) -> Result<HandoverSample> {
    crate::db::reset_schema(&mut *crate::db::connect(crate::db::LEASE_DB, "lab bench")?, crate::db::LEASE_SCHEMA)?;
    crate::db::reset_schema(&mut *crate::db::connect(crate::db::RES_DB, "lab bench")?, crate::db::RES_SCHEMA)?;
    let mut leases = LeaseStore::connect("bench takeover")?;
    let mode = match design {
        Takeover::Mode(mode) => mode,
        Takeover::LockDelay => FenceMode::Unfenced,
    };
    let mut store = ResourceStore::connect(mode, "bench takeover")?;
    let mut latencies = Vec::with_capacity(TAKEOVERS);
    for i in 0..TAKEOVERS {
        let holder = format!("holder-{i:02}");
        // B_TTL: the lease F31's lock-delay is measured against.
        let grant = leases.acquire(LEASE, &holder, B_TTL, margin(B_TTL))?.ok_or("the bench's lease was held by someone else")?;
        let granted = Instant::now();
        if design == Takeover::LockDelay {
            wait_lock_delay(&mut leases)?;
        }
        let accepted = store.write(&PartWrite { scope: "daily-report", part: "summary", content: "rows=200", writer: &holder, token: grant.token })?;
        latencies.push(granted.elapsed());
        if !accepted {
            return Err(format!("{}: the first write of holder {holder} (token {}) was refused", design.name(), grant.token).into());
        }
        leases.release(&grant)?;
    }
    latencies.sort_unstable();
    Ok(HandoverSample {
        design,
        p50: quantile(&latencies, 0.5).ok_or("no takeover was timed")?,
        max: *latencies.last().ok_or("no takeover was timed")?,
    })
}

/// The designs' samples of one run.
pub fn measure_all() -> Result<Vec<HandoverSample>> {
    Takeover::ALL.into_iter().map(measure).collect()
}

/// Nothing here is timed by a test; the table's figures come from a run.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_designs_are_named_as_the_book_names_them() {
        assert_eq!(Takeover::ALL.map(Takeover::name), ["fenced-scope", "claim-first", "lock-delay"]);
    }
}
