//! Where a proxy forwards its clients, and the socket it forwards them on:
//! a TCP address (a server on a host of the lab's network), or a Unix
//! socket (a server on this machine, which listens on nothing else; see
//! `cluster`: no loopback port of the lab's carries a password).

use std::fmt;
use crate::stream::Stream;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// Where every connection of a proxy is forwarded.
#[derive(Clone, Debug)]
pub enum Target {
    /// A server's TCP address.
    Tcp(SocketAddr),
    /// A server's Unix socket (the socket file itself).
    Unix(PathBuf),
}

impl From<SocketAddr> for Target {
    fn from(at: SocketAddr) -> Target {
        Target::Tcp(at)
    }
}

impl From<PathBuf> for Target {
    fn from(socket: PathBuf) -> Target {
        Target::Unix(socket)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(at) => write!(f, "{at}"),
            Target::Unix(socket) => write!(f, "{}", socket.display()),
        }
    }
}

/// The proxy's connection to its target for one client.
pub type Upstream = Stream;

/// Connects to `target`, trying for at most `bound` (a Unix socket's
/// connect does not wait: it succeeds or is refused at once).
pub fn connect(target: &Target, bound: Duration) -> std::io::Result<Upstream> {
    Ok(match target {
        Target::Tcp(at) => {
            let stream = TcpStream::connect_timeout(at, bound)?;
            // The proxy must not add Nagle's wait to a protocol of small
            // request/answer messages; PostgreSQL's client disables it too.
            stream.set_nodelay(true)?;
            Stream::Tcp(stream)
        }
        Target::Unix(socket) => Stream::Unix(UnixStream::connect(socket)?),
    })
}
