//! The hosts layer on the real kernel: namespaces made, a partition that is
//! silence, a heal, children born inside a host, and nothing left behind.
//! They need root; without it they fail under CI and say so otherwise.

use super::*;
use std::net::TcpListener;

/// Whether the tests can run here; outside CI a loud line when not.
fn can_run() -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "the hosts tests need root (network namespaces), and CI must run them");
    eprintln!("NOTE: the hosts tests did NOT run: they need root (network namespaces)");
    false
}

/// A listener on `host`, on a port the kernel picks.
fn listen(host: &Host) -> (TcpListener, SocketAddr) {
    let listener = host.run(|| TcpListener::bind(host.at(0))).unwrap().unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, host.at(port))
}

/// Hosts reach each other; a split is silence between its sides and not
/// beyond them; a heal ends it; isolating one host cuts it from all.
#[test]
fn a_split_is_silence_between_its_sides_only() {
    if !can_run() {
        return;
    }
    let net = Network::create(&["a", "b", "c"]).unwrap();
    let (a, b, c) = (net.host("a"), net.host("b"), net.host("c"));
    let (_lb, at_b) = listen(b);
    let (_la, at_a) = listen(a);
    assert_eq!(a.reach(at_b).unwrap(), Reach::Answered);
    // Nothing listens on port 1 of b: a reset, not silence.
    assert_eq!(a.reach(b.at(1)).unwrap(), Reach::Refused);
    net.split(&["a"], &["b"]).unwrap();
    assert_eq!(net.cuts(), vec![("a".to_owned(), "b".to_owned())]);
    assert_eq!(a.reach(at_b).unwrap(), Reach::Silent);
    assert_eq!(b.reach(at_a).unwrap(), Reach::Silent);
    assert_eq!(c.reach(at_a).unwrap(), Reach::Answered);
    assert_eq!(c.reach(at_b).unwrap(), Reach::Answered);
    net.heal().unwrap();
    assert_eq!(a.reach(at_b).unwrap(), Reach::Answered);
    net.isolate("c").unwrap();
    let (_lc, at_c) = listen(c);
    assert_eq!(a.reach(at_c).unwrap(), Reach::Silent);
    assert_eq!(c.reach(at_b).unwrap(), Reach::Silent);
    assert_eq!(a.reach(at_b).unwrap(), Reach::Answered);
}

/// A process started inside a host lives there: it sees the host's
/// address, and the machine's own namespace has no link of the network's.
#[test]
fn a_child_is_born_inside_its_host() {
    if !can_run() {
        return;
    }
    let net = Network::create(&["solo"]).unwrap();
    let host = net.host("solo");
    let out = host.run(|| std::process::Command::new("ip").args(["-o", "-4", "addr", "show", "dev", "eth0"]).output()).unwrap().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{}/24", host.addr())), "{out:?}");
    let links = std::process::Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains("p-solo"), "a link of the network's is in the machine's namespace");
}

/// Dropping a network removes every namespace it made; a network whose run
/// died is removed by the next sweep, and a live run's is kept.
#[test]
fn nothing_outlives_its_run() {
    if !can_run() {
        return;
    }
    let net = Network::create(&["x", "y"]).unwrap();
    let prefix = format!("{}{}-", record::PREFIX, net.id());
    assert_eq!(netns::listed(&prefix).len(), 3, "switch, x, y");
    drop(net);
    assert!(netns::listed(&prefix).is_empty());

    // A run that died: a record naming a process that has exited, and a
    // namespace of its network, as a SIGKILL would leave them.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = crate::owner::Owner::Run { pid: child.id(), started: crate::owner::start_time(child.id()).unwrap_or(1) };
    child.wait().unwrap();
    let records = record::records_for_tests();
    let id = "deadbeef";
    crate::owner::write_in(&records, id, &dead).unwrap();
    let left = format!("{}{id}-h", record::PREFIX);
    Netns::add(&left).unwrap();
    let live = Network::create(&["z"]).unwrap();
    assert!(netns::listed(&left).is_empty(), "the dead run's namespace is still there");
    assert_eq!(netns::listed(&format!("{}{}-", record::PREFIX, live.id())).len(), 2, "the live run's own network was touched");
}
