//! The parent's handle on one holder process, and the guard that makes sure
//! no holder outlives its case.
//!
//! The parent freezes a holder with SIGSTOP, reads its state (`T`) from
//! `/proc/<pid>/stat`, resumes it with SIGCONT, writes its release line on
//! stdin and reads its protocol lines from stdout, each parsed into a
//! [`Step`] here, so that no reader matches text. Every read and wait has a
//! bound; a holder that does not answer, or prints a line that is not a
//! step, becomes an error that shows its argv, exit status, stderr and the
//! server log's path, never a hang or a guess.
//!
//! On drop, whatever the exit path (a failed check, a panic, an error), the
//! guard sends SIGCONT and SIGKILL and reaps the process. Two more nets catch
//! the paths a destructor cannot: the interrupt thread kills registered
//! holders on Ctrl-C, and PR_SET_PDEATHSIG has the kernel kill a holder whose
//! parent died without cleaning up.
//!
//! Why this file stays whole: it is the one owner of one process, from
//! spawn to reap; its reads, signals and drop keep one invariant (one
//! reaper per pid) that is checked by reading them together.

use crate::vocabulary::Act;
use crate::error::Result;
use crate::holder::{HolderArgs, Line, Step, Steps};
use crate::hosts::Host;
use crate::safe_dir::{self, SafeDir};
use crate::{call_log, events, interrupt, sysinfo};
use crate::paths;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a holder may take to print its next line or to exit. Far above
/// any real step (a step is one or two SQL statements), so it only fires
/// when a holder is stuck or dead.
pub const ANSWER_BOUND: Duration = Duration::from_secs(20);

/// What a bounded read of a holder's output found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// One protocol line.
    Step(Step),
    /// Nothing yet.
    Quiet,
    /// The holder closed its output: it has exited, or is about to.
    Ended,
}

/// A running holder process, owned by the case that started it.
pub struct HolderGuard {
    /// The holder's parameters, for messages.
    holder: String,
    /// The command line, for diagnostics.
    argv: Vec<String>,
    /// The process; `None` once it has been reaped.
    child: Option<Child>,
    /// Its pid, for signals and /proc.
    pid: Pid,
    /// Where the release line goes.
    stdin: Option<ChildStdin>,
    /// Its stdout, line by line, from a reader thread, its calls taken out
    /// (they go to [`call_log`]).
    lines: mpsc::Receiver<String>,
    /// That reader thread, joined once the holder has exited, so that every
    /// call it printed is in the log before the guard is gone.
    stdout_reader: Option<std::thread::JoinHandle<()>>,
    /// Its stderr so far, from a reader thread.
    stderr: Arc<Mutex<String>>,
    /// That reader thread, joined once the holder has exited, so that a
    /// failure report never misses the last words the holder wrote.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// Its exit status once reaped.
    status: Option<ExitStatus>,
}

impl HolderGuard {
    // ANCHOR: spawn
    /// Starts `bin` with `args`.
    pub fn spawn(bin: &Path, args: &HolderArgs) -> Result<HolderGuard> {
        HolderGuard::spawn_with_env(bin, args, &[])
    }

    /// Starts `bin` with `args` and extra environment variables: F13
    /// preloads a fake clock this way. (F12 sends its holder through the
    /// delay proxy with its arguments, [`HolderArgs::via_proxy`].) Its calls
    /// are logged as the next incarnation of its holder.
    pub fn spawn_with_env(bin: &Path, args: &HolderArgs, env: &[(&str, &str)]) -> Result<HolderGuard> {
        HolderGuard::spawn_as(bin, args, env, None, None)
    }

    /// Starts `bin` with `args` on `host` of the lab's network.
    pub fn spawn_on(host: &Host, bin: &Path, args: &HolderArgs) -> Result<HolderGuard> {
        HolderGuard::spawn_as(bin, args, &[], None, Some(host))
    }

    /// Like [`spawn_with_env`](HolderGuard::spawn_with_env), its calls logged
    /// as `incarnation` of its holder (the chaos run's slots count their own:
    /// a new one after a kill or a failure, not after a normal end), on
    /// `host` when given.
    pub fn spawn_as(bin: &Path, args: &HolderArgs, env: &[(&str, &str)], incarnation: Option<u32>, host: Option<&Host>) -> Result<HolderGuard> {
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        let argv = args.to_argv();
        let mut cmd = Command::new(bin);
        cmd.args(&argv).envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(host) = host {
            // Born inside its host, where the lab's account may be mapped in
            // a user namespace that cannot judge the folders above its
            // servers' credentials: the lab walks to them here and hands
            // them down open (see safe_dir::hand_down).
            let folders = args.credential_folders().iter().filter_map(|dir| SafeDir::open_made(dir).transpose()).collect::<Result<Vec<_>>>()?;
            let keep = safe_dir::hand_down(&mut cmd, folders);
            host.enter(&mut cmd, None, keep)?;
        }
        // Its own process group: a Ctrl-C at the terminal must not stop or
        // kill it behind the lab's back; the lab's cleanup decides.
        cmd.process_group(0);
        // If the lab dies without its cleanup, the kernel sends the holder
        // SIGKILL, which ends it even while it is stopped.
        interrupt::tie_to_lab(&mut cmd, Signal::SIGKILL);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start holder {}: {e}", bin.display()))?;
        let pid = Pid::from_raw(child.id() as i32);
        interrupt::register_child(pid);
        events::record(&args.holder, Act::Spawn);

        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let (process, counted) = call_log::started(&args.holder);
        let (holder, incarnation) = (args.holder.clone(), incarnation.unwrap_or(counted));
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // A call is the history's, stamped as it arrives; every
                // other line is the case's to read (and to refuse, if it
                // is no step). Read to the end even when nobody listens,
                // so that no call is lost.
                match line.parse::<Line>() {
                    Ok(Line::Call(call)) => call_log::heard(process, &holder, incarnation, call),
                    _ => {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let mut err_pipe = child.stderr.take().expect("piped");
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Ok(HolderGuard {
            holder: args.holder.clone(),
            argv,
            child: Some(child),
            pid,
            stdin,
            lines,
            stdout_reader: Some(stdout_reader),
            stderr,
            stderr_reader: Some(stderr_reader),
            status: None,
        })
    }
    // ANCHOR_END: spawn

    /// The next protocol line within [`ANSWER_BOUND`], `None` once the
    /// holder has closed its output; a holder silent for the whole bound is
    /// an error, worded by `silent` ("printed nothing", …).
    fn answer(&mut self, silent: &str) -> Result<Option<Step>> {
        match self.lines.recv_timeout(ANSWER_BOUND) {
            Ok(line) => self.parse(&line).map(Some),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => Err(self.failure(&format!("{} {silent} for {ANSWER_BOUND:?}", self.holder)).into()),
        }
    }

    /// One line of the holder's stdout as a step; any other line is the
    /// holder's failure, reported whole.
    fn parse(&self, line: &str) -> Result<Step> {
        line.parse().map_err(|e: String| self.failure(&format!("{} printed {e}", self.holder)).into())
    }

    /// The next protocol line, within [`ANSWER_BOUND`].
    pub fn next_step(&mut self) -> Result<Step> {
        match self.answer("printed nothing")? {
            Some(step) => Ok(step),
            None => {
                // Reaped for the report; its status is in the error below.
                self.wait_exit()?;
                Err(self.failure(&format!("{} ended its output early", self.holder)).into())
            }
        }
    }

    /// A read of the next protocol line that waits at most `bound`: the
    /// chaos run's slots read this way, between the nemesis's orders.
    pub fn read_within(&mut self, bound: Duration) -> Result<Output> {
        match self.lines.recv_timeout(bound) {
            Ok(line) => self.parse(&line).map(Output::Step),
            Err(RecvTimeoutError::Timeout) => Ok(Output::Quiet),
            Err(RecvTimeoutError::Disconnected) => Ok(Output::Ended),
        }
    }

    /// Every line the holder prints until it closes its output, then its
    /// exit status: after this, nothing the holder does can still land.
    pub fn rest_of_output(&mut self) -> Result<(Steps, ExitStatus)> {
        let mut steps = Vec::new();
        while let Some(step) = self.answer("neither printed nor ended its output")? {
            steps.push(step);
        }
        Ok((Steps(steps), self.wait_exit()?))
    }

    /// The next `n` protocol lines.
    pub fn next_steps(&mut self, n: usize) -> Result<Steps> {
        (0..n).map(|_| self.next_step()).collect::<Result<_>>().map(Steps)
    }

    /// Up to `n` protocol lines: fewer if the holder ends its output first,
    /// so that a holder that took another path shows what it printed
    /// instead of ending the case.
    pub fn up_to_steps(&mut self, n: usize) -> Result<Steps> {
        let mut steps = Vec::new();
        while steps.len() < n {
            match self.answer("printed nothing")? {
                Some(step) => steps.push(step),
                None => break,
            }
        }
        Ok(Steps(steps))
    }

    /// Reads the next line, which must be `step`.
    pub fn expect_step(&mut self, step: Step) -> Result<()> {
        let next = self.next_step()?;
        if next != step {
            return Err(self.failure(&format!("{} printed {next}, expected {step}", self.holder)).into());
        }
        Ok(())
    }

    // ANCHOR: sigstop
    /// Sends SIGSTOP and waits until `/proc` shows every thread of the
    /// process stopped; returns the process's state letter then.
    pub fn stop(&mut self) -> Result<char> {
        // SIGSTOP cannot be caught or ignored: every thread of the holder,
        // the renewer included, stops where it is.
        kill(self.pid, Signal::SIGSTOP)?;
        events::record(&self.holder, Act::Stop);
        // Delivery is asynchronous, and each thread stops on its own way
        // back from the kernel: the process's stat may show T while the
        // renewer is still running. Wait for the kernel to show all of them.
        // A holder that exited just before the signal (a zombie, `Z`, not
        // yet reaped) will never stop: that ends the wait too.
        let start = Instant::now();
        loop {
            let threads = self.threads()?;
            let all_stopped = threads.iter().all(|(_, state)| *state == 'T');
            let exited = threads.iter().any(|(_, state)| *state == 'Z');
            if all_stopped || exited || start.elapsed() > ANSWER_BOUND {
                return self.state();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Sends SIGKILL, as a crash would, and reaps the process. SIGKILL cannot
    /// be caught: no cleanup of the holder's own runs, and whatever it had
    /// open (a transaction, a lease) is left to the servers to notice.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        kill(self.pid, Signal::SIGKILL)?;
        events::record(&self.holder, Act::Kill);
        self.wait_exit()
    }

    /// The holder's process id.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends SIGCONT: the holder resumes exactly where it was stopped.
    pub fn resume(&mut self) -> Result<()> {
        kill(self.pid, Signal::SIGCONT)?;
        events::record(&self.holder, Act::Cont);
        Ok(())
    }

    /// The process state from `/proc/<pid>/stat`: `S` sleeping, `R` running,
    /// `T` stopped by a signal, `Z` exited but not yet reaped.
    pub fn state(&self) -> Result<char> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))?;
        sysinfo::parse_stat(&stat).map(|s| s.state).ok_or_else(|| format!("unreadable /proc/{}/stat", self.pid).into())
    }

    /// Each thread's name and state (see [`sysinfo::thread_states`]).
    pub fn threads(&self) -> Result<Vec<(String, char)>> {
        Ok(sysinfo::thread_states(self.pid.as_raw() as u32)?)
    }

    /// The state of the thread named `name` (the renewer is "renewer"):
    /// SIGSTOP must have stopped every thread, not only the main one.
    pub fn thread_state(&self, name: &str) -> Result<String> {
        let states: Vec<String> =
            self.threads()?.into_iter().filter(|(comm, _)| comm == name).map(|(_, s)| s.to_string()).collect();
        if states.is_empty() {
            return Err(format!("{} has no thread named {name}", self.holder).into());
        }
        Ok(states.join(","))
    }
    // ANCHOR_END: sigstop

    /// Writes one line to the holder's stdin (buffered by the pipe even while
    /// the holder is stopped).
    pub fn send_line(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("the holder's stdin is closed")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Waits for the holder to exit, within [`ANSWER_BOUND`], and reaps it.
    pub fn wait_exit(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let start = Instant::now();
        let mut nap = crate::poll::Backoff::up_to(Duration::from_millis(5));
        loop {
            let child = self.child.as_mut().expect("not reaped yet");
            if let Some(status) = child.try_wait()? {
                interrupt::unregister_child(self.pid);
                self.child = None;
                self.status = Some(status);
                // The holder is gone, so its stderr is at EOF: the reader
                // ends. It only copies bytes for failure reports, and
                // decides nothing: a panic there would show as a report
                // without the holder's last words, never as a verdict.
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                self.join_stdout_reader();
                return Ok(status);
            }
            if start.elapsed() > ANSWER_BOUND {
                return Err(self.failure(&format!("{} did not exit within {ANSWER_BOUND:?}", self.holder)).into());
            }
            nap.sleep();
        }
    }

    /// Waits for the stdout reader, which ends at the holder's EOF: every
    /// call the holder printed is logged after this. It only sorts lines;
    /// a panic there would lose calls, and the history's check that every
    /// write attempt has its call would show it.
    fn join_stdout_reader(&mut self) {
        if let Some(reader) = self.stdout_reader.take() {
            let _ = reader.join();
        }
    }

    /// Everything needed to understand a misbehaving holder.
    pub fn failure(&self, what: &str) -> String {
        let status = match self.status {
            // The code alone: `ExitStatus`'s own Display would repeat "exit status: ".
            Some(s) => s.code().map_or_else(|| signal_text(s), |code| code.to_string()),
            None => match self.state() {
                Ok(state) => format!("still running (state {state})"),
                Err(_) => "unknown".into(),
            },
        };
        let stderr = self.stderr.lock().trim_end().to_owned();
        format!(
            "{what}\nargv: holder {}\nexit status: {status}\nstderr: {}\nserver log: {}",
            self.argv.join(" "),
            if stderr.is_empty() { "(empty)".into() } else { stderr.replace('\n', "\n  ") },
            crate::cluster::log_path(&paths::cluster_dir()).display()
        )
    }
}

/// How a holder ended, as a transcript shows it after its last protocol
/// line: `exit 0`, `exit 3`, or `signal 9` for one killed by SIGKILL.
pub fn exit_text(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit {code}"),
        None => signal_text(status),
    }
}

/// A holder's last protocol lines and how it ended, as one text a check
/// compares: `RENEW_AFTER_WRITE ok=true, RELEASED, exit 0`, or `exit 0`
/// when it printed none. `exit` is an [`exit_text`], or the one expected.
pub fn ending(steps: &Steps, exit: &str) -> String {
    if steps.is_empty() {
        exit.to_owned()
    } else {
        format!("{steps}, {exit}")
    }
}

/// The signal that ended a process: `signal 9`.
fn signal_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    status.signal().map_or_else(|| status.to_string(), |signal| format!("signal {signal}"))
}

// ANCHOR: guard
impl Drop for HolderGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Resume first, so nothing is ever left stopped, then end it.
            let _ = kill(self.pid, Signal::SIGCONT);
            let _ = kill(self.pid, Signal::SIGKILL);
            // Unregistered before the reap: afterwards the pid may be reused.
            interrupt::unregister_child(self.pid);
            let _ = child.wait();
            self.join_stdout_reader();
        }
    }
}
// ANCHOR_END: guard
