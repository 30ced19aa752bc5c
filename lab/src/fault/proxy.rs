//! A delaying TCP proxy: the network between a holder and the resource, with
//! a hand on the wire.
//!
//! Case F12 ("a write delayed in the network") needs a request that goes
//! stale *in flight*: holder A is valid, passes its local deadline check and
//! sends its write; the write then stays on the wire while A's lease expires
//! and B acquires and writes; only then does it reach the resource, which
//! must refuse it. Nothing is paused: A is running, waiting for its answer,
//! as it would behind a slow link. So A reaches the database server (its
//! lease sessions and its resource session alike: one slow link, on which
//! its renewals stall too) through a [`DelayProxy`]; the parent calls
//! [`hold`](DelayProxy::hold) before A
//! sends, [`wait_until_held`](DelayProxy::wait_until_held) to see the write
//! queued, and [`release`](DelayProxy::release) once B has written. The
//! chaos run gives each holder slot a proxy of its own and uses
//! [`set_delay`](DelayProxy::set_delay) instead, to slow one slot's link
//! for a span while the others stay fast.
//!
//! How it works. One accepting thread listens on 127.0.0.1 only (the proxy
//! opens no door to the network; the chaos run's slots listen on a host of
//! the lab's own network instead, [`DelayProxy::start_on`]), and takes only
//! connections made by the lab's own account: loopback is every local account's, so for each
//! connection it asks the kernel's socket table who made the client's end,
//! and closes another account's unread (its bytes can neither pass for a
//! holder's write nor count as a connection). For each client of the lab's
//! own it connects to the target and starts three pumps, all owned by the
//! proxy:
//! - `up` reads what the client sends and appends each chunk, stamped with
//!   the time it arrived, to the connection's queue;
//! - `wr` writes the chunk at the front of that queue to the server, unless
//!   the proxy holds or the chunk's delay has not yet passed;
//! - `dn` copies server→client bytes as they come, never held or delayed, so
//!   the server's answers, errors and notices flow while a request waits.
//!
//! The client→server direction has two threads so that the proxy goes on
//! reading (and counting) what the client sends while it holds. The queue,
//! first in first out, is the one place where bytes wait, so neither hold
//! nor delay can reorder them. One mutex guards the queues and the switches;
//! one condvar wakes whoever waits on them (a `wr` pump for a release or its
//! chunk's due time, an owner in `wait_until_held`).
//!
//! On drop the proxy shuts down every socket it has, which ends the pumps'
//! blocked reads and writes, and the listening socket, which ends the
//! blocked accept; then it joins every thread it started. So dropping
//! returns promptly even while bytes are held or a peer is silent, and no
//! thread or socket outlives the proxy. Bytes still held then are dropped
//! with it: a request held when the proxy goes never arrives.
//!
//! What it does not do: it never reorders, drops, duplicates or alters bytes,
//! and it never holds the server→client direction. It speaks TCP only and
//! knows nothing of PostgreSQL's protocol: it holds bytes, not messages (F12
//! holds from before A sends, so A's whole write is held). While it holds,
//! a client's writes do not block (TCP's back-pressure ends at the proxy),
//! which is fine for the few hundred bytes of a request; a link whose queue
//! grows past [`MAX_QUEUED`] is cut, so no client can grow the lab's memory
//! without bound.
//!
//! The parts: this file holds the proxy itself, its control API and its
//! shutdown; `state` what it shares with its threads; `links` the accepting
//! thread and a link's start and end; `pumps` a link's three pumps and the
//! rule by which `wr` takes from the queue. The unit tests are in `tests`.

/// The most one link may have queued: far above any request of the lab's
/// (a few hundred bytes), far below what would strain the machine.
pub const MAX_QUEUED: usize = 16 << 20;

mod links;
mod pumps;
mod state;
mod upstream;
#[cfg(test)]
mod tests;

pub use links::CONNECT_BOUND;
pub use upstream::Target;

use crate::error::{Result, ResultExt};
use crate::hosts::Host;
use state::{Shared, State};
use std::net::{Ipv4Addr, Shutdown, TcpListener};
use std::os::fd::AsRawFd;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A TCP proxy on 127.0.0.1 that forwards every connection to its target,
/// and can hold or delay the client→server bytes.
pub struct DelayProxy {
    /// What the proxy shares with its threads.
    shared: Arc<Shared>,
    /// The port it listens on, on 127.0.0.1.
    port: u16,
    /// The listening socket (the accepting thread has a clone), kept to shut
    /// it down on drop: that is what wakes a blocked accept.
    listener: TcpListener,
    /// The accepting thread; `None` once joined.
    acceptor: Option<JoinHandle<()>>,
}

impl DelayProxy {
    /// Listens on 127.0.0.1 on a free port and forwards every connection to
    /// `target`, passing bytes through until told to hold or delay them.
    pub fn start(target: impl Into<Target>) -> Result<DelayProxy> {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("the delay proxy cannot listen on 127.0.0.1")?;
        DelayProxy::serve(listener, target.into(), true)
    }

    /// Listens on `host`'s address, on a free port, inside that host of the
    /// lab's network, and forwards every connection to `target` from here
    /// (the chaos run's slots: each holder reaches the server across the
    /// switch, where a partition can cut it off). On the lab's subnet only
    /// processes inside the lab's own namespaces can connect, and entering
    /// one takes root or the account whose user namespace owns them (the
    /// lab's): there is no other account's connection to refuse (and
    /// the client's socket is in another namespace's table, where this
    /// proxy cannot look it up).
    pub fn start_on(target: impl Into<Target>, host: &Host) -> Result<DelayProxy> {
        let listener = host.listen(host.at(0)).with_context(|| format!("the delay proxy cannot listen on {}", host.addr()))?;
        DelayProxy::serve(listener, target.into(), false)
    }

    /// Serves `listener`; `own_only`: refuse connections another account
    /// made (loopback is every local account's).
    fn serve(listener: TcpListener, target: Target, own_only: bool) -> Result<DelayProxy> {
        let port = listener.local_addr()?.port();
        let accepting = listener.try_clone()?;
        let shared = Arc::new(Shared { target, own_only, state: Mutex::new(State::default()), changed: Condvar::new() });
        let for_acceptor = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name(format!("px{port}.accept"))
            .spawn(move || for_acceptor.accept_loop(accepting, port))
            .context("the delay proxy cannot start its accepting thread")?;
        Ok(DelayProxy { shared, port, listener, acceptor: Some(acceptor) })
    }

    /// The port clients connect to, on 127.0.0.1 (or on its host's address).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// From now on client→server bytes are queued, not sent: every chunk not
    /// yet written, whenever it arrives. (A chunk a pump has already taken
    /// to write goes on.)
    pub fn hold(&self) {
        self.shared.lock().holding = true;
    }

    /// Stops holding: the pumps send every queued chunk, in order, before
    /// anything the client sends later. Returns without waiting for them;
    /// the owner learns that a released request arrived from its answer.
    pub fn release(&self) {
        self.shared.lock().holding = false;
        self.shared.changed.notify_all();
    }

    /// The client→server bytes queued right now, on all connections: held,
    /// delayed, or (briefly) between a pump's read and its write.
    pub fn held_bytes(&self) -> usize {
        self.shared.lock().queued()
    }

    /// Waits until some client→server bytes are queued (a request is in
    /// flight); `false` if `bound` passed first.
    pub fn wait_until_held(&self, bound: Duration) -> bool {
        self.wait_until_held_bytes(1, bound)
    }

    /// Waits until at least `bytes` client→server bytes are queued; `false`
    /// if `bound` passed first.
    pub fn wait_until_held_bytes(&self, bytes: usize, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = self.shared.lock();
        while state.queued() < bytes {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = { self.shared.changed.wait_for(&mut state, left); state };
        }
        true
    }

    /// Delays each client→server chunk by `delay` after it arrived (`None`:
    /// no delay). Applies to chunks already queued too; since every chunk
    /// waits the same time, order is kept.
    pub fn set_delay(&self, delay: Option<Duration>) {
        self.shared.lock().delay = delay;
        self.shared.changed.notify_all();
    }

    /// Connections accepted so far, whether or not the target took them:
    /// a case can confirm that its client really came through the proxy.
    pub fn connections(&self) -> usize {
        self.shared.lock().accepted
    }

    /// The latest failure (the target refused a connection, a socket
    /// failed), for diagnostics. The ends of a drop are not failures.
    pub fn last_error(&self) -> Option<String> {
        self.shared.lock().last_error.clone()
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        {
            let mut state = self.shared.lock();
            state.stopping = true;
            // Shutting a socket down ends a read or write blocked on it in
            // another thread, with EOF or an error, at once; closing it
            // would not (the blocked call keeps the socket alive).
            for link in state.links.values() {
                let _ = link.client.shutdown(Shutdown::Both);
                let _ = link.server.shutdown(Shutdown::Both);
            }
        }
        // Wakes the `wr` pumps waiting for a release or a due time.
        self.shared.changed.notify_all();
        // On Linux, shutting down a listening socket makes the accept blocked
        // on it (and any later one) fail with EINVAL; the accepting thread
        // then sees `stopping` and ends. std offers no shutdown on a listener.
        let _ = nix::sys::socket::shutdown(self.listener.as_raw_fd(), nix::sys::socket::Shutdown::Read);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // No pump is started after the acceptor ended, so this is all of
        // them. Joined outside the lock: each pump takes it as it ends.
        let pumps = std::mem::take(&mut self.shared.lock().pumps);
        for pump in pumps {
            let _ = pump.join();
        }
    }
}
