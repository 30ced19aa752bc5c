//! The holder process: one instance of the report job, as a separate OS
//! process (the `holder` binary), so that F4 can freeze it with SIGSTOP.
//!
//! It acquires the lease, starts the background renewer, checks its local
//! deadline, optionally waits for one line on stdin, writes its report part,
//! renews once more and releases. Each step prints one protocol line on
//! stdout ([`Step`], in `protocol`), which the parent reads back to follow
//! it; `args` is its command line.
//!
//! The lease lives in PostgreSQL (`lease26`) or on the etcd cluster
//! (`--lease-backend etcd`, F16); the steps, their lines and the write are
//! the same on both: [`hold`] is one function over [`LeaseService`]. The
//! resource does not know which store issued the token.
//!
//! The chaos run (F15) asks for a longer holding of the same shape: several
//! parts of one scope (`--part summary,detail,…`), each after its own local
//! deadline check, with a work time before each later one (`--work-ms`), and
//! an acquire that waits its turn (`--acquire-every-ms`) instead of giving
//! up at once. With none of these flags a holder is the cases' holder.

use crate::error::Result;
use crate::etcd_lease::EtcdLeaseStore;
use crate::lease::{LeaseService, LeaseStore};
use crate::renewer::{self, Renewer};
use crate::resource::{PartWrite, ResourceStore};
use std::io::{BufRead, Write};
use std::time::Duration;

mod args;
mod call;
mod protocol;
mod record;

pub use args::{HolderArgs, WaitPoint};
use crate::vocabulary::LeaseStoreKind;
pub use call::{Call, Invoke, Return};
pub use protocol::{Line, Step, Steps};

use record::Calls;

/// What a failed write reports: the server's SQLSTATE when it sent one
/// (e.g. 25P03, its idle-in-transaction timeout), `connection-closed` when
/// the connection was gone; `None` for any other failure, which is the
/// holder's own error.
fn failure_code(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(pg) = e.downcast_ref::<postgres::Error>() {
            if let Some(state) = pg.code() {
                return Some(state.code().to_owned());
            }
            if pg.is_closed() {
                return Some("connection-closed".into());
            }
        }
        cause = e.source();
    }
    None
}

/// The exit status when the lease was held by someone else.
pub const EXIT_NOT_ACQUIRED: i32 = 3;

fn say(step: Step) -> Result<()> {
    print_line(&step)
}

/// One line on stdout, whole (the renewer prints its calls from its own
/// thread), and at once.
fn print_line(line: &dyn std::fmt::Display) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    // The parent reads line by line through a pipe: every line must leave now.
    out.flush()?;
    Ok(())
}

fn wait_for_line() -> Result<()> {
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        return Err("stdin closed before the release line arrived".into());
    }
    Ok(())
}

// ANCHOR: holder_run
/// Holds the lease once on the store `args` names; returns the process
/// exit status. The caller has validated `args` (the binary exits 2
/// otherwise).
pub fn hold(args: &HolderArgs) -> Result<i32> {
    // The resource's session is connected up front, so that nothing but
    // the write itself lies between the deadline check and the write; it
    // logs in on its own thread while the lease store's session does.
    let report = {
        let (at, mode, who) = (args.resource_endpoint()?, args.mode, args.holder.clone());
        aside("the resource's", move || ResourceStore::connect_to(&at, mode, &who))
    };
    // The one place that knows there are two stores: everything after the
    // connect is the same code.
    match args.lease_backend {
        LeaseStoreKind::Postgres => {
            let at = args.lease_endpoint()?;
            // The renewer's session logs in beside the lease's, not after
            // the acquire: a login is a server process started, and the
            // renewer needs its session only a period after the grant.
            let renewal = (!args.no_renewer).then(|| {
                let (at, who) = (at.clone(), renewer::session_name(&args.holder));
                let login = aside("the renewer's", move || LeaseStore::connect_to(&at, &who));
                move |_: &LeaseStore| login()
            });
            let lease = LeaseStore::connect_to(&at, &args.holder)?;
            hold_on(lease, renewal, report()?, args)
        }
        LeaseStoreKind::Etcd => {
            let lease = if args.etcd_members.is_empty() { EtcdLeaseStore::locate()? } else { EtcdLeaseStore::at(args.etcd_members.clone())? };
            // An etcd session is another client of the same members, made
            // after the grant: its gateway authenticates at its first
            // renewal, in the renewer's thread.
            let renewal = (!args.no_renewer).then_some(|lease: &EtcdLeaseStore| lease.another_session(&renewer::session_name(&args.holder)));
            hold_on(lease, renewal, report()?, args)
        }
    }
}

/// Runs `login` on a thread of its own now; the returned call waits for
/// its session. `whose` names it if the thread panics.
fn aside<T: Send + 'static>(whose: &'static str, login: impl FnOnce() -> Result<T> + Send + 'static) -> impl FnOnce() -> Result<T> {
    let thread = std::thread::spawn(login);
    move || thread.join().map_err(|panic| format!("{whose} login panicked: {}", crate::error::panic_message(&*panic)))?
}

/// Holds the lease once on `lease`, from acquire to release, writing to
/// the resource through `report`; the renewer, if there is one, renews on
/// the session `renewal` gives it, a second one of the same store.
fn hold_on<S: LeaseService>(mut lease: S, renewal: Option<impl FnOnce(&S) -> Result<S>>, mut report: ResourceStore, args: &HolderArgs) -> Result<i32> {
    let ttl = Duration::from_millis(args.ttl_ms);
    let margin = Duration::from_millis(args.margin_ms);
    if args.idle_timeout_ms > 0 {
        report = report.with_idle_timeout(Duration::from_millis(args.idle_timeout_ms))?;
    }
    if args.waits_at(WaitPoint::InsideFence) {
        report = report.with_gap(|| {
            // Inside the fenced transaction: say so, and wait to be let go.
            // A closed stdin lets the write go on (the parent has gone).
            let _ = say(Step::InFence).and_then(|()| wait_for_line());
        });
    }

    // Every call to a server is also printed as it starts and returns
    // (`CALL`, `RETURN`): the run's history; the steps are the protocol.
    let calls = Calls::new();
    let mut acquiring = calls.acquiring()?;
    let mut holding = loop {
        match acquiring.try_once(|| lease.acquire(&args.lease, &args.holder, ttl, margin))? {
            Some(holding) => break holding,
            // Waiting its turn, as a job instance polling for the lease does.
            None if args.acquire_every_ms > 0 => std::thread::sleep(Duration::from_millis(args.acquire_every_ms)),
            None => {
                acquiring.refused()?;
                say(Step::NotAcquired)?;
                return Ok(EXIT_NOT_ACQUIRED);
            }
        }
    };
    // The token and the local deadline, whichever store issued them.
    let token = holding.as_ref().token;
    acquiring.granted(token)?;
    say(Step::Acquired { token })?;
    let every = Duration::from_millis(args.renew_ms);
    let renewer = match renewal {
        Some(session) => Some(Renewer::watched(session(&lease)?, &holding, every, calls.renewals(token))?),
        None => None,
    };

    for (index, part) in args.parts.iter().enumerate() {
        // The work that produces this part: the holder runs, its renewer renews.
        std::thread::sleep(args.work_before(index));
        if args.waits_at(WaitPoint::BeforeCheck) {
            say(Step::Waiting)?;
            wait_for_line()?;
        }
        let grant = holding.as_mut();
        if let Some(renewer) = &renewer {
            grant.local_deadline = renewer.local_deadline();
        }
        if !args.skip_deadline_check {
            if !grant.within_deadline() {
                say(Step::DeadlinePassed)?;
                end_renewer(renewer, false)?;
                return Ok(0);
            }
            say(Step::DeadlineOk)?;
        }
        if args.waits_at(WaitPoint::BeforeWrite) {
            say(Step::Waiting)?;
            wait_for_line()?;
        }
        // No check between here and the write: whatever pause falls here is
        // invisible to this process. Only the resource can refuse the write.
        let write = PartWrite { scope: &args.scope, part, content: &args.content, writer: &args.holder, token };
        let written = calls.call(Invoke::Write { token, part: part.clone() }, || report.write(&write));
        match written {
            Ok(accepted) => say(Step::Write { accepted, token })?,
            Err(e) => {
                say(Step::WriteFailed { code: failure_code(e.as_ref()).ok_or(e)? })?;
                // The session may be gone (a server restart, a timeout):
                // no more parts on it.
                break;
            }
        }
    }

    let renewed = calls.call(Invoke::Renew { token }, || lease.renew(&mut holding))?;
    say(Step::RenewAfterWrite { ok: renewed })?;
    end_renewer(renewer, renewed)?;
    if !renewed {
        say(Step::LeaseLost)?;
    } else if calls.call(Invoke::Release { token }, || lease.release(&holding))? {
        say(Step::Released)?;
    } else {
        say(Step::ReleaseRefused)?;
    }
    Ok(0)
}
// ANCHOR_END: holder_run

/// Stops the renewer and makes what it ended in count: a store's error, or
/// a panic of its thread, is the holder's error (the run must not look
/// clean), and a renewer that lost
/// a holding which the holder's own renewal just kept would mean the lease
/// store contradicts itself.
fn end_renewer(renewer: Option<Renewer>, renewed: bool) -> Result<()> {
    let Some(renewer) = renewer else { return Ok(()) };
    let state = renewer.stop();
    if let Some(error) = state.error {
        return Err(format!("the renewer stopped on an error: {error}").into());
    }
    if state.lost && renewed {
        return Err("the renewer's renewal was refused, yet the holder's own renewal afterwards succeeded".into());
    }
    Ok(())
}
