//! The lab opens no door on a shared machine, and heals after it is killed.
//!
//! Table of contents:
//! - only the reader gets in: the cluster has no TCP port, and another
//!   local account cannot enter the socket's folder;
//! - a port squatter gets nothing: another account holds every port of the
//!   lab's block through F8's crash-restart, F14's failover and F16's
//!   leader kill and restart; the cases pass, and not one connection
//!   reaches the squatter;
//! - the experiments' role is not a superuser: `COPY … TO PROGRAM` is refused;
//! - a server whose credentials are gone is recreated with fresh passwords;
//! - `kill -9` of `lab` in the middle of F17, its holders and servers on
//!   hosts of its network: they end, and the network's namespaces with them;
//! - `kill -9` of `lab` in the middle of F4, then a run of F1: nothing is
//!   left running, not the server the killed run started, not a holder;
//! - attacks planted by another account (`lab-stranger`) or by the server's
//!   own account (`postgres`), each followed by the lab's commands, which
//!   must refuse with a message and leave the planted target as it was:
//!   a cluster folder made in advance with links inside (to a folder, to a
//!   file) and a link where the run lock would be; a link in place of the
//!   server log; `reset` of a folder the lab did not make; and a stranger's
//!   writes and reads of the etcd lease key while the lab's etcd runs.
//!
//! Each test runs its own private cluster (`LAB_CLUSTER_DIR`, `LAB_PORT`).

mod common;

use common::{assert_exit, leftovers, namespaces_alive, namespaces_of, stderr, stdout, PrivateCluster, LAB};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The account the test plays "another local user" with.
const STRANGER: &str = "lab-stranger";

/// A psql binary (Debian's versioned folder first: /usr/bin/psql is a wrapper).
fn psql() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/psql"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| PathBuf::from("psql"))
}

/// The stranger's uid and gid, creating the account when it is missing.
fn stranger() -> (u32, u32) {
    if nix::unistd::User::from_name(STRANGER).unwrap().is_none() {
        let out = Command::new("useradd").args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", STRANGER]).output().unwrap();
        assert!(out.status.success(), "useradd {STRANGER}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let user = nix::unistd::User::from_name(STRANGER).unwrap().unwrap();
    (user.uid.as_raw(), user.gid.as_raw())
}

/// psql as the stranger, with no password file and never a prompt.
fn psql_as_stranger(host: &str, port: &str, password: Option<&str>) -> Output {
    let (uid, gid) = stranger();
    let mut cmd = Command::new(psql());
    cmd.args(["-w", "-h", host, "-p", port, "-U", "lab", "-d", "res26", "-c", "SELECT 1"])
        .env_clear()
        .env("HOME", "/tmp")
        .env("PGCONNECT_TIMEOUT", "5")
        .uid(uid)
        .gid(gid)
        .current_dir("/tmp");
    if let Some(password) = password {
        cmd.env("PGPASSWORD", password);
    }
    cmd.output().unwrap()
}

/// While the reader's cluster runs, another local account cannot get in:
/// there is no TCP port, and the socket's folder is closed to it; the
/// reader's `psql` works without typing anything (peer: the kernel says who).
#[test]
fn only_the_reader_gets_in() {
    let cluster = PrivateCluster::new("private");
    assert_exit(&cluster.lab(&["cluster", "start"]), 0, "lab cluster start");
    let me = cluster.lab(&["psql", "res26", "--", "-c", "SELECT current_user"]);
    assert_exit(&me, 0, "the reader's lab psql");
    assert!(stdout(&me).contains(" lab\n"), "{}", stdout(&me));

    if !common::needs_root("the other-account half of only_the_reader_gets_in", &format!("to create the account {STRANGER} and connect as it")) {
        return;
    }
    // No TCP port at all: nothing to try a password on, nothing to take.
    let by_tcp = psql_as_stranger("127.0.0.1", &cluster.port, Some("guess"));
    assert!(!by_tcp.status.success(), "the stranger got in over TCP");
    assert!(stderr(&by_tcp).contains("Connection refused"), "{}", stderr(&by_tcp));

    let socket = format!("{}/server/socket", cluster.place().display());
    let by_socket = psql_as_stranger(&socket, &cluster.port, None);
    assert!(!by_socket.status.success(), "the stranger got in through the socket");
    assert!(stderr(&by_socket).contains("Permission denied"), "{}", stderr(&by_socket));
}

/// The experiments' role cannot run a program as the server's account.
#[test]
fn the_experiments_role_is_not_a_superuser() {
    let cluster = PrivateCluster::new("role");
    assert_exit(&cluster.lab(&["cluster", "start"]), 0, "lab cluster start");
    let out = cluster.lab(&["psql", "res26", "--", "-c", "COPY (SELECT 1) TO PROGRAM 'id'"]);
    assert!(!out.status.success(), "COPY TO PROGRAM ran as role lab:\n{}", stdout(&out));
    assert!(stderr(&out).contains("must be superuser or have privileges of the pg_execute_server_program role"), "{}", stderr(&out));
    let roles = cluster.lab(&["psql", "res26", "--", "-At", "-c", "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"]);
    assert_eq!(stdout(&roles).trim(), "f|f|f", "{}", stderr(&roles));
}

/// A server whose credentials file is gone (whoever holds its superuser's
/// password is unknown) is recreated with fresh passwords, and says so.
#[test]
fn a_cluster_without_passwords_is_recreated() {
    let cluster = PrivateCluster::new("trust");
    assert_exit(&cluster.lab(&["cluster", "start"]), 0, "lab cluster start");
    assert_exit(&cluster.lab(&["cluster", "stop"]), 0, "lab cluster stop");
    std::fs::remove_file(cluster.place().join("credentials")).unwrap();
    let again = cluster.lab(&["cluster", "start"]);
    assert_exit(&again, 0, "lab cluster start on a cluster without passwords");
    assert!(stderr(&again).contains("recreating it with fresh passwords"), "{}", stderr(&again));
    assert!(cluster.place().join("credentials").is_file());
    assert_exit(&cluster.lab(&["psql", "res26", "--", "-c", "SELECT 1"]), 0, "psql after the recreation");
}

/// `kill -9` of `lab` in the middle of F4 leaves the server up (pg_ctl
/// daemonised it) and kills the holders; the next run takes the server over
/// and stops it at its end: nothing is left running.
#[test]
fn a_killed_run_is_healed_by_the_next() {
    let cluster = PrivateCluster::new("heal");
    let mut child = Command::new(LAB).args(["run", "F4"]).envs(cluster.env()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    loop {
        let line = lines.next().unwrap_or_else(|| panic!("lab ended before holder-a was stopped; it printed:\n{seen}")).unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("SIGSTOP 后") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL: no cleanup of its own can run
    child.wait().unwrap();
    assert_exit(&cluster.lab(&["cluster", "status"]), 0, "the server outlives a run killed with SIGKILL");
    // The kernel kills the holders (PR_SET_PDEATHSIG); wait until they are reaped.
    let start = Instant::now();
    while leftovers(cluster.dir.path()).iter().any(|p| !p.contains("postgres")) {
        assert!(start.elapsed() < Duration::from_secs(20), "holders outlived their killed parent: {:?}", leftovers(cluster.dir.path()));
        std::thread::sleep(Duration::from_millis(50));
    }

    let next = cluster.lab(&["run", "F1"]);
    assert_exit(&next, 0, "lab run F1 after the killed run");
    assert!(stderr(&next).contains("was left running by lab run pid"), "{}", stderr(&next));
    let left = leftovers(cluster.dir.path());
    assert!(left.is_empty(), "left running after the healing run:\n{}", left.join("\n"));
    assert_exit(&cluster.lab(&["cluster", "status"]), 1, "cluster status after the healing run");
}

/// `kill -9` of `lab` while F17's holders and servers run on hosts of its
/// network: the kernel ends the holders and servers (their parent-death
/// signal), and with them the network's namespaces, which no name and no
/// process holds any more; nothing is left to sweep.
#[test]
fn a_killed_partition_run_leaves_no_namespace() {
    let cluster = PrivateCluster::new("netkill");
    let mut child = Command::new(LAB).args(["run", "F17"]).envs(cluster.env()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    loop {
        let line = lines.next().unwrap_or_else(|| panic!("lab ended before holder-a stood on its host; it printed:\n{seen}")).unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("A 在 holder-a 上获取 token=1") {
            break;
        }
    }
    let during = leftovers(cluster.dir.path());
    let namespaces = namespaces_of(&during);
    assert!(!namespaces.is_empty(), "no process of the run was on a host:\n{}", during.join("\n"));
    child.kill().unwrap(); // SIGKILL: no cleanup of its own can run
    child.wait().unwrap();
    let start = Instant::now();
    loop {
        let (left, alive) = (leftovers(cluster.dir.path()), namespaces_alive(&namespaces));
        if left.iter().all(|p| !p.contains("/lease/") && !p.contains("/resource/") && !p.contains("holder")) && alive.is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "20 s after kill -9: {left:?}, namespaces {alive:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a planted target looks like: owner, mode and content (a folder's
/// entries). Compared before and after the lab ran.
fn fingerprint(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    let content = if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names.join(",")
    } else {
        std::fs::read_to_string(path).unwrap()
    };
    format!("{}:{} {:o} [{content}]", meta.uid(), meta.gid(), meta.mode() & 0o7777)
}

/// Targets an attacker points links at: a folder and a file of root's.
struct Victims {
    _dir: tempfile::TempDir,
    folder: PathBuf,
    file: PathBuf,
}

impl Victims {
    fn new() -> Victims {
        let dir = tempfile::Builder::new().prefix("lab-victims-").tempdir().unwrap();
        let (folder, file) = (dir.path().join("folder"), dir.path().join("file"));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("keep"), "root's\n").unwrap();
        std::fs::write(&file, "root's own file\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Victims { _dir: dir, folder, file }
    }

    fn fingerprints(&self) -> (String, String) {
        (fingerprint(&self.folder), fingerprint(&self.file))
    }
}

/// Runs `script` with bash as the stranger; fails the test if it fails.
fn as_stranger(script: &str) -> Output {
    let (uid, gid) = stranger();
    let out = Command::new("bash").args(["-c", script]).env_clear().env("PATH", "/usr/bin:/bin").uid(uid).gid(gid).current_dir("/tmp").output().unwrap();
    assert!(out.status.success(), "as the stranger: {script}\n{}", stderr(&out));
    out
}

/// `program args…` as the stranger, with an empty environment, from /tmp;
/// its output whatever its status.
fn run_as_stranger(program: &str, args: &[&str]) -> Output {
    let (uid, gid) = stranger();
    Command::new(program).args(args).env_clear().uid(uid).gid(gid).current_dir("/tmp").output().unwrap()
}

/// Root-only test: NOT RUN when it cannot run, a failure under CI.
fn needs_root(test: &str) -> bool {
    common::needs_root(test, &format!("to plant attacks as another account ({STRANGER}, postgres)"))
}

/// Another account prepares the cluster's folder before the lab's first
/// run: links inside it to root's folder and file, where the socket, the
/// superuser's password file and the run lock would go. Every command
/// refuses, saying what it found; nothing of root's changes owner, mode or
/// content.
#[test]
fn a_planted_cluster_folder_is_refused_and_left_alone() {
    if !needs_root("a_planted_cluster_folder_is_refused_and_left_alone") {
        return;
    }
    let victims = Victims::new();
    let before = victims.fingerprints();
    // The stranger's own folder in /tmp (a name it chose), and inside it the
    // folder the lab is pointed at, as a root user might be told to do.
    let planted = as_stranger(&format!(
        "d=$(mktemp -d /tmp/lab-planted-XXXXXX) && chmod 755 $d && mkdir -m 777 $d/cluster && \
         ln -s {folder} $d/cluster/socket && ln -s {file} $d/cluster/initdb-password && ln -s {file} $d/cluster/lock && \
         ln -s {folder} $d/cluster/server && echo $d",
        folder = victims.folder.display(),
        file = victims.file.display()
    ));
    let parent = PathBuf::from(stdout(&planted).trim());
    let place = parent.join("cluster");
    // The folder the stranger made in /tmp, and one inside it.
    for dir in [&parent, &place] {
        let env = [("LAB_CLUSTER_DIR", dir.to_str().unwrap().to_owned()), ("LAB_PORT", common::free_port().to_string())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for args in [&["cluster", "start"][..], &["cluster", "reset"], &["cluster", "forget"], &["run", "F1"], &["psql", "--", "-c", "SELECT 1"]] {
            let out = common::run(LAB, args, &env);
            assert!(!out.status.success(), "lab {args:?} worked in {} which another account made:\n{}", dir.display(), stdout(&out));
            let err = stderr(&out);
            assert!(err.contains("belongs to uid"), "lab {args:?} did not say what it found in {}: {err}", dir.display());
        }
    }
    assert_eq!(victims.fingerprints(), before, "a planted link led the lab to change root's files");
    let left = fingerprint(&place);
    assert!(left.contains("initdb-password,lock,server,socket]"), "the lab changed the planted folder: {left}");
    as_stranger(&format!("rm -rf {}", parent.display()));
}

/// The server's own account replaces the server log with a link to a file
/// of root's: the lab reads it only through a descriptor that refuses the
/// link (`lab cluster log`, a failed start's error), and F14's tied start,
/// which opens its log as root, refuses to open it. The file is unchanged.
#[test]
fn a_link_in_place_of_the_server_log_is_refused() {
    if !needs_root("a_link_in_place_of_the_server_log_is_refused") {
        return;
    }
    let cluster = PrivateCluster::new("log-link");
    assert_exit(&cluster.lab(&["run", "F14"]), 0, "lab run F14 (makes the primary's folder)");
    let victims = Victims::new();
    let before = victims.fingerprints();
    // World-readable parents, so the postgres account can make its link.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(victims.file.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for server in ["server", "primary/server"] {
        let log = cluster.place().join(server).join("postgres.log");
        let out = Command::new("ln").args(["-sf", victims.file.to_str().unwrap(), log.to_str().unwrap()]).uid(postgres_uid()).output().unwrap();
        assert!(out.status.success(), "ln as postgres: {}", stderr(&out));
    }
    let log = cluster.lab(&["cluster", "log"]);
    assert!(!log.status.success() && stderr(&log).contains("symbolic link"), "lab cluster log followed the link: {}", stderr(&log));
    let f14 = cluster.lab(&["run", "F14"]);
    assert!(!f14.status.success(), "F14 ran with a link in place of its primary's log");
    assert!(format!("{}{}", stdout(&f14), stderr(&f14)).contains("symbolic link"), "F14 did not say why: {}", stderr(&f14));
    assert_eq!(victims.fingerprints(), before, "the lab wrote through the server account's link");
}

/// The `postgres` account's uid.
fn postgres_uid() -> u32 {
    nix::unistd::User::from_name("postgres").unwrap().expect("the postgres account").uid.as_raw()
}

/// `reset` and `forget` delete only a folder the lab made: one without the
/// marker is refused, whole.
#[test]
fn reset_refuses_a_folder_the_lab_did_not_make() {
    let keep = common::TempDir::new("keep");
    std::fs::write(keep.0.join("precious"), "mine\n").unwrap();
    let before = fingerprint(&keep.0);
    for action in ["reset", "forget"] {
        let out = common::run(LAB, &["cluster", action], &[("LAB_CLUSTER_DIR", keep.path()), ("LAB_PORT", &common::free_port().to_string())]);
        assert!(!out.status.success(), "lab cluster {action} accepted a folder the lab did not make");
        assert!(stderr(&out).contains("not made by the lab"), "{}", stderr(&out));
        assert_eq!(fingerprint(&keep.0), before, "lab cluster {action} changed a folder it did not make");
    }
}

/// While the lab's etcd runs, another account cannot reach a member at
/// all (no TCP port; the sockets are in the cluster's closed folder), so
/// it can neither write, delete nor read the lease key; nor can it read the
/// root user's password.
#[test]
fn a_stranger_cannot_touch_the_etcd_lease_key() {
    if !needs_root("a_stranger_cannot_touch_the_etcd_lease_key") {
        return;
    }
    let tmp = common::TempDir::new("etcd-auth");
    let dir = tmp.0.join("etcd-26");
    let base = lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap().to_string();
    let env = [("LAB_ETCD_DIR", dir.to_str().unwrap()), ("LAB_ETCD_PORT_BASE", base.as_str())];
    assert_exit(&common::run(LAB, &["etcd", "start"], &env), 0, "lab etcd start");
    // No member listens on a TCP port: the stranger's request finds nobody.
    let port = base.parse::<u16>().unwrap() + 1;
    let tcp = run_as_stranger("bash", &["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")]);
    assert!(!tcp.status.success() && stderr(&tcp).contains("Connection refused"), "a member answered on TCP: {}", stderr(&tcp));
    // The members' sockets are in the cluster's folder, closed to the stranger.
    let socket = dir.join(format!("m1:{port}"));
    assert!(socket.exists(), "no socket at {}", socket.display());
    let unix = run_as_stranger("perl", &["-MIO::Socket::UNIX", "-e", "IO::Socket::UNIX->new(Peer => $ARGV[0]) or die \"connect: $!\\n\"", socket.to_str().unwrap()]);
    assert!(!unix.status.success() && stderr(&unix).contains("Permission denied"), "the stranger reached a member's socket: {}", stderr(&unix));
    let read = Command::new("cat").arg(dir.join("credentials")).uid(stranger().0).gid(stranger().1).output().unwrap();
    assert!(!read.status.success(), "the stranger read etcd's password");
    assert_exit(&common::run(LAB, &["etcd", "stop"], &env), 0, "lab etcd stop");
}

/// The squatter: binds every port it is given on 127.0.0.1 (with
/// SO_REUSEADDR, as a server does), says `bound PORT` for each and then
/// `ready`, and from then on reports every connection (`accepted on PORT`)
/// and every byte it receives (`read N bytes: HEX`), answering nothing.
/// Perl, because Debian's perl-base is on every machine and needs nothing
/// built as the other account.
const SQUATTER: &str = r#"
use strict; use IO::Socket::INET; use IO::Select;
$| = 1;
my $sel = IO::Select->new; my %port;
for my $p (@ARGV) {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p, Listen => 16, ReuseAddr => 1);
    if ($s) { $port{$s} = $p; $sel->add($s); print "bound $p\n" } else { print "cannot bind $p: $!\n" }
}
print "ready\n";
while (1) {
    for my $s ($sel->can_read(0.2)) {
        if ($port{$s}) { my $c = $s->accept or next; $sel->add($c); print "accepted on $port{$s}\n"; next }
        my $n = sysread($s, my $buf, 65536);
        if (!$n) { $sel->remove($s); close $s; next }
        print "read $n bytes: ", unpack("H*", $buf), "\n";
    }
}
"#;

/// Another account takes every port of the lab's blocks (the cluster's
/// three, etcd's fourteen) before the lab starts, and holds them through
/// F8 (the server's crash and restart), F14 (a primary, a standby,
/// replication, a failover) and F16 (etcd's leader killed with SIGKILL and
/// restarted): the ports a squatter would wait for. The cases pass, and
/// the squatter receives not one connection: no password, no token,
/// nothing to replay. First the squatter is shown to work: a connection
/// the test makes to one of its ports is reported, bytes and all.
#[test]
fn a_port_squatter_gets_nothing() {
    if !needs_root("a_port_squatter_gets_nothing") {
        return;
    }
    let cluster = PrivateCluster::new("squat");
    let etcd_dir = cluster.dir.0.join("etcd-26");
    let etcd_base = lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap();
    let pg_base: u16 = cluster.port.parse().unwrap();
    let ports: Vec<u16> = (pg_base..pg_base + lab::cluster::PORTS).chain(etcd_base..etcd_base + lab::cluster::etcd::PORTS).collect();
    let (uid, gid) = stranger();
    let mut squatter = Command::new("perl")
        .arg("-e")
        .arg(SQUATTER)
        .args(ports.iter().map(u16::to_string))
        .env_clear()
        .uid(uid)
        .gid(gid)
        .current_dir("/")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (said, heard) = std::sync::mpsc::channel::<String>();
    let out = squatter.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if said.send(line).is_err() {
                return;
            }
        }
    });
    let next = |what: &str| heard.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| panic!("the squatter said nothing while {what}: {e}"));
    let mut bound = Vec::new();
    loop {
        let line = next("binding");
        if line == "ready" {
            break;
        }
        bound.push(line);
    }
    let wanted: Vec<String> = ports.iter().map(|p| format!("bound {p}")).collect();
    assert_eq!(bound, wanted, "the squatter must hold every port of both blocks");

    // It really listens and reports: a probe of the test's own.
    let mut probe = std::net::TcpStream::connect(("127.0.0.1", pg_base)).unwrap();
    std::io::Write::write_all(&mut probe, b"probe").unwrap();
    assert_eq!(next("probed"), format!("accepted on {pg_base}"));
    assert_eq!(next("probed"), "read 5 bytes: 70726f6265");
    drop(probe);

    let (place, etcd_base) = (cluster.place(), etcd_base.to_string());
    let env = [
        ("LAB_PORT", cluster.port.as_str()),
        ("LAB_CLUSTER_DIR", place.to_str().unwrap()),
        ("LAB_ETCD_DIR", etcd_dir.to_str().unwrap()),
        ("LAB_ETCD_PORT_BASE", etcd_base.as_str()),
    ];
    let run = common::run(LAB, &["run", "F8", "F14", "F16"], &env);
    let _ = squatter.kill();
    let _ = squatter.wait();
    let mut reached: Vec<String> = heard.try_iter().collect();
    reached.retain(|l| !l.is_empty());
    assert_exit(&run, 0, "lab run F8 F14 F16 beside the squatter");
    assert!(reached.is_empty(), "connections reached the squatter during the run:\n{}", reached.join("\n"));
}

/// Every file the lab writes because a reader named it goes through one
/// writer, which refuses a link planted at its name and leaves it (and the
/// file it points to) as it was: the transcript of `--out`, and the copies
/// of the timelines and histories beside it. Each is planted in turn; the
/// run says which path it refused and fails.
#[test]
fn a_link_at_a_path_the_reader_named_is_refused() {
    let cluster = PrivateCluster::new("out-links");
    let victim = cluster.dir.0.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    for (i, planted) in ["out.txt", "out.json", "timelines/F4.mmd", "history/F4.jsonl"].iter().enumerate() {
        let folder = cluster.dir.0.join(format!("run{i}"));
        let link = folder.join(planted);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let out = folder.join("out.txt");
        let run = cluster.lab(&["run", "F4", "--out", out.to_str().unwrap()]);
        assert!(!run.status.success(), "the run wrote past a link at {planted}");
        let said = format!("refusing to write {}: it is a symbolic link", link.display());
        assert!(stderr(&run).contains(&said), "{planted}: {}", stderr(&run));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "{planted}: the file behind the link changed");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "{planted}: the link was replaced");
    }
}
