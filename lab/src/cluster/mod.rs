//! The lab's throw-away PostgreSQL cluster, `b3-26`, and its lifecycle.
//!
//! One piece of code owns the cluster: it initialises it in its own folder
//! (see [`crate::paths::cluster_place`]), starts it on a Unix socket in
//! that folder and nothing else (no TCP port: see below), stops it, and crash-stops it (`pg_ctl stop -m
//! immediate`: no checkpoint, so the next start replays the WAL; F8).
//! PostgreSQL refuses to run as root, so when the lab runs as root every
//! server command runs as the unprivileged `postgres` account that Debian's
//! packages create.
//!
//! The cluster's folder, its *place*, is split by who may write where
//! (see [`crate::safe_dir`]):
//!
//! | path | owner, mode | what |
//! |---|---|---|
//! | `<place>/` | the lab's account, 0711 (0700 when it runs the server itself) | made and marked by the lab ([`crate::safe_dir::MARKER`]) |
//! | `<place>/credentials`, `owner`, `lock` | the lab's account, 0600 | passwords, who started the server, the run lock |
//! | `<place>/server/` | the server account, 0700 | `data/`, `socket/`, `postgres.log` |
//! | `<place>/primary/`, `standby/` | as `<place>/` | F14's two servers, each a place of its own |
//!
//! The server account can change anything in `server/`, so the lab reaches
//! into it only through descriptors (no link followed, the owner checked);
//! it never writes by path into a folder that account owns, and the
//! account cannot touch the lab's own files beside it.
//!
//! One file per job:
//! - [`binaries`]: finding `initdb`, `pg_ctl`, `postgres` of version 15+;
//! - [`lifecycle`]: initdb, start, stop, immediate stop;
//! - [`credentials`]: the two roles' random passwords, readable by the
//!   reader's account only: no other local account gets in;
//! - who started the running server (a run, or the reader) is recorded
//!   with [`crate::owner`], so that a server left by a killed run is
//!   stopped by the next one;
//! - [`session`]: a run's ownership of the cluster: [`Session`] starts it
//!   if needed and stops it again at the end, on an error, on a panic and
//!   (via [`crate::interrupt`]) on Ctrl-C; a cluster the reader started by
//!   hand with `lab cluster start` is left running, so the tables can be
//!   inspected;
//! - [`diagnose`]: what a failed server command or a held port tells the reader;
//! - [`tied`]: the servers a run starts as its own children beside
//!   `b3-26`, each in a place of its own (F14's pair, the partition cases'
//!   lease and resource servers), tied to the run so no kill leaves them
//!   up; a server on a host of the lab's network starts inside it;
//! - [`replica`]: F14's lease store on two servers of its own, a primary and
//!   its streaming standby, beside `b3-26`: the same lifecycle, twice, plus a
//!   base backup and a promotion.
//! - [`etcd`]: the second lease backend's server, a three-member etcd
//!   cluster `etcd-26` on Unix sockets in its own folder (no TCP port), or
//!   for F19 one member on each of three hosts of the lab's network
//!   (start, stop, status, kill a member with SIGKILL, restart it, ask for
//!   the leader), owned by a run or by the reader like `b3-26`. It talks to
//!   its members through [`crate::etcd_client`], the client of etcd's JSON
//!   gateway, which sits below this module.
//!
//! **No port, no password on the wire.** Every client on this machine (the
//! lab, the holders, `./run.sh psql`, a standby) reaches a server through
//! its Unix socket, in the server account's 0700 folder inside the lab's
//! place: no other account can put a socket there, so none can pose as
//! the server and ask for a password. A loopback port, by contrast, is
//! free for any account to take while a server restarts (F8, F13, F14),
//! and the next client would hand it its password. Only a server on a host
//! of the lab's network also listens on a TCP address, inside namespaces
//! no other account can enter. `LAB_PORT` still names the server: its
//! socket is `.s.PGSQL.<port>`.
//!
//! Nothing here speaks SQL but one transaction: [`access`] gives the roles
//! new passwords as part of every start (an `ALTER ROLE` per role, over the
//! socket, with the driver itself). Everything else is the `db` module's,
//! one layer up, which connects to the running server ([`Endpoint`] says
//! where, and with whose passwords).

mod access;
mod binaries;
mod copy_over;
pub mod credentials;
pub mod diagnose;
pub mod etcd;
mod lifecycle;
pub mod replica;
mod session;
pub mod tied;

pub use session::{lock_runs, stop_owned, Session};

use crate::error::{Result, ResultExt};
use crate::hosts::Host;
use crate::paths;
use crate::safe_dir::{Account, SafeDir};
use nix::fcntl::OFlag;
use nix::unistd::User;
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// The cluster's name: batch 3, article 26.
pub const NAME: &str = paths::CLUSTER_NAME;

/// The loopback address. No server of the lab's listens on it: on this
/// machine a server has only its Unix socket. [`free_ports`] probes it for
/// a free block, a server on a host of the lab's network has its port
/// checked there inside its host, and [`Endpoint::addr`] holds it where no
/// other address applies.
pub const HOST: &str = "127.0.0.1";

/// The cluster's port unless `LAB_PORT` says otherwise. F14's two servers
/// take the next two (26427, 26428). Below Linux's ephemeral range
/// (32768–60999 by default, `/proc/sys/net/ipv4/ip_local_port_range`): a
/// port in that range can be taken at random by any outgoing connection on
/// the machine, as a chaos run's own proxies once took F14's 55512.
pub const DEFAULT_PORT: u16 = 26426;

/// How many consecutive ports a cluster takes from its port on: its own
/// and F14's primary and standby. The partition cases' servers use
/// `LAB_PORT` + 3 and + 4 besides (`cases/partitioned.rs`), listening on
/// TCP only inside their hosts' namespaces, never on this machine's.
pub const PORTS: u16 = 3;

/// The first port of `count` consecutive loopback ports that nobody
/// listens on right now, below the ephemeral range (see [`DEFAULT_PORT`]),
/// for a private cluster (`LAB_PORT`: [`PORTS`]) or a private etcd cluster
/// (`LAB_ETCD_PORT_BASE`: [`etcd::PORTS`]). Where the search starts
/// depends on the process and the time, so two runs that look at once
/// rarely pick the same block; a block taken between this look and the
/// server's start is reported by the cluster's start, never adopted.
/// `LAB_FREE_PORTS=low-high` narrows the search to that range: the test
/// suite gives each of its parallel groups a range of its own, so two
/// groups never pick the same block.
pub fn free_ports(count: u16) -> Result<u16> {
    let (low, high) = match std::env::var("LAB_FREE_PORTS") {
        Ok(text) => text
            .split_once('-')
            .and_then(|(lo, hi)| Some((lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?)))
            .ok_or_else(|| format!("LAB_FREE_PORTS={text:?} is not a range low-high"))?,
        Err(_) => (20000, 32000),
    };
    free_ports_in(low, high, count)
}

/// [`free_ports`] within `low..high`.
pub fn free_ports_in(low: u32, high: u32, count: u16) -> Result<u16> {
    if !(low < high && high <= 32768 && high - low > 2 * u32::from(count)) {
        return Err(format!("{low}-{high} is not a range of ports below 32768 with room for {count}").into());
    }
    let span = high - low - u32::from(count);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let start = std::process::id().wrapping_mul(7919).wrapping_add(nanos) % span;
    // Held for the whole search: two threads never probe at once and take
    // the same block.
    let mut handed_out = HANDED_OUT.lock();
    let mut taken = handed_out.clone();
    taken.extend(blocks_in_environment());
    for step in 0..span / u32::from(count) {
        let base = low + (start + step * u32::from(count)) % span;
        let block = (base, base + u32::from(count));
        if taken.iter().any(|&(from, to)| block.0 < to && from < block.1) {
            continue;
        }
        // Bound and dropped at once: only whether each can be bound now.
        if (block.0..block.1).all(|p| std::net::TcpListener::bind((HOST, p as u16)).is_ok()) {
            handed_out.push(block);
            return Ok(base as u16);
        }
    }
    Err(format!("no {count} consecutive free ports on {HOST} between {low} and {high}").into())
}

/// The blocks of ports (first, one past the last) this process has handed
/// out. A block looks free to the probe until its server binds it, seconds
/// later (after initdb): without this, the tests of one binary, each making
/// a private cluster on a thread of its own, could be handed the same
/// block, and the second server's start fails ("Address already in use",
/// once in the privacy group). Never emptied: a run hands out a few dozen.
static HANDED_OUT: parking_lot::Mutex<Vec<(u32, u32)>> = parking_lot::Mutex::new(Vec::new());

/// The blocks this process's environment gives its clusters (`LAB_PORT`,
/// `LAB_ETCD_PORT_BASE`), which may not be bound yet either.
fn blocks_in_environment() -> Vec<(u32, u32)> {
    [("LAB_PORT", PORTS), ("LAB_ETCD_PORT_BASE", etcd::PORTS)]
        .into_iter()
        .filter_map(|(var, count)| Some((std::env::var(var).ok()?.parse::<u32>().ok()?, count)))
        .map(|(base, count)| (base, base + u32::from(count)))
        .collect()
}

/// The port clients connect to and the cluster listens on. The tests move
/// it (with `LAB_CLUSTER_DIR`) to run a private cluster; children inherit
/// it, so a holder always talks to its parent's cluster.
pub fn port() -> Result<u16> {
    match std::env::var("LAB_PORT") {
        Ok(text) => text.parse().with_context(|| format!("LAB_PORT={text:?} is not a port number")),
        Err(_) => Ok(DEFAULT_PORT),
    }
}

/// The lab's cluster: where it lives and how to run its server commands.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// `b3-26`, or one of F14's servers (`b3-26-primary`, `b3-26-standby`).
    name: String,
    /// Holds `data/`, `socket/` and `postgres.log`.
    dir: PathBuf,
    /// The folder with `initdb`, `pg_ctl`, `postgres`, `pg_controldata`.
    bin: PathBuf,
    /// The server binaries' major version.
    major: u32,
    /// The account server commands run as, when the lab runs as root.
    run_as: Option<User>,
    /// The port the server listens on.
    port: u16,
    /// The host of the lab's network it runs on (the partition cases'
    /// servers), listening on that host's address as well as its Unix
    /// socket; `None`: this machine, its Unix socket only.
    host: Option<Host>,
    /// The size of its WAL segments in MB, when not initdb's default of 16
    /// (see [`Cluster::with_wal_segment_mb`]).
    wal_segment_mb: Option<u32>,
}

impl Cluster {
    /// Finds the server binaries and the account to run them as.
    pub fn locate() -> Result<Cluster> {
        let (bin, major) = binaries::find_server_bin()?;
        let run_as = if nix::unistd::Uid::effective().is_root() {
            let user = paths::server_account().ok_or(
                "the lab runs as root, and PostgreSQL refuses to: it needs the unprivileged `postgres` \
                 account to run the server (Debian's postgresql package creates it; or `useradd --system postgres`)",
            )?;
            Some(user)
        } else {
            None
        };
        Ok(Cluster { name: NAME.into(), dir: paths::cluster_dir(), bin, major, run_as, port: port()?, host: None, wal_segment_mb: None })
    }

    /// The server's name: `b3-26`, `b3-26-primary`, `b3-26-standby`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where clients reach this server, and whose passwords they prove.
    pub fn endpoint(&self) -> Endpoint {
        // Its Unix socket: the only way in on this machine (a server on a
        // host also listens on the host's address, but the lab reads it
        // here, where no partition can cut it).
        Endpoint { name: self.name.clone(), addr: IpAddr::from([127, 0, 0, 1]), port: self.port, dir: self.dir.clone(), socket: Some(self.socket_dir()) }
    }

    /// Where the other hosts of the lab's network reach this server (a
    /// server on a host only): its host's address.
    pub fn network_endpoint(&self) -> Result<Endpoint> {
        let host = self.host.as_ref().ok_or_else(|| format!("{} is not on a host of the lab's network", self.name))?;
        Ok(Endpoint::at(&self.name, host.at(self.port), self.dir.clone()))
    }

    /// The cluster's folder, its place.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The place, made (and marked) the first time, checked every time:
    /// on a trusted path, this account's, carrying the lab's marker.
    pub fn place(&self) -> Result<SafeDir> {
        let shared = Path::new(paths::SHARED_PLACES);
        if self.dir.parent() == Some(shared) {
            // Root's folder for the places of closed checkouts: only root
            // creates entries in it; 0711 lets the server account pass.
            let (parent, name) = (shared.parent().expect("an absolute path"), shared.file_name().expect("a name"));
            SafeDir::open(parent)?.sub_dir(&name.to_string_lossy(), Account::me(), 0o711)?;
        }
        if self.dir.parent() == Some(paths::build_dir().as_path()) {
            // The default place's parent, which a fresh checkout has not made yet.
            paths::make_build_dir().with_context(|| format!("creating {}", paths::build_dir().display()))?;
        }
        SafeDir::open_or_make(&self.dir, self.place_mode())
    }

    /// The place if the lab has made it (an error if something else is there).
    pub fn existing_place(&self) -> Result<Option<SafeDir>> {
        SafeDir::open_made(&self.dir)
    }

    /// The place's mode: the server account passes through to `server/`.
    fn place_mode(&self) -> u32 {
        if self.run_as.is_some() {
            0o711
        } else {
            0o700
        }
    }

    /// Who owns `server/` and everything in it.
    pub(crate) fn server_owner(&self) -> Account {
        self.run_as.as_ref().map_or_else(Account::me, Account::of)
    }

    /// `server/`: the server account's folder in the place, made the first
    /// time (given to that account through its descriptor), checked every
    /// time (a real folder of that account's, open to nobody else).
    pub(crate) fn server_folder(&self) -> Result<SafeDir> {
        self.place()?.sub_dir(SERVER_FOLDER, self.server_owner(), 0o700)
    }

    /// `server/` if it exists.
    fn existing_server_folder(&self) -> Result<Option<SafeDir>> {
        match self.existing_place()? {
            Some(place) => place.existing_sub_dir(SERVER_FOLDER, self.server_owner(), 0o700),
            None => Ok(None),
        }
    }

    /// The text of a file in `server/` (`data/PG_VERSION`, say), read
    /// through descriptors; `None` when it (or the cluster) does not exist.
    pub(crate) fn read_server_file(&self, relative: &str) -> Result<Option<String>> {
        match self.existing_server_folder()? {
            Some(server) => server.read_file(relative, self.server_owner()),
            None => Ok(None),
        }
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(SERVER_FOLDER).join("data")
    }

    /// The server log; F8 reads its recovery messages from here.
    pub fn log_path(&self) -> PathBuf {
        log_path(&self.dir)
    }

    /// The folder of the server's Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        socket_dir(&self.dir)
    }

    /// The server's Unix socket itself: `.s.PGSQL.<port>` in its folder.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir().join(format!(".s.PGSQL.{}", self.port))
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of the server binaries (psql is looked for there first).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// `Database cluster state` from `pg_controldata`: `in production` while
    /// running or after a crash, `shut down` after a clean stop.
    pub fn control_state(&self) -> Result<String> {
        self.control_field("Database cluster state")
    }

    /// One field of `pg_controldata`'s report (its untranslated label,
    /// without the colon), trimmed; a report without it is an error.
    pub(super) fn control_field(&self, label: &str) -> Result<String> {
        let out = self.server_command("pg_controldata").arg(self.data_dir()).output()?;
        if !out.status.success() {
            return Err(diagnose::command_error("pg_controldata", &out, None).into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix(label)?.strip_prefix(':'))
            .map(|s| s.trim().to_owned())
            .ok_or_else(|| format!("pg_controldata printed no {label:?}").into())
    }

    /// The server log, opened through descriptors (it is in the server
    /// account's folder: a link there is refused, not followed).
    fn open_log(&self) -> Result<std::fs::File> {
        let server = self.existing_server_folder()?.ok_or_else(|| format!("{} has no server folder yet (has the cluster been started?)", self.dir.display()))?;
        server.open_file(LOG_NAME, OFlag::O_RDONLY, self.server_owner()).context("opening the server log")
    }

    /// The current length of the server log, to read what follows later.
    pub fn log_len(&self) -> Result<u64> {
        Ok(self.open_log()?.metadata()?.len())
    }

    /// What the server logged from byte `offset` on.
    pub fn log_since(&self, offset: u64) -> Result<String> {
        let mut file = self.open_log()?;
        file.seek(SeekFrom::Start(offset))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The last `lines` lines of the server log, each on a new line,
    /// indented, for an error message (or why it cannot be read).
    pub fn log_tail(&self, lines: usize) -> String {
        match self.log_since(0) {
            Ok(text) => diagnose::tail(&text, lines),
            Err(e) => format!("\n  (cannot read it: {})", crate::error::chain(e.as_ref())),
        }
    }

    /// A human summary for `lab cluster status`.
    pub fn describe(&self) -> Result<String> {
        let state = if self.is_running()? { "running" } else { "stopped" };
        let mut text = format!(
            "cluster {}: {state}\n  server:  PostgreSQL {} ({})\n  listens: {} only (no TCP port)\n  data:    {}\n  log:     {}",
            self.name,
            self.major,
            self.bin.display(),
            self.socket_path().display(),
            self.data_dir().display(),
            self.log_path().display(),
        );
        if let Some(user) = &self.run_as {
            text.push_str(&format!("\n  runs as: {} (the lab runs as root)", user.name));
        }
        if let Some(moved) = &paths::cluster_place().moved {
            text.push_str(&format!("\n  why there: {moved}"));
        }
        Ok(text)
    }
}

/// Where a client reaches one of the lab's servers: `b3-26` on `LAB_PORT`,
/// F14's primary and standby beside it, or a server on one of the
/// partition cases' hosts. Each server has its own credentials file in its
/// folder (a standby has a copy of its primary's: physical replication
/// copies the roles too).
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The server's name, for messages.
    pub name: String,
    /// The address to connect to over TCP (when `socket` is `None`): from
    /// another host of the lab's network, the server's host's address
    /// there; for a holder sent through a delay proxy, [`HOST`]. A socket
    /// endpoint holds [`HOST`] too, which its connections do not use.
    pub addr: IpAddr,
    /// Its port.
    pub port: u16,
    /// Its folder, which holds its credentials file.
    pub dir: PathBuf,
    /// The server's Unix socket folder, when clients reach it there: every
    /// client on this machine (the folder is the server account's, 0700,
    /// inside the lab's own place: no other account can put a socket
    /// there, so no other account can pose as the server); `None`: over
    /// TCP, from another host of the lab's network.
    pub socket: Option<PathBuf>,
}

impl Endpoint {
    /// The lab's cluster `b3-26`, where this process's `LAB_PORT` and
    /// `LAB_CLUSTER_DIR` put it (no server binaries needed: a holder uses it).
    pub fn lab() -> Result<Endpoint> {
        let dir = paths::cluster_dir();
        Ok(Endpoint { name: NAME.into(), addr: IpAddr::from([127, 0, 0, 1]), port: port()?, socket: Some(socket_dir(&dir)), dir })
    }

    /// The server at `addr:port` whose credentials are in `dir`, reached
    /// over TCP from wherever the client runs (a holder on its host).
    pub fn at(name: &str, addr: SocketAddr, dir: PathBuf) -> Endpoint {
        Endpoint { name: name.into(), addr: addr.ip(), port: addr.port(), dir, socket: None }
    }

    /// `addr:port`.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.addr, self.port)
    }

    /// The server's Unix socket itself, when clients reach it there.
    pub fn socket_file(&self) -> Option<PathBuf> {
        self.socket.as_ref().map(|dir| dir.join(format!(".s.PGSQL.{}", self.port)))
    }

    /// The password of `role` on this server.
    pub fn password(&self, role: &str) -> Result<String> {
        credentials::password(&self.dir, role)
    }
}

/// The server account's folder inside a place.
const SERVER_FOLDER: &str = "server";

/// The server log's name in `server/`.
const LOG_NAME: &str = "postgres.log";

/// The Unix socket folder of the server whose place is `dir`.
pub fn socket_dir(dir: &Path) -> PathBuf {
    dir.join(SERVER_FOLDER).join("socket")
}

/// The server log of the cluster whose place is `dir`.
pub fn log_path(dir: &Path) -> PathBuf {
    dir.join(SERVER_FOLDER).join(LOG_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks handed out by one process never overlap, though nothing
    /// binds them: the tests of one binary pick theirs before their
    /// servers start. (Above the suite's ranges, 20000–32000, so no
    /// group's server is probed.) Without the record, twelve random picks
    /// of 3 among 97 starts overlap in almost every run.
    #[test]
    fn blocks_handed_out_never_overlap() {
        let blocks: Vec<u32> = (0..12).map(|_| u32::from(free_ports_in(32600, 32700, PORTS).unwrap())).collect();
        for (i, a) in blocks.iter().enumerate() {
            for b in &blocks[i + 1..] {
                assert!(a.abs_diff(*b) >= 3, "blocks at {a} and {b} overlap: {blocks:?}");
            }
        }
    }
}
