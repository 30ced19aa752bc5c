//! The experiments, one module per case, and what they share.
//!
//! | case | shows | kind |
//! |---|---|---|
//! | F1 | the normal path and the lease state machine | component |
//! | F2 | equal tokens, renewal after expiry, `now()` in a long transaction | component |
//! | F3 | 16 concurrent acquires: one winner, or none while held | component, threads + barrier |
//! | F4 | a paused stale holder is refused by the resource | two processes, SIGSTOP |
//! | F5 | the same timeline without the resource check: the stale write wins | two processes, negative control |
//! | F6 | check-then-write races; the conditional UPDATE does not | component, latches + lock wait |
//! | F7 | a per-row fence lets a stale holder create new rows | component, negative control |
//! | F8 | immediate shutdown and WAL recovery keep lease, floor and token | crash recovery |
//! | F9 | a side effect with no token: idempotency keeps the first arrival | component, negative control |
//! | F10 | a holder killed (SIGKILL) inside its fenced write: nothing left, the lease not released | process, SIGKILL |
//! | F11 | a holder frozen inside the fence blocks every writer; the idle-in-transaction timeout ends it | processes, SIGSTOP, lock wait |
//! | F12 | a write delayed in the network goes stale in flight; the fence refuses it | a delaying proxy, negative control |
//! | F13 | clocks that run wrong: a slow holder clock, a server clock that jumps | libfaketime |
//! | F14 | the lease store fails over to an async standby: a token is issued twice; sync keeps it, at a price | primary + streaming standby, failover, negative control |
//! | F15 | chaos: eight holders under seeded pauses, kills, slow links and partitions (and database restarts when the schedule has them; seed 1's 20 s has none); the checker finds the fenced history clean, the unfenced one not | processes, SIGSTOP, SIGKILL, proxies, network hosts, history checker, negative control |
//! | F16 | F4's timeline with the lease on etcd; the etcd leader killed between two acquires: the token still grows | three-member etcd, SIGSTOP, SIGKILL |
//! | F17 | a holder cut off from the lease store, not from the resource: it stops in time; without its check the fence refuses it | network hosts, a partition in the switch |
//! | F18 | the 2018 pattern: the old primary and the promoted standby both grant; which configurations lose writes, which refuse them | network hosts, a partition between sites, a real promotion, negative controls |
//! | F19 | etcd's leader partitioned into the minority: no renewal, no grant; a new leader; the cut-off holder loses its lease and the fence refuses it | three etcd members on hosts, a partition |
//! | F20–F28 | the bug zoo: the lease bugs of published job queues and similar projects (Z1–Z9), each put back into the lab's queue and shown to harm, then the fixed queue (a token per claim, checked on every write) refusing | component, threads, negative controls |
//! | F29–F33 | a resource that cannot compare tokens, only its own version: a conditional write protects the object, not the lease (F29); an ETag's ABA (F30); lock-delay, which only waits (F31); each with claiming first, which refuses the stale holder; the probe that finds a store whose conditional writes are not atomic (F32); and a write whose answer was lost, retried (F33) | component, negative controls |
//! | F34 | the report as one object of such a store, the resource modes VERSION_CAS and CLAIM_FIRST that the chaos run, the bench and the model run: a stale holder that reads afresh tears the report; a claim refuses it | component, negative control |
//!
//! Every case starts from fresh schemas in both databases (F14 makes its
//! own lease store on servers of its own, F16 starts the etcd cluster from
//! empty data; both use `res26` like the others).

pub mod command;
pub mod common;
pub mod history;
pub mod f1;
pub mod f2;
pub mod f3;
pub mod f4;
pub mod f5;
pub mod f6;
pub mod f7;
pub mod f8;
pub mod f9;
pub mod f10;
pub mod f11;
pub mod f12;
pub mod f13;
pub mod f14;
pub mod f15;
pub mod f16;
pub mod f17;
pub mod f18;
pub mod f19;
pub mod f20;
pub mod f21;
pub mod f22;
pub mod f23;
pub mod f24;
pub mod f25;
pub mod f26;
pub mod f27;
pub mod f28;
pub mod f29;
pub mod f30;
pub mod f31;
pub mod f32;
pub mod f33;
pub mod f34;
pub mod job_queue;
pub mod own_sessions;
pub mod partitioned;
pub mod paused_holder;
pub mod run_data;
pub mod runner;
pub mod test_args;

pub use runner::{CaseTime, Runner};

use crate::cluster::Cluster;
use crate::db;
use crate::timeline;
use own_sessions::OwnSessions;
use crate::error::Result;
use crate::lease::LeaseStore;
use crate::params;
use crate::resource::{ResourceStore, ResourceView};
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use std::path::PathBuf;

/// The cases whose paused holder can stop before its deadline check
/// (`--pause-before-check`): they run [`paused_holder`]'s timeline.
pub const PAUSES_BEFORE_CHECK: [&str; 2] = ["F4", "F5"];

/// Knobs for the "things to try" of the book. The defaults are the article's
/// experiments, which the evidence locks.
#[derive(Clone, Debug)]
pub struct CaseOptions {
    /// Replaces the resource mode of the cases that take it (see [`Case::modes`]).
    pub mode: Option<FenceMode>,
    /// F4/F5: pause holder-a before its deadline check instead of after it.
    pub pause_before_check: bool,
    /// F3: how many threads race for the lease.
    pub threads: usize,
}

impl Default for CaseOptions {
    fn default() -> CaseOptions {
        CaseOptions { mode: None, pause_before_check: false, threads: params::RACERS }
    }
}

/// What a case runs against.
pub struct Lab {
    /// The `holder` binary, for every case with holder processes (F4, F5,
    /// F10–F13, F15–F19).
    pub holder_bin: PathBuf,
    /// The cluster, `b3-26`: F8 crashes and restarts it, F13 restarts it
    /// with a jumped clock, F11 reads its log, F15's chaos run restarts it;
    /// F14, F17, F18 and F19 start their own servers beside it, inside its
    /// place.
    pub cluster: Cluster,
    /// The reader's knobs.
    pub options: CaseOptions,
    /// The lab's own sessions for resets and pictures, kept for the run.
    pub own: OwnSessions,
}

impl Lab {
    /// Brings both schemas back to the ones in `sql/` as loaded: emptied
    /// when nothing changed them since their last load (the process's
    /// record, `db::setup::with_load_record`), loaded again otherwise (see
    /// `db::emptying`). What the timeline would need of
    /// the old rows is kept first (a case may reset halfway), and the case's
    /// history so far ends its stretch.
    ///
    /// The two databases are independent, so they are reset at once, each
    /// on a thread of its own: a reset takes as long as the slower one.
    pub fn reset(&self) -> Result<()> {
        history::cut();
        // Rows that cannot be read (the tables do not exist yet) are not an
        // error: there is nothing to keep.
        let (lease, writes) = std::thread::scope(|scope| {
            let lease = scope.spawn(|| self.own.reset(db::LEASE_DB, db::LEASE_SCHEMA, |c| timeline::lease_events_on(c).unwrap_or_default()));
            let writes = scope.spawn(|| self.own.reset(db::RES_DB, db::RES_SCHEMA, |c| timeline::write_events_on(c).unwrap_or_default()));
            (joined(lease), joined(writes))
        });
        timeline::stash(lease?, writes?);
        Ok(())
    }

    /// Replaces only the resource's schema: a case that runs a second
    /// timeline against the same grants (F6) starts the resource afresh.
    pub fn reset_resource(&self) -> Result<()> {
        self.own.reset(db::RES_DB, db::RES_SCHEMA, |_| ())
    }

    /// A lease service session for `who`.
    pub fn leases(&self, who: &str) -> Result<LeaseStore> {
        LeaseStore::connect(who)
    }

    /// A resource session for `who`, judging writes by `mode`.
    pub fn store(&self, mode: FenceMode, who: &str) -> Result<ResourceStore> {
        ResourceStore::connect(mode, who)
    }

    /// An observer of the resource.
    pub fn view(&self) -> Result<ResourceView> {
        ResourceView::connect()
    }
}

/// What a reset's thread returned; its panic is an error.
fn joined<T>(reset: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    reset.join().unwrap_or_else(|_| Err("a reset's thread panicked".into()))
}

/// One experiment.
pub struct Case {
    /// `F1` … `F19`.
    pub id: &'static str,
    /// The header's title, which may name the reader's knobs.
    pub title: fn(&CaseOptions) -> String,
    /// Runs the case's timeline and checks, after the header.
    pub run: fn(&Lab, &mut Transcript) -> Result<()>,
    /// The resource mode that `--mode` replaces; `None` where it does not apply.
    pub mode: Option<FenceMode>,
    /// The modes `--mode` may pick for this case: every mode for F4 and F5;
    /// for F6(b) and F7's scope half only the three forms of the scope
    /// fence, since their timelines need a fence that orders a scope's writers.
    pub modes: &'static [FenceMode],
    /// What the case needs besides PostgreSQL: `./run.sh` installs it (as
    /// root) only when a case it runs needs it (`lab needs`), and the book
    /// names these cases from this field.
    pub needs: &'static [Need],
}

/// A program a case needs besides PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// etcd (Debian's `etcd-server`): the lease on an etcd cluster.
    Etcd,
    /// `ip` and `nft` (iproute2, nftables): network hosts and partitions.
    Hosts,
    /// libfaketime: a holder whose clock is wrong.
    Faketime,
}

impl Need {
    pub const ALL: [Need; 3] = [Need::Etcd, Need::Hosts, Need::Faketime];

    /// How a command line names it (`lab needs etcd F16`).
    pub fn name(self) -> &'static str {
        match self {
            Need::Etcd => "etcd",
            Need::Hosts => "hosts",
            Need::Faketime => "faketime",
        }
    }
}

/// Whether any case that `args` runs needs `what`: the case ids among them
/// (or `all`), or every case when they name none (`./run.sh --mode …`). A
/// word shaped like a case id that names no case (`F99`) counts as named:
/// the run will refuse it, and nothing is installed for a typo.
pub fn any_needs(what: Need, args: &[impl AsRef<str>]) -> bool {
    let shaped_like_a_case = |a: &str| a.eq_ignore_ascii_case("all") || (a.len() > 1 && a.starts_with(['F', 'f']) && a[1..].chars().all(|c| c.is_ascii_digit()));
    let named: Vec<&str> = args.iter().map(AsRef::as_ref).filter(|a| shaped_like_a_case(a)).collect();
    let cases = if named.is_empty() { ALL.to_vec() } else { select(&named) };
    cases.iter().any(|c| c.needs.contains(&what))
}

impl Case {
    /// The name of a run of this case with `options`: `F4` for the
    /// article's run, `F4-unfenced`, `F4-pause-before-check`, `F3-threads-4`
    /// for the reader's variants (knobs that do not apply, or that repeat
    /// the default, add nothing).
    pub fn run_name(&self, options: &CaseOptions) -> String {
        let mut name = self.id.to_owned();
        if let (Some(own), Some(picked)) = (self.mode, self.mode_in_force(options)) {
            if own != picked {
                name.push('-');
                name.push_str(&picked.cli_name());
            }
        }
        if options.pause_before_check && self.takes_pause_before_check() {
            name.push_str("-pause-before-check");
        }
        if self.takes_threads() && options.threads != params::RACERS {
            name.push_str(&format!("-threads-{}", options.threads));
        }
        name
    }
}

impl Case {
    /// The resource mode this case runs with under `options`: the picked
    /// one when the case takes it, else its own.
    pub fn mode_in_force(&self, options: &CaseOptions) -> Option<FenceMode> {
        options.mode.filter(|m| self.modes.contains(m)).or(self.mode)
    }

    /// Whether `--mode picked` means something for this case.
    pub fn takes_mode(&self, picked: FenceMode) -> bool {
        self.modes.contains(&picked)
    }

    /// Whether `--threads` means something for this case: only F3 races
    /// threads for the lease.
    pub fn takes_threads(&self) -> bool {
        self.id == "F3"
    }

    /// Whether `--pause-before-check` means something for this case: only
    /// the paused holder's timeline (F4, F5) has a local deadline check to
    /// pause before.
    pub fn takes_pause_before_check(&self) -> bool {
        PAUSES_BEFORE_CHECK.contains(&self.id)
    }
}

/// A run the book tells the reader to try, with the flags it uses: its
/// transcript is locked as evidence too (`evidence/26/variants/`), so no
/// result of the book exists only as prose.
pub struct Variant {
    /// The case.
    pub case: &'static Case,
    /// The reader's knobs.
    pub options: CaseOptions,
    /// The flags as typed after `./run.sh F4`.
    pub flags: &'static [&'static str],
}

impl Variant {
    /// Its name, e.g. `F4-unfenced` (see [`Case::run_name`]).
    pub fn name(&self) -> String {
        self.case.run_name(&self.options)
    }
}

/// Every variant the book runs.
pub fn variants() -> Vec<Variant> {
    let with = |mode: Option<FenceMode>, pause_before_check: bool, threads: usize| CaseOptions { mode, pause_before_check, threads };
    vec![
        Variant { case: &f4::CASE, options: with(None, true, params::RACERS), flags: &["--pause-before-check"] },
        Variant { case: &f5::CASE, options: with(None, true, params::RACERS), flags: &["--pause-before-check"] },
        Variant { case: &f4::CASE, options: with(Some(FenceMode::FencedRow), false, params::RACERS), flags: &["--mode", "fenced-row"] },
        Variant { case: &f4::CASE, options: with(Some(FenceMode::CheckThenWrite), false, params::RACERS), flags: &["--mode", "check-then-write"] },
        Variant { case: &f4::CASE, options: with(Some(FenceMode::Unfenced), false, params::RACERS), flags: &["--mode", "unfenced"] },
        Variant { case: &f5::CASE, options: with(Some(FenceMode::FencedScope), false, params::RACERS), flags: &["--mode", "fenced-scope"] },
        Variant { case: &f3::CASE, options: with(None, false, 4), flags: &["--threads", "4"] },
        // The one-statement fence under the three timelines that tell fences apart.
        Variant { case: &f4::CASE, options: with(Some(FenceMode::FencedScopeCte), false, params::RACERS), flags: &["--mode", "fenced-scope-cte"] },
        Variant { case: &f6::CASE, options: with(Some(FenceMode::FencedScopeCte), false, params::RACERS), flags: &["--mode", "fenced-scope-cte"] },
        Variant { case: &f7::CASE, options: with(Some(FenceMode::FencedScopeCte), false, params::RACERS), flags: &["--mode", "fenced-scope-cte"] },
        // The reader/writer fence under the same three (F6 with its two races around a raise).
        Variant { case: &f4::CASE, options: with(Some(FenceMode::FencedScopeShared), false, params::RACERS), flags: &["--mode", "fenced-scope-shared"] },
        Variant { case: &f6::CASE, options: with(Some(FenceMode::FencedScopeShared), false, params::RACERS), flags: &["--mode", "fenced-scope-shared"] },
        Variant { case: &f7::CASE, options: with(Some(FenceMode::FencedScopeShared), false, params::RACERS), flags: &["--mode", "fenced-scope-shared"] },
    ]
}

/// Every case, in the article's order.
pub const ALL: [&Case; 34] = [
    &f1::CASE, &f2::CASE, &f3::CASE, &f4::CASE, &f5::CASE, &f6::CASE, &f7::CASE, &f8::CASE, &f9::CASE, &f10::CASE, &f11::CASE, &f12::CASE,
    &f13::CASE, &f14::CASE, &f15::CASE, &f16::CASE, &f17::CASE, &f18::CASE, &f19::CASE, &f20::CASE, &f21::CASE, &f22::CASE, &f23::CASE,
    &f24::CASE, &f25::CASE, &f26::CASE, &f27::CASE, &f28::CASE, &f29::CASE, &f30::CASE, &f31::CASE, &f32::CASE, &f33::CASE, &f34::CASE,
];

/// The case with this id (case-insensitive).
pub fn find(id: &str) -> Option<&'static Case> {
    ALL.iter().copied().find(|c| c.id.eq_ignore_ascii_case(id))
}

/// The cases some ids name, in the article's order; `all` names every case.
/// Ids that name no case are left out (the CLI refuses them earlier).
pub fn select(ids: &[impl AsRef<str>]) -> Vec<&'static Case> {
    let wanted = |case: &Case| ids.iter().any(|id| id.as_ref().eq_ignore_ascii_case("all") || id.as_ref().eq_ignore_ascii_case(case.id));
    ALL.iter().copied().filter(|c| wanted(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::{any_needs, Need};

    #[test]
    fn a_run_needs_what_its_cases_need() {
        assert!(any_needs(Need::Etcd, &["F16"]));
        assert!(any_needs(Need::Etcd, &["f19", "--runs", "3"]));
        assert!(!any_needs(Need::Etcd, &["F4", "--mode", "unfenced"]));
        assert!(!any_needs(Need::Hosts, &["F1", "F2"]));
        assert!(any_needs(Need::Hosts, &["F4", "F17"]));
        assert!(any_needs(Need::Faketime, &["all"]));
        // Flags only: every case runs.
        assert!(any_needs(Need::Faketime, &["--mode", "unfenced"]));
        assert!(!any_needs(Need::Faketime, &["F14"]));
        // A typo names no case: nothing to install for it.
        assert!(!any_needs(Need::Etcd, &["F99"]));
    }
}
