//! What the partition cases (F17, F18, F19) share: a network of hosts
//! ([`crate::hosts`]), servers of the lab's own started on them, holders
//! started on theirs, and the premise every one of them checks first: that
//! the partition it is about to judge is really there.
//!
//! The servers are siblings of `b3-26` (see [`crate::cluster::tied`]), each
//! in its own place, on `LAB_PORT` + an offset, and on its host of the
//! network: the lease store on `lease` (F17), F14's primary and standby on
//! `lease-p` and `lease-s` (F18), the resource on `resource` (all three).
//! The resource is never in a group of a partition: every holder reaches
//! it, as a fence on a store of its own would be reached.

use super::Lab;
use crate::cluster::tied::{Starting, TiedServer};
use crate::cluster::{Cluster, Endpoint};
use crate::db;
use crate::error::Result;
use crate::holder::HolderArgs;
use crate::holder_guard::HolderGuard;
use crate::hosts::{Host, Reach};
use crate::{poll, timeline};
use crate::transcript::Transcript;

/// F17's lease store: `b3-26-lease`, on `LAB_PORT` + 3.
pub const LEASE_OFFSET: u16 = 3;

/// The resource of every partition case: `b3-26-resource`, on `LAB_PORT` + 4.
pub const RESOURCE_OFFSET: u16 = 4;

/// Starts the sibling server `role` on `host` (made the first time).
pub fn start_server(lab: &Lab, role: &str, offset: u16, host: &Host) -> Result<TiedServer> {
    TiedServer::start(lab.cluster.sibling(role, offset)?.on_host(host))
}

/// Launches the sibling server `role` on `host` and returns while it boots
/// (see [`TiedServer::launch`]): the case starts something else meanwhile.
pub fn launch_server(lab: &Lab, role: &str, offset: u16, host: &Host) -> Result<Starting> {
    TiedServer::launch(lab.cluster.sibling(role, offset)?.on_host(host))
}

/// A fresh `res26` on `resource`: every timeline starts from floor 0.
pub fn fresh_resource(resource: &TiedServer) -> Result<()> {
    db::setup::reloaded_databases(&resource.server().endpoint(), &[(db::RES_DB, db::RES_SCHEMA)])
}

/// Runs `there` on a thread of its own and `here` on this one, at once;
/// both results, or the error of either (when both fail, `here`'s, with
/// `there`'s after it). `here` is the one that may start a server: a tied
/// server's postmaster ends with the thread that started it (see
/// [`crate::cluster::tied`]), which must be the case's own. `there` is
/// SQL on another server (a reset), nothing that starts one.
pub fn at_once<A: Send, B>(there: impl FnOnce() -> Result<A> + Send, here: impl FnOnce() -> Result<B>) -> Result<(A, B)> {
    std::thread::scope(|threads| {
        let there = threads.spawn(there);
        let here = here();
        let there = there.join().unwrap_or_else(|_| Err("a step run at once with another panicked".into()));
        match (there, here) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
            (Err(other), Err(e)) => Err(format!("{}; and at the same time: {}", crate::error::chain(e.as_ref()), crate::error::chain(other.as_ref())).into()),
        }
    })
}

/// A holder on `host`, its lease store and resource named by the servers'
/// network addresses (it reaches them across the switch, as the host it
/// runs on does).
pub fn holder_on(lab: &Lab, host: &Host, args: &HolderArgs) -> Result<HolderGuard> {
    HolderGuard::spawn_on(host, &lab.holder_bin, args)
}

/// `args` with its lease store and resource on these servers (their
/// network endpoints: addresses on the lab's subnet).
pub fn on_servers(args: HolderArgs, lease: Option<&Endpoint>, resource: &Endpoint) -> HolderArgs {
    HolderArgs {
        lease_server: lease.map(Endpoint::socket_addr),
        lease_server_dir: lease.map(|e| e.dir.clone()),
        resource_server: Some(resource.socket_addr()),
        resource_server_dir: Some(resource.dir.clone()),
        ..args
    }
}

/// One connection attempt of a premise: from which host, to which server
/// (its name in the line), where, and what it must get.
pub struct Probe<'a> {
    /// The host the attempt is made from.
    pub from: &'a Host,
    /// The server's name, as the line shows it.
    pub to: &'a str,
    /// Where the server listens on the network.
    pub at: std::net::SocketAddr,
    /// What the attempt must get.
    pub expect: Reach,
}

// ANCHOR: show_reach
/// The premise of a partition case, as one check line: each probe's
/// connection attempt, made from its host (see [`Host::reach`]), gets what
/// it must. A cut that was not made, or made between the wrong hosts,
/// fails here, before anything is judged under it.
pub fn show_reach(t: &mut Transcript, what: &str, probes: &[Probe]) -> Result<bool> {
    let expected: Vec<String> = probes.iter().map(|p| format!("{}→{} {}", p.from.name(), p.to, p.expect)).collect();
    // All at once, each on a thread of its own: the silent ones wait out
    // one bound together, not one each. Waiting out a silence is the
    // premise's own time: by design.
    let reached: Vec<Result<Reach>> = poll::designed(|| {
        std::thread::scope(|scope| {
            let attempts: Vec<_> = probes.iter().map(|p| scope.spawn(move || p.from.reach(p.at))).collect();
            attempts.into_iter().map(|a| a.join().unwrap_or_else(|_| Err("a probe's thread panicked".into()))).collect()
        })
    });
    let mut actual = Vec::new();
    for (probe, reach) in probes.iter().zip(reached) {
        actual.push(format!("{}→{} {}", probe.from.name(), probe.to, reach?));
    }
    Ok(t.check_eq_shown(what, expected.join(", "), actual.join(", ")))
}
// ANCHOR_END: show_reach

/// Keeps the rows of a case's own servers for its picture (see
/// [`timeline::stash_from`]): the lease events of `leases`, the write
/// attempts of `resources`.
pub fn keep_for_timeline(leases: &[&Cluster], resources: &[&Cluster]) {
    let endpoints = |servers: &[&Cluster]| servers.iter().map(|s| s.endpoint()).collect::<Vec<_>>();
    timeline::stash_from(&endpoints(leases), &endpoints(resources));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails(what: &'static str) -> Result<u8> {
        Err(what.into())
    }

    #[test]
    fn at_once_returns_both_results_or_every_error() {
        assert_eq!(at_once(|| Ok(1), || Ok(2)).unwrap(), (1, 2));
        assert_eq!(at_once(|| fails("there"), || Ok(2)).unwrap_err().to_string(), "there");
        assert_eq!(at_once(|| Ok(1), || fails("here")).unwrap_err().to_string(), "here");
        // Both failed: the case thread's own error first, the other kept.
        assert_eq!(at_once(|| fails("there"), || fails("here")).unwrap_err().to_string(), "here; and at the same time: there");
    }

    #[test]
    fn a_panic_on_the_other_thread_is_an_error() {
        let e = at_once(|| -> Result<u8> { panic!("reset exploded") }, || Ok(2)).unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
    }
}
