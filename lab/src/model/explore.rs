//! `lab model --explore [MODE]`: stateright's Explorer, a web page that
//! shows the model's initial state and lets a reader take one step at a
//! time, see every property in every state, and follow a counterexample.
//!
//! It listens on 127.0.0.1 only, on a port the kernel picks free: the
//! listener that asks for it is closed just before the Explorer binds the
//! same port (stateright takes an address, not a socket). In that moment
//! another account could take the port, and a reader who opened the
//! address would see that account's page. So the Explorer serves on a
//! thread of its own, and its address is printed only once the kernel's
//! socket table shows the listener on that port to be one of this
//! process's own descriptors; a port another process holds ends the
//! command with an error naming the port and its owner.
//!
//! The page and its scripts are served from the binary itself, with one
//! catch: stateright 0.31 first looks for `./ui/index.htm`, `./ui/app.js`
//! … in the current folder (its "dev mode"), and serves those if they
//! exist, so a `ui/` folder planted where the reader stands would be
//! served under the lab's address. Before serving, the process therefore
//! moves into a private folder it has just made and removed: the kernel
//! creates nothing in a removed folder, so no `./ui` can ever be found.
//! Nothing is fetched from elsewhere, and nothing is left behind. It runs
//! until the process is stopped (Ctrl-C).

use super::{Config, LeaseModel};
use crate::cluster::diagnose::{self, TcpSocket};
use crate::error::{Result, ResultExt};
use crate::poll::{poll_until, BOUND, EVERY};
use nix::fcntl::{open, OFlag};
use nix::sys::stat::{fstat, Mode};
use stateright::Model;
use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::OwnedFd;
use std::thread::JoinHandle;

/// A free port on 127.0.0.1, as the kernel hands one out.
fn free_port() -> Result<u16> {
    let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(probe.local_addr()?.port())
}

/// Serves the Explorer for `config`; prints its address once it is
/// verified to be this process's. Returns only if the server fails.
pub fn serve(config: Config) -> Result<()> {
    nix::unistd::fchdir(removed_private_folder()?).context("moving into the Explorer's empty folder")?;
    let port = free_port()?;
    let what = format!("the Explorer of {} on {}", config.mode, config.store.name());
    let server = std::thread::Builder::new()
        .name("explorer".into())
        .spawn(move || {
            // Binds the port, then serves until the process ends; if the
            // bind fails, tiny_http panics and this thread ends.
            LeaseModel::new(config).checker().serve((Ipv4Addr::LOCALHOST, port));
        })
        .context("starting the Explorer's thread")?;
    wait_until_ours(port, &server)?;
    println!("model: {what} at http://127.0.0.1:{port}/ (Ctrl-C to stop)");
    // Flushed: a reader (or a test) waits for this line before it connects.
    use std::io::Write;
    std::io::stdout().flush()?;
    let _ = server.join();
    Err("the Explorer stopped".into())
}

/// Waits until the listener on 127.0.0.1:`port` is this process's (the
/// Explorer's, which `server` runs); an error as soon as it is another
/// process's, or once `server` has ended without listening.
fn wait_until_ours(port: u16, server: &JoinHandle<()>) -> Result<()> {
    let ours = poll_until(BOUND, EVERY, || -> Result<bool> {
        match listener_on(port)? {
            Listener::Ours => Ok(true),
            Listener::Another { uid } => Err(format!(
                "127.0.0.1:{port} is held by another process (uid {uid}), which took it before the Explorer could: \
                 the lab will not print an address whose page it does not serve. Run the command again for another port"
            )
            .into()),
            Listener::Nobody if server.is_finished() => {
                Err(format!("the Explorer could not listen on 127.0.0.1:{port} (its server's message is above)").into())
            }
            Listener::Nobody => Ok(false),
        }
    })?;
    if !ours {
        return Err(format!("the Explorer did not listen on 127.0.0.1:{port} within {BOUND:?}").into());
    }
    Ok(())
}

/// Who listens on 127.0.0.1:`port`, by the kernel's socket table.
#[derive(Debug, PartialEq, Eq)]
enum Listener {
    /// A socket open in this process.
    Ours,
    /// A socket of another process, made by the account `uid`.
    Another {
        /// The uid of the account that made it.
        uid: u32,
    },
    /// No socket listens there.
    Nobody,
}

/// Who listens on 127.0.0.1:`port` now.
fn listener_on(port: u16) -> Result<Listener> {
    let rows = diagnose::tcp_sockets().context("reading the socket table (/proc/net/tcp)")?;
    Ok(judge(&rows, port, &own_sockets()?))
}

/// Who, among `rows`, listens where a browser's `127.0.0.1:port` arrives:
/// on 127.0.0.1 or on every address (`0.0.0.0`). A listener is this
/// process's when its inode is one of `ours`; any other one decides
/// against, even beside one of ours.
fn judge(rows: &[TcpSocket], port: u16, ours: &HashSet<u64>) -> Listener {
    let mut found = Listener::Nobody;
    let there = rows.iter().filter(|s| s.is_listening() && s.local.port() == port && (*s.local.ip() == Ipv4Addr::LOCALHOST || s.local.ip().is_unspecified()));
    for row in there {
        if !ours.contains(&row.inode) {
            return Listener::Another { uid: row.uid };
        }
        found = Listener::Ours;
    }
    found
}

/// The inodes of the sockets open in this process: each descriptor in
/// `/proc/self/fd` that is a socket links to `socket:[inode]`.
fn own_sockets() -> Result<HashSet<u64>> {
    let mut inodes = HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")? {
        // A descriptor closed since the listing (another thread's) is skipped.
        let Ok(link) = std::fs::read_link(entry?.path()) else { continue };
        let inode = link.to_str().and_then(|l| l.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok());
        inodes.extend(inode);
    }
    Ok(inodes)
}

/// A folder made for this process alone (`mkdtemp`: a random name, mode
/// 0700, created only if new), checked through its descriptor, and
/// removed again: the descriptor of a folder in which nothing exists and
/// nothing can be made, which leaves nothing behind however the process ends.
fn removed_private_folder() -> Result<OwnedFd> {
    let made = nix::unistd::mkdtemp(&std::env::temp_dir().join("lab-explorer-XXXXXX")).context("making the Explorer's empty folder")?;
    let folder = open(&made, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
        .with_context(|| format!("opening {}", made.display()))?;
    let stat = fstat(&folder)?;
    let me = nix::unistd::Uid::effective().as_raw();
    if stat.st_uid != me || stat.st_mode & 0o7777 != 0o700 {
        return Err(format!("{} is owned by uid {} with mode {:o}, not the folder just made (uid {me}, mode 700)", made.display(), stat.st_uid, stat.st_mode & 0o7777).into());
    }
    std::fs::remove_dir(&made).with_context(|| format!("removing {}", made.display()))?;
    // The folder held open is the one removed, not another put in its name.
    if fstat(&folder)?.st_nlink != 0 {
        return Err(format!("{} was replaced before it could be removed", made.display()).into());
    }
    Ok(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener this process opened is recognised as its own; once it is
    /// closed, nobody listens on its port.
    #[test]
    fn a_listener_of_ours_is_recognised() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listener_on(port).unwrap(), Listener::Ours);
        drop(listener);
        assert_eq!(listener_on(port).unwrap(), Listener::Nobody);
    }

    /// A listener whose inode is not among this process's descriptors is
    /// another's, named by its uid, even beside one of ours; a listener on
    /// another address or port, or a connection, is not on the port.
    #[test]
    fn a_listener_of_another_process_is_not_ours() {
        let row = |local: &str, state: &str, uid: u32, inode: u64| TcpSocket {
            local: local.parse().unwrap(),
            remote: "0.0.0.0:0".parse().unwrap(),
            state: state.into(),
            uid,
            inode,
        };
        let ours = HashSet::from([11]);
        assert_eq!(judge(&[row("127.0.0.1:26600", "0A", 0, 11)], 26600, &ours), Listener::Ours);
        assert_eq!(judge(&[row("127.0.0.1:26600", "0A", 65534, 12)], 26600, &ours), Listener::Another { uid: 65534 });
        assert_eq!(judge(&[row("0.0.0.0:26600", "0A", 1000, 13)], 26600, &ours), Listener::Another { uid: 1000 });
        assert_eq!(judge(&[row("127.0.0.1:26600", "0A", 0, 11), row("0.0.0.0:26600", "0A", 1000, 13)], 26600, &ours), Listener::Another { uid: 1000 });
        let elsewhere = [row("127.0.0.2:26600", "0A", 1000, 14), row("127.0.0.1:26601", "0A", 1000, 15), row("127.0.0.1:26600", "01", 1000, 16)];
        assert_eq!(judge(&elsewhere, 26600, &ours), Listener::Nobody);
    }

    /// The Explorer's folder is this account's, already removed, and no
    /// `ui` folder can be made in it, not even by root.
    #[test]
    fn the_explorers_folder_can_hold_nothing() {
        let folder = removed_private_folder().unwrap();
        let stat = fstat(&folder).unwrap();
        assert_eq!((stat.st_nlink, stat.st_uid, stat.st_mode & 0o7777), (0, nix::unistd::Uid::effective().as_raw(), 0o700));
        assert_eq!(nix::sys::stat::mkdirat(&folder, "ui", Mode::from_bits_truncate(0o700)), Err(nix::errno::Errno::ENOENT));
        assert!(nix::fcntl::openat(&folder, "ui/index.htm", OFlag::O_RDONLY, Mode::empty()).is_err());
    }
}
