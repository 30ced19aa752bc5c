//! One link's pumps, the threads that move its bytes: `up` (client → the
//! link's queue), `wr` (queue → server, when the proxy does not hold and a
//! chunk's delay has passed) and `dn` (server → client, never held), and the
//! rule by which `wr` picks what to do next.

use super::state::{Chunk, Shared, State};
use std::io::{ErrorKind, Read, Write};
use super::upstream::Upstream;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The most one read takes from a socket; a chunk is what one read returned.
const CHUNK: usize = 16 * 1024;

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
    /// The `up` pump: queues what the client sends, chunk by chunk.
    pub(super) fn pump_client_to_queue(&self, number: usize, mut client: TcpStream) {
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
            let queued: usize = link.queue.iter().map(|c| c.bytes.len()).sum();
            if queued > super::MAX_QUEUED {
                // Cut: the queue dropped, the client done (so `wr` finishes
                // even while the proxy holds), both sockets shut.
                link.queue.clear();
                link.client_done = true;
                let _ = link.client.shutdown(Shutdown::Both);
                let _ = link.server.shutdown(Shutdown::Both);
                state.note(format!("connection {number}: more than {} bytes queued; cut", super::MAX_QUEUED));
                drop(state);
                self.changed.notify_all();
                return;
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
    pub(super) fn pump_queue_to_server(&self, number: usize, mut server: Upstream) {
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
                    Next::Wait(None) => state = { self.changed.wait(&mut state); state },
                    Next::Wait(Some(left)) => {
                        state = { self.changed.wait_for(&mut state, left); state }
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
    pub(super) fn pump_server_to_client(&self, mut server: Upstream, mut client: TcpStream) {
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
