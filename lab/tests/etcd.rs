//! The two pieces F16 stands on, tested on their own against a private
//! three-member etcd cluster (a port block picked free once per process, a
//! private temporary folder): the cluster's lifecycle (`lab::cluster::etcd`)
//! and the lease operations over etcd (`lab::etcd_lease`).
//!
//! Contents:
//! - `a_held_port_is_refused`: the start names the process on a member's
//!   port and starts nothing.
//! - `a_killed_run_leaves_no_member`: a run killed with SIGKILL takes its
//!   members with it (PR_SET_PDEATHSIG); the run is this test binary again,
//!   running `run_that_gets_killed`.
//! - `etcd_cluster_and_leases`: one cluster, one thread, in order:
//!   1. `start_elects_a_leader`
//!   2. `the_minimum_ttl_is_one_second`
//!   3. `one_holder_at_a_time`
//!   4. `renewals_keep_the_holding`
//!   5. `expiry_by_etcds_clock_then_a_larger_token`
//!   6. `release_frees_at_once`
//!   7. `acquire_latency`
//!   8. `a_leader_change_restarts_the_countdown`
//!   9. `the_acquire_after_a_leader_kill_succeeds_with_a_larger_token`
//!   10. `the_readers_cluster_outlives_its_starter`
//!   11. no etcd process is left.
//!
//! One test owns the cluster from start to end, on one thread: members die
//! with the thread that started them (PR_SET_PDEATHSIG), and the steps
//! share its tokens. The measured numbers are printed (`--nocapture`).
//!
//! Why this file stays whole: one test binary for the etcd
//! cluster's lifecycle, whose tests share its ports and its leftover
//! checks.

mod common;

use common::{leftovers, TempDir};
use lab::etcd_client::reply;
use lab::cluster::etcd::{EtcdCluster, MEMBERS, MIN_TTL, NAME};
use lab::owner::Owner;
use lab::etcd_lease::EtcdLeaseStore;
use lab::{stats, sysinfo};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The private cluster's port block (clients base+1…3, peers base+11…13): a
/// free block, picked once per process, never a fixed one (the suite runs
/// groups side by side, each in a port range of its own).
fn base() -> u16 {
    static BASE: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap())
}

/// The TTL of holders that let their lease run out: etcd's minimum here.
const TTL: Duration = MIN_TTL;

/// The local margin for [`TTL`].
const MARGIN: Duration = Duration::from_millis(200);

/// Whatever tokens the steps saw, to show that every new one is larger.
struct Tokens(Vec<i64>);

impl Tokens {
    /// Records `token`, which must be larger than every earlier one.
    fn larger(&mut self, token: i64, what: &str) {
        if let Some(max) = self.0.iter().max() {
            assert!(token > *max, "{what}: token {token} is not larger than every earlier token (max {max})");
        }
        self.0.push(token);
    }
}

/// The members' processes still in /proc: by the folder on their command
/// line, or, for an unreaped member, as a zombie child named etcd whose pid
/// is one of `members` (a zombie has no command line to tell its folder by).
/// Only those pids: the tests of this binary run at once, and another
/// test's member, killed and not yet reaped by that test, is a zombie child
/// of this process too (the fresh-clone suite once failed this way).
fn etcd_leftovers(dir: &str, members: &[u32]) -> Vec<String> {
    let mut found = leftovers(dir);
    let me = std::process::id();
    for &pid in members {
        // A process that ended since it was seen has no stat: not a leftover.
        let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().as_deref().and_then(sysinfo::parse_stat) else { continue };
        if stat.comm == "etcd" && stat.state == 'Z' && stat.ppid == me {
            found.push(format!("zombie etcd {pid}"));
        }
    }
    found
}

/// Stops the cluster in a folder on drop: the net for members the reader
/// owns (no run's children), should a step fail while they are up.
struct StopOnDrop(std::path::PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Ok(cluster) = EtcdCluster::new(&self.0, base()) {
            let _ = cluster.stop();
        }
    }
}

/// The median of some latencies (nearest rank).
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    stats::quantile(&samples, 0.5).expect("latencies were measured")
}

/// A member's client port held by another process neither blocks nor
/// fools the cluster: the members listen on Unix sockets in the cluster's
/// folder only, so the cluster starts, and nothing connects to the port.
#[test]
fn a_held_port_neither_blocks_nor_fools_the_cluster() {
    let base = lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap();
    let tmp = TempDir::new("etcd-port");
    let dir = tmp.0.join(NAME);
    let squatter = TcpListener::bind(("127.0.0.1", base + 2)).unwrap();
    squatter.set_nonblocking(true).unwrap();
    let cluster = EtcdCluster::new(&dir, base).unwrap();
    cluster.start(Owner::this_run()).expect("the cluster starts beside a held port");
    assert!((0..MEMBERS).all(|i| cluster.pid(i).is_some()), "a member is missing");
    let members: Vec<u32> = (0..MEMBERS).filter_map(|i| cluster.pid(i)).collect();
    cluster.stop().unwrap();
    assert_eq!(squatter.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "a client connected to the held port");
    drop(cluster);
    assert_eq!(etcd_leftovers(&dir.display().to_string(), &members), Vec::<String>::new());
}

/// The port block of the run that gets killed, handed to it in this variable.
const KILLED_BASE: &str = "LAB_ETCD_TEST_KILLED_BASE";

/// Where `run_that_gets_killed` keeps its cluster; set only by the test that kills it.
const KILLED_DIR: &str = "LAB_ETCD_TEST_KILLED_DIR";

/// A run that dies by SIGKILL runs no cleanup at all: the kernel's death
/// signal ends its members, and none is left.
#[test]
fn a_killed_run_leaves_no_member() {
    let tmp = TempDir::new("etcd-killed");
    let dir = tmp.0.join(NAME);
    let killed_base = lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap();
    let mut run = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "run_that_gets_killed", "--nocapture"])
        .env(KILLED_DIR, &dir)
        .env(KILLED_BASE, killed_base.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(run.stdout.take().unwrap()).lines();
    let started = lines.by_ref().map_while(Result::ok).any(|line| line.starts_with("leader "));
    let cluster = EtcdCluster::new(&dir, killed_base).unwrap();
    let pids: Vec<Option<u32>> = (0..MEMBERS).map(|i| cluster.pid(i)).collect();
    let members: Vec<u32> = pids.iter().flatten().copied().collect();
    let _ = run.kill();
    let _ = run.wait();
    assert!(started, "the run to be killed did not start its cluster");
    assert!(pids.iter().all(Option::is_some), "members before the kill: {pids:?}");
    // The death signal is sent at once; their new parent reaps them. When
    // that parent is this test (a member handed to it as it died shows as
    // our zombie child), reaping it is this test's job: a zombie has ended.
    let dir_text = dir.display().to_string();
    // What is left once our own zombie children are reaped. Reaping comes
    // first on every look, the last one included: a member handed to us
    // just after a look would otherwise show as a zombie in the next.
    let left = || {
        for zombie in etcd_leftovers(&dir_text, &members).iter().filter_map(|l| l.strip_prefix("zombie etcd ")) {
            let pid = nix::unistd::Pid::from_raw(zombie.parse().expect("a pid"));
            let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        }
        etcd_leftovers(&dir_text, &members)
    };
    let start = Instant::now();
    while !left().is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(left(), Vec::<String>::new(), "members outlived their killed run");
    assert!((0..MEMBERS).all(|i| cluster.pid(i).is_none()));
}

/// Not a test on its own: the run that `a_killed_run_leaves_no_member`
/// starts, and kills once it prints its leader.
#[test]
#[ignore = "run by a_killed_run_leaves_no_member"]
fn run_that_gets_killed() {
    let Some(dir) = std::env::var_os(KILLED_DIR) else { return };
    let base: u16 = std::env::var(KILLED_BASE).unwrap().parse().unwrap();
    let cluster = EtcdCluster::new(dir, base).unwrap();
    let leader = cluster.start(Owner::this_run()).unwrap();
    println!("leader {}", leader.name);
    std::thread::sleep(Duration::from_secs(60));
}

/// The cluster's lifecycle and the lease operations, in one run.
#[test]
fn etcd_cluster_and_leases() {
    let tmp = TempDir::new("etcd");
    let dir = tmp.0.join(NAME);
    let _reader_members = StopOnDrop(dir.clone());
    {
        let cluster = EtcdCluster::new(&dir, base()).unwrap();
        let mut tokens = Tokens(Vec::new());
        start_elects_a_leader(&cluster);
        // After the start: it turned authentication on; the store logs in as the cluster does.
        let store = EtcdLeaseStore::new(cluster.gateway().another());
        the_minimum_ttl_is_one_second(&store);
        one_holder_at_a_time(&store, &mut tokens);
        renewals_keep_the_holding(&store);
        expiry_by_etcds_clock_then_a_larger_token(&store, &mut tokens);
        release_frees_at_once(&store, &mut tokens);
        acquire_latency(&store, &mut tokens);
        a_leader_change_restarts_the_countdown(&cluster, &store);
        the_acquire_after_a_leader_kill_succeeds_with_a_larger_token(&cluster, &store, &mut tokens);
        the_readers_cluster_outlives_its_starter(&cluster, &store, &mut tokens);
        // The cluster is dropped here, whatever happened above.
    }
    // The last members were the reader's (no child of this process): by their folder alone.
    assert_eq!(etcd_leftovers(&dir.display().to_string(), &[]), Vec::<String>::new(), "etcd processes left");
}

/// The start returns once etcd itself reports a leader that all three follow.
fn start_elects_a_leader(cluster: &EtcdCluster) {
    let t = Instant::now();
    let leader = cluster.start(Owner::this_run()).unwrap();
    eprintln!("etcd {}: started in {:?}, leader {} ({:x})", cluster.version(), t.elapsed(), leader.name, leader.id);
    let status = cluster.status().unwrap();
    assert!(status.members.iter().all(|m| m.pid.is_some() && m.status.as_ref().is_some_and(|s| s.leader == Some(leader.id))));
    assert_eq!(status.leader.as_ref().map(|l| &l.name), Some(&leader.name));
    assert_eq!(status.owner, Some(Owner::this_run()));
    eprintln!("{}", cluster.describe().unwrap());
}

/// A TTL of 1 s is granted as 1 s, and a TTL of 0 is raised to it: 1 s is
/// the smallest lease etcd grants with the lab's timing flags.
fn the_minimum_ttl_is_one_second(store: &EtcdLeaseStore) {
    for (asked, granted) in [("1", 1), ("0", 1)] {
        let answer: reply::Granted = store.gateway().call_as("/v3/lease/grant", &json!({ "TTL": asked })).unwrap().unwrap();
        assert_eq!(answer.ttl, granted, "grant of TTL {asked}: {answer:?}");
        store.gateway().call("/v3/lease/revoke", &json!({ "ID": answer.id.to_string() })).unwrap().unwrap();
    }
    assert_eq!(MIN_TTL, Duration::from_secs(1));
}

/// A acquires; B is refused while A holds; the parent sees A's token.
fn one_holder_at_a_time(store: &EtcdLeaseStore, tokens: &mut Tokens) {
    let a = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().expect("a free lease is granted");
    tokens.larger(a.grant.token, "A's first acquire");
    assert!(store.acquire("report-job", "holder-b", TTL, MARGIN).unwrap().is_none(), "B acquired while A holds");
    let view = store.view("report-job").unwrap();
    let holding = view.holding.expect("the key exists");
    assert_eq!((holding.holder.as_str(), holding.token, holding.lease_id), ("holder-a", a.grant.token, a.lease_id));
    assert!(view.revision >= a.grant.token && view.leader.is_some());
    assert!(store.release(&a).unwrap());
}

/// Renewing every 300 ms keeps a 1 s lease for 2.5 s: B stays refused,
/// the token does not change.
fn renewals_keep_the_holding(store: &EtcdLeaseStore) {
    let mut a = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        std::thread::sleep(Duration::from_millis(300));
        let before = a.grant.local_deadline;
        assert!(store.renew(&mut a).unwrap(), "a renewal within the TTL failed");
        assert!(a.grant.local_deadline > before && a.grant.within_deadline());
    }
    assert!(store.acquire("report-job", "holder-b", TTL, MARGIN).unwrap().is_none(), "B acquired a renewed lease");
    assert_eq!(store.holding("report-job").unwrap().0.map(|h| h.token), Some(a.grant.token));
    assert!(store.release(&a).unwrap());
}

/// A stops renewing; the key disappears by etcd's clock, no sooner than a
/// TTL after A's last renewal was sent; A's renewal then fails, and B's
/// token is larger.
fn expiry_by_etcds_clock_then_a_larger_token(store: &EtcdLeaseStore, tokens: &mut Tokens) {
    let mut a = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().unwrap();
    tokens.larger(a.grant.token, "A's acquire");
    let last_renewal = Instant::now();
    assert!(store.renew(&mut a).unwrap());
    store.wait_until_free("report-job").unwrap();
    let gone_after = last_renewal.elapsed();
    eprintln!("expiry: the key of a {TTL:?} lease disappeared {gone_after:?} after its last renewal was sent");
    assert!(gone_after >= TTL, "the key went {gone_after:?} after the last renewal, before the TTL");
    assert!(!store.renew(&mut a).unwrap(), "an expired lease was renewed");
    let b = store.acquire("report-job", "holder-b", TTL, MARGIN).unwrap().expect("B acquires the expired lease");
    tokens.larger(b.grant.token, "B after A's expiry");
    assert!(store.release(&b).unwrap());
}

/// After a release the next acquire succeeds at once, with a larger token;
/// a second release of the same holding says it is gone.
fn release_frees_at_once(store: &EtcdLeaseStore, tokens: &mut Tokens) {
    let a = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().unwrap();
    tokens.larger(a.grant.token, "A");
    assert!(store.release(&a).unwrap());
    let b = store.acquire("report-job", "holder-b", TTL, MARGIN).unwrap().expect("acquire right after a release");
    tokens.larger(b.grant.token, "B right after A's release");
    assert!(store.release(&b).unwrap());
    assert!(!store.release(&b).unwrap(), "a second release found the lease");
}

/// 50 acquire+release pairs: the median latency of each, tokens rising.
fn acquire_latency(store: &EtcdLeaseStore, tokens: &mut Tokens) {
    let (mut acquires, mut releases) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let t = Instant::now();
        let g = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().unwrap();
        acquires.push(t.elapsed());
        tokens.larger(g.grant.token, "a timed acquire");
        let t = Instant::now();
        assert!(store.release(&g).unwrap());
        releases.push(t.elapsed());
    }
    let (worst, a, r) = (acquires.iter().max().copied().unwrap(), median(acquires), median(releases));
    eprintln!("latency over 50 pairs: acquire (grant + txn) median {a:?}, max {worst:?}; release (revoke) median {r:?}");
}

/// A SIGKILL of the leader: a new leader within a bound, and the lease's
/// remaining TTL goes *up*: the new leader restarts every countdown.
fn a_leader_change_restarts_the_countdown(cluster: &EtcdCluster, store: &EtcdLeaseStore) {
    let ttl = Duration::from_secs(5);
    let a = store.acquire("report-job", "holder-a", ttl, MARGIN).unwrap().unwrap();
    // The one deliberate wait: let the countdown run down, so that a
    // restart of it shows.
    std::thread::sleep(Duration::from_secs(2));
    let before = store.remaining_ttl(a.lease_id).unwrap().expect("the lease lives");
    let old = cluster.leader().unwrap().expect("a leader");
    let t = Instant::now();
    cluster.kill_member(old.index).unwrap();
    // A leader after the old one, in a later term: etcd reports the term a
    // member has applied, so a leader elected a moment ago may still show
    // the old one (see `wait_for_leader_after`).
    let new = cluster.wait_for_leader_after(&old).unwrap();
    let elected_in = t.elapsed();
    assert_ne!(new.id, old.id, "the killed leader is still the leader");
    assert!(new.term > old.term);
    let after = store.remaining_ttl(a.lease_id).unwrap().expect("the lease survives the leader change");
    eprintln!(
        "leader change: killed {} (term {}), {} leads (term {}) after {elected_in:?}; remaining TTL of a {ttl:?} lease: {before:?} before, {after:?} after",
        old.name, old.term, new.name, new.term
    );
    assert!(after > before, "remaining TTL {before:?} before the leader change, {after:?} after");
    assert_eq!(store.holding("report-job").unwrap().0.map(|h| h.holder), Some("holder-a".into()));
    assert!(store.release(&a).unwrap());
    let back = cluster.restart_member(old.index).unwrap();
    assert!(cluster.pid(old.index).is_some());
    eprintln!("{} restarted from its data; leader {}", old.name, back.name);
}

/// The acquire sent right after the leader's SIGKILL, before any election,
/// still succeeds (its requests move to the other members and wait out the
/// election) and its token is larger than every earlier one.
fn the_acquire_after_a_leader_kill_succeeds_with_a_larger_token(
    cluster: &EtcdCluster,
    store: &EtcdLeaseStore,
    tokens: &mut Tokens,
) {
    let old = cluster.leader().unwrap().expect("a leader");
    cluster.kill_member(old.index).unwrap();
    let t = Instant::now();
    let b = store.acquire("report-job", "holder-b", TTL, MARGIN).unwrap().expect("the lease is free");
    eprintln!("acquire right after killing leader {}: {:?}, token {}", old.name, t.elapsed(), b.grant.token);
    tokens.larger(b.grant.token, "B after the leader kill");
    let new = cluster.wait_for_leader_after(&old).unwrap();
    assert_ne!(new.id, old.id);
    assert!(store.release(&b).unwrap());
    cluster.restart_member(old.index).unwrap();
}

/// A stop ends all three; the reader's start from the same data keeps
/// the revisions (the next token is still larger); another handle (as
/// another process would) finds its members by their pid files and stops them.
fn the_readers_cluster_outlives_its_starter(cluster: &EtcdCluster, store: &EtcdLeaseStore, tokens: &mut Tokens) {
    let members: Vec<u32> = (0..MEMBERS).filter_map(|i| cluster.pid(i)).collect();
    let t = Instant::now();
    cluster.stop().unwrap();
    eprintln!("stop (SIGTERM to all three): {:?}", t.elapsed());
    assert!((0..MEMBERS).all(|i| cluster.pid(i).is_none()));
    assert_eq!(etcd_leftovers(&cluster.dir().display().to_string(), &members), Vec::<String>::new());

    cluster.start(Owner::Reader).unwrap();
    let g = store.acquire("report-job", "holder-a", TTL, MARGIN).unwrap().unwrap();
    tokens.larger(g.grant.token, "A after a stop and a start");
    assert!(store.release(&g).unwrap());
    let other = EtcdCluster::new(cluster.dir(), base()).unwrap();
    let status = other.status().unwrap();
    assert_eq!(status.owner, Some(Owner::Reader));
    assert!(status.members.iter().all(|m| m.pid.is_some()), "{}", other.describe().unwrap());
    // The reader's members are no run's children: dropping a handle leaves them up.
    drop(other);
    assert!((0..MEMBERS).all(|i| cluster.pid(i).is_some()));
    EtcdCluster::new(cluster.dir(), base()).unwrap().stop().unwrap();
    assert!((0..MEMBERS).all(|i| cluster.pid(i).is_none()));
}
