//! One network namespace the lab made: created and removed with iproute2,
//! entered by one thread with `setns(2)`.
//!
//! `ip netns add NAME` makes a namespace and bind-mounts it at
//! `/run/netns/NAME`, so it lives without any process in it, and `ip -n
//! NAME …` (and `nft`, started inside) can configure it. `ip netns del NAME`
//! removes the mount; the kernel ends the namespace, and every link inside
//! it, once the last process in it has gone.
//!
//! A thread enters a namespace with `setns(fd, CLONE_NEWNET)`: from then on
//! the sockets it creates, and the processes it starts (a child copies the
//! namespaces of the thread that forks it), belong to that host. A socket
//! stays in the namespace it was created in, so a connection opened inside
//! a host can be used from any thread afterwards. Only the calling thread
//! moves; the rest of the process stays where it was.

use crate::error::{Result, ResultExt};
use nix::fcntl::{open, OFlag};
use nix::sched::{setns, CloneFlags};
use nix::sys::stat::Mode;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

/// Where iproute2 keeps the namespaces it names.
pub const NETNS_DIR: &str = "/run/netns";

/// A named network namespace, held open.
#[derive(Debug)]
pub struct Netns {
    /// Its name under `/run/netns`.
    name: String,
    /// The namespace itself, for `setns`.
    fd: OwnedFd,
}

impl Netns {
    /// Creates the namespace `name` (`ip netns add`); fails if it exists.
    pub fn add(name: &str) -> Result<Netns> {
        ip(&["netns", "add", name])?;
        Netns::open(name)
    }

    /// The existing namespace `name`, opened.
    fn open(name: &str) -> Result<Netns> {
        let path = format!("{NETNS_DIR}/{name}");
        let fd = open(path.as_str(), OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).with_context(|| format!("opening {path}"))?;
        Ok(Netns { name: name.to_owned(), fd })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `commands` (one `ip` command a line, without the leading
    /// `ip`) inside this namespace, as one `ip -batch` (iproute2 enters
    /// the namespace itself: `ip -n`).
    pub fn ip_batch(&self, commands: &[String]) -> Result<()> {
        let mut child = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting ip (iproute2)")?;
        child.stdin.take().expect("piped").write_all(commands.join("\n").as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(format!("ip -n {} -batch failed ({}): {}\ncommands:\n{}", self.name, out.status, String::from_utf8_lossy(&out.stderr).trim(), commands.join("\n")).into());
        }
        Ok(())
    }

    /// Runs `f` on this thread inside the namespace, and brings the thread
    /// back to the namespace it was in, whatever `f` did.
    pub fn within<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        let _inside = Entered::enter(self)?;
        Ok(f())
    }

}

/// Removes the namespace called `name`, if it is there.
pub fn remove(name: &str) -> Result<()> {
    if !std::path::Path::new(NETNS_DIR).join(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

/// The names under `/run/netns` that start with `prefix`.
pub fn listed(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else { return Vec::new() };
    entries.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(prefix)).collect()
}

/// A thread inside another namespace, until dropped.
struct Entered {
    /// The namespace the thread was in, to go back to.
    home: OwnedFd,
}

impl Entered {
    fn enter(ns: &Netns) -> Result<Entered> {
        // thread-self, not self: each thread has its own namespace, and
        // another thread of this process may be inside some other host.
        let home = open("/proc/thread-self/ns/net", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).context("opening this thread's network namespace")?;
        setns(&ns.fd, CloneFlags::CLONE_NEWNET).with_context(|| format!("entering network namespace {}", ns.name))?;
        Ok(Entered { home })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // A thread left in the wrong namespace would connect somewhere else
        // without anyone noticing: better no process at all.
        if let Err(e) = setns(&self.home, CloneFlags::CLONE_NEWNET) {
            eprintln!("lab: cannot bring a thread back to its network namespace ({e}); aborting");
            std::process::abort();
        }
    }
}

/// Runs `ip ARGS…`, failing with its stderr.
fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().context("running ip (iproute2)")?;
    if !out.status.success() {
        return Err(format!("ip {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    Ok(())
}
