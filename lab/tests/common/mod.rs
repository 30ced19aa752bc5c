//! Helpers shared by the integration tests: running a command and failing
//! loudly with its output, private clusters, and finding leftover processes.

#![allow(dead_code)] // each test binary uses its own subset

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

/// A folder under /tmp (reachable by the postgres account when run as
/// root), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let dir = PathBuf::from(format!("/tmp/lab-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port nobody listens on right now, and the two after it (F14's
/// servers), below the ephemeral range.
pub fn free_port() -> u16 {
    lab::cluster::free_ports(3).unwrap()
}

/// A private cluster (its own folder and port) for one test; every `lab`
/// and holder process the test starts with [`PrivateCluster::env`] uses it.
/// Its server is stopped and its folder removed on drop.
pub struct PrivateCluster {
    pub dir: TempDir,
    pub port: String,
}

impl PrivateCluster {
    pub fn new(tag: &str) -> PrivateCluster {
        PrivateCluster { dir: TempDir::new(tag), port: free_port().to_string() }
    }

    /// The variables that point the lab at this cluster.
    pub fn env(&self) -> [(&str, &str); 2] {
        [("LAB_PORT", self.port.as_str()), ("LAB_CLUSTER_DIR", self.dir.path())]
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

/// Processes of the private cluster in `cluster_dir`, or any holder process.
pub fn leftovers(cluster_dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Ok(pid) = name.to_string_lossy().parse::<u32>() else { continue };
        let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if exe == Path::new(HOLDER) || (cmdline.contains(cluster_dir) && !cmdline.contains("cargo")) {
            found.push(format!("pid {pid} [{}]: {cmdline}", state.rsplit_once(')').map_or("?", |(_, s)| s.trim()).chars().next().unwrap_or('?')));
        }
    }
    found
}
