//! The cluster's configuration: its name and size, the port block, the
//! timing flags and the smallest lease TTL they give, where its folder
//! lives, and which `etcd` binary runs it.

use crate::etcd_client::{Gateway, MemberAddr};
use crate::error::{Result, ResultExt};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The cluster's name: etcd, article 26.
pub const NAME: &str = "etcd-26";

/// How many members: the smallest cluster that survives losing one.
pub const MEMBERS: usize = 3;

/// The address the members listen on: the only one on loopback. For F19,
/// on hosts of the lab's network, each member listens on its host's
/// address too, and on this one inside its host.
pub const HOST: &str = "127.0.0.1";

/// Client ports are base+1…base+3, peer ports base+11…base+13:
/// 26431–26433 and 26441–26443, beside `b3-26`'s 26426–26428 and, like
/// them, below the ephemeral range, where a busy machine's outgoing
/// connections take ports at random (seen here: a parallel run's
/// connections held 55802).
pub const DEFAULT_PORT_BASE: u16 = 26430;

/// How many consecutive ports the cluster takes from its base on
/// (base…base+13; the base itself and the gaps stay unused).
pub const PORTS: u16 = 14;

/// `--heartbeat-interval`: how often the leader tells followers it lives.
pub const HEARTBEAT: Duration = Duration::from_millis(50);

/// `--election-timeout`: the base of how long a follower waits without a
/// heartbeat before it starts an election (raft draws each wait at random
/// between one and two of these, so that two followers seldom stand at
/// once). Ten heartbeats, as etcd advises.
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(500);

// The client gives one member two election timeouts to answer (see
// `etcd_client::ATTEMPT_TIMEOUT`): checked here, where the timeout is set.
const _: () = assert!(crate::etcd_client::ATTEMPT_TIMEOUT.as_millis() == 2 * ELECTION_TIMEOUT.as_millis());

/// The smallest lease TTL etcd grants with these flags; it raises any
/// shorter TTL to this.
pub const MIN_TTL: Duration = min_ttl(HEARTBEAT, ELECTION_TIMEOUT);

/// How long a member may take to stop on SIGTERM before it gets SIGKILL:
/// a leader whose followers are stopping tries to hand over leadership
/// first, and gives up after etcd's request timeout (about 5 s).
pub(super) const STOP_BOUND: Duration = Duration::from_secs(10);

/// etcd's minimum lease TTL for these timing flags, as etcd computes it
/// (`etcdserver/server.go`): `(3 × election ticks / 2) × heartbeat`,
/// rounded up to whole seconds, where election ticks = election timeout /
/// heartbeat.
pub const fn min_ttl(heartbeat: Duration, election_timeout: Duration) -> Duration {
    let ticks = election_timeout.as_millis() / heartbeat.as_millis();
    let millis = (3 * ticks / 2) * heartbeat.as_millis();
    Duration::from_secs(millis.div_ceil(1000) as u64)
}

/// The port base: `LAB_ETCD_PORT_BASE`, else [`DEFAULT_PORT_BASE`].
/// Children inherit it, so a holder talks to its parent's cluster.
pub fn port_base() -> Result<u16> {
    let base = match std::env::var("LAB_ETCD_PORT_BASE") {
        Ok(text) => text.parse().with_context(|| format!("LAB_ETCD_PORT_BASE={text:?} is not a port number"))?,
        Err(_) => DEFAULT_PORT_BASE,
    };
    if base == 0 || base > u16::MAX - 20 {
        return Err(format!("LAB_ETCD_PORT_BASE={base} leaves no room for ports base+1…base+13").into());
    }
    Ok(base)
}

/// The cluster's folder: `LAB_ETCD_DIR`, else `target/lab/etcd-26`.
pub fn default_dir() -> PathBuf {
    match std::env::var_os("LAB_ETCD_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => crate::paths::build_dir().join(NAME),
    }
}

/// The client side of the lab's cluster (by `LAB_ETCD_PORT_BASE`, logged
/// in with the credentials in `LAB_ETCD_DIR`), for a process that talks to
/// it without owning it (a holder).
pub fn gateway() -> Result<Gateway> {
    let dir = default_dir();
    super::auth::logged_in(Gateway::new(client_sockets(&dir, port_base()?)), &dir)
}

/// [`gateway`] through these members' client addresses (a holder on a
/// host of the lab's network reaches them by their hosts' addresses).
pub fn gateway_at(members: Vec<SocketAddr>) -> Result<Gateway> {
    super::auth::logged_in(Gateway::new(members.into_iter().map(MemberAddr::Tcp).collect()), &default_dir())
}

/// The members' client ports on loopback (inside their hosts, F19).
pub(super) fn client_addrs(base: u16) -> Vec<SocketAddr> {
    (0..MEMBERS).map(|i| SocketAddr::from(([127, 0, 0, 1], client_port(base, i)))).collect()
}

/// Member `i`'s client port in block `base`.
pub(super) fn client_port(base: u16, i: usize) -> u16 {
    base + 1 + i as u16
}

/// Member `i`'s peer port in block `base`.
pub(super) fn peer_port(base: u16, i: usize) -> u16 {
    base + 11 + i as u16
}

/// Member `i`'s name: `m1`, `m2`, `m3`.
pub(super) fn member_name(i: usize) -> String {
    format!("m{}", i + 1)
}

/// The name of member `i`'s socket for `port` in the cluster's folder,
/// `m1:26431`: etcd takes a Unix socket as `unix://NAME:PORT` and makes it
/// in its working directory, the cluster's folder.
pub(super) fn socket_name(i: usize, port: u16) -> String {
    format!("{}:{port}", member_name(i))
}

/// The members' client sockets in `dir`, for a cluster on this machine.
pub(super) fn client_sockets(dir: &Path, base: u16) -> Vec<MemberAddr> {
    (0..MEMBERS).map(|i| MemberAddr::Unix(dir.join(socket_name(i, client_port(base, i))))).collect()
}

/// The `etcd` binary (`LAB_ETCD_BIN`, else `PATH`, else `/usr/bin/etcd`) and
/// its version, which must be 3.4 or newer: the JSON gateway serves `/v3/…`
/// from 3.4 on (3.3 had `/v3beta/…`).
pub(super) fn find_etcd() -> Result<(PathBuf, String)> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("LAB_ETCD_BIN").map(PathBuf::from).into_iter().collect();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("etcd")));
    }
    candidates.push(PathBuf::from("/usr/bin/etcd"));
    let bin = candidates.into_iter().find(|c| c.is_file()).ok_or(
        "etcd not found: install it (Debian: apt-get install etcd-server), or set LAB_ETCD_BIN to the etcd binary",
    )?;
    let out = Command::new(&bin).arg("--version").output().with_context(|| format!("running {} --version", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("{} --version printed no version: {text:?}", bin.display()))?;
    let numbers: Vec<u32> = version.split('.').filter_map(|n| n.parse().ok()).collect();
    if numbers.len() < 2 || (numbers[0], numbers[1]) < (3, 4) {
        return Err(format!("{} is etcd {version}; the lab needs 3.4 or newer (its /v3/ JSON gateway)", bin.display()).into());
    }
    Ok((bin, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// etcd's minimum TTL: 1 s with the lab's flags, 2 s with etcd's
    /// defaults (100 ms / 1 s), 5 s for 300 ms / 3 s: the grants measured
    /// on etcd 3.4.23 (a TTL of 1 came back as 1, 2 and 5).
    #[test]
    fn min_ttl_follows_the_election_timeout() {
        assert_eq!(MIN_TTL, Duration::from_secs(1));
        assert_eq!(min_ttl(Duration::from_millis(100), Duration::from_millis(1000)), Duration::from_secs(2));
        assert_eq!(min_ttl(Duration::from_millis(300), Duration::from_millis(3000)), Duration::from_secs(5));
    }
}
