//! The lab's three-member etcd cluster, `etcd-26`, and its lifecycle: the
//! second lease backend's server, started and stopped by the lab itself,
//! like `b3-26`.
//!
//! Three members, `m1`…`m3`, each an `etcd` process listening on
//! 127.0.0.1 only: client ports base+1…base+3, peer ports base+11…base+13
//! (base [`DEFAULT_PORT_BASE`] unless `LAB_ETCD_PORT_BASE` says otherwise).
//! The block lies below the kernel's range for outgoing connections
//! (32768–60999 on Linux), so another program's client socket can never
//! sit on a member's port for a moment.
//! Everything lives in one folder named after the cluster
//! (`target/lab/etcd-26` unless `LAB_ETCD_DIR`): each member's data in
//! `m1/`…, its log in `m1.log`…, its pid in `m1.pid`…, and the owner
//! record in `owner`. Data is kept across stop and start, like `b3-26`'s,
//! so revisions (the tokens) never go back while the folder lives.
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
//! The start refuses a port held by anything else, naming the process, and
//! checks every port before it starts anything. It returns once etcd
//! itself reports a leader that every running member follows: the lab asks
//! each member (`/v3/maintenance/status`), with a bound; it never sleeps
//! "long enough".
//!
//! Timing: [`HEARTBEAT`] 50 ms and [`ELECTION_TIMEOUT`] 500 ms (etcd's
//! defaults are 100 ms and 1 s, tuned for real networks). On loopback a
//! heartbeat costs nothing; a follower notices a dead leader after one
//! election timeout, so a new leader is elected in about half a second. It
//! is not lower because the machine is shared: a member starved of the CPU
//! for an election timeout triggers an election nobody asked for. etcd
//! derives its smallest lease TTL from these: ⌈1.5 × election timeout⌉ in
//! whole seconds ([`MIN_TTL`], 1 s here; 2 s with the defaults).

pub mod gateway;

use super::diagnose;
use super::owner::{self, Owner};
use crate::error::{Result, ResultExt};
use crate::{interrupt, poll};
use gateway::{Gateway, Leader, MemberStatus};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The cluster's name: etcd, article 26.
pub const NAME: &str = "etcd-26";

/// How many members: the smallest cluster that survives losing one.
pub const MEMBERS: usize = 3;

/// The only address the members listen on.
pub const HOST: &str = "127.0.0.1";

/// Client ports are base+1…base+3, peer ports base+11…base+13:
/// 26431–26433 and 26441–26443, beside `b3-26`'s 26426–26428 and, like
/// them, below the ephemeral range, where a busy machine's outgoing
/// connections take ports at random (seen here: a parallel run's
/// connections held 55802).
pub const DEFAULT_PORT_BASE: u16 = 26430;

/// `--heartbeat-interval`: how often the leader tells followers it lives.
pub const HEARTBEAT: Duration = Duration::from_millis(50);

/// `--election-timeout`: how long a follower waits without a heartbeat
/// before it starts an election. Ten heartbeats, as etcd advises.
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(500);

/// The smallest lease TTL etcd grants with these flags; it raises any
/// shorter TTL to this.
pub const MIN_TTL: Duration = min_ttl(HEARTBEAT, ELECTION_TIMEOUT);

/// How long a member may take to stop on SIGTERM before it gets SIGKILL:
/// a leader whose followers are stopping tries to hand over leadership
/// first, and gives up after etcd's request timeout (about 5 s).
const STOP_BOUND: Duration = Duration::from_secs(10);

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

/// The client side of the lab's cluster (by `LAB_ETCD_PORT_BASE`), for a
/// process that talks to it without owning it (a holder).
pub fn gateway() -> Result<Gateway> {
    Ok(Gateway::new(client_addrs(port_base()?)))
}

fn client_addrs(base: u16) -> Vec<SocketAddr> {
    (0..MEMBERS).map(|i| SocketAddr::from(([127, 0, 0, 1], base + 1 + i as u16))).collect()
}

/// One member's name and ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// 0 for `m1`.
    pub index: usize,
    /// `m1`, `m2`, `m3`: etcd's `--name`.
    pub name: String,
    /// Where clients (and the gateway) connect.
    pub client_port: u16,
    /// Where the other members replicate to it.
    pub peer_port: u16,
}

/// One member as `status` sees it.
#[derive(Clone, Debug)]
pub struct MemberState {
    /// Its name and ports.
    pub member: Member,
    /// Its pid, when its process runs.
    pub pid: Option<u32>,
    /// What it says about itself, when it answers.
    pub status: Option<MemberStatus>,
}

/// The cluster as `status` sees it.
#[derive(Clone, Debug)]
pub struct ClusterStatus {
    /// Each member.
    pub members: Vec<MemberState>,
    /// The leader etcd agrees on, if any.
    pub leader: Option<Leader>,
    /// Who started it.
    pub owner: Option<Owner>,
}

/// A member started by this process for a run: its pid, to kill and reap it.
struct RunMember {
    /// The member process.
    pid: Pid,
    /// Its pid file, removed once it is reaped.
    pid_file: PathBuf,
}

/// The members this process started for a run, alive now. One owner ends
/// them: this registry, from a drop or from the interrupt cleanup.
static RUN_MEMBERS: Mutex<Vec<RunMember>> = Mutex::new(Vec::new());

/// Serialises start, stop, kill and restart within this process.
static LIFECYCLE: Mutex<()> = Mutex::new(());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills and reaps every member this process started for a run. The
/// interrupt cleanup; safe to call twice.
pub fn stop_run_members() {
    end_run_members(|_| true);
}

fn end_run_members(which: impl Fn(&Path) -> bool) {
    let mut members = lock(&RUN_MEMBERS);
    let (ending, keep): (Vec<RunMember>, Vec<RunMember>) = members.drain(..).partition(|m| which(&m.pid_file));
    *members = keep;
    for m in ending {
        // SIGCONT first, so a member a case froze is not left stopped if
        // the kill were to fail; SIGKILL ends it either way. Reaped here,
        // under the lock: afterwards the pid may be reused.
        let _ = kill(m.pid, Signal::SIGCONT);
        let _ = kill(m.pid, Signal::SIGKILL);
        let _ = waitpid(m.pid, None);
        let _ = fs::remove_file(&m.pid_file);
    }
}

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
    /// The client side, over the members' client ports.
    gateway: Gateway,
}

impl EtcdCluster {
    /// The lab's cluster: `LAB_ETCD_DIR` and `LAB_ETCD_PORT_BASE`, or the defaults.
    pub fn locate() -> Result<EtcdCluster> {
        EtcdCluster::new(default_dir(), port_base()?)
    }

    /// A cluster in `dir` (a folder named after the cluster) on port block `base`.
    pub fn new(dir: impl Into<PathBuf>, base: u16) -> Result<EtcdCluster> {
        let (bin, version) = find_etcd()?;
        Ok(EtcdCluster { dir: dir.into(), base, bin, version, gateway: Gateway::new(client_addrs(base)) })
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

    /// Member `i` (0 for `m1`).
    pub fn member(&self, i: usize) -> Member {
        assert!(i < MEMBERS, "etcd member index {i} out of 0..{MEMBERS}");
        Member {
            index: i,
            name: format!("m{}", i + 1),
            client_port: self.base + 1 + i as u16,
            peer_port: self.base + 11 + i as u16,
        }
    }

    /// Member `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(self.member(i).name)
    }

    /// Member `i`'s log (its stderr, appended across restarts).
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.member(i).name))
    }

    fn pid_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.pid", self.member(i).name))
    }

    /// Member `i`'s pid, when its recorded process still runs (same pid,
    /// same start time, not a zombie).
    pub fn pid(&self, i: usize) -> Option<u32> {
        let text = fs::read_to_string(self.pid_file(i)).ok()?;
        let (pid, started) = text.trim().split_once(' ')?;
        let (pid, started): (u32, u64) = (pid.parse().ok()?, started.parse().ok()?);
        match owner::state_and_start(pid) {
            Some((state, now)) if now == started && state != 'Z' => Some(pid),
            _ => None,
        }
    }

    /// Starts every member that is not running and waits until etcd has a
    /// leader that every running member follows. From nothing, `owner`
    /// becomes the cluster's owner; members missing from a running cluster
    /// are started for the owner it has. A cluster already up is left as is.
    pub fn start(&self, owner: Owner) -> Result<Leader> {
        {
            let _lifecycle = lock(&LIFECYCLE);
            if interrupt::requested() {
                return Err("interrupted".into());
            }
            let missing: Vec<usize> = (0..MEMBERS).filter(|&i| self.pid(i).is_none()).collect();
            let owner = if missing.len() == MEMBERS { owner } else { self.owner_of_running()? };
            // Every port first: a port held by something else ends the start
            // before any member runs.
            for &i in &missing {
                self.check_ports_free(i)?;
            }
            if !missing.is_empty() {
                fs::create_dir_all(&self.dir).with_context(|| format!("creating {}", self.dir.display()))?;
                if missing.len() == MEMBERS {
                    owner::write(&self.dir, &owner)?;
                }
            }
            for &i in &missing {
                self.spawn(i, &owner)?;
            }
        }
        self.wait_for_leader()
    }

    /// Stops every running member: SIGTERM (etcd closes cleanly), and
    /// SIGKILL for one still there after [`STOP_BOUND`]. Works on the
    /// reader's members from any process, by their pid files.
    ///
    /// The followers go first, then the leader, once it has stepped down. A
    /// leader that gets SIGTERM hands its leadership to a peer it still
    /// counts as connected, and waits for the handover up to etcd's request
    /// timeout: 6 s when that peer is stopping too (measured). A leader that
    /// lost its followers steps down within one or two election timeouts
    /// (raft's CheckQuorum, on in etcd), and a member that is not the leader
    /// exits at once on SIGTERM.
    pub fn stop(&self) -> Result<()> {
        let _lifecycle = lock(&LIFECYCLE);
        // This run's own members leave the registry: from here on the stop
        // below is their one owner.
        let own_pid_files: Vec<PathBuf> = (0..MEMBERS).map(|i| self.pid_file(i)).collect();
        lock(&RUN_MEMBERS).retain(|m| !own_pid_files.contains(&m.pid_file));
        let running: Vec<(usize, Pid)> =
            (0..MEMBERS).filter_map(|i| self.pid(i).map(|p| (i, Pid::from_raw(p as i32)))).collect();
        let leader = gateway::agreed_leader(&self.gateway.statuses()).map(|(index, _, _)| index);
        let (last, first): (Vec<_>, Vec<_>) = running.into_iter().partition(|(i, _)| Some(*i) == leader);
        let start = Instant::now();
        let mut forced = Vec::new();
        for (group, group_is_followers) in [(first, true), (last, false)] {
            for (_, pid) in &group {
                // SIGCONT first: a member a case froze must see the SIGTERM.
                let _ = kill(*pid, Signal::SIGCONT);
                let _ = kill(*pid, Signal::SIGTERM);
            }
            for (i, pid) in group {
                if !wait_gone(pid, STOP_BOUND.saturating_sub(start.elapsed()))? {
                    let _ = kill(pid, Signal::SIGKILL);
                    if !wait_gone(pid, poll::BOUND)? {
                        return Err(format!("etcd member {} (pid {pid}) survived SIGKILL", self.member(i).name).into());
                    }
                    forced.push(self.member(i).name);
                }
                let _ = fs::remove_file(self.pid_file(i));
            }
            if group_is_followers {
                if let Some(i) = leader {
                    self.wait_for_step_down(i);
                }
            }
        }
        owner::clear(&self.dir);
        if !forced.is_empty() {
            eprintln!("lab: etcd members {} did not stop within {STOP_BOUND:?} of SIGTERM; killed", forced.join(", "));
        }
        Ok(())
    }

    /// Starts the cluster from empty data for this run (F16, `lab
    /// lease-stores`): its revisions, the tokens, start at 1 again, as every
    /// case starts from fresh databases, so a transcript can lock them. A
    /// cluster that the reader or another live run has up is refused, not
    /// taken over (the run kills its leader); one left by a run that died is
    /// stopped first.
    pub fn start_fresh_for_run(&self) -> Result<Leader> {
        if (0..MEMBERS).any(|i| self.pid(i).is_some()) {
            match owner::read(&self.dir) {
                Some(run @ Owner::Run { .. }) if run.is_dead_run() => {}
                Some(Owner::Run { pid, .. }) => {
                    return Err(format!("lab run pid {pid} is using etcd cluster {NAME} ({}); wait for it to finish", self.dir.display()).into())
                }
                Some(Owner::Reader) | None => {
                    return Err(format!(
                        "etcd cluster {NAME} ({}) is running for the reader; a run starts it from empty data and kills its \
                         leader: stop it first with `./run.sh etcd stop`",
                        self.dir.display()
                    )
                    .into())
                }
            }
        }
        self.reset()?;
        self.start(Owner::this_run())
    }

    /// Stops the cluster and removes its folder: the next start makes a new
    /// cluster, whose revisions start again at 1.
    pub fn reset(&self) -> Result<()> {
        self.stop()?;
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).with_context(|| format!("removing {}", self.dir.display()))?;
        }
        Ok(())
    }

    /// Kills member `i` with SIGKILL, as a crash would, and waits until it
    /// is gone; returns its pid. Its data stays for [`Self::restart_member`].
    pub fn kill_member(&self, i: usize) -> Result<u32> {
        let _lifecycle = lock(&LIFECYCLE);
        let name = self.member(i).name;
        let pid = self.pid(i).ok_or_else(|| format!("etcd member {name} is not running"))?;
        let pid = Pid::from_raw(pid as i32);
        // A run's member leaves the registry first: this call is now its one
        // owner, and reaps it.
        lock(&RUN_MEMBERS).retain(|m| m.pid != pid);
        // SIGKILL cannot be caught: no clean close, no leadership handover;
        // the others learn of it by the missing heartbeats. What it had
        // acknowledged is safe: etcd syncs its log before it answers.
        kill(pid, Signal::SIGKILL).with_context(|| format!("killing etcd member {name} (pid {pid})"))?;
        if !wait_gone(pid, poll::BOUND)? {
            return Err(format!("etcd member {name} (pid {pid}) survived SIGKILL for {:?}", poll::BOUND).into());
        }
        let _ = fs::remove_file(self.pid_file(i));
        Ok(pid.as_raw() as u32)
    }

    /// Starts member `i` again from its data, for the cluster's owner, and
    /// waits until it follows the leader.
    pub fn restart_member(&self, i: usize) -> Result<Leader> {
        {
            let _lifecycle = lock(&LIFECYCLE);
            if interrupt::requested() {
                return Err("interrupted".into());
            }
            let name = self.member(i).name;
            if self.pid(i).is_some() {
                return Err(format!("etcd member {name} is already running").into());
            }
            if (0..MEMBERS).all(|j| self.pid(j).is_none()) {
                return Err(format!("etcd cluster {NAME} is not running: start it, not one member").into());
            }
            let owner = self.owner_of_running()?;
            self.check_ports_free(i)?;
            self.spawn(i, &owner)?;
        }
        self.wait_for_leader()
    }

    /// The leader, as etcd reports it now (see [`gateway::agreed_leader`]).
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.gateway.leader()
    }

    /// Waits until etcd reports a leader that every running member follows,
    /// within [`poll::BOUND`]. A member that exits meanwhile ends the wait
    /// with its log.
    pub fn wait_for_leader(&self) -> Result<Leader> {
        self.wait_for_leader_beyond(None)
    }

    /// Waits, like [`Self::wait_for_leader`], for a leader that is not
    /// `old` and that serves a later term than `old` did. etcd's status
    /// reports the term of the last entry a member *applied*: a member
    /// elected a moment ago still shows the old term until it has applied
    /// the empty entry every new leader appends to its log, so waiting for
    /// the term also waits for the new leader to be able to serve.
    pub fn wait_for_leader_after(&self, old: &Leader) -> Result<Leader> {
        self.wait_for_leader_beyond(Some(old))
    }

    fn wait_for_leader_beyond(&self, old: Option<&Leader>) -> Result<Leader> {
        let ready = poll::poll_until(poll::BOUND, Duration::from_millis(20), || -> Result<bool> {
            self.check_recorded_members_run()?;
            let statuses = self.gateway.statuses();
            let Some((_, id, term)) = gateway::agreed_leader(&statuses) else { return Ok(false) };
            let succeeds = old.is_none_or(|old| id != old.id && term > old.term);
            Ok(succeeds && (0..MEMBERS).filter(|&i| self.pid(i).is_some()).all(|i| statuses[i].as_ref().is_some_and(|s| s.leader == id)))
        })?;
        let leader = self.leader()?;
        if !ready {
            // A leader that never got past `old` is handed back as it is,
            // for the caller's check to judge and show.
            if let (Some(_), Some(seen)) = (old, leader) {
                return Ok(seen);
            }
            let logs: Vec<String> = (0..MEMBERS).map(|i| self.log_path(i).display().to_string()).collect();
            return Err(format!("etcd cluster {NAME} has no leader after {:?}; see {}", poll::BOUND, logs.join(", ")).into());
        }
        leader.ok_or_else(|| format!("etcd cluster {NAME} lost its leader right after electing it").into())
    }

    /// Each member's process and answer, and the leader.
    pub fn status(&self) -> Result<ClusterStatus> {
        let statuses = self.gateway.statuses();
        let members = (0..MEMBERS)
            .map(|i| MemberState { member: self.member(i), pid: self.pid(i), status: statuses[i].clone() })
            .collect();
        let leader = if gateway::agreed_leader(&statuses).is_some() { self.leader()? } else { None };
        Ok(ClusterStatus { members, leader, owner: owner::read(&self.dir) })
    }

    /// A human summary, for `lab etcd status`.
    pub fn describe(&self) -> Result<String> {
        let status = self.status()?;
        let up = status.members.iter().filter(|m| m.pid.is_some()).count();
        let leader = match &status.leader {
            Some(l) => format!("leader {} (term {})", l.name, l.term),
            None => "no leader".into(),
        };
        let mut text = format!("etcd cluster {NAME}: {up} of {MEMBERS} members running, {leader}");
        for m in &status.members {
            let pid = m.pid.map(|p| format!("pid {p}")).unwrap_or_else(|| "stopped".into());
            let said = match &m.status {
                Some(s) => format!("id {:x}, revision {}", s.id, s.revision),
                None => "no answer".into(),
            };
            text.push_str(&format!(
                "\n  {}: {pid}, client {HOST}:{}, peer {HOST}:{}, {said}",
                m.member.name, m.member.client_port, m.member.peer_port
            ));
        }
        let owner = match status.owner {
            Some(Owner::Reader) => "the reader (stays up until stop)".to_owned(),
            Some(run @ Owner::Run { pid, .. }) if run.is_dead_run() => format!("lab run pid {pid}, which is gone (killed before its cleanup)"),
            Some(Owner::Run { pid, .. }) => format!("lab run pid {pid} (stops it at its end)"),
            None => "nobody".to_owned(),
        };
        text.push_str(&format!(
            "\n  etcd:    {} ({}), heartbeat {HEARTBEAT:?}, election timeout {ELECTION_TIMEOUT:?}, minimum lease ttl {MIN_TTL:?}\n  folder:  {}\n  owner:   {owner}",
            self.version,
            self.bin.display(),
            self.dir.display()
        ));
        Ok(text)
    }

    /// Waits, within three election timeouts, until member `i` no longer
    /// calls itself the leader (or no longer answers).
    fn wait_for_step_down(&self, i: usize) {
        let bound = ELECTION_TIMEOUT * 3;
        let _ = poll::poll_until(bound, Duration::from_millis(20), || {
            Ok::<_, ()>(self.gateway.member_status(i).map_or(true, |s| s.leader != s.id))
        });
    }

    /// The owner to start members for, in a cluster that has running members.
    fn owner_of_running(&self) -> Result<Owner> {
        match owner::read(&self.dir) {
            Some(run @ Owner::Run { .. }) if run == Owner::this_run() => Ok(run),
            Some(Owner::Run { pid, .. }) => Err(format!(
                "lab run pid {pid} started etcd cluster {NAME} ({}) and still runs; wait for it to finish",
                self.dir.display()
            )
            .into()),
            // Up with no record: started by hand, so the reader's.
            Some(Owner::Reader) | None => Ok(Owner::Reader),
        }
    }

    /// A member whose pid file is there but whose process is not: it exited
    /// on its own (bad flags, a port taken meanwhile, a corrupt data dir).
    fn check_recorded_members_run(&self) -> Result<()> {
        for i in 0..MEMBERS {
            if self.pid_file(i).exists() && self.pid(i).is_none() {
                let log = self.log_path(i);
                return Err(format!(
                    "etcd member {} exited; its log {}:{}",
                    self.member(i).name,
                    log.display(),
                    diagnose::log_tail(&log, 8)
                )
                .into());
            }
        }
        Ok(())
    }

    fn check_ports_free(&self, i: usize) -> Result<()> {
        let member = self.member(i);
        for (port, what) in [(member.client_port, "client"), (member.peer_port, "peer")] {
            match TcpListener::bind((HOST, port)) {
                Ok(_probe) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    let holder = diagnose::who_listens(port).unwrap_or_else(|| {
                        "a connection, not a listener: the kernel gave the port to an outgoing connection \
                         (see /proc/sys/net/ipv4/ip_local_port_range)"
                            .into()
                    });
                    return Err(format!(
                        "port {port} on {HOST} ({what} port of etcd member {}) is already in use by {holder}, which is \
                         not the lab's etcd cluster ({}). The lab does not touch it: stop that process, free the port \
                         or choose another block with LAB_ETCD_PORT_BASE, then run again",
                        member.name,
                        self.dir.display()
                    )
                    .into());
                }
                Err(e) => return Err(e).context(format!("probing port {port}")),
            }
        }
        Ok(())
    }

    /// etcd's command line for member `i`.
    fn flags(&self, i: usize) -> Vec<String> {
        let url = |port: u16| format!("http://{HOST}:{port}");
        let member = self.member(i);
        let initial_cluster: Vec<String> =
            (0..MEMBERS).map(|j| self.member(j)).map(|m| format!("{}={}", m.name, url(m.peer_port))).collect();
        [
            ("--name", member.name.clone()),
            ("--data-dir", self.data_dir(i).display().to_string()),
            ("--listen-client-urls", url(member.client_port)),
            ("--advertise-client-urls", url(member.client_port)),
            ("--listen-peer-urls", url(member.peer_port)),
            ("--initial-advertise-peer-urls", url(member.peer_port)),
            // Used only on a member's first start; afterwards its data says
            // who the members are. The token carries the port block, so two
            // lab clusters can never join each other.
            ("--initial-cluster", initial_cluster.join(",")),
            ("--initial-cluster-token", format!("{NAME}-{}", self.base)),
            ("--initial-cluster-state", "new".into()),
            ("--heartbeat-interval", HEARTBEAT.as_millis().to_string()),
            ("--election-timeout", ELECTION_TIMEOUT.as_millis().to_string()),
            ("--logger", "zap".into()),
            ("--log-outputs", "stderr".into()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .collect()
    }

    /// Starts member `i`'s process for `owner` and records its pid.
    fn spawn(&self, i: usize, owner: &Owner) -> Result<()> {
        let name = self.member(i).name;
        let log = fs::OpenOptions::new().create(true).append(true).open(self.log_path(i))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(self.flags(i)).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // etcd also reads every flag from ETCD_* variables: none of the
        // caller's may change the member the lab asked for.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ETCD_") {
                cmd.env_remove(key);
            }
        }
        let spawned = match owner {
            Owner::Run { .. } => {
                // Its own process group: a Ctrl-C at the terminal reaches the
                // lab only, and the lab's cleanup ends the member.
                cmd.process_group(0);
                let parent = nix::unistd::getpid();
                // SAFETY: the closure runs in the forked child before exec and
                // calls only prctl(2) and getppid(2), both async-signal-safe,
                // and allocates nothing.
                unsafe {
                    cmd.pre_exec(move || {
                        // If the run dies without cleaning up (SIGKILL, a
                        // crash), the kernel kills the member.
                        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                        // The run may have died between fork and prctl: then
                        // no death signal will come, so do not start at all.
                        if nix::unistd::getppid() != parent {
                            return Err(std::io::Error::other("the lab exited while starting an etcd member"));
                        }
                        Ok(())
                    });
                }
                let mut members = lock(&RUN_MEMBERS);
                // Checked under the registry's lock: the interrupt cleanup
                // has either run already (then nothing new starts) or will
                // find this member in the registry.
                if interrupt::requested() {
                    return Err("interrupted".into());
                }
                interrupt::on_stop(stop_run_members);
                let child = cmd.spawn().with_context(|| format!("starting etcd member {name} ({})", self.bin.display()))?;
                let pid = Pid::from_raw(child.id() as i32);
                members.push(RunMember { pid, pid_file: self.pid_file(i) });
                pid
            }
            Owner::Reader => {
                // SAFETY: runs in the forked child before exec; setsid(2) is
                // async-signal-safe and nothing is allocated.
                unsafe {
                    // A session of its own: no terminal's hang-up or Ctrl-C
                    // reaches it; it lives until `stop`.
                    cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
                }
                let child = cmd.spawn().with_context(|| format!("starting etcd member {name} ({})", self.bin.display()))?;
                // Not waited for: it outlives this process (and is reaped by
                // whoever inherits it, or by `stop` if this process stops it).
                Pid::from_raw(child.id() as i32)
            }
        };
        // spawn() returns after the exec succeeded, so /proc has the process.
        let started = owner::start_time(spawned.as_raw() as u32).ok_or_else(|| format!("etcd member {name} vanished at once"))?;
        fs::write(self.pid_file(i), format!("{spawned} {started}\n"))?;
        Ok(())
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        let dir = self.dir.clone();
        end_run_members(|pid_file| pid_file.starts_with(&dir));
        if owner::read(&self.dir) == Some(Owner::this_run()) {
            owner::clear(&self.dir);
        }
    }
}

/// Waits until process `pid` is gone, within `bound`: reaps it if it is this
/// process's child, else watches `/proc` (a zombie counts as gone: its
/// parent reaps it). `Ok(false)` when the bound ran out.
fn wait_gone(pid: Pid, bound: Duration) -> Result<bool> {
    poll::poll_until(bound, Duration::from_millis(10), || -> Result<bool> {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => Ok(false),
            Ok(_) => Ok(true),
            // Not our child: ask /proc.
            Err(nix::errno::Errno::ECHILD) => {
                Ok(owner::state_and_start(pid.as_raw() as u32).is_none_or(|(state, _)| state == 'Z'))
            }
            Err(e) => Err(e.into()),
        }
    })
}

/// The `etcd` binary (`LAB_ETCD_BIN`, else `PATH`, else `/usr/bin/etcd`) and
/// its version, which must be 3.4 or newer: the JSON gateway serves `/v3/…`
/// from 3.4 on (3.3 had `/v3beta/…`).
fn find_etcd() -> Result<(PathBuf, String)> {
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

    /// Every member listens on loopback only, on its own two ports of the block.
    #[test]
    fn members_use_the_port_block_on_loopback() {
        let cluster = EtcdCluster {
            dir: PathBuf::from("/tmp/etcd-26"),
            base: 26430,
            bin: PathBuf::from("/usr/bin/etcd"),
            version: "3.4.23".into(),
            gateway: Gateway::new(client_addrs(26430)),
        };
        let ports: Vec<(u16, u16)> = (0..MEMBERS).map(|i| (cluster.member(i).client_port, cluster.member(i).peer_port)).collect();
        assert_eq!(ports, [(26431, 26441), (26432, 26442), (26433, 26443)]);
        let flags = cluster.flags(1).join(" ");
        assert!(flags.contains("--name m2 --data-dir /tmp/etcd-26/m2"), "{flags}");
        assert!(flags.contains("--listen-client-urls http://127.0.0.1:26432"), "{flags}");
        assert!(flags.contains("m1=http://127.0.0.1:26441,m2=http://127.0.0.1:26442,m3=http://127.0.0.1:26443"), "{flags}");
        assert!(!flags.contains("0.0.0.0"), "{flags}");
        assert_eq!(cluster.gateway().members()[2].to_string(), "127.0.0.1:26433");
    }
}
