//! Separate network hosts on one machine, and the partitions between them.
//!
//! Everything else in the lab talks over loopback, where nothing can come
//! between two processes. A partition needs machines with a network
//! between them. Linux network namespaces give each "machine" a network
//! stack of its own (its interfaces, addresses, routes, loopback and
//! ports), and a virtual switch connects them:
//!
//! ```text
//!   holder-a 10.26.0.1   lease-p 10.26.0.3   resource 10.26.0.5  …
//!        eth0                 eth0                eth0
//!          \                    |                  /
//!     p-holder-a            p-lease-p         p-resource      (veth pairs)
//!           \___________________|_________________/
//!                         switch (a bridge)
//! ```
//!
//! - **A network** ([`Network`]) is one switch namespace, holding a Linux
//!   bridge, and one namespace per host, each plugged into the bridge by a
//!   veth pair (`eth0` in the host, `p-<host>` on the switch). Every host has
//!   one address on the private subnet 10.26.0.0/24, which exists only inside
//!   these namespaces: the machine's own namespace gets no address, no route
//!   and no link of the lab's, and a veth is created straight inside the
//!   namespaces that hold its two ends.
//! - **A host** ([`Host`]): a server or a holder is started inside it
//!   ([`Host::enter`]: the child enters between fork and exec), and the
//!   lab's own sockets there ([`Host::connect`], [`Host::listen`]) are made
//!   inside it by the host's helper: the lab's threads never change
//!   namespace. The lab reads a server on a host through the server's Unix
//!   socket, a file in the lab's own folder that no partition can cut, as
//!   an operator logged into that machine would.
//! - **A partition** ([`Network::split`], [`Network::isolate`],
//!   [`Network::heal`]) is made in the switch: it drops every IPv4 frame
//!   between the two groups' ports, silently (see `partition.rs` for why a
//!   drop in the switch, and not a reject or a link taken down). A host in
//!   neither group still reaches both.
//! - **Whose, and for how long.** The namespaces belong to the run: to the
//!   machine's user namespace when the lab is root, otherwise to a user
//!   namespace the run makes for itself, so that an ordinary account needs
//!   no root at all (`space.rs`). None has a name: each is held by a
//!   descriptor of the lab's and by the processes inside, which are the
//!   lab's children, and the kernel ends it, with every link and rule in
//!   it, once the last of them is gone (`netns.rs`). A network therefore
//!   ends with its run on every exit path: its drop, Ctrl-C, a panic,
//!   `kill -9`. The processes in a host have their own owners (holder
//!   guards, tied servers, etcd members), which end them before the
//!   network goes.
//!
//! Making hosts needs the `ip` command (iproute2) and `nft` (nftables),
//! with the kernel's bridge filtering, and, for an account other than
//! root, a kernel that allows it a user namespace; [`Network::create`] says
//! which is missing and what to do.

mod netns;
mod partition;
mod probe;
mod space;

pub use probe::{Reach, PROBE_BOUND};

use crate::vocabulary::Act;
use crate::error::{Result, ResultExt};
use crate::events;
use netns::Netns;
use nix::unistd::User;
use space::{Role, Space};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The private subnet's prefix: host `i` (from 0) is 10.26.0.(i + 1).
pub const SUBNET: [u8; 3] = [10, 26, 0];

/// The subnet in CIDR form, for the servers' client authentication rules.
pub const SUBNET_CIDR: &str = "10.26.0.0/24";

/// One machine of a network.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its name: `holder-a`, `lease-p`, `etcd-m1`, …
    name: String,
    /// Its address on the subnet.
    addr: Ipv4Addr,
    /// Its namespace, shared by the clones of this handle.
    netns: Arc<Netns>,
}

impl Host {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its address on the network.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// `port` on this host, as the other hosts reach it.
    pub fn at(&self, port: u16) -> SocketAddr {
        SocketAddr::from((self.addr, port))
    }

    /// Makes `cmd` start inside this host, as a server, holder or etcd
    /// member: never root of the hosts' space (`space.rs`); when the lab is
    /// root, as `run_as` if given. `keep`: descriptors the process inherits.
    pub fn enter(&self, cmd: &mut Command, run_as: Option<User>, keep: Vec<OwnedFd>) -> Result<()> {
        Space::get()?.entry(Arc::clone(&self.netns), Role::Process { run_as }, keep)?.apply_to(cmd);
        Ok(())
    }

    /// A TCP connection from this host to `to`, within `timeout`.
    pub fn connect(&self, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
        let socket = socket2::Socket::from(self.netns.tcp_socket()?);
        socket.connect_timeout(&to.into(), timeout)?;
        Ok(socket.into())
    }

    /// A TCP listener on `at`, inside this host (port 0: one the kernel picks).
    pub fn listen(&self, at: SocketAddr) -> std::io::Result<TcpListener> {
        let socket = socket2::Socket::from(self.netns.tcp_socket()?);
        // As std's TcpListener::bind does on Unix.
        socket.set_reuse_address(true)?;
        socket.bind(&at.into())?;
        socket.listen(128)?;
        Ok(socket.into())
    }
}

/// The switch and the hosts of one run, and the partition in force.
pub struct Network {
    /// The switch's namespace.
    switch: Arc<Netns>,
    /// The hosts, in the order asked for.
    hosts: Vec<Host>,
    /// The partition in force, changed by one caller at a time.
    partition: Mutex<Partition>,
}

/// The partition in force, and the number of the last chain tried.
#[derive(Default)]
struct Partition {
    /// The pairs of hosts cut apart now (host names).
    cuts: Vec<(String, String)>,
    /// The number given to the last partition's chain tried: 0 before any;
    /// a heal with nothing cut takes none.
    generation: u32,
}

impl Network {
    /// Makes a switch and one host per name, plugged in and addressed, and
    /// checks that the switch can filter (by loading the partitions' table and
    /// its forward chain, `partition::switch_table`).
    pub fn create(names: &[&str]) -> Result<Network> {
        if let Some(bad) = names.iter().find(|n| n.is_empty() || n.len() > 13 || !n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')) {
            // The switch port `p-<host>` must fit an interface name (15 bytes).
            return Err(format!("{bad:?} cannot name a host: up to 13 of a-z, 0-9 and -").into());
        }
        if names.len() >= 250 {
            return Err("a network holds at most 249 hosts".into());
        }
        let space = available()?;
        if crate::interrupt::requested() {
            return Err("interrupted: no network is made after a stop signal".into());
        }
        let switch = Arc::new(Netns::make(space).map_err(|e| namespace_refused(space, e))?);
        let mut hosts = Vec::new();
        // A bridge is the switch: it learns which port each host is on and
        // forwards frames between them. STP is off (Linux's default), so a
        // port forwards as soon as it is up.
        let mut switch_side: Vec<String> = vec!["link add switch type bridge".into(), "link set switch up".into()];
        let mut host_namespaces = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let netns = Arc::new(Netns::make(space)?);
            let port = partition::port(name);
            // The cable: a veth pair made inside the switch, its other end
            // (`eth0`) moved straight into the host as it is made (named by
            // the descriptor `ip` inherits), so the machine's own namespace
            // never holds a link of the lab's.
            let host_ns = netns.duplicate().context("holding a host's namespace for ip")?;
            let named = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&host_ns));
            switch_side.push(format!("link add {port} type veth peer name eth0 netns {named}"));
            switch_side.push(format!("link set {port} master switch"));
            switch_side.push(format!("link set {port} up"));
            host_namespaces.push(host_ns);
            let addr = Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], i as u8 + 1);
            hosts.push(Host { name: (*name).to_owned(), addr, netns });
        }
        // Every cable and port in one `ip -batch`, before any host's side
        // (a host's link comes up to a port already up and forwarding).
        ip_batch(&switch, &switch_side, host_namespaces)?;
        for host in &hosts {
            // The host's side: loopback (each namespace has its own, down at
            // first), its address on the subnet, the link up. The /24 gives
            // it a route to every other host through eth0, and nothing else.
            ip_batch(&host.netns, &["link set lo up".into(), format!("addr add {}/24 dev eth0", host.addr), "link set eth0 up".into()], vec![])?;
        }
        let network = Network { switch, hosts, partition: Mutex::default() };
        // The partitions' table, loaded once: the switch can filter frames.
        partition::apply(&network.switch, &partition::switch_table()).map_err(|e| {
            format!("the kernel or nft cannot filter bridged frames (nftables' bridge family): {}", crate::error::chain(e.as_ref()))
        })?;
        Ok(network)
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("the network has no host {name:?}"))
    }

    /// Every host, in the order made.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    // ANCHOR: split
    /// Cuts every host of `a` off from every host of `b`, in both
    /// directions; hosts in neither group still reach both sides. Replaces
    /// the partition in force.
    pub fn split(&self, a: &[&str], b: &[&str]) -> Result<()> {
        let mut cuts = Vec::new();
        for x in a {
            for y in b {
                if x == y {
                    return Err(format!("host {x} cannot be on both sides of a partition").into());
                }
                cuts.push((self.host(x).name.clone(), self.host(y).name.clone()));
            }
        }
        self.apply(cuts)
    }

    /// Cuts `host` off from every other host.
    pub fn isolate(&self, host: &str) -> Result<()> {
        let others: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).filter(|n| *n != host).collect();
        self.split(&[host], &others)
    }

    /// Ends the partition: every host reaches every other again.
    pub fn heal(&self) -> Result<()> {
        self.apply(Vec::new())
    }
    // ANCHOR_END: split

    /// The pairs cut apart now.
    pub fn cuts(&self) -> Vec<(String, String)> {
        self.partition.lock().unwrap_or_else(|p| p.into_inner()).cuts.clone()
    }

    fn apply(&self, cuts: Vec<(String, String)>) -> Result<()> {
        let mut guard = self.partition.lock().unwrap_or_else(|p| p.into_inner());
        let Partition { cuts: current, generation } = &mut *guard;
        // Healing a switch with no cut changes nothing: no chain is added.
        if cuts.is_empty() && current.is_empty() {
            return Ok(());
        }
        // A number never used again, whatever becomes of this one: a chain
        // by the same name would take the new rules after its `accept`.
        // (`nft -f` loads a script as one transaction, all or nothing: after
        // an error nft reports, nothing of the script is in the switch.)
        *generation += 1;
        partition::apply(&self.switch, &partition::ruleset(*generation, &cuts))?;
        // The pictures of a run mark when each host was cut off and healed.
        let touched = |pairs: &[(String, String)], host: &str| pairs.iter().any(|(a, b)| a == host || b == host);
        for host in &self.hosts {
            match (touched(current, &host.name), touched(&cuts, &host.name)) {
                (false, true) => events::record(&host.name, Act::Cut),
                (true, false) => events::record(&host.name, Act::Heal),
                _ => {}
            }
        }
        *current = cuts;
        Ok(())
    }

}

/// Whether this process can make hosts at all: the programs are there, and
/// the kernel gives it a space for them; if not, what to do.
fn available() -> Result<&'static Space> {
    for (program, package) in [("ip", "iproute2"), ("nft", "nftables")] {
        let found = program_path(program).is_some_and(|p| Command::new(p).arg("-V").output().is_ok_and(|o| o.status.success()));
        if !found {
            return Err(format!(
                "`{program}` is missing: the network hosts of F15, F17-F19 and the chaos run need it (Debian: apt-get install {package}; \
                 `./run.sh` installs it when it runs as root)"
            )
            .into());
        }
    }
    Space::get()
}

/// Where `program` is: on PATH, or in `/usr/sbin` and `/sbin`, which an
/// ordinary account's PATH does not name and where Debian puts `nft`.
fn program_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok() && p.is_file())
}

/// `program` run as the administrator of `netns` (root of the hosts'
/// space), inheriting `keep`.
fn admin_command(netns: &Arc<Netns>, program: &str, keep: Vec<OwnedFd>) -> Result<Command> {
    let path = program_path(program).ok_or_else(|| format!("`{program}` is missing"))?;
    let mut cmd = Command::new(path);
    Space::get()?.entry(Arc::clone(netns), Role::Admin, keep)?.apply_to(&mut cmd);
    Ok(cmd)
}

/// Runs `commands` (one `ip` command a line, without the leading `ip`)
/// inside `netns`, as one `ip -batch`.
fn ip_batch(netns: &Arc<Netns>, commands: &[String], keep: Vec<OwnedFd>) -> Result<()> {
    use std::io::Write;
    let mut child = admin_command(netns, "ip", keep)?
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting ip (iproute2) inside a host")?;
    child.stdin.take().expect("piped").write_all(commands.join("\n").as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("ip -batch failed ({}): {}\ncommands:\n{}", out.status, String::from_utf8_lossy(&out.stderr).trim(), commands.join("\n")).into());
    }
    Ok(())
}

/// What to say when the kernel refuses a network namespace.
fn namespace_refused(space: &Space, e: crate::Error) -> crate::Error {
    let what = if space.is_own() {
        "inside the user namespace the lab made for this run"
    } else {
        "to root; in a container, that takes --privileged (or CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    };
    format!("the kernel refused a network namespace {what} ({}); the network hosts cannot be made", crate::error::chain(e.as_ref())).into()
}

#[cfg(test)]
mod tests;
