//! What a proxy shares with its threads: the switches (hold, delay,
//! stopping), the live links with their queues of client→server chunks, the
//! pump handles, and the one mutex and condvar that guard and announce them.

use std::collections::{HashMap, VecDeque};
use super::upstream::{Target, Upstream};
use std::net::TcpStream;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The state of a proxy and the condvar that announces its changes.
pub(super) struct Shared {
    /// Where every connection is forwarded.
    pub(super) target: Target,
    /// Refuse connections another account made (a proxy on loopback).
    pub(super) own_only: bool,
    /// Switches, queues and threads, under one lock.
    pub(super) state: Mutex<State>,
    /// Notified when a chunk is queued, a switch changes, or the proxy stops.
    pub(super) changed: Condvar,
}

/// Everything the owner and the pumps share.
#[derive(Default)]
pub(super) struct State {
    /// Whether client→server chunks are held in their queues.
    pub(super) holding: bool,
    /// How long each client→server chunk waits after it arrived.
    pub(super) delay: Option<Duration>,
    /// Set by drop: nothing new is started, every pump ends.
    pub(super) stopping: bool,
    /// Connections accepted so far; also the number of the latest one.
    pub(super) accepted: usize,
    /// The live connections, by number.
    pub(super) links: HashMap<usize, Link>,
    /// Every pump thread started and not yet joined.
    pub(super) pumps: Vec<JoinHandle<()>>,
    /// The latest failure, for diagnostics.
    pub(super) last_error: Option<String>,
}

/// One client's connection and the proxy's connection to the target for it.
pub(super) struct Link {
    /// Client→server chunks not yet written to the server, oldest first.
    pub(super) queue: VecDeque<Chunk>,
    /// Whether the client has finished sending (EOF or an error).
    pub(super) client_done: bool,
    /// The client's socket, kept to shut it down on drop.
    pub(super) client: TcpStream,
    /// The socket to the target, kept to shut it down on drop.
    pub(super) server: Upstream,
    /// Pumps of this link still running; the last one to end removes the
    /// link, which closes the two sockets.
    pub(super) pumps_left: usize,
}

/// What one read from the client returned.
pub(super) struct Chunk {
    /// When it was read, the start of its delay.
    pub(super) arrived: Instant,
    /// The bytes.
    pub(super) bytes: Vec<u8>,
}

impl State {
    /// Bytes queued on all connections.
    pub(super) fn queued(&self) -> usize {
        self.links.values().flat_map(|link| &link.queue).map(|chunk| chunk.bytes.len()).sum()
    }

    /// Keeps `what` as the latest failure, unless the proxy is stopping (then
    /// failures are the drop's own doing).
    pub(super) fn note(&mut self, what: String) {
        if !self.stopping {
            self.last_error = Some(what);
        }
    }
}

impl Shared {
    /// The state, even if a thread panicked while holding it: the proxy's
    /// drop must still run to the end.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }
}
