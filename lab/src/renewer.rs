//! The background renewal thread of a holder.
//!
//! It renews on its own session every `every` (400 ms in F4/F5, about a
//! quarter of the 1500 ms ttl; 500 ms of etcd's 2 s in F16) and stops at
//! the first refused renewal: a refused renewal means the holding is over
//! and only a new acquire, with a new token, may start another. SIGSTOP
//! freezes this thread together with the rest of the process, which is
//! exactly what lets F4's lease expire, and F16's.
//!
//! It is written once for both stores, against [`LeaseService`]: on
//! PostgreSQL a renewal is the RENEW statement, on etcd a keep-alive.
//!
//! A renewal the store does not answer at all (etcd's gateway found no
//! member able to serve it within its bound: a holder behind a partition)
//! is neither a refusal nor an error: the local deadline stays where the
//! last successful renewal put it, and the thread tries again at its next
//! period, as etcd's own client keeps sending keep-alives.
//!
//! A panic in the thread is an error like the store's: it is caught where
//! it happens and recorded in [`RenewState::error`], which the holder turns
//! into its own failure, so a renewer that died never looks like one that
//! is still renewing.

use crate::error::{panic_message, Result};
use crate::lease::LeaseService;
use std::sync::mpsc::{self, RecvTimeoutError};
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the renewer has done so far.
#[derive(Clone, Debug)]
pub struct RenewState {
    /// Successful renewals.
    pub renewals: u32,
    /// A renewal was refused: the lease was lost.
    pub lost: bool,
    /// Renewals the store did not answer at all (see
    /// [`LeaseService::unanswered`]); each was tried again a period later.
    pub unanswered: u32,
    /// The local deadline after the last successful renewal.
    pub local_deadline: Instant,
    /// The store's error (the database's, etcd's), or the thread's panic,
    /// that stopped the renewer, if one did.
    pub error: Option<String>,
}

/// What the renewer tells its watcher about each renewal, as it happens
/// (the holder prints each as a call of its history).
pub enum Renewal<'a> {
    /// A renewal is about to be sent.
    Sending,
    /// It returned: renewed, refused, or the store's error.
    Returned(&'a Result<bool>),
}

/// The name the renewer's session goes by (its `application_name` on
/// PostgreSQL): the holder's, followed by `renewer`.
pub fn session_name(holder: &str) -> String {
    format!("{holder} renewer")
}

/// A running renewal thread; dropping it stops the thread.
pub struct Renewer {
    /// Closing (or sending on) this channel ends the thread's wait at once.
    stop: Option<mpsc::Sender<()>>,
    /// Shared with the thread.
    state: Arc<Mutex<RenewState>>,
    /// Joined on stop.
    thread: Option<JoinHandle<()>>,
}

impl Renewer {
    /// Opens a second session on `store` and starts renewing `holding` there.
    pub fn start<S: LeaseService>(store: &S, holding: &S::Holding, every: Duration) -> Result<Renewer> {
        let session = store.another_session(&session_name(&holding.as_ref().holder))?;
        Renewer::watched(session, holding, every, |_| {})
    }

    // ANCHOR: renewer_start
    /// Starts renewing `holding` on `store`, a session of its own (a
    /// PostgreSQL holder logs it in beside its lease session; etcd's is
    /// another gateway with the holder's credentials, which authenticates
    /// at its first renewal; [`Renewer::start`] opens one), telling `watch`
    /// of each renewal as it goes out and returns.
    pub fn watched<S: LeaseService>(mut store: S, holding: &S::Holding, every: Duration, mut watch: impl FnMut(Renewal<'_>) + Send + 'static) -> Result<Renewer> {
        let mut grant = holding.clone();
        let state = Arc::new(Mutex::new(RenewState {
            renewals: 0,
            lost: false,
            unanswered: 0,
            local_deadline: grant.as_ref().local_deadline,
            error: None,
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::Builder::new().name("renewer".into()).spawn(move || {
            let renewing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
                // The renewal period is the protocol's own rhythm, not a guess at
                // how long something takes; the channel makes stop() immediate.
                match stopped.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                watch(Renewal::Sending);
                let outcome = store.renew(&mut grant);
                watch(Renewal::Returned(&outcome));
                let mut s = shared.lock();
                match outcome {
                    Ok(true) => {
                        s.renewals += 1;
                        s.local_deadline = grant.as_ref().local_deadline;
                    }
                    Ok(false) => {
                        s.lost = true;
                        return;
                    }
                    // Nobody answered (F19's holder behind a partition): no
                    // renewal, so the local deadline stays where the last
                    // one put it; the next period tries again.
                    Err(e) if S::unanswered(e.as_ref()) => s.unanswered += 1,
                    Err(e) => {
                        s.error = Some(crate::error::chain(e.as_ref()));
                        return;
                    }
                }
            }));
            if let Err(panic) = renewing {
                shared.lock().error.get_or_insert(format!("the renewer thread panicked: {}", panic_message(&*panic)));
            }
        })?;
        Ok(Renewer { stop: Some(stop), state, thread: Some(thread) })
    }
    // ANCHOR_END: renewer_start

    /// The local deadline as extended by the renewals so far.
    pub fn local_deadline(&self) -> Instant {
        self.state.lock().local_deadline
    }

    /// Whether the thread has ended by itself (a refusal or an error).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> RenewState {
        self.halt();
        self.state.lock().clone()
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread catches its own panics; one that escapes anyway
            // (in the panic handler itself) is recorded all the same.
            if let Err(panic) = thread.join() {
                self.state.lock().error.get_or_insert(format!("the renewer thread panicked: {}", panic_message(&*panic)));
            }
        }
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Grant;

    /// A lease store whose renewal panics, as a bug in a client would.
    struct PanickingStore;

    impl LeaseService for PanickingStore {
        type Holding = Grant;

        fn acquire(&mut self, _: &str, _: &str, _: Duration, _: Duration) -> Result<Option<Grant>> {
            unreachable!("the renewer never acquires")
        }

        fn renew(&mut self, _: &mut Grant) -> Result<bool> {
            panic!("renewal exploded")
        }

        fn release(&mut self, _: &Grant) -> Result<bool> {
            unreachable!("the renewer never releases")
        }

        fn another_session(&self, _: &str) -> Result<PanickingStore> {
            Ok(PanickingStore)
        }
    }

    /// A renewer whose thread panics ends with an error naming the panic,
    /// which the holder reports as its failure; it is not a renewer that
    /// merely stopped renewing.
    #[test]
    fn a_panicking_renewer_ends_in_an_error() {
        let grant = Grant {
            name: "report-job".into(),
            holder: "holder-a".into(),
            token: 1,
            ttl: Duration::from_secs(1),
            margin: Duration::from_millis(200),
            local_deadline: Instant::now() + Duration::from_millis(800),
        };
        let renewer = Renewer::start(&PanickingStore, &grant, Duration::from_millis(1)).unwrap();
        assert!(crate::poll::poll_until(crate::poll::BOUND, Duration::from_millis(1), || Ok::<_, crate::Error>(renewer.is_finished())).unwrap());
        let state = renewer.stop();
        assert_eq!(state.error.as_deref(), Some("the renewer thread panicked: renewal exploded"), "{state:?}");
        assert!(!state.lost && state.renewals == 0);
    }
}
