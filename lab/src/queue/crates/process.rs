//! One `lab-queues` process (the crate's setup, or a worker process), owned
//! by the run that started it: spawned in its own process group and tied to
//! the lab (the kernel kills it if the lab dies), registered for Ctrl-C,
//! its stderr kept for the failure report, and on drop, whatever the exit
//! path, continued, killed and reaped. The same nets as the lab's holders
//! (holder_guard.rs), for a process that speaks no protocol on its pipes.

use crate::error::Result;
use crate::{interrupt, poll, sysinfo};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;

/// A running `lab-queues` process.
pub struct QueueProcess {
    /// Its name in messages: `setup`, `worker-2#1`.
    pub name: String,
    child: Option<Child>,
    pid: Pid,
    /// Its stderr so far, from a reader thread.
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl QueueProcess {
    /// Starts `bin` with `args`, as `name`.
    pub fn spawn(bin: &Path, name: &str, args: &[String]) -> Result<QueueProcess> {
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        // Its own process group: a Ctrl-C at the terminal must not reach it
        // behind the lab's back; the lab's cleanup decides.
        cmd.process_group(0);
        // If the lab dies without its cleanup, the kernel sends SIGKILL,
        // which ends the process even while it is stopped.
        interrupt::tie_to_lab(&mut cmd, Signal::SIGKILL);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {} ({}): {e}; `./run.sh queues` builds it", bin.display(), name))?;
        let pid = Pid::from_raw(child.id() as i32);
        interrupt::register_child(pid);
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped");
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Ok(QueueProcess { name: name.into(), child: Some(child), pid, stderr, reader: Some(reader) })
    }

    /// Stops it (SIGSTOP) and waits until the kernel shows it stopped: from
    /// then on it runs no instruction, sends no heartbeat, until [`resume`](Self::resume).
    pub fn pause(&self) -> Result<()> {
        kill(self.pid, Signal::SIGSTOP).map_err(|e| format!("SIGSTOP to {}: {e}", self.name))?;
        // Every thread (the async runtime's, the crate's heartbeat among
        // them), not only the main one.
        let stopped = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            Ok(sysinfo::thread_states(self.pid.as_raw() as u32)?.iter().all(|(_, state)| *state == 'T'))
        })?;
        if stopped {
            Ok(())
        } else {
            Err(format!("{} did not stop within {:?} of SIGSTOP", self.name, poll::BOUND).into())
        }
    }

    /// Continues it (SIGCONT).
    pub fn resume(&self) -> Result<()> {
        kill(self.pid, Signal::SIGCONT).map_err(|e| format!("SIGCONT to {}: {e}", self.name).into())
    }

    /// Whether it has exited on its own, and how (a worker process never
    /// should: the run then fails with its stderr).
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        match &mut self.child {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// Waits for it to exit (the setup's run), at most `bound`; its status.
    pub fn wait_exit(&mut self, bound: std::time::Duration) -> Result<ExitStatus> {
        let mut status = None;
        poll::poll_until(bound, poll::EVERY, || -> Result<bool> {
            status = self.exited()?;
            Ok(status.is_some())
        })?;
        let status = status.ok_or_else(|| format!("{} did not end within {bound:?}", self.name))?;
        self.reap();
        Ok(status)
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().clone()
    }

    /// Kills and reaps it (a worker process the nemesis kills, or any at
    /// the end of the run). SIGCONT first: a stopped process dies on
    /// SIGKILL too, but the order costs nothing.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(self.pid, Signal::SIGCONT);
            let _ = kill(self.pid, Signal::SIGKILL);
            // Forgotten before it is reaped: after that its pid may be reused.
            interrupt::unregister_child(self.pid);
            let _ = child.wait();
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Reaps a process that has exited.
    fn reap(&mut self) {
        self.kill();
    }
}

impl Drop for QueueProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
