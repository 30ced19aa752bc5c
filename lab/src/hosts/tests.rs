//! The hosts layer on the real kernel: namespaces made, a partition that is
//! silence, a heal, children born inside a host and not root there, and
//! nothing left behind. They run as any account: root makes the hosts in
//! the machine's user namespace, any other account in one of its own.

use super::*;

/// A listener on `host`, on a port the kernel picks.
fn listen(host: &Host) -> (TcpListener, SocketAddr) {
    let listener = host.listen(host.at(0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, host.at(port))
}

/// Hosts reach each other; a split is silence between its sides and not
/// beyond them; a heal ends it; isolating one host cuts it from all.
#[test]
fn a_split_is_silence_between_its_sides_only() {
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

/// `program` with `args` started inside `host` as a holder would be; its output.
fn inside(host: &Host, program: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(program_path(program).unwrap());
    cmd.args(args);
    host.enter(&mut cmd, None, vec![]).unwrap();
    cmd.output().unwrap()
}

/// A process started inside a host lives there: it sees the host's
/// address, and the machine's own namespace has no link of the network's.
/// It runs as the lab's own account, and is not root of the host: it
/// cannot change the host's links, even when the lab is root.
#[test]
fn a_child_is_born_inside_its_host_and_not_root_there() {
    let net = Network::create(&["solo"]).unwrap();
    let host = net.host("solo");
    let out = inside(host, "ip", &["-o", "-4", "addr", "show", "dev", "eth0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{}/24", host.addr())), "{out:?}");
    let links = Command::new(program_path("ip").unwrap()).args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains("p-solo"), "a link of the network's is in the machine's namespace");
    let id = inside(host, "id", &["-u"]);
    assert_eq!(String::from_utf8_lossy(&id.stdout).trim(), nix::unistd::Uid::effective().to_string(), "{id:?}");
    let down = inside(host, "ip", &["link", "set", "eth0", "down"]);
    assert!(!down.status.success(), "a process in a host took its link down");
    assert!(String::from_utf8_lossy(&down.stderr).contains("Operation not permitted"), "{down:?}");
}

/// The namespaces the network's hosts and switch are, as /proc names them.
fn namespaces(net: &Network) -> Vec<String> {
    let mut all: Vec<&Netns> = net.hosts().iter().map(|h| &*h.netns).collect();
    all.push(&net.switch);
    all.iter().map(|ns| format!("net:[{}]", std::fs::metadata(format!("/proc/self/fd/{}", ns.fd())).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).unwrap())).collect()
}

/// Whether any process is in one of `namespaces` or holds a descriptor of it.
fn referred(namespaces: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let mut links: Vec<_> = std::fs::read_link(entry.path().join("ns/net")).into_iter().collect();
        links.extend(std::fs::read_dir(entry.path().join("fd")).into_iter().flatten().flatten().filter_map(|fd| std::fs::read_link(fd.path()).ok()));
        found.extend(links.into_iter().map(|l| l.to_string_lossy().into_owned()).filter(|l| namespaces.contains(l)));
    }
    found
}

/// A network's namespaces have no name anywhere, and once the network is
/// dropped nothing refers to them: the kernel has ended them, and their
/// helpers have exited and been reaped.
#[test]
fn nothing_outlives_its_network() {
    let net = Network::create(&["x", "y"]).unwrap();
    let names = namespaces(&net);
    assert_eq!(names.len(), 3, "switch, x, y");
    assert!(!referred(&names).is_empty(), "the live network's namespaces are not seen");
    let helpers: Vec<_> = net.hosts().iter().map(|h| h.netns.helper()).chain([net.switch.helper()]).collect();
    drop(net);
    assert_eq!(referred(&names), Vec::<String>::new(), "a dropped network's namespace is still referred to");
    for pid in helpers {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "helper {pid} is still there");
    }
}

/// The variable that makes the next test its own child, inside a user
/// namespace whose limit leaves no room for another.
const REFUSED_CHILD: &str = "LAB_TEST_REFUSED_CHILD";

/// A kernel that refuses the lab's account a user namespace gets a line
/// that names the setting, and what to do. Made real, for any account:
/// the test runs itself again inside a user namespace of its own whose
/// limit on nested ones (user.max_user_namespaces there) is spent by the
/// one it runs in, as a non-root uid; there the lab's own attempt fails
/// as it would on a machine that forbids them.
#[test]
fn a_refused_user_namespace_is_named() {
    if std::env::var_os(REFUSED_CHILD).is_some() {
        assert!(!nix::unistd::Uid::effective().is_root(), "the child runs as root");
        match Network::create(&["h"]) {
            Ok(_) => println!("MADE a network"),
            Err(e) => println!("REFUSED {}", crate::error::chain(e.as_ref())),
        }
        return;
    }
    let me = std::env::current_exe().unwrap();
    let script = "echo 1 > /proc/sys/user/max_user_namespaces && exec unshare --user --map-user=1000 --map-group=1000 \"$0\" \
                  --exact hosts::tests::a_refused_user_namespace_is_named --nocapture --test-threads=1";
    let out = Command::new("unshare").args(["--user", "--map-root-user", "sh", "-c", script]).arg(&me).env(REFUSED_CHILD, "1").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let line = text.lines().find_map(|l| l.find("REFUSED ").or(l.find("MADE ")).map(|at| &l[at..])).unwrap_or_else(|| panic!("the child said nothing: {out:?}"));
    assert!(line.contains("the kernel refused this account a user namespace"), "{line}");
    assert!(line.contains("user.max_user_namespaces"), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
}
