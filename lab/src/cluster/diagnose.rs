//! What a failed server command or a held port tells the reader: the
//! command's own output, the tail of the server log, and which process
//! holds the port (read from `/proc`).

use super::Cluster;
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Output;

/// One IPv4 TCP socket of this machine, as `/proc/net/tcp` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    /// Its own address.
    pub local: SocketAddrV4,
    /// Its peer's (0.0.0.0:0 for a listener).
    pub remote: SocketAddrV4,
    /// The kernel's state code (`0A`: LISTEN, `01`: ESTABLISHED).
    pub state: String,
    /// The uid of the account that made it.
    pub uid: u32,
    /// Its inode, which `/proc/<pid>/fd` links name (`socket:[inode]`).
    pub inode: u64,
}

impl TcpSocket {
    /// Whether it is a connection both ends still hold (`01`). Only then
    /// does its row name the account that made it: a socket its process
    /// has closed lives on in the kernel alone (`FIN_WAIT`, then
    /// `TIME_WAIT`, whose row says uid 0 whoever made it).
    pub fn is_established(&self) -> bool {
        self.state_code() == Some(0x01)
    }

    /// Whether it is a listener (`0A`).
    pub fn is_listening(&self) -> bool {
        self.state_code() == Some(0x0A)
    }

    /// Its state by the kernel's name (`TIME_WAIT`), for messages.
    pub fn state_name(&self) -> &str {
        // The order of the kernel's `TCP_*` states (include/net/tcp_states.h), from 1.
        const NAMES: [&str; 12] =
            ["ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"];
        self.state_code().and_then(|code| NAMES.get(usize::from(code).checked_sub(1)?)).copied().unwrap_or(&self.state)
    }

    /// The state as the number the kernel prints in hex.
    fn state_code(&self) -> Option<u8> {
        u8::from_str_radix(&self.state, 16).ok()
    }
}

/// The IPv4 TCP sockets of this machine (the lab listens on 127.0.0.1
/// only); an unreadable table is an error, not an empty list.
pub fn tcp_sockets() -> std::io::Result<Vec<TcpSocket>> {
    Ok(parse_tcp_table(&fs::read_to_string("/proc/net/tcp")?))
}

/// The rows of a `/proc/net/tcp` table: `sl local rem st queues tr
/// retrnsmt uid timeout inode …`, addresses as `0100007F:6F3A` (the
/// IPv4 address a little-endian hex word, the port big-endian hex).
fn parse_tcp_table(text: &str) -> Vec<TcpSocket> {
    let addr = |field: &str| -> Option<SocketAddrV4> {
        let (ip, port) = field.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        Some(SocketAddrV4::new(Ipv4Addr::from(ip.swap_bytes()), u16::from_str_radix(port, 16).ok()?))
    };
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(TcpSocket {
                local: addr(f.get(1)?)?,
                remote: addr(f.get(2)?)?,
                state: f.get(3)?.to_string(),
                uid: f.get(7)?.parse().ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// Which process listens on `port` (best effort, from /proc), e.g.
/// `pid 4242 (python3 -m http.server 26426)`.
pub fn who_listens(port: u16) -> Option<String> {
    let inode = tcp_sockets().ok()?.into_iter().find(|s| s.local.port() == port && s.is_listening())?.inode;
    let wanted = format!("socket:[{inode}]");
    for proc_entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = fs::read_dir(proc_entry.path().join("fd")) else { continue };
        if fds.flatten().any(|fd| fs::read_link(fd.path()).map(|l| l.as_os_str() == wanted.as_str()).unwrap_or(false)) {
            let cmdline = fs::read(proc_entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            return Some(format!("pid {pid} ({})", cmdline.trim()));
        }
    }
    None
}

/// A failed server command, with what it printed and where to look next
/// (the tail of `server`'s log).
pub fn command_error(what: &str, out: &Output, server: Option<&Cluster>) -> String {
    let mut text = format!("{what} failed ({})", out.status);
    for stream in [&out.stdout, &out.stderr] {
        let s = String::from_utf8_lossy(stream);
        if !s.trim().is_empty() {
            text.push_str(&format!("\n{}", s.trim_end()));
        }
    }
    if let Some(server) = server {
        text.push_str(&format!("\nserver log {}:{}", server.log_path().display(), server.log_tail(8)));
    }
    text
}

/// The last `lines` lines of a log's text, each on a new line, indented.
pub fn tail(text: &str, lines: usize) -> String {
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().map(|line| format!("\n  {line}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of /proc/net/tcp reads as its addresses, state, owner and inode.
    #[test]
    fn tcp_rows_read_as_the_kernel_writes_them() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                     0: 0100007F:66BA 0100007F:D431 01 00000000:00000000 00:00000000 00000000   999        0 123456 1 0000000000000000 20 4 30 10 -1\n";
        let rows = parse_tcp_table(table);
        assert_eq!(
            rows,
            [TcpSocket {
                local: "127.0.0.1:26298".parse().unwrap(),
                remote: "127.0.0.1:54321".parse().unwrap(),
                state: "01".into(),
                uid: 999,
                inode: 123456
            }]
        );
        assert!(rows[0].is_established() && !rows[0].is_listening());
        assert_eq!(rows[0].state_name(), "ESTABLISHED");
    }

    /// A state reads by its kernel name; a code the kernel does not use
    /// reads as itself, never as some other state.
    #[test]
    fn states_read_by_their_kernel_names() {
        let row = |state: &str| TcpSocket { local: "127.0.0.1:1".parse().unwrap(), remote: "127.0.0.1:2".parse().unwrap(), state: state.into(), uid: 0, inode: 1 };
        assert_eq!(row("06").state_name(), "TIME_WAIT");
        assert!(row("0A").is_listening() && row("0a").is_listening());
        assert_eq!(row("0A").state_name(), "LISTEN");
        assert_eq!(row("FF").state_name(), "FF");
        assert_eq!(row("00").state_name(), "00");
        assert!(!row("06").is_established() && !row("zz").is_established());
    }
}
