//! F19 — a partition puts etcd's leader in the minority: it can neither
//! renew nor grant; the majority elects a new leader; a holder whose
//! client knows only the old leader loses its lease; the next token is
//! still larger, and the fence refuses the cut-off holder's late write.
//!
//! Six hosts of the lab's network: etcd's three members `m1`–`m3` on
//! `etcd-m1`…`etcd-m3` (each listening on its host's address; they
//! replicate to each other across the switch), holder-a, holder-b and the
//! resource. holder-a's client is given one endpoint, the member that leads
//! now; holder-b's the other two. The partition puts the leader and
//! holder-a on one side, the two other members and holder-b on the other;
//! the resource is reached from both.
//!
//! Nothing is killed (contrast F16): the old leader keeps running, and
//! answers on its own side. With no majority behind it, etcd's CheckQuorum
//! makes it step down; a grant asked of it is never committed; holder-a's
//! keep-alives, which only it receives, renew nothing the majority knows
//! of (a renewal lives in the leader's memory alone). On the other side
//! the two members elect a leader, which restarts every lease's countdown
//! and, with no keep-alive reaching it, revokes holder-a's lease and
//! deletes its lock key. Every step waits for what etcd itself reports
//! (each member's status, the lock key, the revision), read by the parent
//! over each member's host's own loopback, which no partition touches.

use super::common::{leader_text, lines_of, on_etcd, require, rest};
use super::partitioned::{self, holder_on, on_servers, show_reach, Probe};
use super::{Case, Lab, Need};
use crate::cluster::tied::TiedServer;
use crate::cluster::etcd::{EtcdCluster, ELECTION_TIMEOUT, MEMBERS};
use crate::error::Result;
use crate::etcd_lease::{grant_request, EtcdLeaseStore};
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::hosts::{Host, Network, Reach};
use crate::params::{ETCD_TTL, LEASE, PART_SUMMARY, SCOPE};
use crate::poll;
use crate::resource::ResourceView;
use crate::transcript::Transcript;
use std::net::SocketAddr;
use std::time::Duration;

/// The case.
pub const CASE: Case = Case {
    id: "F19",
    title: |_| "网络分区把 etcd 的 leader 隔进少数派：它既续不了租也发不出授予；多数派选出新 leader；只连着旧 leader 的持有者丢了租约，token 照样递增，栅栏拒绝它迟到的写入".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Etcd, Need::Hosts],
};

/// The hosts, in the order of their addresses.
const HOSTS: [&str; 6] = ["holder-a", "holder-b", "etcd-m1", "etcd-m2", "etcd-m3", "resource"];

/// How long the minority is given to grant an etcd lease: four election
/// timeouts. A healthy cluster grants in milliseconds here; a leader with a
/// majority behind it would have committed the grant many times over.
const MINORITY_BOUND: Duration = Duration::from_millis(4 * ELECTION_TIMEOUT.as_millis() as u64);

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let net = Network::create(&HOSTS)?;
    let member_hosts: Vec<Host> = (1..=MEMBERS).map(|i| net.host(&format!("etcd-m{i}")).clone()).collect();
    let cluster = EtcdCluster::locate()?.on_hosts(member_hosts.clone())?;
    // The resource boots while the experiment's own lease store starts
    // from empty data, as F16's (the members' election is the designed
    // wait; the resource's boot costs nothing beside it).
    let resource = partitioned::launch_server(lab, "resource", partitioned::RESOURCE_OFFSET, net.host("resource"))?;
    poll::designed(|| cluster.start_fresh_for_run())?;
    let resource = resource.ready()?;
    partitioned::fresh_resource(&resource)?;
    let hosts: Vec<String> = net.hosts().iter().map(|h| format!("{} {}", h.name(), h.addr())).collect();
    t.note(format!(
        "六台主机插在同一台虚拟交换机上：{}；etcd 的成员 m1–m3 各在一台 etcd-m* 上，彼此经交换机复制；父进程从每个成员自己的主机读它",
        hosts.join("、")
    ));
    let outcome = minority_leader(lab, t, &net, &cluster, &member_hosts, &resource);
    net.heal()?;
    partitioned::keep_for_timeline(&[], &[resource.server()]);
    outcome
}

// ANCHOR: minority_leader
fn minority_leader(lab: &Lab, t: &mut Transcript, net: &Network, cluster: &EtcdCluster, member_hosts: &[Host], resource: &TiedServer) -> Result<()> {
    let store = EtcdLeaseStore::new(cluster.gateway().another());
    // The leader is whoever won the first election; the case moves it to
    // m1, so that the same hosts end up on each side every run.
    let old = poll::designed(|| cluster.move_leader_to(0))?;
    let majority: Vec<usize> = (0..MEMBERS).filter(|&i| i != old.index).collect();
    let addrs = cluster.client_addrs();
    let (old_host, others) = (&member_hosts[old.index], majority.iter().map(|&i| &member_hosts[i]).collect::<Vec<_>>());
    t.note(format!("父进程用 etcd 的 MoveLeader 把 leadership 交给 m1（每次运行两侧都是同样的主机）：此刻 {}，在 {} 上", leader_text(&old), old_host.name()));
    let r_at = resource.server().network_endpoint()?;

    let a_token = store.holding(LEASE)?.1 + 1;
    let a_args = on_etcd(HolderArgs { waits: vec![WaitPoint::BeforeWrite], etcd_members: vec![addrs[old.index]], ..HolderArgs::new("holder-a", "rows=900(A)") });
    let mut a = holder_on(lab, net.host("holder-a"), &on_servers(a_args, None, &r_at))?;
    let ready = t.check_eq(
        format!("A 在 holder-a 上获取 token={a_token}（它的客户端只知道 leader 这一个成员），通过本地检查，停在写入之前"),
        Steps::from([Step::Acquired { token: a_token }, Step::DeadlineOk, Step::Waiting]),
        a.next_steps(3)?,
    );
    require(ready, "holder-a is not ready to write")?;
    // A client on the minority's side that knows only the old leader,
    // logged in (a raft write) while the cluster is still whole.
    let minority = EtcdLeaseStore::new(cluster.gateway().only(old.index));
    minority.holding(LEASE)?;

    let (one_side, other_side): (Vec<&str>, Vec<&str>) = (vec![old_host.name(), "holder-a"], others.iter().map(|h| h.name()).chain(["holder-b"]).collect());
    net.split(&one_side, &other_side)?;
    t.note(format!("故障注入：交换机把 {{{}}} 与 {{{}}} 隔开；resource 两边都连得上。没有进程被杀，也没有进程被暂停", one_side.join(", "), other_side.join(", ")));
    let (a_host, b_host) = (net.host("holder-a"), net.host("holder-b"));
    let peer = |i: usize| SocketAddr::new(member_hosts[i].addr().into(), cluster.member(i).peer_port);
    let premise = show_reach(t, "从主机连各端口（一次 TCP 连接尝试，最多等 1s）；旧 leader→多数派 是成员之间的复制端口", &[
        Probe { from: a_host, to: "旧 leader", at: addrs[old.index], expect: Reach::Answered },
        Probe { from: a_host, to: "多数派", at: addrs[majority[0]], expect: Reach::Silent },
        Probe { from: b_host, to: "多数派", at: addrs[majority[0]], expect: Reach::Answered },
        Probe { from: b_host, to: "旧 leader", at: addrs[old.index], expect: Reach::Silent },
        Probe { from: old_host, to: "多数派", at: peer(majority[1]), expect: Reach::Silent },
        Probe { from: a_host, to: "resource", at: r_at.socket_addr(), expect: Reach::Answered },
        Probe { from: b_host, to: "resource", at: r_at.socket_addr(), expect: Reach::Answered },
    ])?;
    require(premise, "the partition is not the one this case needs")?;

    let new = poll::designed(|| cluster.wait_for_leader_among(&old, &majority))?;
    t.check(new.id != old.id && new.term > old.term, format!("多数派选出新的 leader（不是旧 leader，term 更大）：{}", leader_text(&new)), || {
        format!("{} → {}", leader_text(&old), leader_text(&new))
    });
    let mut own = None;
    let stepped_down = poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            own = cluster.gateway().member_status(old.index).ok();
            Ok(own.as_ref().is_some_and(|s| s.leader != Some(old.id)))
        })
    })?;
    t.check(stepped_down, "旧 leader 还在运行、还在应答，但不再自称 leader：听不到多数派，它就退位（etcd 的 CheckQuorum）", || format!("{own:?}"));
    let asked = poll::designed(|| minority.gateway().call_within("/v3/lease/grant", &grant_request(ETCD_TTL), MINORITY_BOUND));
    let granted = match asked {
        Ok(Ok(_)) => "granted",
        _ => "no grant",
    };
    t.check_eq_shown(format!("少数派一侧向旧 leader 申请 etcd 租约，{}ms 内：拿不到（授予要经多数派写进日志）", MINORITY_BOUND.as_millis()), "no grant", granted);

    store.wait_until_free(LEASE)?;
    t.check_eq("A 的 keep-alive 只到得了旧 leader，续不上：新 leader 让 A 的 etcd 租约到期，锁键被删除；A 一直在运行（/proc 状态 S）", 'S', a.state()?);
    let b_token = store.holding(LEASE)?.1 + 1;
    let b_args = on_etcd(HolderArgs { etcd_members: majority.iter().map(|&i| addrs[i]).collect(), ..HolderArgs::new("holder-b", "rows=901(B)") });
    t.check_eq(
        format!("B 在 holder-b 上经多数派获取 token={b_token}，写入、续租、释放"),
        lines_of([Step::Acquired { token: b_token }, Step::DeadlineOk, Step::Write { accepted: true, token: b_token }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        rest(&mut holder_on(lab, b_host, &on_servers(b_args, None, &r_at))?)?,
    );
    t.check(b_token > a_token, format!("token 照样递增：B 的 token={b_token} 大于 A 的 token={a_token}"), || format!("{b_token} <= {a_token}"));

    a.send_line("go")?;
    t.check_eq_shown(
        format!("放行 A：它以 token={a_token} 写入，写入到达资源库，被栅栏拒绝"),
        Steps::from([Step::Write { accepted: false, token: a_token }]),
        Steps(vec![a.next_step()?]),
    );
    net.heal()?;
    t.note("恢复：交换机换上一个没有切口的分区；旧 leader 重新连上多数派");
    // A's keep-alive went to the old leader before the heal. That member,
    // without a leader, holds it (etcd waits for one before it forwards a
    // keep-alive), and A's client asks again after each attempt timeout;
    // it is answered once the member has rejoined the majority, at etcd's
    // election timers and the client's: the experiment's time, not the
    // lab's overhead.
    let a_rest = poll::designed(|| rest(&mut a))?;
    t.check_eq("A 写后的 keep-alive 经重新连上的旧成员转给现在的 leader：租约已不存在，A 不释放别人的租约，随后退出", lines_of([Step::RenewAfterWrite { ok: false }, Step::LeaseLost]), a_rest);

    let whole = poll::designed(|| cluster.wait_for_leader())?;
    let revision = store.holding(LEASE)?.1;
    let mut seen = Vec::new();
    poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            seen = cluster.gateway().statuses().iter().map(|s| s.as_ref().map(|s| (s.leader == Some(whole.id), s.revision))).collect();
            Ok(seen.iter().all(|s| *s == Some((true, revision))))
        })
    })?;
    let shown = |s: &Option<(bool, i64)>| s.map_or("no answer".into(), |(follows, r)| format!("{} {r}", if follows { "follows" } else { "elsewhere" }));
    t.check_eq_shown(
        "恢复之后三个成员跟随同一个 leader，revision 相同（旧 leader 追上了它错过的日志）",
        vec![shown(&Some((true, revision))); MEMBERS].join(", "),
        seen.iter().map(shown).collect::<Vec<_>>().join(", "),
    );

    let mut view = ResourceView::connect_to(&resource.server().endpoint())?;
    t.check_eq_shown(
        "资源端：summary；fence_floor；A 被接受 | 被拒的写入次数",
        format!("rows=901(B) by holder-b token={b_token}; {b_token}; 0 | 1"),
        format!("{}; {}; {} | {}", view.part_text(SCOPE, PART_SUMMARY)?, view.floor(SCOPE)?, view.attempts("holder-a", true)?, view.attempts("holder-a", false)?),
    );
    Ok(())
}
// ANCHOR_END: minority_leader
