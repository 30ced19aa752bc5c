//! The command-line contract of `lab` and `holder`.
//!
//! Table of contents:
//! - usage errors: an unknown case or flag, bad holder parameters (exit 2);
//! - `lab diff`: match, a one-word edit, no transcript yet;
//! - the environment: a port held by another process, psql on a stopped cluster;
//! - a chaos run with nothing to judge fails, and writes no evidence;
//! - `lab history`: a page drawn from JSON lines alone, with the checker's
//!   verdict on them; a broken line named;
//! - no leftovers: Ctrl-C (SIGINT) at several moments of F4, and in the
//!   middle of a chaos run.
//!
//! The environment tests use a private cluster (`LAB_CLUSTER_DIR`,
//! `LAB_PORT`) so that they never touch the reader's own cluster.

mod common;

use common::{assert_exit, free_port, leftovers, leftovers_after_exit, namespaces_alive, namespaces_of, run, stderr, stdout, PrivateCluster, TempDir, LAB, HOLDER};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The leftover checks count every holder process of this build on the
/// machine: the tests that start holders take turns.
static HOLDERS_RUNNING: Mutex<()> = Mutex::new(());

/// `lab run F99` names the valid cases and exits 2.
#[test]
fn unknown_case_is_a_usage_error() {
    let out = run(LAB, &["run", "F99"], &[]);
    assert_exit(&out, 2, "lab run F99");
    let every: Vec<&str> = lab::cases::ALL.iter().map(|c| c.id).collect();
    assert!(stderr(&out).contains(&format!("valid cases: {}, all", every.join(", "))), "{}", stderr(&out));
}

/// `lab run --bogus` is refused by the parser with exit 2.
#[test]
fn unknown_flag_is_a_usage_error() {
    let out = run(LAB, &["run", "--bogus"], &[]);
    assert_exit(&out, 2, "lab run --bogus");
    assert!(stderr(&out).contains("--bogus"), "{}", stderr(&out));
}

/// The holder refuses unparsable and meaningless parameters with exit 2.
#[test]
fn holder_rejects_bad_parameters() {
    let out = run(HOLDER, &["--holder", "holder-a", "--content", "x", "--ttl-ms", "abc"], &[]);
    assert_exit(&out, 2, "holder --ttl-ms abc");
    let out = run(HOLDER, &["--holder", "holder-a", "--content", "x", "--renew-ms", "2000"], &[]);
    assert_exit(&out, 2, "holder --renew-ms 2000");
    assert!(stderr(&out).contains("cannot keep the lease"), "{}", stderr(&out));
}

/// The locked transcript of F4, as a file a reader could have saved.
fn evidence_copy(dir: &TempDir, edit: impl Fn(String) -> String) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let snap = std::fs::read_to_string(root.join("evidence/26/F4.snap")).unwrap();
    let body = lab::evidence::snapshot_body(&snap).expect("F4.snap has an insta header").to_owned();
    let file = dir.0.join("F4.txt");
    std::fs::write(&file, edit(body)).unwrap();
    file
}

/// An unedited transcript matches the evidence: one line, exit 0.
#[test]
fn diff_of_the_evidence_itself_matches() {
    let dir = TempDir::new("diff");
    let file = evidence_copy(&dir, |body| body);
    let out = run(LAB, &["diff", "F4", file.to_str().unwrap()], &[]);
    assert_exit(&out, 0, "lab diff F4 <copy>");
    assert!(stdout(&out).contains("matches evidence/26/F4.snap"), "{}", stdout(&out));
}

/// One edited word shows as a -/+ pair and exits 1.
#[test]
fn diff_shows_an_edited_word() {
    let dir = TempDir::new("diff");
    let file = evidence_copy(&dir, |body| body.replacen("rows=201(B) by holder-b", "rows=200(A) by holder-b", 1));
    let out = run(LAB, &["diff", "F4", file.to_str().unwrap(), "--color", "never"], &[]);
    assert_exit(&out, 1, "lab diff F4 <edited>");
    let text = stdout(&out);
    assert!(text.contains("\n-  note 最终 summary = rows=201(B)") && text.contains("\n+  note 最终 summary = rows=200(A)"), "{text}");
}

/// A transcript that does not exist yet: a message saying to run the case first.
#[test]
fn diff_without_a_transcript_says_to_run_first() {
    let out = run(LAB, &["diff", "F4", "/nonexistent/F4.txt"], &[]);
    assert_exit(&out, 3, "lab diff F4 /nonexistent");
    assert!(stderr(&out).contains("run it first with `./run.sh F4`"), "{}", stderr(&out));
}

/// A port held by another process neither blocks nor fools the lab: the
/// cluster has no TCP port, so it starts on its Unix socket, nothing
/// connects to the other process, and the other process keeps its port.
#[test]
fn a_held_port_neither_blocks_nor_fools_the_cluster() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let dir = TempDir::new("port");
    let place = dir.0.join("cluster");
    let env = [("LAB_PORT", port.as_str()), ("LAB_CLUSTER_DIR", place.to_str().unwrap())];
    let out = run(LAB, &["cluster", "start"], &env);
    assert_exit(&out, 0, "lab cluster start beside a held port");
    assert!(stdout(&out).contains(&format!("server/socket/.s.PGSQL.{port}")), "{}", stdout(&out));
    let query = run(LAB, &["psql", "res26", "--", "-At", "-c", "SELECT 1"], &env);
    assert_exit(&query, 0, "lab psql on the cluster");
    assert_exit(&run(LAB, &["cluster", "stop"], &env), 0, "lab cluster stop");
    // Nothing came to the other process's port, and it is still its own.
    listener.set_nonblocking(true).unwrap();
    assert_eq!(listener.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "a client connected to the held port");
    listener.set_nonblocking(false).unwrap();
    let client = std::thread::spawn(move || std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_ok());
    assert!(listener.accept().is_ok());
    assert!(client.join().unwrap());
}

/// psql on a cluster that is not running says how to start it.
#[test]
fn psql_on_a_stopped_cluster_says_how_to_start_it() {
    let dir = TempDir::new("psql");
    let place = dir.0.join("cluster");
    let out = run(LAB, &["psql"], &[("LAB_CLUSTER_DIR", place.to_str().unwrap()), ("LAB_PORT", &free_port().to_string())]);
    assert_exit(&out, 3, "lab psql on a stopped cluster");
    assert!(stderr(&out).contains("./run.sh cluster start"), "{}", stderr(&out));
}

/// A chaos run too short for anything to happen (1 ms: the schedule has
/// no fault in it, and no holder gets to write) has nothing to judge: its
/// zeros are not a clean fence. `lab chaos` says so, exits 1, and writes no
/// table where the evidence would go.
#[test]
fn a_chaos_run_with_nothing_to_judge_fails() {
    let _turn = HOLDERS_RUNNING.lock();
    let cluster = PrivateCluster::new("chaos-empty");
    let table = cluster.dir.0.join("chaos.md");
    let out = cluster.lab(&["chaos", "--holders", "2", "--duration", "1ms", "--mode", "fenced-scope", "--out", table.to_str().unwrap()]);
    assert_exit(&out, 1, "lab chaos --duration 1ms");
    let text = stdout(&out);
    assert!(text.contains("chaos: UNEXPECTED: FENCED_SCOPE had nothing to judge (") && text.contains("no fault injected"), "{text}");
    assert!(text.contains("verdict") && text.contains("nothing to judge"), "the table shows the verdict:\n{text}");
    assert!(!table.exists(), "a run with nothing to judge wrote {}", table.display());
    let left = leftovers(cluster.dir.path());
    assert!(left.is_empty(), "{}", left.join("\n"));
}

/// F5's shape as JSON lines: B's write with token 2, then A's with token 1,
/// both accepted; A was paused between.
const F5_LINES: &str = r#"{"type":"run","schema":2,"name":"F5-mine","command":"lab run F5","mode":"UNFENCED","t0_unix_ms":1000.0,"end_ms":4000.0,"fault_kinds":["pause-long"],"holders":["holder-a","holder-b"]}
{"type":"op","id":1,"holder":"holder-a","incarnation":0,"process":1,"f":"acquire","invoke_ms":10.0,"complete_ms":12.0,"outcome":"ok","token":1,"tries":1,"holding":1}
{"type":"op","id":2,"holder":"holder-b","incarnation":0,"process":2,"f":"acquire","invoke_ms":2000.0,"complete_ms":2003.0,"outcome":"ok","token":2,"tries":1,"holding":1}
{"type":"op","id":3,"holder":"holder-b","incarnation":0,"process":2,"f":"write","invoke_ms":2004.0,"complete_ms":2006.0,"outcome":"ok","token":2,"part":"summary","attempt":{"id":1,"scope":"daily-report","part":"summary","writer":"holder-b","token":2,"mode":"UNFENCED","accepted":true,"floor_after":0,"at_ms":2005.0}}
{"type":"op","id":4,"holder":"holder-a","incarnation":0,"process":1,"f":"write","invoke_ms":3000.0,"complete_ms":3002.0,"outcome":"ok","token":1,"part":"summary","attempt":{"id":2,"scope":"daily-report","part":"summary","writer":"holder-a","token":1,"mode":"UNFENCED","accepted":true,"floor_after":0,"at_ms":3001.0}}
{"type":"fault","id":1,"kind":"pause-long","targets":["holder-a"],"start_ms":500.0,"end_ms":2999.0}
{"type":"final","scope":"daily-report","part":"summary","content":"old(A)","writer":"holder-a","token":1}
"#;

/// `lab history FILE.jsonl` judges the lines alone and draws the page beside
/// them; a line that is no entry is named, and nothing is drawn.
#[test]
fn history_draws_and_judges_json_lines() {
    let dir = TempDir::new("history");
    let jsonl = dir.0.join("F5-mine.jsonl");
    std::fs::write(&jsonl, F5_LINES).unwrap();
    let out = run(LAB, &["history", jsonl.to_str().unwrap()], &[]);
    assert_exit(&out, 0, "lab history F5-mine.jsonl");
    let text = stdout(&out);
    assert!(text.contains("F5-mine: 4 operations, 1 faults"), "{text}");
    assert!(text.contains("stale writes accepted (I3)       1") && text.contains("lost writes                      1"), "{text}");
    assert!(text.contains("verdict: NOT clean"), "{text}");
    let page = std::fs::read_to_string(dir.0.join("F5-mine.html")).unwrap();
    assert_eq!(page.matches("data-op=\"").count(), 4);
    assert!(page.contains("class=\"op write acc stale\" data-op=\"4\""), "A's stale write is marked");
    assert!(page.contains("class=\"op write acc lost\" data-op=\"3\""), "B's lost write is marked");

    std::fs::remove_file(dir.0.join("F5-mine.html")).unwrap();
    std::fs::write(&jsonl, F5_LINES.replacen("\"type\":\"fault\"", "\"type\":\"faults\"", 1)).unwrap();
    let out = run(LAB, &["history", jsonl.to_str().unwrap()], &[]);
    assert_exit(&out, 3, "lab history on a broken line");
    assert!(stderr(&out).contains("line 6"), "{}", stderr(&out));
    assert!(!dir.0.join("F5-mine.html").exists(), "a broken history was drawn");
}

/// Ctrl-C (SIGINT) while F4 runs — during startup, with holder-a frozen by
/// SIGSTOP, while B runs — leaves no holder (stopped or running) and no
/// postgres of the lab's cluster, exits 130, and leaves the previous
/// `--out` transcript as it was.
#[test]
fn interrupt_during_f4_leaves_nothing_behind() {
    let _turn = HOLDERS_RUNNING.lock();
    let dir = TempDir::new("sigint");
    let port = free_port().to_string();
    let place = dir.0.join("cluster");
    let env = [("LAB_PORT", port.as_str()), ("LAB_CLUSTER_DIR", place.to_str().unwrap())];
    let out_file = dir.0.join("output.txt");
    std::fs::write(&out_file, "the previous full run\n").unwrap();
    for moment in ["", "CASE F4 ::", "SIGSTOP 后", "B 获取租约"] {
        let mut child = spawn_lab(&["run", "F4", "--out", out_file.to_str().unwrap()], &env);
        let seen = if moment.is_empty() { String::new() } else { read_until(child.stdout.take().unwrap(), |line| line.contains(moment)) };
        let status = exit_after_sigint(&mut child, &format!("lab run F4, SIGINT at {moment:?}"));
        let left = leftovers_after_exit(dir.path());
        assert!(left.is_empty(), "SIGINT at {moment:?} left processes behind:\n{}", left.join("\n"));
        // A SIGINT that lands before the lab installs its handler kills it outright.
        if !moment.is_empty() {
            assert_eq!(status.code(), Some(130), "SIGINT at {moment:?}: {status}; it printed:\n{seen}");
        }
        let out = run(LAB, &["cluster", "status"], &env);
        assert_exit(&out, 1, &format!("cluster status after SIGINT at {moment:?}"));
        assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "the previous full run\n", "SIGINT at {moment:?} replaced the --out file");
    }
}

/// Ctrl-C (SIGINT) ten seconds into a chaos run, with holders running,
/// paused by the nemesis and behind their proxies: the run stops, every
/// holder (stopped or not) is resumed or killed and reaped, the cluster
/// stops, and the lab exits 130 without printing a table.
#[test]
fn interrupt_during_a_chaos_run_leaves_nothing_behind() {
    let _turn = HOLDERS_RUNNING.lock();
    let dir = TempDir::new("sigint-chaos");
    let port = free_port().to_string();
    let place = dir.0.join("cluster");
    let env = [("LAB_PORT", port.as_str()), ("LAB_CLUSTER_DIR", place.to_str().unwrap())];
    let mut child = spawn_lab(&["chaos", "--seed", "3", "--holders", "4", "--duration", "120s", "--mode", "unfenced"], &env);
    // The run reports its progress on stderr every ten seconds.
    let seen = read_until(child.stderr.take().unwrap(), |line| line.starts_with("chaos UNFENCED 10s/"));
    let during = leftovers(dir.path());
    assert!(during.iter().any(|p| p.contains("holder")), "no holder was running ten seconds into the run:\n{}", during.join("\n"));
    let namespaces = namespaces_of(&during);
    assert!(!namespaces.is_empty(), "no holder of the run was on a network host of its own:\n{}", during.join("\n"));
    let status = exit_after_sigint(&mut child, "lab chaos");
    let left = leftovers_after_exit(dir.path());
    assert!(left.is_empty(), "SIGINT during a chaos run left processes behind:\n{}", left.join("\n"));
    let hosts_left = namespaces_alive(&namespaces);
    assert!(hosts_left.is_empty(), "SIGINT during a chaos run left network namespaces behind: {hosts_left:?}");
    assert_eq!(status.code(), Some(130), "lab chaos after SIGINT: {status}; it printed:\n{seen}");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(!out.contains("verdict"), "an interrupted run printed a table:\n{out}");
    let status_out = run(LAB, &["cluster", "status"], &env);
    assert_exit(&status_out, 1, "cluster status after SIGINT during a chaos run");
}

/// Sends SIGINT to `child`, as a Ctrl-C at the terminal delivers it to the
/// lab, and waits (at most a minute) for it to exit.
fn exit_after_sigint(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not exit within 60 s of SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `lab` with `args` and `env`, its stdout and stderr piped.
fn spawn_lab(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    Command::new(LAB).args(args).envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Reads `stream` line by line up to and including the first line `stop`
/// accepts; returns the lines read, and drains the rest on a thread of its
/// own, so that the lab never writes into a closed pipe (which would make
/// its next print panic). Fails the test if the stream ends first.
fn read_until(stream: impl std::io::Read + Send + 'static, mut stop: impl FnMut(&str) -> bool) -> String {
    let mut seen = String::new();
    let mut lines = BufReader::new(stream).lines();
    while let Some(line) = lines.next() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if stop(&line) {
            std::thread::spawn(move || lines.for_each(drop));
            return seen;
        }
    }
    panic!("lab ended before the line the test waits for; it printed:\n{seen}");
}
