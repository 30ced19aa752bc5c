//! The lab opens no door on a shared machine, and heals after it is killed.
//!
//! Table of contents:
//! - only the reader gets in: another local account is refused over TCP
//!   (no password, a wrong password) and cannot enter the socket's folder;
//! - the experiments' role is not a superuser: `COPY … TO PROGRAM` is refused;
//! - a cluster made by an older lab with `trust` is recreated with passwords;
//! - `kill -9` of `lab` in the middle of F4, then a run of F1: nothing is
//!   left running, not the server the killed run started, not a holder.
//!
//! Each test runs its own private cluster (`LAB_CLUSTER_DIR`, `LAB_PORT`).

mod common;

use common::{assert_exit, leftovers, stderr, stdout, PrivateCluster, LAB};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
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

/// While the reader's cluster runs, another local account cannot get in,
/// by TCP or by socket; the reader's `psql` works without typing anything.
#[test]
fn only_the_reader_gets_in() {
    let cluster = PrivateCluster::new("private");
    assert_exit(&cluster.lab(&["cluster", "start"]), 0, "lab cluster start");
    let me = cluster.lab(&["psql", "res26", "--", "-c", "SELECT current_user"]);
    assert_exit(&me, 0, "the reader's lab psql");
    assert!(stdout(&me).contains(" lab\n"), "{}", stdout(&me));

    if !nix::unistd::Uid::effective().is_root() {
        let _ = writeln!(std::io::stderr(), "\n*** NOT RUN: the other-account half of only_the_reader_gets_in needs root (to create {STRANGER})\n");
        return;
    }
    let no_password = psql_as_stranger("127.0.0.1", &cluster.port, None);
    assert!(!no_password.status.success(), "the stranger got in with no password");
    assert!(stderr(&no_password).contains("no password supplied"), "{}", stderr(&no_password));

    let wrong = psql_as_stranger("127.0.0.1", &cluster.port, Some("guess"));
    assert!(!wrong.status.success(), "the stranger got in with a wrong password");
    assert!(stderr(&wrong).contains("password authentication failed for user \"lab\""), "{}", stderr(&wrong));

    let socket = format!("{}/socket", cluster.dir.path());
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

/// A cluster without a credentials file (made by a lab that used `trust`)
/// is recreated with passwords, and says so.
#[test]
fn a_cluster_without_passwords_is_recreated() {
    let cluster = PrivateCluster::new("trust");
    assert_exit(&cluster.lab(&["cluster", "start"]), 0, "lab cluster start");
    assert_exit(&cluster.lab(&["cluster", "stop"]), 0, "lab cluster stop");
    std::fs::remove_file(cluster.dir.0.join("credentials")).unwrap();
    let again = cluster.lab(&["cluster", "start"]);
    assert_exit(&again, 0, "lab cluster start on a cluster without passwords");
    assert!(stderr(&again).contains("recreating it with passwords"), "{}", stderr(&again));
    assert!(cluster.dir.0.join("credentials").is_file());
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
