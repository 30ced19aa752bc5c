//! The proxy's unit tests, through its public API only, against a recording
//! server on loopback: forwarding both ways, hold and release in order,
//! answers flowing while held, delay, a prompt drop, an unreachable target.
//! One exception: who made a connection is judged on rows of the socket
//! table built by hand, since a client's row in `TIME_WAIT` at the moment
//! of the accept cannot be brought about on demand.

use super::DelayProxy;
use crate::poll::BOUND;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// Another account's connection is closed unread: it reaches neither the
/// target nor the count of connections, and `last_error` names its uid.
#[test]
fn another_accounts_connection_is_refused() {
    if !crate::test_support::needs_root("another_accounts_connection_is_refused", "to connect as the `nobody` account") {
        return;
    }
    let server = Recorder::start();
    let proxy = Proxy::start(server.addr);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().expect("the nobody account");
    // bash's /dev/tcp, as `nobody`: connect, send, and wait for the close.
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{}; printf 'stranger' >&3; cat <&3 >/dev/null", proxy.port());
    let out = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("timeout")
            .args(["10", "bash", "-c", &script])
            .uid(nobody.uid.as_raw())
            .gid(nobody.gid.as_raw())
            .output()
            .unwrap()
    };
    assert!(out.status.success(), "the stranger's connection was not closed by the proxy: {out:?}");
    assert_eq!(proxy.connections(), 0, "the stranger's connection was counted");
    let error = proxy.last_error().expect("no refusal kept");
    assert!(error.contains(&format!("uid {}", nobody.uid)), "last_error: {error}");
    // The lab's own connection still passes, and the stranger's bytes never arrived.
    let mut mine = client(&proxy);
    mine.write_all(b"mine").unwrap();
    assert_eq!(server.wait_for(4), "mine");
}

/// A link that queues more than MAX_QUEUED while held is cut: the client
/// sees its connection end, and the proxy's memory stays bounded.
#[test]
fn a_queue_past_the_bound_is_cut() {
    let server = Recorder::start();
    let proxy = Proxy::start(server.addr);
    proxy.hold();
    let mut flood = client(&proxy);
    let block = vec![b'x'; 1 << 20];
    let mut cut = false;
    for _ in 0..(super::MAX_QUEUED >> 20) + 8 {
        if flood.write_all(&block).is_err() {
            cut = true;
            break;
        }
    }
    assert!(cut || sees_closed(&mut flood), "the flooding client's connection is still open");
    assert!(proxy.held_bytes() <= super::MAX_QUEUED, "{} bytes held", proxy.held_bytes());
    assert!(proxy.last_error().is_some_and(|e| e.contains("cut")), "last_error: {:?}", proxy.last_error());
}

/// A client that opens more connections than one proxy carries gets the
/// extra ones closed at once, and the proxy says why; the open ones still
/// carry bytes.
#[test]
fn connections_past_the_bound_are_refused() {
    use super::links::MAX_LINKS;
    let server = Recorder::start();
    let proxy = Proxy::start(server.addr);
    let mut open: Vec<TcpStream> = (0..MAX_LINKS).map(|_| client(&proxy)).collect();
    // Every one of them a live link before the next is judged.
    let deadline = Instant::now() + BOUND;
    while proxy.connections() < MAX_LINKS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(proxy.connections(), MAX_LINKS);
    let mut extra = client(&proxy);
    assert!(sees_closed(&mut extra), "a connection past the bound stayed open");
    let error = proxy.last_error().expect("no reason kept");
    assert!(error.contains("the most one proxy carries"), "last_error: {error}");
    assert_eq!(proxy.connections(), MAX_LINKS, "the refused one was counted");
    open[0].write_all(b"ping").unwrap();
    assert_eq!(server.wait_for(4), "ping");
}

/// A client's row counts as its owner's only while ESTABLISHED: a row in
/// TIME_WAIT (uid 0 in the kernel's table, whoever made it) or FIN_WAIT
/// names nobody, so a stranger that sends and closes at once is not taken
/// for root. Beside a live row for the same addresses, the live one decides.
#[test]
fn a_row_not_established_names_no_owner() {
    use super::links::owner_in;
    use crate::cluster::diagnose::TcpSocket;
    let (ours, theirs): (std::net::SocketAddrV4, std::net::SocketAddrV4) = ("127.0.0.1:26500".parse().unwrap(), "127.0.0.1:41234".parse().unwrap());
    let row = |state: &str, uid: u32| TcpSocket { local: theirs, remote: ours, state: state.into(), uid, inode: 7 };
    // Our own side of the connection (root's here) is not the client's row.
    let ours_side = TcpSocket { local: ours, remote: theirs, state: "01".into(), uid: 0, inode: 8 };
    assert_eq!(owner_in(&[ours_side.clone(), row("01", 65534)], ours, theirs), Ok(65534));
    for (state, name) in [("06", "TIME_WAIT"), ("05", "FIN_WAIT2"), ("04", "FIN_WAIT1")] {
        let err = owner_in(&[ours_side.clone(), row(state, 0)], ours, theirs).unwrap_err();
        assert!(err.starts_with("an unknown account") && err.contains(&format!("in state {name}")), "{state}: {err}");
    }
    assert_eq!(owner_in(&[row("06", 0), row("01", 1000)], ours, theirs), Ok(1000));
    let err = owner_in(&[ours_side], ours, theirs).unwrap_err();
    assert!(err.contains("not in the socket table"), "{err}");
}
