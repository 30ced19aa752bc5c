//! The lab's three-member etcd cluster, `etcd-26`, and its lifecycle: the
//! second lease backend's server, started and stopped by the lab itself,
//! like `b3-26`.
//!
//! Three members, `m1`…`m3`, each an `etcd` process listening on no TCP
//! port, only on two Unix sockets in the cluster's folder, named after the
//! ports of a block: one for clients (base+1…base+3: `m1:26431` with the
//! default base) and one for the other members (base+11…base+13:
//! `m1:26441`), base [`DEFAULT_PORT_BASE`] unless `LAB_ETCD_PORT_BASE`
//! says otherwise. For F19
//! ([`EtcdCluster::on_hosts`]) each member runs on a host of the lab's
//! network instead and listens on TCP, on its host's address (and its
//! host's own loopback), on those same ports; the block lies below the
//! kernel's range for outgoing connections (32768–60999 on Linux), so no
//! program's client socket can sit on such a port for a moment.
//! Everything lives in one folder named after the cluster
//! (`target/lab/etcd-26` unless `LAB_ETCD_DIR`), which the lab makes and
//! marks (see [`crate::safe_dir`]; a folder without the marker is refused,
//! never used or deleted): each member's data in `m1/`…, its log in
//! `m1.log`…, its pid in `m1.pid`…, the owner record in `owner`, and the
//! `root` user's password in `credentials` (mode 0600). Data is kept across
//! stop and start, like `b3-26`'s, so revisions (the tokens) never go back
//! while the folder lives.
//!
//! Authentication is on ([`auth`]), as a second wall behind the folder no
//! other account can enter (behind the hosts' namespaces, for F19): every
//! request proves the `root` user's password, so no other account can read
//! or change a lease key.
//!
//! Who owns a member process, and who ends it:
//! - a **run** ([`Owner::Run`]): the members are this process's children,
//!   with PR_SET_PDEATHSIG, so the kernel kills them if the run dies
//!   without cleaning up. The run keeps their pids in one registry; every
//!   exit path ends them through it: [`EtcdCluster`]'s drop, an error or a
//!   panic (drop again), and Ctrl-C ([`crate::interrupt::on_stop`]).
//!   The death signal fires when the *thread* that started the member
//!   ends, so a run starts and restarts members from the thread that
//!   outlives them (a case's own thread, not a helper thread).
//! - the **reader** ([`Owner::Reader`], `./run.sh etcd start`):
//!   the members run in a session of their own and outlive the command;
//!   their pid files (pid and process start time, so a reused pid is not
//!   taken for a member) let `stop` and `status` in another process find
//!   them.
//!
//! Before it starts anything, the start checks every member: on this
//! machine, that its sockets' paths fit a Unix socket address; on hosts
//! (F19), that its ports there are free, refusing a port held by anything
//! else and naming the process. It returns once etcd itself reports a
//! leader that every running member follows: the lab asks each member
//! (`/v3/maintenance/status`), with a bound; it never sleeps "long
//! enough".
//!
//! Timing: [`HEARTBEAT`] 50 ms and [`ELECTION_TIMEOUT`] 500 ms (etcd's
//! defaults are 100 ms and 1 s, tuned for real networks). On one machine a
//! heartbeat costs nothing; a follower campaigns after a wait that etcd's
//! raft draws anew between one and two election timeouts without a
//! heartbeat, so a new leader is elected within about a second. It
//! is not lower because the machine is shared: a member starved of the CPU
//! for an election timeout triggers an election nobody asked for. etcd
//! derives its smallest lease TTL from these: ⌈1.5 × election timeout⌉ in
//! whole seconds ([`MIN_TTL`], 1 s here; 2 s with the defaults).
//!
//! [`Owner::Run`]: crate::owner::Owner::Run
//! [`Owner::Reader`]: crate::owner::Owner::Reader


mod auth;
mod config;
mod lifecycle;
mod member;
mod run_members;
mod status;

pub use config::{
    default_dir, gateway, gateway_at, min_ttl, port_base, DEFAULT_PORT_BASE, PORTS, ELECTION_TIMEOUT, HEARTBEAT, HOST, MEMBERS, MIN_TTL, NAME,
};
pub use member::Member;
pub use run_members::stop_run_members;
pub use status::{ClusterStatus, MemberState};

use crate::error::Result;
use crate::hosts::Host;
use config::{client_addrs, client_sockets, find_etcd};
use crate::etcd_client::{Gateway, MemberAddr};
use std::path::{Path, PathBuf};

/// The lab's etcd cluster: where it lives, its ports, its binary.
///
/// Dropping it kills and reaps the members that this process started for
/// a run in its folder (members the reader started stay up).
#[derive(Debug)]
pub struct EtcdCluster {
    /// Holds `m1/`…, `m1.log`…, `m1.pid`… and `owner`.
    dir: PathBuf,
    /// The port base (see [`DEFAULT_PORT_BASE`]).
    base: u16,
    /// The `etcd` binary.
    bin: PathBuf,
    /// Its version, e.g. `3.4.23`.
    version: String,
    /// The client side, over the members' client sockets (their client
    /// ports, on hosts).
    gateway: Gateway,
    /// The hosts of the lab's network the members run on, one each (F19);
    /// `None`: all on this machine, on Unix sockets in the cluster's folder.
    hosts: Option<Vec<Host>>,
}

impl EtcdCluster {
    /// The lab's cluster: `LAB_ETCD_DIR` and `LAB_ETCD_PORT_BASE`, or the defaults.
    pub fn locate() -> Result<EtcdCluster> {
        EtcdCluster::new(default_dir(), port_base()?)
    }

    /// A cluster in `dir` (a folder named after the cluster) on port block
    /// `base`. A `dir` that exists must be one the lab made (it carries the
    /// lab's marker): its pid files name the processes the lab signals.
    pub fn new(dir: impl Into<PathBuf>, base: u16) -> Result<EtcdCluster> {
        let dir = dir.into();
        let (bin, version) = find_etcd()?;
        let gateway = auth::logged_in(Gateway::new(client_sockets(&dir, base)), &dir)?;
        Ok(EtcdCluster { dir, base, bin, version, gateway, hosts: None })
    }

    /// The same cluster with member `i` on `hosts[i]` of the lab's network
    /// (F19): each member listens on its host's address, the members reach
    /// each other across the switch (so a partition can cut them apart),
    /// and the lab reads each member over its host's own loopback.
    pub fn on_hosts(mut self, hosts: Vec<Host>) -> Result<EtcdCluster> {
        if hosts.len() != MEMBERS {
            return Err(format!("etcd cluster {NAME} needs {MEMBERS} hosts, one per member, not {}", hosts.len()).into());
        }
        let routes = hosts.iter().cloned().map(Some).collect();
        self.gateway = auth::logged_in(Gateway::routed(client_addrs(self.base).into_iter().map(MemberAddr::Tcp).collect(), routes), &self.dir)?;
        self.hosts = Some(hosts);
        Ok(self)
    }

    /// The members' client addresses as the other hosts of the lab's network
    /// reach them (F19). Without hosts, loopback addresses, on which the
    /// members do not listen: on this machine they have only their sockets.
    pub fn client_addrs(&self) -> Vec<std::net::SocketAddr> {
        (0..MEMBERS).map(|i| std::net::SocketAddr::new(self.member_ip(i), self.member(i).client_port)).collect()
    }

    /// Member `i`'s address: its host's, or loopback (without hosts).
    fn member_ip(&self, i: usize) -> std::net::IpAddr {
        self.hosts.as_ref().map_or(std::net::IpAddr::from([127, 0, 0, 1]), |h| h[i].addr().into())
    }

    /// The host member `i` lives on, if it is on one.
    fn member_host(&self, i: usize) -> Option<&Host> {
        self.hosts.as_ref().map(|hosts| &hosts[i])
    }

    /// The cluster's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The etcd version, e.g. `3.4.23`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The client side of this cluster.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }
}
