//! How links come and go: the accepting thread, which connects each client
//! to the target; a link's setup with its three pump threads; and its
//! removal when the last of its pumps ends.

use super::state::{Link, Shared, State};
use crate::cluster::diagnose::{self, TcpSocket};
use crate::error::{Result, ResultExt};
use nix::unistd::Uid;
use std::collections::VecDeque;
use super::upstream::{self, Upstream};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// How long the proxy tries to reach its target for one client. The lab's
/// targets are on loopback, where a connect succeeds or is refused at once;
/// the bound only keeps a wrong target from stalling the accepting thread,
/// and with it the proxy's drop, which waits for that thread.
pub const CONNECT_BOUND: Duration = Duration::from_secs(5);

/// The most live connections one proxy carries. The lab's own clients use
/// a handful (a holder's three sessions, a few at a time); a client that
/// opens more (another account on a host's port, or a bug) is refused,
/// so no client can pile up threads and sockets in the lab: each link
/// costs three threads.
pub const MAX_LINKS: usize = 64;

/// How long the accepting thread pauses after a failed accept (a full file
/// table, say) before it tries again, so that a lasting failure does not
/// become a busy loop.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// The uid of the account that made the other end of `client`, from the
/// kernel's socket table (see [`owner_in`]).
fn made_by(client: &TcpStream) -> std::result::Result<u32, String> {
    let (ours, theirs) = match (client.local_addr(), client.peer_addr()) {
        (Ok(SocketAddr::V4(ours)), Ok(SocketAddr::V4(theirs))) => (ours, theirs),
        other => return Err(format!("a connection with addresses {other:?}")),
    };
    let sockets = diagnose::tcp_sockets().map_err(|e| format!("an unknown account (/proc/net/tcp: {e})"))?;
    owner_in(&sockets, ours, theirs)
}

/// The uid of the account that made the client's socket among `sockets`:
/// the one whose own address is our peer (`theirs`), whose peer is our own
/// address (`ours`), and which is ESTABLISHED. A client that has already
/// closed its end (sent its bytes and gone) leaves a row in `FIN_WAIT` or
/// `TIME_WAIT`, which the kernel keeps with uid 0, root's, whoever made
/// it: such a row names nobody, and the connection is another account's
/// as far as the proxy can tell.
pub(super) fn owner_in(sockets: &[TcpSocket], ours: SocketAddrV4, theirs: SocketAddrV4) -> std::result::Result<u32, String> {
    let mut rows = sockets.iter().filter(|s| s.local == theirs && s.remote == ours);
    let first = rows.next().ok_or_else(|| format!("an unknown account ({theirs} is not in the socket table)"))?;
    // The same pair of addresses may be listed twice (a closed connection's
    // TIME_WAIT beside a new one that reused its port): the live one decides.
    match std::iter::once(first).chain(rows).find(|s| s.is_established()) {
        Some(live) => Ok(live.uid),
        None => Err(format!("an unknown account ({theirs} in state {}, which names no owner)", first.state_name())),
    }
}

impl Shared {
    /// The accepting thread: a link for each client, until the proxy stops.
    pub(super) fn accept_loop(self: Arc<Self>, listener: TcpListener, port: u16) {
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
            // On a host of the lab's network there is no other account to
            // refuse (see `DelayProxy::start_on`).
            let made = if self.own_only { Some(made_by(&client)) } else { None };
            match made {
                None => {}
                Some(Ok(uid)) if uid == Uid::effective().as_raw() => {}
                Some(found) => {
                    // Another account's (or unknown): closed unread, not counted.
                    let who = found.map_or_else(|e| e, |uid| format!("uid {uid}"));
                    self.lock().note(format!("refused a connection made by {who}: the proxy carries the lab's own connections only"));
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
            }
            let live = self.lock().links.len();
            if live >= MAX_LINKS {
                self.lock().note(format!("refused a connection: {live} are open already, the most one proxy carries ({MAX_LINKS})"));
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            let number = {
                let mut state = self.lock();
                state.accepted += 1;
                state.accepted
            };
            let server = match upstream::connect(&self.target, CONNECT_BOUND) {
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
    fn start_link(self: &Arc<Self>, number: usize, client: TcpStream, server: Upstream, port: u16) -> Result<()> {
        // The proxy must not add Nagle's wait to a protocol of small
        // request/answer messages; PostgreSQL's client disables it too (the
        // upstream's own is off from its connect).
        client.set_nodelay(true)?;
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
