//! Ctrl-C (SIGINT), SIGTERM and SIGHUP: stop every holder and whatever else
//! this process started (its cluster, registered with [`on_stop`]), then
//! exit with 130.
//!
//! The signal handler only writes the signal's number into a pipe; one
//! waiting thread reads it and runs the cleanup as ordinary code (it may
//! lock, spawn `pg_ctl`, wait), not inside the handler. Holders and server
//! commands run in process groups of their own, so a Ctrl-C typed at the
//! terminal reaches only the lab, and the lab alone decides what to stop.
//!
//! Not blocked and taken with `sigwait`, as this module first did: a child
//! inherits its parent's signal mask (std has kept it since Rust 1.66), so
//! every program the lab started, the test binaries and shells of the
//! suite's groups among them, had SIGINT, SIGTERM and SIGHUP blocked. The
//! suite's Ctrl-C then stopped nothing but the lab processes in a group; a
//! handler is reset by `exec`, and the children start with the defaults.

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use parking_lot::Mutex;

/// Set once a stop signal arrived.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// The child processes alive right now that a stop must end: the holders
/// only (a mutant's runs are in [`CLEANING_CHILDREN`]).
static CHILDREN: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// The child processes that clean up after a stop signal of their own (a
/// mutant's build and its case run, which may hold holders, servers and
/// network hosts): a stop sends them SIGINT, as a Ctrl-C would, and kills
/// only what has not exited within [`CLEANUP_BOUND`].
static CLEANING_CHILDREN: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// How long a child that cleans up after itself is given before SIGKILL.
const CLEANUP_BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// What else to stop, after the children, in the order registered (the
/// cluster registers its stop here: this module knows no module above it).
static ON_STOP: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// The pipe's end the handler writes into; -1 until [`install`].
static PIPE_IN: AtomicI32 = AtomicI32::new(-1);

/// The handler of the stop signals: one byte, the signal's number, into the
/// pipe, and nothing else (write(2) is async-signal-safe; errno is kept).
extern "C" fn on_stop_signal(signal: nix::libc::c_int) {
    // SAFETY: errno is this thread's; write(2) on a descriptor this module
    // owns, with a one-byte buffer on this stack. A full pipe (a burst of
    // signals) drops the byte, which is harmless: one is enough.
    unsafe {
        let errno = *nix::libc::__errno_location();
        let byte = signal as u8;
        nix::libc::write(PIPE_IN.load(Ordering::SeqCst), (&raw const byte).cast(), 1);
        *nix::libc::__errno_location() = errno;
    }
}

/// Installs the handler of the stop signals and starts the thread that
/// waits for them. Also replaces an inherited "ignore" (a run started in
/// the background ignores SIGINT): the lab must clean up whatever stops it.
pub fn install() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler};
    let (out, into) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("making the stop signals' pipe");
    PIPE_IN.store(std::os::fd::IntoRawFd::into_raw_fd(into), Ordering::SeqCst);
    // SA_RESTART: a slow system call that a signal interrupts in another
    // thread is restarted rather than failing with EINTR. All three
    // blocked while the handler runs, so it runs once at a time.
    let mut during = SigSet::empty();
    for signal in STOP_SIGNALS {
        during.add(signal);
    }
    let action = SigAction::new(SigHandler::Handler(on_stop_signal), SaFlags::SA_RESTART, during);
    for signal in STOP_SIGNALS {
        // SAFETY: the handler is async-signal-safe (above).
        unsafe { sigaction(signal, &action) }.expect("installing the stop signals' handler");
    }
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            let mut file = std::fs::File::from(out);
            let mut byte = [0u8; 1];
            // read_exact retries a read that a signal interrupted.
            std::io::Read::read_exact(&mut file, &mut byte).expect("waiting for a stop signal");
            let signal = Signal::try_from(i32::from(byte[0])).map_or_else(|_| format!("signal {}", byte[0]), |s| s.to_string());
            REQUESTED.store(true, Ordering::SeqCst);
            // Not eprintln!, which panics when stderr is gone: a test binary
            // that read this process's stderr has often died of the same
            // Ctrl-C, and a panic here would end the cleanup before it began.
            let _ = writeln!(std::io::stderr(), "\nlab: {signal} received: stopping holders and the cluster");
            // Each step runs even if one before it panicked (a message
            // printed deep inside a cleanup, to a stderr that is gone).
            let _ = std::panic::catch_unwind(stop_cleaning_children);
            let _ = std::panic::catch_unwind(kill_children);
            let cleanups = ON_STOP.lock().clone();
            for cleanup in cleanups {
                let _ = std::panic::catch_unwind(cleanup);
            }
            std::process::exit(130);
        })
        .expect("starting the interrupt thread");
}

/// The signals that stop the lab: Ctrl-C, `kill`, a closed terminal.
const STOP_SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Whether a stop signal arrived; nothing new is started after that.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Called by `main` before it returns: if a stop signal is being handled,
/// wait for the interrupt thread to finish its cleanup and exit the process,
/// instead of returning and ending the process under its feet (which would
/// leave a half-stopped server behind).
pub fn settle() {
    if requested() {
        loop {
            std::thread::park();
        }
    }
}

/// A writer that passes everything through until a stop signal arrives,
/// and then swallows it: after Ctrl-C, the failures of a case whose holders
/// and server are being stopped are noise, not findings.
pub struct QuietAfterStop<W>(pub W);

impl<W: std::io::Write> std::io::Write for QuietAfterStop<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if requested() {
            return Ok(buf.len());
        }
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Registers a cleanup to run on a stop signal, once however often it is registered.
pub fn on_stop(cleanup: fn()) {
    let mut list = ON_STOP.lock();
    if !list.iter().any(|f| std::ptr::fn_addr_eq(*f, cleanup)) {
        list.push(cleanup);
    }
}

/// Records a live child process, so that an interrupt can stop it.
pub fn register_child(pid: Pid) {
    CHILDREN.lock().push(pid);
}

/// Forgets a child, just before its owner reaps it (after that its pid may
/// be reused by an unrelated process, which must never receive our signals).
pub fn unregister_child(pid: Pid) {
    CHILDREN.lock().retain(|p| *p != pid);
}

/// Starts `cmd` as a child that cleans up after a stop signal of its own
/// (see [`CLEANING_CHILDREN`]), registered before anyone can stop this
/// process; `None`, and nothing started, once a stop signal has come. The
/// check, the start and the registration happen under the list's lock,
/// which the stop takes after marking the signal: a child started in
/// between would be missed by the stop and outlive this process.
pub fn spawn_cleaning_child(cmd: &mut Command) -> std::io::Result<Option<std::process::Child>> {
    let mut children = CLEANING_CHILDREN.lock();
    if requested() {
        return Ok(None);
    }
    let child = cmd.spawn()?;
    children.push(Pid::from_raw(child.id() as i32));
    Ok(Some(child))
}

/// Forgets a child started by [`spawn_cleaning_child`], just before its
/// owner reaps it (as [`unregister_child`]).
pub fn unregister_cleaning_child(pid: Pid) {
    CLEANING_CHILDREN.lock().retain(|p| *p != pid);
}

/// SIGINT to every child that cleans up after itself, then a wait for
/// each, at most [`CLEANUP_BOUND`] for all, SIGKILL for any still there,
/// and the reaping (pid 1 may not reap a zombie we leave). The list stays
/// locked throughout: no child starts meanwhile, and no owner reaps one
/// whose pid could then be reused.
fn stop_cleaning_children() {
    stop_cleaning_children_within(CLEANUP_BOUND);
}

fn stop_cleaning_children_within(bound: std::time::Duration) {
    use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
    let children = CLEANING_CHILDREN.lock();
    for pid in children.iter() {
        let _ = nix::sys::signal::kill(*pid, Signal::SIGINT);
    }
    let deadline = std::time::Instant::now() + bound;
    for pid in children.iter() {
        // WNOWAIT: looks without reaping, so the pid stays ours until the
        // waitpid below.
        while matches!(waitid(Id::Pid(*pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG), Ok(WaitStatus::StillAlive))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = nix::sys::signal::kill(*pid, Signal::SIGKILL);
        let _ = waitpid(*pid, None);
    }
}

/// Ties a child to this process: when the lab dies without running its
/// cleanup (SIGKILL, a crash), the kernel sends the child `signal`. If the
/// lab is already gone by the time the child could ask for that (it died
/// between fork and prctl), no signal would ever come, so the child does
/// not start at all (the spawn fails; its caller names the child). The
/// child starts with `signal`'s default action: an ignored signal stays
/// ignored across exec (a shell's `&` ignores SIGINT and SIGQUIT), and
/// then neither the kernel's nor the lab's would end it.
pub fn tie_to_lab(cmd: &mut Command, signal: Signal) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec (after std
    // has switched the child's account, if the command asks for one, so the
    // setting survives it) and calls only sigaction(2), prctl(2) and
    // getppid(2), all async-signal-safe, and allocates only on the way out.
    unsafe {
        cmd.pre_exec(move || {
            // SIGKILL has no action to set (and needs none).
            if signal != Signal::SIGKILL {
                nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigDfl)?;
            }
            nix::sys::prctl::set_pdeathsig(signal)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("the lab exited while starting it"));
            }
            Ok(())
        });
    }
}

fn kill_children() {
    let children = CHILDREN.lock();
    for pid in children.iter() {
        // SIGCONT first would be needed for a signal the process must handle;
        // SIGKILL ends even a stopped process. The SIGCONT keeps the rule of
        // the holder guard: nothing is left stopped, whatever happens next.
        let _ = nix::sys::signal::kill(*pid, Signal::SIGCONT);
        let _ = nix::sys::signal::kill(*pid, Signal::SIGKILL);
        // Reap it here, still under the lock (its guard cannot reap it
        // meanwhile): a zombie would outlive us if pid 1 does not reap.
        let _ = nix::sys::wait::waitpid(*pid, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    /// A child started to clean up after itself whose shell answers SIGINT
    /// with `on_int`, once it says it is ready.
    fn cleaning_child(on_int: &str) -> std::process::Child {
        let script = format!("trap '{on_int}' INT; echo ready; while :; do sleep 0.05; done");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]).process_group(0).stdout(Stdio::piped());
        let mut child = spawn_cleaning_child(&mut cmd).unwrap().expect("no stop signal in a unit test");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        child
    }

    /// The stop signals' bits in a `SigBlk:`/`SigIgn:` line of a child's
    /// /proc status (signal n is bit n-1).
    fn stop_bits(status: &str, field: &str) -> u64 {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in:\n{status}"));
        let mask = u64::from_str_radix(line[field.len()..].trim(), 16).unwrap();
        STOP_SIGNALS.iter().map(|s| 1u64 << (*s as i32 - 1)).filter(|bit| mask & bit != 0).sum()
    }

    /// A program the lab starts can be stopped: it inherits neither a
    /// blocked nor an ignored stop signal from the lab's handling of them.
    #[test]
    fn children_start_with_the_stop_signals_deliverable() {
        install();
        // The thread that starts the child is one made after install(),
        // like the lab's case and group threads.
        let status = std::thread::spawn(|| Command::new("cat").arg("/proc/self/status").output().unwrap()).join().unwrap();
        let status = String::from_utf8(status.stdout).unwrap();
        assert_eq!(stop_bits(&status, "SigBlk:"), 0, "a child of the lab starts with stop signals blocked:\n{status}");
        assert_eq!(stop_bits(&status, "SigIgn:"), 0, "a child of the lab starts with stop signals ignored:\n{status}");
    }

    /// A stop passes SIGINT on and waits for the child's own cleanup; a
    /// child that ignores it is killed once the bound has passed. Either
    /// way it is reaped. (One test: the list of children is the process's.)
    #[test]
    fn a_stop_asks_children_to_clean_up_and_kills_only_what_stays() {
        let dir = tempfile::tempdir().unwrap();
        let cleaned = dir.path().join("cleaned");
        let mut obliging = cleaning_child(&format!("echo done > {}; exit 0", cleaned.display()));
        stop_cleaning_children_within(Duration::from_secs(30));
        assert_eq!(std::fs::read_to_string(&cleaned).unwrap(), "done\n", "the child did not run its cleanup");
        assert!(obliging.try_wait().is_err(), "the stop left the child unreaped");

        let mut stubborn = cleaning_child("");
        let start = Instant::now();
        stop_cleaning_children_within(Duration::from_millis(300));
        assert!(start.elapsed() < Duration::from_secs(5), "the stop waited {:?} for a child that ignores SIGINT", start.elapsed());
        assert!(stubborn.try_wait().is_err(), "the stop left the child unreaped");
        CLEANING_CHILDREN.lock().clear();
    }
}
