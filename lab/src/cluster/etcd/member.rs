//! One member: its name, ports and files, its etcd command line, and its
//! process: the port check before it starts, the spawn for a run or for
//! the reader, and its pid file, which finds it again from any process.

use super::config::{client_port, member_name, peer_port, socket_name, ELECTION_TIMEOUT, HEARTBEAT, HOST, MEMBERS, NAME};
use super::run_members::{stop_run_members, RunMember, RUN_MEMBERS};
use super::EtcdCluster;
use crate::cluster::diagnose;
use crate::owner::{self, Owner};
use crate::error::{Result, ResultExt};
use crate::interrupt;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// One member's name and ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// 0 for `m1`.
    pub index: usize,
    /// `m1`, `m2`, `m3`: etcd's `--name`.
    pub name: String,
    /// Where clients (and the gateway) connect.
    pub client_port: u16,
    /// Where the other members replicate to it.
    pub peer_port: u16,
}

impl EtcdCluster {
    /// Member `i` (0 for `m1`).
    pub fn member(&self, i: usize) -> Member {
        assert!(i < MEMBERS, "etcd member index {i} out of 0..{MEMBERS}");
        Member { index: i, name: member_name(i), client_port: client_port(self.base, i), peer_port: peer_port(self.base, i) }
    }

    /// Member `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(self.member(i).name)
    }

    /// Member `i`'s log (its stderr, appended across restarts).
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.member(i).name))
    }

    pub(super) fn pid_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.pid", self.member(i).name))
    }

    /// Member `i`'s pid, when its recorded process still runs (same pid,
    /// same start time, not a zombie).
    pub fn pid(&self, i: usize) -> Option<u32> {
        let text = fs::read_to_string(self.pid_file(i)).ok()?;
        let (pid, started) = text.trim().split_once(' ')?;
        let (pid, started): (u32, u64) = (pid.parse().ok()?, started.parse().ok()?);
        match crate::sysinfo::state_and_start(pid) {
            Some((state, now)) if now == started && state != 'Z' => Some(pid),
            _ => None,
        }
    }

    pub(super) fn check_ports_free(&self, i: usize) -> Result<()> {
        if self.hosts.is_none() {
            // On this machine a member has no port, only its sockets, in the
            // cluster's own folder; etcd replaces a socket file it left.
            return self.check_socket_paths(i);
        }
        let member = self.member(i);
        for (port, what) in [(member.client_port, "client"), (member.peer_port, "peer")] {
            // Where the member will listen: inside its host, when it has one.
            let at = std::net::SocketAddr::new(HOST.parse().expect("an address"), port);
            let probe = match self.member_host(i) {
                Some(host) => host.listen(at),
                None => TcpListener::bind(at),
            };
            match probe {
                Ok(_probe) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    let holder = diagnose::who_listens(port).unwrap_or_else(|| {
                        "a connection, not a listener: the kernel gave the port to an outgoing connection \
                         (see /proc/sys/net/ipv4/ip_local_port_range)"
                            .into()
                    });
                    return Err(format!(
                        "port {port} on {HOST} ({what} port of etcd member {}) is already in use by {holder}, which is \
                         not the lab's etcd cluster ({}). The lab does not touch it: stop that process, free the port \
                         or choose another block with LAB_ETCD_PORT_BASE, then run again",
                        member.name,
                        self.dir.display()
                    )
                    .into());
                }
                Err(e) => return Err(e).context(format!("probing port {port}")),
            }
        }
        Ok(())
    }

    /// Member `i`'s sockets fit a Unix socket address (108 bytes with its
    /// terminator) when named from the root, as the lab's client does.
    fn check_socket_paths(&self, i: usize) -> Result<()> {
        let member = self.member(i);
        for port in [member.client_port, member.peer_port] {
            let path = self.dir.join(socket_name(i, port));
            if path.as_os_str().len() > 107 {
                return Err(format!("the socket path {} is longer than a Unix socket allows; set LAB_ETCD_DIR to a shorter folder", path.display()).into());
            }
        }
        Ok(())
    }

    /// etcd's command line for member `i`.
    fn flags(&self, i: usize) -> Vec<String> {
        // A member's own address: on this machine a Unix socket in the
        // cluster's folder (its working directory, see `spawn`), which no
        // other account can enter: no port of the lab's is left for another
        // account to take while a member restarts, and neither the login's
        // token nor the raft traffic between members crosses one. On a host
        // of the lab's network, its host's address, where the others reach
        // it across the switch.
        let url = |j: usize, port: u16| match self.hosts {
            None => format!("unix://{}", socket_name(j, port)),
            Some(_) => format!("http://{}:{port}", self.member_ip(j)),
        };
        let member = self.member(i);
        let initial_cluster: Vec<String> =
            (0..MEMBERS).map(|j| format!("{}={}", self.member(j).name, url(j, self.member(j).peer_port))).collect();
        // Clients: its address, and on a host its loopback too, where the
        // lab reads it from inside the host.
        let mut listen_clients = url(i, member.client_port);
        if self.hosts.is_some() {
            listen_clients = format!("http://{HOST}:{},{listen_clients}", member.client_port);
        }
        [
            ("--name", member.name.clone()),
            ("--data-dir", self.data_dir(i).display().to_string()),
            ("--listen-client-urls", listen_clients),
            ("--advertise-client-urls", url(i, member.client_port)),
            ("--listen-peer-urls", url(i, member.peer_port)),
            ("--initial-advertise-peer-urls", url(i, member.peer_port)),
            // Used only on a member's first start; afterwards its data says
            // who the members are. The token carries the port block, so two
            // lab clusters can never join each other.
            ("--initial-cluster", initial_cluster.join(",")),
            ("--initial-cluster-token", format!("{NAME}-{}", self.base)),
            ("--initial-cluster-state", "new".into()),
            ("--heartbeat-interval", HEARTBEAT.as_millis().to_string()),
            ("--election-timeout", ELECTION_TIMEOUT.as_millis().to_string()),
            // bcrypt's lowest cost for the stored password: every login
            // (each holder's, each gateway's) made etcd spend ~60 ms of
            // processor at the default cost of 10. The cost only slows a
            // guess at a stolen hash, and the one password is 128 random
            // bits (`credentials::random_password`), far beyond guessing.
            ("--bcrypt-cost", "4".into()),
            ("--logger", "zap".into()),
            ("--log-outputs", "stderr".into()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .collect()
    }

    /// Starts member `i`'s process for `owner` and records its pid.
    pub(super) fn spawn(&self, i: usize, owner: &Owner) -> Result<()> {
        let name = self.member(i).name;
        let log = fs::OpenOptions::new().create(true).append(true).open(self.log_path(i))?;
        let mut cmd = Command::new(&self.bin);
        // The cluster's folder: where etcd makes the members' Unix sockets,
        // whose URLs name them relative to it.
        cmd.current_dir(&self.dir);
        if self.hosts.is_none() {
            // A member killed with SIGKILL leaves its socket files, and etcd
            // 3.4 refuses to listen on a client socket whose file exists.
            // They are in the lab's own folder, and this member is not running.
            let folder = crate::safe_dir::SafeDir::open(&self.dir)?;
            let member = self.member(i);
            for port in [member.client_port, member.peer_port] {
                folder.remove_file(&socket_name(i, port))?;
            }
        }
        cmd.args(self.flags(i)).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // etcd also reads every flag from ETCD_* variables: none of the
        // caller's may change the member the lab asked for.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ETCD_") {
                cmd.env_remove(key);
            }
        }
        let spawned = match owner {
            Owner::Run { .. } => {
                // Its own process group: a Ctrl-C at the terminal reaches the
                // lab only, and the lab's cleanup ends the member.
                cmd.process_group(0);
                // If the run dies without cleaning up (SIGKILL, a crash),
                // the kernel kills the member.
                interrupt::tie_to_lab(&mut cmd, Signal::SIGKILL);
                let mut members = RUN_MEMBERS.lock();
                // Checked under the registry's lock: the interrupt cleanup
                // has either run already (then nothing new starts) or will
                // find this member in the registry.
                if interrupt::requested() {
                    return Err("interrupted".into());
                }
                interrupt::on_stop(stop_run_members);
                // Born inside its host, when it has one.
                if let Some(host) = self.member_host(i) {
                    host.enter(&mut cmd, None, vec![])?;
                }
                let child = cmd.spawn().with_context(|| format!("starting etcd member {name} ({})", self.bin.display()))?;
                let pid = Pid::from_raw(child.id() as i32);
                members.push(RunMember { pid, pid_file: self.pid_file(i) });
                pid
            }
            Owner::Reader => {
                // SAFETY: runs in the forked child before exec; setsid(2) is
                // async-signal-safe and nothing is allocated.
                unsafe {
                    // A session of its own: no terminal's hang-up or Ctrl-C
                    // reaches it; it lives until `stop`.
                    cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
                }
                let child = cmd.spawn().with_context(|| format!("starting etcd member {name} ({})", self.bin.display()))?;
                // Not waited for: it outlives this process (and is reaped by
                // whoever inherits it, or by `stop` if this process stops it).
                Pid::from_raw(child.id() as i32)
            }
        };
        // spawn() returns after the exec succeeded, so /proc has the process.
        let started = owner::start_time(spawned.as_raw() as u32).ok_or_else(|| format!("etcd member {name} vanished at once"))?;
        fs::write(self.pid_file(i), format!("{spawned} {started}\n"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::client_sockets;
    use crate::etcd_client::Gateway;
    use super::*;

    /// On this machine every member listens on two Unix sockets in the
    /// cluster's folder, named by its ports of the block, and on no TCP
    /// port at all; the gateway reaches the client sockets by full path.
    #[test]
    fn members_use_sockets_named_by_the_port_block() {
        let dir = PathBuf::from("/srv/lab/etcd-26");
        let cluster = EtcdCluster {
            dir: dir.clone(),
            base: 26430,
            bin: PathBuf::from("/usr/bin/etcd"),
            version: "3.4.23".into(),
            gateway: Gateway::new(client_sockets(&dir, 26430)),
            hosts: None,
        };
        let ports: Vec<(u16, u16)> = (0..MEMBERS).map(|i| (cluster.member(i).client_port, cluster.member(i).peer_port)).collect();
        assert_eq!(ports, [(26431, 26441), (26432, 26442), (26433, 26443)]);
        let flags = cluster.flags(1).join(" ");
        assert!(flags.contains("--name m2 --data-dir /srv/lab/etcd-26/m2"), "{flags}");
        assert!(flags.contains("--listen-client-urls unix://m2:26432 "), "{flags}");
        assert!(flags.contains("--listen-peer-urls unix://m2:26442 "), "{flags}");
        assert!(flags.contains("m1=unix://m1:26441,m2=unix://m2:26442,m3=unix://m3:26443"), "{flags}");
        assert!(!flags.contains("http://") && !flags.contains("127.0.0.1") && !flags.contains("0.0.0.0"), "{flags}");
        assert_eq!(cluster.gateway().members()[2].to_string(), "/srv/lab/etcd-26/m3:26433");
    }
}
