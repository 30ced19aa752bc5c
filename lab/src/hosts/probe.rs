//! Whether one host reaches a port on another, as the host itself sees it:
//! a TCP connection attempt made from inside the host.
//!
//! A case shows its partition this way before it judges anything under it,
//! so that a cut that was not really made (or made in the wrong place)
//! fails a premise line instead of passing unnoticed. The answers a connect
//! can get tell the kinds of failure apart: across a partition the
//! connection attempt hears nothing at all (the switch drops the SYN) and
//! runs into the probe's bound; a port nobody listens on answers with a
//! reset (refused); a host whose own link is down fails at once
//! (unreachable).

use super::Host;
use crate::error::Result;
use std::fmt;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

/// How long a probe waits for an answer. A SYN across the switch is
/// answered within a millisecond here, even on a loaded machine; a second
/// of nothing is silence.
pub const PROBE_BOUND: Duration = Duration::from_secs(1);

/// What a connection attempt got back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Connected: the port's server accepted.
    Answered,
    /// A reset: the host is there, nothing listens on the port.
    Refused,
    /// An error at once, from the sender's own kernel (no route, link down).
    Unreachable,
    /// Nothing at all within the bound: a partition.
    Silent,
}

impl fmt::Display for Reach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reach::Answered => "answered",
            Reach::Refused => "refused",
            Reach::Unreachable => "unreachable",
            Reach::Silent => "silent",
        })
    }
}

impl Host {
    /// Tries to connect from this host to `to`, waiting at most
    /// [`PROBE_BOUND`]; the connection, if made, is closed at once.
    pub fn reach(&self, to: SocketAddr) -> Result<Reach> {
        self.reach_within(to, PROBE_BOUND)
    }

    /// [`Self::reach`] with a bound of its own. A shorter one can only take
    /// a slow answer for silence, never silence for an answer: the chaos
    /// run's nemesis uses one to confirm each partition it makes, quickly.
    pub fn reach_within(&self, to: SocketAddr, bound: std::time::Duration) -> Result<Reach> {
        let attempt = self.connect(to, bound);
        Ok(match attempt {
            Ok(_connected) => Reach::Answered,
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Reach::Refused,
            Err(e) if e.kind() == ErrorKind::TimedOut || e.kind() == ErrorKind::WouldBlock => Reach::Silent,
            Err(e) if matches!(e.raw_os_error(), Some(nix::libc::EHOSTUNREACH) | Some(nix::libc::ENETUNREACH)) => Reach::Unreachable,
            Err(e) => return Err(format!("probing {to} from {}: {e}", self.name()).into()),
        })
    }
}
