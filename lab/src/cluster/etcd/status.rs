//! What the cluster says about itself: each member's process and answer,
//! the leader etcd agrees on, the waits for a leader (after a start, a
//! restart, or a failover) and for a leader to step down, and the human
//! summary for `lab etcd status`.

use super::config::{socket_name, ELECTION_TIMEOUT, HEARTBEAT, HOST, MEMBERS, MIN_TTL, NAME};
use crate::etcd_client::{self, Leader, MemberStatus};
use super::member::Member;
use super::EtcdCluster;
use crate::cluster::diagnose;
use crate::owner::{self, Owner};
use crate::error::Result;
use crate::poll;
use std::time::Duration;

/// One member as `status` sees it.
#[derive(Clone, Debug)]
pub struct MemberState {
    /// Its name and ports.
    pub member: Member,
    /// Its pid, when its process runs.
    pub pid: Option<u32>,
    /// What it says about itself, when it answers.
    pub status: Option<MemberStatus>,
}

/// The cluster as `status` sees it.
#[derive(Clone, Debug)]
pub struct ClusterStatus {
    /// Each member.
    pub members: Vec<MemberState>,
    /// The leader etcd agrees on, if any.
    pub leader: Option<Leader>,
    /// Who started it.
    pub owner: Option<Owner>,
}

impl EtcdCluster {
    /// The leader, as etcd reports it now (see [`etcd_client::agreed_leader`]).
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.gateway.leader()
    }

    /// Waits until etcd reports a leader that every running member follows,
    /// within [`poll::BOUND`]. A member that exits meanwhile ends the wait
    /// with its log.
    pub fn wait_for_leader(&self) -> Result<Leader> {
        self.wait_for_leader_beyond(None)
    }

    /// Waits, like [`Self::wait_for_leader`], for a leader that is not
    /// `old` and that serves a later term than `old` did. etcd's status
    /// reports the term of the last entry a member *applied*: a member
    /// elected a moment ago still shows the old term until it has applied
    /// the empty entry every new leader appends to its log, so waiting for
    /// the term also waits for the new leader to be able to serve.
    pub fn wait_for_leader_after(&self, old: &Leader) -> Result<Leader> {
        self.wait_for_leader_beyond(Some(old))
    }

    /// Waits, like [`Self::wait_for_leader_after`], for a leader elected
    /// by the members `among` alone (F19's majority, while the old leader
    /// sits cut off in the minority and follows nobody).
    pub fn wait_for_leader_among(&self, old: &Leader, among: &[usize]) -> Result<Leader> {
        self.wait_for_leader_of(Some(old), among)
    }

    fn wait_for_leader_beyond(&self, old: Option<&Leader>) -> Result<Leader> {
        let running: Vec<usize> = (0..MEMBERS).filter(|&i| self.pid(i).is_some()).collect();
        self.wait_for_leader_of(old, &running)
    }

    /// Waits for a leader that every member of `followers` follows (and
    /// that succeeds `old`, when given).
    fn wait_for_leader_of(&self, old: Option<&Leader>, followers: &[usize]) -> Result<Leader> {
        let ready = poll::poll_until(poll::BOUND, Duration::from_millis(20), || -> Result<bool> {
            self.check_recorded_members_run()?;
            let statuses = self.gateway.statuses();
            let Some((_, id, term)) = etcd_client::agreed_leader(&statuses) else { return Ok(false) };
            let succeeds = old.is_none_or(|old| id != old.id && term > old.term);
            Ok(succeeds && followers.iter().all(|&i| statuses[i].as_ref().is_some_and(|s| s.leader == Some(id))))
        })?;
        let leader = self.leader()?;
        if !ready {
            // A leader that never got past `old` is handed back as it is,
            // for the caller's check to judge and show.
            if let (Some(_), Some(seen)) = (old, leader) {
                return Ok(seen);
            }
            let logs: Vec<String> = (0..MEMBERS).map(|i| self.log_path(i).display().to_string()).collect();
            return Err(format!("etcd cluster {NAME} has no leader after {:?}; see {}", poll::BOUND, logs.join(", ")).into());
        }
        leader.ok_or_else(|| format!("etcd cluster {NAME} lost its leader right after electing it").into())
    }

    /// Hands the leadership to member `to` (etcd's MoveLeader, asked of
    /// the leader, as the root user) and waits until every running member
    /// follows it: F19 starts from a leader it names, so its transcript can
    /// name the hosts on each side of its partition.
    pub fn move_leader_to(&self, to: usize) -> Result<Leader> {
        let leader = self.wait_for_leader()?;
        if leader.index == to {
            return Ok(leader);
        }
        let target = self.gateway.member_status(to)?.id;
        // MoveLeader: the leader sends the target its log and a TimeoutNow,
        // and the target campaigns at once (raft's leadership transfer).
        let request = serde_json::json!({ "targetID": target.to_string() });
        self.gateway.only(leader.index).call("/v3/maintenance/transfer-leadership", &request)?.map_err(|s| format!("moving etcd's leadership to {}: {s}", self.member(to).name))?;
        // The target, in the term its campaign began: a status read a
        // moment after the transfer may still name the old leader.
        let moved = self.wait_for_leader_after(&leader)?;
        if moved.index != to {
            return Err(format!("etcd's leader is {} after moving the leadership to {}", moved.name, self.member(to).name).into());
        }
        Ok(moved)
    }

    /// Each member's process and answer, and the leader.
    pub fn status(&self) -> Result<ClusterStatus> {
        let statuses = self.gateway.statuses();
        let members = (0..MEMBERS)
            .map(|i| MemberState { member: self.member(i), pid: self.pid(i), status: statuses[i].clone() })
            .collect();
        let leader = if etcd_client::agreed_leader(&statuses).is_some() { self.leader()? } else { None };
        Ok(ClusterStatus { members, leader, owner: owner::read(&self.dir)? })
    }

    /// A human summary, for `lab etcd status`.
    pub fn describe(&self) -> Result<String> {
        let status = self.status()?;
        let up = status.members.iter().filter(|m| m.pid.is_some()).count();
        let leader = match &status.leader {
            Some(l) => format!("leader {} (term {})", l.name, l.term),
            None => "no leader".into(),
        };
        let mut text = format!("etcd cluster {NAME}: {up} of {MEMBERS} members running, {leader}");
        for m in &status.members {
            let pid = m.pid.map(|p| format!("pid {p}")).unwrap_or_else(|| "stopped".into());
            let said = match &m.status {
                Some(s) => format!("id {:x}, revision {}", s.id, s.revision),
                None => "no answer".into(),
            };
            let (client, peer) = match &self.hosts {
                None => (self.dir.join(socket_name(m.member.index, m.member.client_port)).display().to_string(), socket_name(m.member.index, m.member.peer_port)),
                Some(_) => (format!("{HOST}:{}", m.member.client_port), format!("{HOST}:{}", m.member.peer_port)),
            };
            text.push_str(&format!("\n  {}: {pid}, client {client}, peer {peer}, {said}", m.member.name));
        }
        let owner = match status.owner {
            Some(Owner::Reader) => "the reader (stays up until stop)".to_owned(),
            Some(run @ Owner::Run { pid, .. }) if run.is_dead_run() => format!("lab run pid {pid}, which is gone (killed before its cleanup)"),
            Some(Owner::Run { pid, .. }) => format!("lab run pid {pid} (stops it at its end)"),
            None => "nobody".to_owned(),
        };
        text.push_str(&format!(
            "\n  etcd:    {} ({}), heartbeat {HEARTBEAT:?}, election timeout {ELECTION_TIMEOUT:?}, minimum lease ttl {MIN_TTL:?}\n  folder:  {}\n  owner:   {owner}",
            self.version,
            self.bin.display(),
            self.dir.display()
        ));
        Ok(text)
    }

    /// Waits, within three election timeouts, until member `i` no longer
    /// calls itself the leader (or no longer answers); says so when it
    /// still does (the stop goes on: the leader gets SIGTERM anyway, and
    /// SIGKILL after the stop's bound).
    pub(super) fn wait_for_step_down(&self, i: usize) {
        let bound = ELECTION_TIMEOUT * 3;
        let stepped_down = poll::poll_until(bound, Duration::from_millis(20), || {
            Ok::<_, ()>(self.gateway.member_status(i).map_or(true, |s| s.leader != Some(s.id)))
        });
        if stepped_down != Ok(true) {
            eprintln!("lab: etcd member {} still led {bound:?} after its followers stopped; stopping it as the leader", self.member(i).name);
        }
    }

    /// A member whose pid file is there but whose process is not: it exited
    /// on its own (bad flags, a port taken meanwhile, a corrupt data dir).
    fn check_recorded_members_run(&self) -> Result<()> {
        for i in 0..MEMBERS {
            if self.pid_file(i).exists() && self.pid(i).is_none() {
                let log = self.log_path(i);
                let text = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("(cannot read it: {e})"));
                return Err(format!("etcd member {} exited; its log {}:{}", self.member(i).name, log.display(), diagnose::tail(&text, 8)).into());
            }
        }
        Ok(())
    }
}
