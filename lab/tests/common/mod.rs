//! Helpers shared by the integration tests: running a command and failing
//! loudly with its output, private clusters, finding leftover processes,
//! and a check that cannot run here (NOT RUN, a failure under CI).

#![allow(dead_code)] // each test binary uses its own subset

pub mod bench_table;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const LAB: &str = env!("CARGO_BIN_EXE_lab");
pub const HOLDER: &str = env!("CARGO_BIN_EXE_holder");

/// Runs a command and returns its output.
pub fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

/// Fails loudly, with the command, its status, stdout and stderr.
pub fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: expected exit {code}, got {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A folder made by `tempfile` under `LAB_TEST_TMP` (the suite's folder for
/// the group) when set, else under the system's temp folder.
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    let builder = tempfile::Builder::new().prefix(prefix).to_owned();
    match std::env::var_os("LAB_TEST_TMP") {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .unwrap()
}

/// A private folder for one test, made by `tempfile` (a random name,
/// created atomically: nobody can have placed it first, and no name is
/// computed from a pid), opened to 0711 so that the server account can
/// pass through to a cluster inside it; removed on drop.
pub struct TempDir(pub PathBuf, tempfile::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir(&format!("lab-{tag}-"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        TempDir(dir.path().to_path_buf(), dir)
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

/// A port nobody listens on right now, and the two after it (F14's
/// servers), below the ephemeral range.
pub fn free_port() -> u16 {
    lab::cluster::free_ports(lab::cluster::PORTS).unwrap()
}

/// A private cluster (its own folder and port) for one test; every `lab`
/// and holder process the test starts with [`PrivateCluster::env`] uses it.
/// The lab makes its place, `<temp dir>/cluster`, itself. Its server is
/// stopped and its folder removed on drop.
pub struct PrivateCluster {
    pub dir: TempDir,
    pub port: String,
    /// `LAB_CLUSTER_DIR`: the place, inside `dir`.
    place: String,
}

impl PrivateCluster {
    pub fn new(tag: &str) -> PrivateCluster {
        let dir = TempDir::new(tag);
        let place = dir.0.join("cluster").to_str().unwrap().to_owned();
        PrivateCluster { dir, port: free_port().to_string(), place }
    }

    /// The cluster's place (`LAB_CLUSTER_DIR`).
    pub fn place(&self) -> PathBuf {
        PathBuf::from(&self.place)
    }

    /// The variables that point the lab at this cluster.
    pub fn env(&self) -> [(&str, &str); 2] {
        [("LAB_PORT", self.port.as_str()), ("LAB_CLUSTER_DIR", self.place.as_str())]
    }

    /// `lab <args>` against this cluster.
    pub fn lab(&self, args: &[&str]) -> Output {
        run(LAB, args, &self.env())
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.lab(&["cluster", "stop"]);
    }
}

/// Processes of the private cluster in `cluster_dir`: its server's (by the
/// folder on their command line) and its holders (a holder's environment
/// names the cluster it works against). Other tests' holders, running side
/// by side in the suite, are theirs, not leftovers of this one.
pub fn leftovers(cluster_dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Ok(pid) = name.to_string_lossy().parse::<u32>() else { continue };
        let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let environ = String::from_utf8_lossy(&std::fs::read(entry.path().join("environ")).unwrap_or_default()).into_owned();
        let ours = if exe == Path::new(HOLDER) { environ.contains(cluster_dir) } else { cmdline.contains(cluster_dir) && !cmdline.contains("cargo") };
        if ours {
            let state = lab::sysinfo::proc_stat(pid).map_or('?', |s| s.state);
            found.push(format!("pid {pid} [{state}]: {cmdline}"));
        }
    }
    found
}

/// The network namespaces (`net:[<inode>]`) the processes listed by
/// [`leftovers`] (`pid N …`) are in, other than this test's own.
pub fn namespaces_of(processes: &[String]) -> Vec<String> {
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let mut found = Vec::new();
    for line in processes {
        let Some(pid) = line.strip_prefix("pid ").and_then(|rest| rest.split(' ').next()) else { continue };
        let Ok(ns) = std::fs::read_link(format!("/proc/{pid}/ns/net")) else { continue };
        if ns != own && !found.contains(&ns.to_string_lossy().into_owned()) {
            found.push(ns.to_string_lossy().into_owned());
        }
    }
    found
}

/// Which of `namespaces` still exist: some process is in one, or holds a
/// descriptor of it. The lab's namespaces have no name (none is mounted
/// under /run/netns), so one that nothing refers to has been ended by the
/// kernel.
pub fn namespaces_alive(namespaces: &[String]) -> Vec<String> {
    let mut alive = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let mut refs: Vec<PathBuf> = std::fs::read_link(entry.path().join("ns/net")).into_iter().collect();
        for fd in std::fs::read_dir(entry.path().join("fd")).into_iter().flatten().flatten() {
            refs.extend(std::fs::read_link(fd.path()));
        }
        for r in refs {
            let r = r.to_string_lossy().into_owned();
            if namespaces.contains(&r) && !alive.iter().any(|a: &String| a.starts_with(&r)) {
                alive.push(format!("{r} (pid {})", entry.file_name().to_string_lossy()));
            }
        }
    }
    alive
}

/// [`leftovers`] once the lab has exited: asked again for up to five
/// seconds while anything is listed, since a child the lab had forked and
/// not yet exec'd when it was stopped (still under the lab's command line)
/// ends on its own a moment later (it was tied to the lab, see
/// `interrupt::tie_to_lab`). What is still there then is a leftover.
pub fn leftovers_after_exit(cluster_dir: &str) -> Vec<String> {
    let start = std::time::Instant::now();
    loop {
        let left = leftovers(cluster_dir);
        if left.is_empty() || start.elapsed() > std::time::Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Headless Chromium's flags for every test that opens a page in it: no
/// sandbox (root), no GPU, and none of the browser's own first-run, sync,
/// update or background traffic. A test adds how it reads the page
/// (`--dump-dom`, or the DevTools protocol).
pub const HEADLESS_CHROMIUM: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// Headless Chromium on this machine, if any: Debian's `chromium`, or
/// another build's name for it.
pub fn chromium() -> Option<PathBuf> {
    which(&["chromium", "chromium-browser", "google-chrome"])
}

/// Whether this is CI's run (`CI=true`, as `.ci/run` sets it), where every
/// check must run.
pub fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A check that cannot run here, for want of what `why` says (root, a
/// second account, Chromium). Outside CI: a loud `*** NOT RUN: …` line on
/// stderr, which the harness does not capture, and the caller returns.
/// Under `CI=true`: a panic, since CI is there to run every check, and a
/// test that returned there would pass on nothing. The one home of that
/// rule for the integration tests (the library's unit tests have a copy
/// of it in `fault/proxy/tests.rs`, their one such test).
pub fn not_run(check: &str, why: &str) {
    if under_ci() {
        panic!("CI must run {check}, and it cannot here: {why}");
    }
    let _ = writeln!(std::io::stderr(), "\n*** NOT RUN: {check}: {why}\n");
}

/// Whether this process runs as root; if not, `check` did not run
/// ([`not_run`]: a failure under CI), `why` saying what it needs root for.
pub fn needs_root(check: &str, why: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    not_run(check, &format!("it needs root, {why}, and this process runs as uid {}", nix::unistd::Uid::effective()));
    false
}

/// Headless Chromium, or `None` once `check` is [`not_run`] (a failure under CI).
pub fn chromium_for(check: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        not_run(check, "headless Chromium is not installed. Install it: apt-get install chromium");
    }
    found
}

/// The first of `programs` found on PATH.
pub fn which(programs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    programs.iter().find_map(|program| std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file()))
}
