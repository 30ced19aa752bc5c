//! The model checker's commands, as a reader runs them.
//!
//! Table of contents:
//! - `lab model --explore`: the Explorer renders the initial state in
//!   headless Chromium, and no request leaves 127.0.0.1;
//! - `lab model --replay MODE`: every counterexample the model finds,
//!   replayed against a private cluster, shows the same violation, and the
//!   fenced replay of the same schedule shows the refusal.

mod common;

use common::{stdout, LAB};
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `lab model --explore` process, killed (by its own pid) and reaped on drop.
struct Explorer(std::process::Child);

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A listener that stands where Chromium's proxy would be: every request
/// for a host other than 127.0.0.1 comes here and goes no further (it is
/// never answered); loopback is not proxied, so the Explorer is reached
/// directly. Chromium's own background requests (its network clock, its
/// component updater) end here too; those the *page* makes carry its
/// address as their Referer or Origin, and are counted.
fn trap(page: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let n = (&conn).read(&mut head).unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]).to_lowercase();
            let from_page = head.lines().any(|l| (l.starts_with("referer:") || l.starts_with("origin:")) && l.contains(&page));
            eprintln!("held at the trap ({}): {:?}", if from_page { "FROM THE PAGE" } else { "chromium's own" }, head.lines().next().unwrap_or(""));
            if from_page {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (port, count)
}

/// `lab model --explore unfenced` serves the Explorer on 127.0.0.1; in
/// headless Chromium its page shows the model and the initial state (both
/// holders idle, the resource's floor 0) and the properties, and nothing
/// is requested from anywhere else.
#[test]
fn explorer_renders_the_initial_state() {
    let Some(chromium) = common::chromium_for("the Explorer check") else { return };
    let mut child = Command::new(LAB).args(["model", "--explore", "unfenced"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let explorer = Explorer(child);
    let first = lines.next().expect("the Explorer printed nothing").unwrap();
    let url = first.split_whitespace().find(|w| w.starts_with("http://127.0.0.1:")).unwrap_or_else(|| panic!("no address in {first:?}")).to_owned();
    let port: u16 = url.trim_start_matches("http://127.0.0.1:").trim_end_matches('/').parse().unwrap();
    let started = Instant::now();
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "the Explorer never listened on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (trap_port, requests) = trap(format!("127.0.0.1:{port}"));
    let profile = tempfile::Builder::new().prefix("lab-explorer-").tempdir().unwrap();
    let out = Command::new(chromium)
        .args(common::HEADLESS_CHROMIUM)
        .args(["--dump-dom", "--virtual-time-budget=10000"])
        .arg(format!("--proxy-server=http://127.0.0.1:{trap_port}"))
        .arg("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        // Its own scratch folders (org.chromium.Chromium.*) go with `profile`.
        .env("TMPDIR", profile.path())
        // The initial state selected, as a reader's first click selects it.
        .arg(format!("{url}#/steps/0"))
        .output()
        .unwrap();
    drop(explorer);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    for expected in ["Stateright Explorer", "LeaseModel", "I3 no stale write accepted", "phase: Idle", "floor: 0"] {
        assert!(dom.contains(expected), "the Explorer's page does not show {expected:?}:\n{dom}");
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0, "the page made requests beyond 127.0.0.1 (see stderr)");
}

/// `lab model` prints the table and its verdict lines and exits 0: every
/// verdict agrees with the cases and the chaos run. Its stdout has no
/// times (they go to stderr) and is the locked `evidence/26/model.snap`,
/// the good run the `model-blind-to-stale` exercise is compared with.
#[test]
fn the_table_is_the_locked_one() {
    let out = Command::new(LAB).arg("model").output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "lab model failed ({}):\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    // One verdict line per mode on each of the three lease stores.
    let verdicts = lab::vocabulary::FenceMode::ALL.len() * 3;
    assert!(text.contains(&format!("SUMMARY passed={verdicts} failed=0")), "{text}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let locked = std::fs::read_to_string(root.join("evidence/26/model.snap")).unwrap();
    let body = lab::evidence::snapshot_body(&locked).expect("model.snap has its header");
    assert_eq!(lab::evidence::redact(&text).trim_end(), body.trim_end(), "lab model's stdout differs from evidence/26/model.snap");
}

/// The replay of `mode`'s counterexample on `store`, against `cluster`.
fn replay(cluster: &common::PrivateCluster, mode: &str, store: &str, out: Option<&std::path::Path>) -> (String, bool) {
    let mut args = vec!["model", "--replay", mode, "--store", store];
    let out_arg;
    if let Some(out) = out {
        out_arg = out.display().to_string();
        args.extend(["--out", &out_arg]);
    }
    let result = cluster.lab(&args);
    let text = stdout(&result);
    eprintln!("{text}{}", String::from_utf8_lossy(&result.stderr));
    (text, result.status.success())
}

/// Every counterexample the model finds replays against PostgreSQL to the
/// same verdict: the violation in the broken mode (a `negative control
/// exposes` line read from `write_attempt` or the lease rows), the refusal
/// when the same schedule runs fenced, no FAIL line. (On a sync standby the
/// counterexamples are the one-server paths, which a unit test checks;
/// every mode's on an async standby is one failover.) FENCED_ROW's
/// transcript is the book's: it must match its lock.
#[test]
fn every_counterexample_replays_to_the_same_verdict() {
    let cluster = common::PrivateCluster::new("model");
    for (mode, store, fenced) in [("unfenced", "single", true), ("check-then-write", "single", true), ("fenced-row", "single", true), ("version-cas", "single", true), ("fenced-scope", "async", false)] {
        let dir = common::TempDir::new("replay");
        let out = dir.0.join("replay.txt");
        let (text, ok) = replay(&cluster, mode, store, Some(&out));
        assert!(ok, "lab model --replay {mode} --store {store} failed:\n{text}");
        assert!(!text.contains("  FAIL "), "{text}");
        assert!(text.contains("  ok   negative control exposes: "), "the replay of {mode} on {store} showed no violation:\n{text}");
        if fenced {
            assert!(text.contains("  ok   栅栏拒绝了过期的写入"), "the fenced replay of {mode}'s schedule showed no refusal:\n{text}");
        }
        if mode == "fenced-row" {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let locked = std::fs::read_to_string(root.join("evidence/26/model-replay-fenced-row.txt")).unwrap();
            assert_eq!(std::fs::read_to_string(&out).unwrap(), locked, "the replay of fenced-row differs from evidence/26/model-replay-fenced-row.txt");
        }
    }
    // A fenced mode has no counterexample on one server: nothing to replay,
    // and the command says so instead of passing on nothing.
    let (text, ok) = replay(&cluster, "fenced-scope", "single", None);
    assert!(!ok && !text.contains("negative control exposes"), "{text}");
}
