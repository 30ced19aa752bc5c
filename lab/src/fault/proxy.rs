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
//! opens no door to the network). For each client it connects to the target
//! and starts three pumps, all owned by the proxy:
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
//! holds from before A sends, so A's whole write is held). It does not bound
//! what it queues: while it holds, a client's writes do not block (TCP's
//! back-pressure ends at the proxy), which is fine for the few hundred bytes
//! of a request.

use crate::error::{Result, ResultExt};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the proxy tries to reach its target for one client. The lab's
/// targets are on loopback, where a connect succeeds or is refused at once;
/// the bound only keeps a wrong target from stalling the accepting thread,
/// and with it the proxy's drop, which waits for that thread.
pub const CONNECT_BOUND: Duration = Duration::from_secs(5);

/// The most one read takes from a socket; a chunk is what one read returned.
const CHUNK: usize = 16 * 1024;

/// How long the accepting thread pauses after a failed accept (a full file
/// table, say) before it tries again, so that a lasting failure does not
/// become a busy loop.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

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

/// The state of a proxy and the condvar that announces its changes.
struct Shared {
    /// Where every connection is forwarded.
    target: SocketAddr,
    /// Switches, queues and threads, under one lock.
    state: Mutex<State>,
    /// Notified when a chunk is queued, a switch changes, or the proxy stops.
    changed: Condvar,
}

/// Everything the owner and the pumps share.
#[derive(Default)]
struct State {
    /// Whether client→server chunks are held in their queues.
    holding: bool,
    /// How long each client→server chunk waits after it arrived.
    delay: Option<Duration>,
    /// Set by drop: nothing new is started, every pump ends.
    stopping: bool,
    /// Connections accepted so far; also the number of the latest one.
    accepted: usize,
    /// The live connections, by number.
    links: HashMap<usize, Link>,
    /// Every pump thread started and not yet joined.
    pumps: Vec<JoinHandle<()>>,
    /// The latest failure, for diagnostics.
    last_error: Option<String>,
}

/// One client's connection and the proxy's connection to the target for it.
struct Link {
    /// Client→server chunks not yet written to the server, oldest first.
    queue: VecDeque<Chunk>,
    /// Whether the client has finished sending (EOF or an error).
    client_done: bool,
    /// The client's socket, kept to shut it down on drop.
    client: TcpStream,
    /// The socket to the target, kept to shut it down on drop.
    server: TcpStream,
    /// Pumps of this link still running; the last one to end removes the
    /// link, which closes the two sockets.
    pumps_left: usize,
}

/// What one read from the client returned.
struct Chunk {
    /// When it was read, the start of its delay.
    arrived: Instant,
    /// The bytes.
    bytes: Vec<u8>,
}

impl DelayProxy {
    /// Listens on 127.0.0.1 on a free port and forwards every connection to
    /// `target`, passing bytes through until told to hold or delay them.
    pub fn start(target: SocketAddr) -> Result<DelayProxy> {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("the delay proxy cannot listen on 127.0.0.1")?;
        let port = listener.local_addr()?.port();
        let accepting = listener.try_clone()?;
        let shared = Arc::new(Shared { target, state: Mutex::new(State::default()), changed: Condvar::new() });
        let for_acceptor = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name(format!("px{port}.accept"))
            .spawn(move || for_acceptor.accept_loop(accepting, port))
            .context("the delay proxy cannot start its accepting thread")?;
        Ok(DelayProxy { shared, port, listener, acceptor: Some(acceptor) })
    }

    /// The port clients connect to, on 127.0.0.1.
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
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
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

/// What a `wr` pump does next.
enum Next {
    /// Write this chunk to the server.
    Write(Chunk),
    /// Wait for a change, at most this long (`None`: until notified).
    Wait(Option<Duration>),
    /// The client has finished and everything it sent is written: pass the
    /// EOF on.
    Finish,
}

impl State {
    /// Bytes queued on all connections.
    fn queued(&self) -> usize {
        self.links.values().flat_map(|link| &link.queue).map(|chunk| chunk.bytes.len()).sum()
    }

    /// Keeps `what` as the latest failure, unless the proxy is stopping (then
    /// failures are the drop's own doing).
    fn note(&mut self, what: String) {
        if !self.stopping {
            self.last_error = Some(what);
        }
    }

    /// What the `wr` pump of link `number` does next; takes the chunk to
    /// write out of the queue.
    fn next_for(&mut self, number: usize) -> Next {
        let (holding, delay) = (self.holding, self.delay.unwrap_or_default());
        let link = self.links.get_mut(&number).expect("a link outlives its pumps");
        let Some(front) = link.queue.front() else {
            return if link.client_done { Next::Finish } else { Next::Wait(None) };
        };
        if holding {
            return Next::Wait(None);
        }
        let left = (front.arrived + delay).saturating_duration_since(Instant::now());
        if !left.is_zero() {
            return Next::Wait(Some(left));
        }
        Next::Write(link.queue.pop_front().expect("front exists"))
    }
}

impl Shared {
    /// The state, even if a thread panicked while holding it: the proxy's
    /// drop must still run to the end.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The accepting thread: a link for each client, until the proxy stops.
    fn accept_loop(self: Arc<Self>, listener: TcpListener, port: u16) {
        loop {
            let accepted = listener.accept();
            if self.lock().stopping {
                return;
            }
            let client = match accepted {
                Ok((client, _)) => client,
                Err(e) => {
                    self.lock().note(format!("accepting a client: {e}"));
                    std::thread::sleep(ACCEPT_RETRY);
                    continue;
                }
            };
            let number = {
                let mut state = self.lock();
                state.accepted += 1;
                state.accepted
            };
            let server = match TcpStream::connect_timeout(&self.target, CONNECT_BOUND) {
                Ok(server) => server,
                Err(e) => {
                    // Noted before the client's socket closes, so a client
                    // that sees its connection end finds the reason here.
                    self.lock().note(format!("connection {number}: cannot reach the target {}: {e}", self.target));
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
            };
            if let Err(e) = self.start_link(number, client, server, port) {
                self.lock().note(format!("connection {number}: cannot start its pumps: {e}"));
            }
        }
    }

    /// Registers a link and starts its three pumps.
    fn start_link(self: &Arc<Self>, number: usize, client: TcpStream, server: TcpStream, port: u16) -> Result<()> {
        // The proxy must not add Nagle's wait to a protocol of small
        // request/answer messages; PostgreSQL's client disables it too.
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        let link = Link {
            queue: VecDeque::new(),
            client_done: false,
            client: client.try_clone()?,
            server: server.try_clone()?,
            pumps_left: 0,
        };
        let (client_for_dn, server_for_dn) = (client.try_clone()?, server.try_clone()?);

        let mut state = self.lock();
        if state.stopping {
            // The drop has already shut down the links it saw; this one is
            // closed here, as the streams go out of scope.
            return Ok(());
        }
        state.links.insert(number, link);
        // Pumps of links gone since the last accept are done: join them now,
        // so a long chaos run does not collect handles.
        let (done, running): (Vec<_>, Vec<_>) =
            std::mem::take(&mut state.pumps).into_iter().partition(|p| p.is_finished());
        state.pumps = running;
        for pump in done {
            let _ = pump.join();
        }
        // Started under the lock, so the drop (which takes it to set
        // `stopping`) joins every pump ever started, and `pumps_left` counts
        // a pump before it can end.
        let spawned = (|| {
            self.spawn_pump(&mut state, number, format!("px{port}.{number}.up"), move |shared| {
                shared.pump_client_to_queue(number, client)
            })?;
            self.spawn_pump(&mut state, number, format!("px{port}.{number}.wr"), move |shared| {
                shared.pump_queue_to_server(number, server)
            })?;
            self.spawn_pump(&mut state, number, format!("px{port}.{number}.dn"), move |shared| {
                shared.pump_server_to_client(server_for_dn, client_for_dn)
            })
        })();
        if spawned.is_err() {
            // The pumps already running end on the shutdown; with none, the
            // link is removed here.
            let link = state.links.get(&number).expect("inserted above");
            let _ = link.client.shutdown(Shutdown::Both);
            let _ = link.server.shutdown(Shutdown::Both);
            if link.pumps_left == 0 {
                state.links.remove(&number);
            }
        }
        spawned
    }

    /// Starts one pump of link `number`, which removes the link when it is
    /// the last to end (even by a panic).
    fn spawn_pump(
        self: &Arc<Self>,
        state: &mut State,
        number: usize,
        name: String,
        pump: impl FnOnce(&Shared) + Send + 'static,
    ) -> Result<()> {
        let shared = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _leaving = PumpEnd { shared: &shared, number };
                pump(&shared);
            })
            .context("the delay proxy cannot start a pump thread")?;
        state.pumps.push(handle);
        state.links.get_mut(&number).expect("registered before its pumps").pumps_left += 1;
        Ok(())
    }

    /// The `up` pump: queues what the client sends, chunk by chunk.
    fn pump_client_to_queue(&self, number: usize, mut client: TcpStream) {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let read = client.read(&mut buf);
            let mut state = self.lock();
            let n = match read {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    state.note(format!("connection {number}: reading the client: {e}"));
                    0
                }
            };
            let link = state.links.get_mut(&number).expect("a link outlives its pumps");
            if n == 0 {
                // The client has finished sending: once the queue is written,
                // the `wr` pump passes the EOF on to the server.
                link.client_done = true;
            } else {
                link.queue.push_back(Chunk { arrived: Instant::now(), bytes: buf[..n].to_vec() });
            }
            drop(state);
            self.changed.notify_all();
            if n == 0 {
                return;
            }
        }
    }

    /// The `wr` pump: writes queued chunks to the server, in order, when the
    /// proxy does not hold and each chunk's delay has passed.
    fn pump_queue_to_server(&self, number: usize, mut server: TcpStream) {
        loop {
            let mut state = self.lock();
            // This wait has no bound of its own: a pump waits as long as its
            // client is silent or the owner holds; the owner's drop ends it.
            let chunk = loop {
                if state.stopping {
                    return;
                }
                match state.next_for(number) {
                    Next::Write(chunk) => break Some(chunk),
                    Next::Finish => break None,
                    Next::Wait(None) => state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
                    Next::Wait(Some(left)) => {
                        state = self.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0
                    }
                }
            };
            drop(state);
            let Some(chunk) = chunk else {
                // Half-close, as the client did: the server may still answer,
                // and the `dn` pump passes that on.
                let _ = server.shutdown(Shutdown::Write);
                return;
            };
            if let Err(e) = server.write_all(&chunk.bytes) {
                self.lock().note(format!("connection {number}: writing to the server: {e}"));
                self.end_link(number);
                return;
            }
        }
    }

    /// The `dn` pump: copies the server's bytes to the client as they come.
    fn pump_server_to_client(&self, mut server: TcpStream, mut client: TcpStream) {
        match std::io::copy(&mut server, &mut client) {
            // The server has finished sending: pass its EOF on, so the client
            // sees the connection end as the server meant it.
            Ok(_) => {
                let _ = client.shutdown(Shutdown::Write);
            }
            Err(e) => {
                self.lock().note(format!("copying server→client: {e}"));
                let _ = server.shutdown(Shutdown::Both);
                let _ = client.shutdown(Shutdown::Both);
            }
        }
    }

    /// Ends link `number` after a failure: its pumps' blocked calls return.
    fn end_link(&self, number: usize) {
        if let Some(link) = self.lock().links.get(&number) {
            let _ = link.client.shutdown(Shutdown::Both);
            let _ = link.server.shutdown(Shutdown::Both);
        }
    }
}

/// Counts a pump's end; the last pump of a link removes it, which closes
/// the link's sockets (the pumps' own clones close as their threads end).
struct PumpEnd<'a> {
    /// The proxy's shared state.
    shared: &'a Shared,
    /// The link the pump served.
    number: usize,
}

impl Drop for PumpEnd<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        let last = state.links.get_mut(&self.number).map(|link| {
            link.pumps_left -= 1;
            link.pumps_left == 0
        });
        if last == Some(true) {
            state.links.remove(&self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll::BOUND;
    use std::sync::mpsc;

    /// What the test server has received on its one connection.
    #[derive(Default)]
    struct Heard {
        /// Every byte, in order of arrival.
        bytes: Vec<u8>,
        /// Whether the connection has ended.
        eof: bool,
        /// The accepted socket, for the server's own writes.
        stream: Option<TcpStream>,
    }

    /// The far end for the tests: a server on 127.0.0.1 that accepts one
    /// connection, records what arrives, and writes when the test says so.
    struct Recorder {
        /// Where it listens.
        addr: SocketAddr,
        /// Its listening socket, shut down on drop to end a blocked accept.
        listener: TcpListener,
        /// What it heard, and a condvar for each new byte or the end.
        heard: Arc<(Mutex<Heard>, Condvar)>,
        /// The accepting and reading thread.
        thread: Option<JoinHandle<()>>,
    }

    impl Recorder {
        fn start() -> Recorder {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let addr = listener.local_addr().unwrap();
            let accepting = listener.try_clone().unwrap();
            let heard = Arc::new((Mutex::new(Heard::default()), Condvar::new()));
            let sink = Arc::clone(&heard);
            let thread = std::thread::spawn(move || {
                let Ok((mut stream, _)) = accepting.accept() else { return };
                let (log, changed) = &*sink;
                log.lock().unwrap().stream = Some(stream.try_clone().unwrap());
                changed.notify_all();
                let mut buf = [0u8; 1024];
                loop {
                    let n = stream.read(&mut buf).unwrap_or(0);
                    let mut log = log.lock().unwrap();
                    log.bytes.extend_from_slice(&buf[..n]);
                    log.eof = n == 0;
                    changed.notify_all();
                    if n == 0 {
                        return;
                    }
                }
            });
            Recorder { addr, listener, heard, thread: Some(thread) }
        }

        /// Waits, within [`BOUND`], until `ready` holds of what was heard.
        fn wait(&self, what: &str, ready: impl Fn(&Heard) -> bool) -> MutexGuard<'_, Heard> {
            let (log, changed) = &*self.heard;
            let (log, timeout) = changed.wait_timeout_while(log.lock().unwrap(), BOUND, |h| !ready(h)).unwrap();
            assert!(!timeout.timed_out(), "the server waited {BOUND:?} for {what}; it heard {:?}", text(&log.bytes));
            log
        }

        /// Everything heard once at least `len` bytes arrived (or the end).
        fn wait_for(&self, len: usize) -> String {
            text(&self.wait(&format!("{len} bytes"), |h| h.bytes.len() >= len || h.eof).bytes)
        }

        /// Everything heard so far.
        fn heard(&self) -> String {
            text(&self.heard.0.lock().unwrap().bytes)
        }

        /// Writes `bytes` to the client, from the server's side.
        fn send(&self, bytes: &[u8]) {
            let log = self.wait("a connection", |h| h.stream.is_some());
            log.stream.as_ref().unwrap().write_all(bytes).unwrap();
        }

        /// Waits for the connection's end; `true` if it came.
        fn wait_eof(&self) -> bool {
            self.wait("the connection's end", |h| h.eof).eof
        }
    }

    impl Drop for Recorder {
        fn drop(&mut self) {
            let _ = nix::sys::socket::shutdown(self.listener.as_raw_fd(), nix::sys::socket::Shutdown::Read);
            if let Some(stream) = &self.heard.0.lock().unwrap_or_else(|p| p.into_inner()).stream {
                let _ = stream.shutdown(Shutdown::Both);
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// How long dropping a proxy may take. Its drop has no wait of its own:
    /// a few seconds is "promptly" even on a loaded machine.
    const DROP_BOUND: Duration = Duration::from_secs(5);

    /// The proxy under test, dropped within [`DROP_BOUND`]: a drop that hangs
    /// fails the test instead of hanging it.
    struct Proxy(Option<DelayProxy>);

    impl Proxy {
        fn start(target: SocketAddr) -> Proxy {
            Proxy(Some(DelayProxy::start(target).unwrap()))
        }

        /// Drops the proxy on another thread; how long that took, or `None`
        /// if it had not returned within [`DROP_BOUND`] (the thread is then
        /// left behind: the test fails anyway).
        fn drop_within_bound(&mut self) -> Option<Duration> {
            let proxy = self.0.take()?;
            let (done, took) = mpsc::channel();
            let dropper = std::thread::spawn(move || {
                let start = Instant::now();
                drop(proxy);
                let _ = done.send(start.elapsed());
            });
            let took = took.recv_timeout(DROP_BOUND).ok()?;
            dropper.join().unwrap();
            Some(took)
        }
    }

    impl std::ops::Deref for Proxy {
        type Target = DelayProxy;
        fn deref(&self) -> &DelayProxy {
            self.0.as_ref().expect("not dropped yet")
        }
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            let dropped = self.0.is_none() || self.drop_within_bound().is_some();
            // A second panic while one unwinds would abort every test.
            if !std::thread::panicking() {
                assert!(dropped, "dropping the proxy did not return within {DROP_BOUND:?}");
            }
        }
    }

    /// A client of the proxy whose reads give up after [`BOUND`].
    fn client(proxy: &DelayProxy) -> TcpStream {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port())).unwrap();
        stream.set_read_timeout(Some(BOUND)).unwrap();
        stream
    }

    /// Reads exactly `len` bytes.
    fn read_n(stream: &mut TcpStream, len: usize) -> String {
        let mut buf = vec![0u8; len];
        stream.read_exact(&mut buf).unwrap();
        text(&buf)
    }

    /// Whether the peer closed the connection: EOF or a reset, not a timeout.
    fn sees_closed(stream: &mut TcpStream) -> bool {
        let mut buf = [0u8; 64];
        match stream.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted),
        }
    }

    /// Bytes pass both ways, and the proxy counts the connection it carried.
    #[test]
    fn bytes_pass_both_ways() {
        let server = Recorder::start();
        let proxy = Proxy::start(server.addr);
        let mut client = client(&proxy);
        client.write_all(b"ping").unwrap();
        assert_eq!(server.wait_for(4), "ping");
        server.send(b"pong");
        assert_eq!(read_n(&mut client, 4), "pong");
        assert_eq!(proxy.connections(), 1);
        assert_eq!(proxy.last_error(), None);
    }

    /// Held bytes reach the server only after release, counted while held,
    /// and in the order written, with what came before and after the hold.
    #[test]
    fn hold_queues_until_release_in_order() {
        let server = Recorder::start();
        let proxy = Proxy::start(server.addr);
        let mut client = client(&proxy);
        client.write_all(b"one ").unwrap();
        client.write_all(b"two ").unwrap();
        assert_eq!(server.wait_for(8), "one two ");

        proxy.hold();
        client.write_all(b"three ").unwrap();
        client.write_all(b"four ").unwrap();
        assert!(proxy.wait_until_held(BOUND));
        assert!(proxy.wait_until_held_bytes(11, BOUND), "held {} bytes, not 11", proxy.held_bytes());
        assert_eq!(proxy.held_bytes(), 11);
        assert_eq!(server.heard(), "one two ", "held bytes reached the server");

        proxy.release();
        // Written right after the release, while the held chunks may still
        // be on their way: it must arrive after them.
        client.write_all(b"five").unwrap();
        assert_eq!(server.wait_for(23), "one two three four five");
        assert_eq!(proxy.held_bytes(), 0);
    }

    /// The server's bytes reach the client while the client's are held.
    #[test]
    fn server_to_client_flows_while_held() {
        let server = Recorder::start();
        let proxy = Proxy::start(server.addr);
        let mut client = client(&proxy);
        proxy.hold();
        client.write_all(b"request").unwrap();
        assert!(proxy.wait_until_held_bytes(7, BOUND));

        server.send(b"notice");
        assert_eq!(read_n(&mut client, 6), "notice");
        assert_eq!(server.heard(), "", "held bytes reached the server");

        proxy.release();
        assert_eq!(server.wait_for(7), "request");
    }

    /// With a delay set, a chunk reaches the server no earlier than the
    /// delay after it was sent, and chunks keep their order.
    #[test]
    fn delay_holds_each_chunk_at_least_that_long() {
        const DELAY: Duration = Duration::from_millis(300);
        let server = Recorder::start();
        let proxy = Proxy::start(server.addr);
        let mut client = client(&proxy);
        proxy.set_delay(Some(DELAY));
        let sent = Instant::now();
        client.write_all(b"late ").unwrap();
        client.write_all(b"later").unwrap();
        assert_eq!(server.wait_for(10), "late later");
        let took = sent.elapsed();
        assert!(took >= DELAY, "arrived after {took:?}, before the delay of {DELAY:?}");

        proxy.set_delay(None);
        client.write_all(b" now").unwrap();
        assert_eq!(server.wait_for(14), "late later now");
    }

    /// Dropping the proxy while it holds a request and a second client is
    /// silent returns promptly; both clients and the server see their
    /// connections end, and the held request never arrives.
    #[test]
    fn drop_ends_everything_promptly() {
        let server = Recorder::start();
        let mut proxy = Proxy::start(server.addr);
        let mut first = client(&proxy);
        first.write_all(b"hello ").unwrap();
        // The server has accepted the first client's connection, so it is
        // the one the server records.
        assert_eq!(server.wait_for(6), "hello ");
        // A second client, whose connection to the server waits in the
        // server's backlog, never accepted: a peer that never answers.
        let mut silent = client(&proxy);
        proxy.hold();
        first.write_all(b"stale write").unwrap();
        silent.write_all(b"x").unwrap();
        // Both connections are live and hold bytes.
        assert!(proxy.wait_until_held_bytes(12, BOUND));
        assert_eq!(proxy.connections(), 2);

        let took = proxy.drop_within_bound().expect("dropping the proxy did not return within the bound");
        assert!(sees_closed(&mut first), "the first client's connection is still open");
        assert!(sees_closed(&mut silent), "the silent client's connection is still open");
        assert!(server.wait_eof(), "the server's connection is still open");
        assert_eq!(server.heard(), "hello ", "the held request arrived after all (drop took {took:?})");
    }

    /// A target that refuses: the client's connection is closed, and
    /// `last_error` names the target and the refusal.
    #[test]
    fn unreachable_target_closes_the_client() {
        // A port that was just free and is closed now: a connect is refused.
        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap();
        let proxy = Proxy::start(closed);
        let mut client = client(&proxy);
        assert!(sees_closed(&mut client), "the client's connection is still open");
        assert_eq!(proxy.connections(), 1);
        let error = proxy.last_error().expect("no error kept");
        assert!(error.contains(&closed.to_string()) && error.contains("refused"), "last_error: {error}");
    }
}
