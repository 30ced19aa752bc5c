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
//! - **A host** ([`Host`]) is entered by one thread at a time
//!   ([`Host::run`]): a server or a holder started there lives in the host
//!   (a child copies the namespaces of the thread that starts it), and a
//!   connection the parent opens there (to a server's loopback address, as
//!   an operator logged into that machine would) belongs to it. The parent
//!   reads every server from inside its own host, so a partition never
//!   blinds the lab's view.
//! - **A partition** ([`Network::split`], [`Network::isolate`],
//!   [`Network::heal`]) is made in the switch: it drops every IPv4 frame
//!   between the two groups' ports, silently (see `partition.rs` for why a
//!   drop in the switch, and not a reject or a link taken down). A host in
//!   neither group still reaches both.
//! - **Ownership.** Namespaces are named `lab26-<id>-<host>` with a random
//!   id per network, and the run records itself as the owner before it
//!   makes the first one (`record.rs`). The network's drop removes them
//!   all (a finished case, an error, a panic); the interrupt cleanup
//!   removes them on Ctrl-C; a run killed outright is cleaned up by the
//!   next run that makes a network, which finds a record whose run is
//!   gone. Removing a namespace removes the links and rules inside it:
//!   nothing of a network outlives its run. The processes in a host are
//!   their own owners' (holder guards, tied servers, etcd members), which
//!   end them before the network goes.
//!
//! Making namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), the
//! `ip` command (iproute2) and `nft` (nftables) with the kernel's bridge
//! filtering; [`Network::create`] says which is missing and what to do.

mod netns;
mod partition;
mod probe;
mod record;

pub use probe::{Reach, PROBE_BOUND};
pub use record::remove_recorded;

use crate::error::Result;
use crate::events;
use netns::Netns;
use record::Record;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

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

    /// Runs `f` on this thread inside the host: the processes it starts and
    /// the sockets it opens belong to the host.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        self.netns.within(f)
    }
}

/// The switch and the hosts of one run, and the partition in force.
pub struct Network {
    /// The record of this run's ownership; `None` once removed.
    record: Option<Record>,
    /// The switch's namespace; `None` until made.
    switch: Option<Netns>,
    /// The hosts, in the order asked for.
    hosts: Vec<Host>,
    /// The pairs of hosts cut apart now.
    cuts: Mutex<Vec<(String, String)>>,
}

impl Network {
    /// Makes a switch and one host per name, plugged in and addressed, and
    /// checks that the switch can filter (by loading an empty partition).
    pub fn create(names: &[&str]) -> Result<Network> {
        available()?;
        if let Some(bad) = names.iter().find(|n| n.is_empty() || n.len() > 13 || !n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')) {
            // The switch port `p-<host>` must fit an interface name (15 bytes).
            return Err(format!("{bad:?} cannot name a host: up to 13 of a-z, 0-9 and -").into());
        }
        if names.len() >= 250 {
            return Err("a network holds at most 249 hosts".into());
        }
        let record = Record::begin()?;
        let mut network = Network { record: None, switch: None, hosts: Vec::new(), cuts: Mutex::new(Vec::new()) };
        network.record = Some(record);
        // From here on the drop removes whatever has been made.
        let switch = network.record().add("switch").map_err(namespace_refused)?;
        // A bridge is the switch: it learns which port each host is on and
        // forwards frames between them. STP is off (Linux's default), so a
        // port forwards as soon as it is up.
        switch.ip_batch(&["link add switch type bridge".into(), "link set switch up".into()])?;
        network.switch = Some(switch);
        for (i, name) in names.iter().enumerate() {
            let netns_name = network.record().netns_name(name);
            let netns = Arc::new(network.record().add(name)?);
            let addr = Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], i as u8 + 1);
            let port = partition::port(name);
            // The cable: a veth pair made inside the switch, its other end
            // (`eth0`) moved straight into the host as it is made, so the
            // machine's own namespace never holds a link of the lab's.
            network.switch().ip_batch(&[
                format!("link add {port} type veth peer name eth0 netns {netns_name}"),
                format!("link set {port} master switch"),
                format!("link set {port} up"),
            ])?;
            // The host's side: loopback (each namespace has its own, down at
            // first), its address on the subnet, the link up. The /24 gives
            // it a route to every other host through eth0, and nothing else.
            netns.ip_batch(&["link set lo up".into(), format!("addr add {addr}/24 dev eth0"), "link set eth0 up".into()])?;
            network.hosts.push(Host { name: (*name).to_owned(), addr, netns });
        }
        // An empty partition, loaded once: the switch can filter frames.
        partition::apply(network.switch(), &partition::ruleset(&[])).map_err(|e| {
            format!("the kernel or nft cannot filter bridged frames (nftables' bridge family): {}", crate::error::chain(e.as_ref()))
        })?;
        Ok(network)
    }

    /// The network's random id, which every namespace name carries.
    pub fn id(&self) -> &str {
        self.record.as_ref().map_or("", Record::id)
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("the network has no host {name:?}"))
    }

    /// Every host, in the order made.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    fn record(&self) -> &Record {
        self.record.as_ref().expect("recorded before the first namespace")
    }

    fn switch(&self) -> &Netns {
        self.switch.as_ref().expect("the switch is made first")
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
        self.cuts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn apply(&self, cuts: Vec<(String, String)>) -> Result<()> {
        let mut current = self.cuts.lock().unwrap_or_else(|p| p.into_inner());
        partition::apply(self.switch(), &partition::ruleset(&cuts))?;
        // The pictures of a run mark when each host was cut off and healed.
        let touched = |pairs: &[(String, String)], host: &str| pairs.iter().any(|(a, b)| a == host || b == host);
        for host in &self.hosts {
            match (touched(&current, &host.name), touched(&cuts, &host.name)) {
                (false, true) => events::record(&host.name, "cut"),
                (true, false) => events::record(&host.name, "heal"),
                _ => {}
            }
        }
        *current = cuts;
        Ok(())
    }

    /// Removes every namespace of the network (and so every link and rule in
    /// them) and the run's record of it.
    fn remove(&mut self) -> Result<()> {
        self.hosts.clear();
        self.switch = None;
        match self.record.take() {
            Some(record) => record.end(),
            None => Ok(()),
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("lab: could not remove the network's namespaces: {}", crate::error::chain(e.as_ref()));
        }
    }
}

/// Whether this process can make hosts at all; if not, what to do.
fn available() -> Result<()> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err("the partition cases put each holder and each server on a network host of its own, a Linux network \
                    namespace, and only root can make those: run them as root (sudo ./run.sh F17); nothing else of the \
                    lab needs it"
            .into());
    }
    for (program, package) in [("ip", "iproute2"), ("nft", "nftables")] {
        let found = std::process::Command::new(program).arg("-V").output().is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!(
                "`{program}` is missing: the partition cases need it (Debian: apt-get install {package}; `./run.sh` installs it when it runs as root)"
            )
            .into());
        }
    }
    Ok(())
}

/// What to say when the kernel refuses a namespace to root.
fn namespace_refused(e: crate::Error) -> crate::Error {
    format!(
        "the kernel refused a network namespace ({}); in a container, that takes --privileged (or CAP_SYS_ADMIN and \
         CAP_NET_ADMIN); the partition cases cannot run without one",
        crate::error::chain(e.as_ref())
    )
    .into()
}

#[cfg(test)]
mod tests;
