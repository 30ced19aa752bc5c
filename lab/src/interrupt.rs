//! Ctrl-C (SIGINT), SIGTERM and SIGHUP: stop every holder and whatever else
//! this process started (its cluster, registered with [`on_stop`]), then
//! exit with 130.
//!
//! The signals are blocked in every thread and taken by one waiting thread
//! with `sigwait`, so the cleanup runs as ordinary code (it may lock, spawn
//! `pg_ctl`, wait), not inside a signal handler. Holders and server commands
//! run in process groups of their own, so a Ctrl-C typed at the terminal
//! reaches only the lab, and the lab alone decides what to stop.

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use parking_lot::Mutex;

/// Set once a stop signal arrived.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// The child processes alive right now that a stop must end: holders, and
/// the mutation harness's runs of a mutant.
static CHILDREN: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// What else to stop, after the children, in the order registered (the
/// cluster registers its stop here: this module knows no module above it).
static ON_STOP: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Blocks the stop signals and starts the thread that waits for them.
/// Call first thing in `main`, before any other thread exists, so that every
/// later thread inherits the blocked mask. (Children do not: std resets the
/// signal mask of a spawned process.)
pub fn install() {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    set.thread_block().expect("blocking the stop signals");
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            let signal = set.wait().expect("waiting for a stop signal");
            REQUESTED.store(true, Ordering::SeqCst);
            eprintln!("\nlab: {signal} received: stopping holders and the cluster");
            kill_children();
            let cleanups = ON_STOP.lock().clone();
            for cleanup in cleanups {
                cleanup();
            }
            std::process::exit(130);
        })
        .expect("starting the interrupt thread");
}

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

/// Ties a child to this process: when the lab dies without running its
/// cleanup (SIGKILL, a crash), the kernel sends the child `signal`. If the
/// lab is already gone by the time the child could ask for that (it died
/// between fork and prctl), no signal would ever come, so the child does
/// not start at all (the spawn fails; its caller names the child).
pub fn tie_to_lab(cmd: &mut Command, signal: Signal) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec (after std
    // has switched the child's account, if the command asks for one, so the
    // setting survives it) and calls only prctl(2) and getppid(2), both
    // async-signal-safe, and allocates only on the way out.
    unsafe {
        cmd.pre_exec(move || {
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
