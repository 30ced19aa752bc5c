//! F18 — the GitHub outage of 21 October 2018, in miniature: the lease
//! store's primary is partitioned from its standby and from some holders,
//! the standby is promoted on the other side, and the old primary, still
//! running, still grants. Which configurations lose writes, and which
//! refuse them, depends on how the lease store replicates and on where the
//! fence lives.
//!
//! Five hosts of the lab's network: holder-a and the primary `lease-p` on
//! one side, holder-b and the standby `lease-s` on the other, the resource
//! on `resource`, reached from both sides. The standby streams from the
//! primary's address across the switch; the partition (the switch drops
//! every IPv4 frame between the two sides) cuts that stream the way a
//! broken link between two sites does, and cuts holder-a off from the
//! standby and holder-b off from the primary. Then the standby is promoted
//! (`pg_ctl promote`) while the primary keeps running: two primaries.
//!
//! The same timeline in three configurations:
//!
//! - (一) asynchronous replication, the fence on a separate store that no
//!   partition touches: holder-a's acquire on the old primary returns token
//!   2, which the standby never received; holder-b's on the promoted
//!   standby returns token 2 again. The resource accepts both holders'
//!   writes (equal tokens pass `<=`), and refuses holder-a only once the
//!   new side has issued a larger token.
//! - (二) asynchronous replication, the fence in the lease store's own
//!   servers (`res26` beside `lease26`, failing over with it; each side
//!   writes to its own primary): every write is accepted on its side, and
//!   the old primary's are gone from the promoted one, the store everyone
//!   uses afterwards.
//! - (三) synchronous replication, the fence on the separate store:
//!   holder-a's acquire on the old primary waits for a standby it cannot
//!   reach and never returns a grant; only the new side grants, and
//!   nothing is lost or needs refusing.
//!
//! Each timeline is forced by the servers' own state: the standby has
//! replayed the last grant before the cut (asked of it); holder-a waits
//! before each deadline check until the parent lets it go; its waiting
//! acquire is read from `pg_stat_activity`.

use super::common::{acquire, replayed, require, rest};
use super::partitioned::{self, holder_on, on_servers, show_reach, Probe, RESOURCE_OFFSET};
use super::{Case, Lab, Need};
use crate::cluster::replica::FailoverPair;
use crate::cluster::tied::{drop_together, TiedServer};
use crate::db::replication::{self, Mode, ReplicationView};
use crate::db::{LEASE_DB, LEASE_SCHEMA, RES_DB, RES_SCHEMA};
use crate::error::Result;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::{ending, exit_text, HolderGuard};
use crate::hosts::{Network, Reach};
use crate::lease::LeaseStore;
use crate::params::{PART_DETAIL, PART_SUMMARY, SCOPE, TTL};
use crate::poll;
use crate::resource::ResourceView;
use crate::stats::ms;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case {
    id: "F18",
    title: |_| "两个站点之间的分区与切换（GitHub 2018）：旧主库和被提升的备库同时发号；哪种配置丢写入，哪种拒绝写入".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Hosts],
};

/// The hosts, in the order of their addresses.
const HOSTS: [&str; 5] = ["holder-a", "holder-b", "lease-p", "lease-s", "resource"];

/// Where the resource's fence lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fence {
    /// On a store of its own, on host `resource`, which both sides reach.
    Separate,
    /// In the lease store's servers: `res26` beside `lease26` on the
    /// primary, replicated to the standby; each side writes to its primary.
    WithLeaseStore,
}

/// One configuration of the timeline.
struct Config {
    /// Its heading in the transcript.
    label: &'static str,
    /// How the lease store's primary commits.
    mode: Mode,
    /// Where the fence lives.
    fence: Fence,
}

const CONFIGS: [Config; 3] = [
    Config { label: "（一）异步复制；栅栏在独立的资源库上，两边都连得上它", mode: Mode::Async, fence: Fence::Separate },
    Config { label: "（二）异步复制；栅栏和租约表在同一组服务器上（res26 随租约库一起复制、一起切换，各侧写自己的主库）", mode: Mode::Async, fence: Fence::WithLeaseStore },
    Config { label: "（三）同步复制（remote_apply）；栅栏在独立的资源库上", mode: Mode::Sync, fence: Fence::Separate },
];

/// What one configuration came to, for the closing lines.
struct Outcome {
    /// Who got token 2.
    token_2: Vec<String>,
    /// holder-a's writes the resource accepted.
    accepted: usize,
    /// holder-a's writes it refused.
    refused: usize,
    /// holder-a's accepted writes that the report everyone reads after the
    /// failover no longer holds.
    lost: usize,
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let net = Network::create(&HOSTS)?;
    let pair = FailoverPair::on_hosts(&lab.cluster, net.host("lease-p"), net.host("lease-s"))?;
    // The resource boots while the pair's primary starts.
    let resource = partitioned::launch_server(lab, "resource", RESOURCE_OFFSET, net.host("resource"))?;
    pair.start_primary()?;
    let resource = resource.ready()?;
    let hosts: Vec<String> = net.hosts().iter().map(|h| format!("{} {}", h.name(), h.addr())).collect();
    t.note(format!(
        "五台主机插在同一台虚拟交换机上：{}；租约库主库 {} 在 lease-p 上，备库 {} 在 lease-s 上，从主库的地址流复制；独立的资源库 {} 在 resource 上",
        hosts.join("、"),
        pair.primary().name(),
        pair.standby().name(),
        resource.server().name()
    ));
    let mut outcomes = Vec::new();
    for config in &CONFIGS {
        let outcome = two_primaries(lab, t, &net, &pair, &resource, config);
        net.heal()?;
        // Both primaries' lease events; the writes where they were made.
        let writes = if config.fence == Fence::Separate { vec![resource.server()] } else { vec![pair.primary(), pair.standby()] };
        partitioned::keep_for_timeline(&[pair.primary(), pair.standby()], &writes);
        outcomes.push(outcome?);
    }
    for (config, o) in CONFIGS.iter().zip(&outcomes) {
        t.note(format!(
            "{}：token=2 发给 {}；holder-a 的写入被接受 {}、被拒 {}、被接受后又丢失 {}",
            &config.label[..config.label.find('）').map_or(0, |i| i + '）'.len_utf8())],
            o.token_2.join("、"),
            o.accepted,
            o.refused,
            o.lost
        ));
    }
    // The pair and the resource stop at once; the network goes after them.
    drop_together(pair, resource);
    Ok(())
}

// ANCHOR: two_primaries
/// One configuration: the cut between the sites, the promotion on the far
/// side, grants on both, and what the resource made of them.
fn two_primaries(lab: &Lab, t: &mut Transcript, net: &Network, pair: &FailoverPair, resource: &TiedServer, config: &Config) -> Result<Outcome> {
    t.note(config.label);
    let (separate, sync) = (config.fence == Fence::Separate, config.mode == Mode::Sync);
    let databases: &[(&str, &str)] = if separate { &[(LEASE_DB, LEASE_SCHEMA)] } else { &[(LEASE_DB, LEASE_SCHEMA), (RES_DB, RES_SCHEMA)] };
    // The pair made on this thread (it starts the servers), the separate
    // resource's reset at the same time on another.
    partitioned::at_once(|| partitioned::fresh_resource(resource), || replication::build_with(pair, config.mode, databases))?;
    let wanted = if sync { "streaming/sync" } else { "streaming/async" };
    t.check_eq_shown("lease-p 的 pg_stat_replication 中备库的 state/sync_state", wanted.to_owned(), replication::walsender_state(pair)?);

    let (p_at, s_at, r_at) = (pair.primary().network_endpoint()?, pair.standby().network_endpoint()?, resource.server().network_endpoint()?);
    // Each side writes to the fence it reaches: the separate store, or its own primary.
    let (a_res, b_res) = if separate { (r_at.clone(), r_at.clone()) } else { (p_at.clone(), s_at.clone()) };
    let mut on_standby = LeaseStore::connect_to(&pair.standby().endpoint(), "lab observer")?;
    let mut x = LeaseStore::connect_to(&pair.primary().endpoint(), "holder-x")?;
    let grant = acquire(&mut x, "holder-x", TTL)?;
    x.release(&grant)?;
    t.check_eq_shown("切断之前：holder-x 在主库获取 token=1 并释放，备库回放之后读到同一行", "holder-x/1 released".to_owned(), replayed(&mut on_standby, "holder-x/1 released")?);

    net.split(&["lease-p", "holder-a"], &["lease-s", "holder-b"])?;
    t.note("故障注入：交换机把 {lease-p, holder-a} 与 {lease-s, holder-b} 隔开（两侧之间的每个 IPv4 帧都被丢弃）；resource 不在任何一侧，两边都连得上");
    let (a_host, b_host, s_host) = (net.host("holder-a"), net.host("holder-b"), net.host("lease-s"));
    let mut probes = vec![
        Probe { from: a_host, to: "lease-p", at: p_at.socket_addr(), expect: Reach::Answered },
        Probe { from: a_host, to: "lease-s", at: s_at.socket_addr(), expect: Reach::Silent },
        Probe { from: b_host, to: "lease-s", at: s_at.socket_addr(), expect: Reach::Answered },
        Probe { from: b_host, to: "lease-p", at: p_at.socket_addr(), expect: Reach::Silent },
        Probe { from: s_host, to: "lease-p", at: p_at.socket_addr(), expect: Reach::Silent },
    ];
    if separate {
        probes.push(Probe { from: a_host, to: "resource", at: r_at.socket_addr(), expect: Reach::Answered });
        probes.push(Probe { from: b_host, to: "resource", at: r_at.socket_addr(), expect: Reach::Answered });
    }
    let premise = show_reach(t, "从主机连服务器（一次 TCP 连接尝试，最多等 1s）；lease-s→lease-p 即备库的复制链路", &probes)?;
    require(premise, "the partition is not the one this case needs")?;

    let a_args = HolderArgs { parts: vec![PART_SUMMARY.into(), PART_DETAIL.into()], waits: vec![WaitPoint::BeforeCheck], ..HolderArgs::new("holder-a", "rows=800(A)") };
    let mut a = holder_on(lab, a_host, &on_servers(a_args, Some(&p_at), &a_res))?;
    let a_token = if sync { old_side_waits(t, pair)? } else { Some(old_side_grants(t, &mut a)?) };
    let a_granted = a_token.is_some();

    let promoted = pair.promote_standby()?;
    t.note(format!("故障切换在另一侧：lease-s 上 pg_ctl promote，用时 {:.1}ms；lease-p 照常运行，没有人停掉它", ms(promoted)));
    let (mut p_view, mut s_view) = (ReplicationView::connect(&pair.primary().endpoint())?, ReplicationView::connect(&pair.standby().endpoint())?);
    t.check_eq_shown("两台服务器都接受写入：lease-p | lease-s 上 pg_is_in_recovery()", "false | false".to_owned(), format!("{} | {}", p_view.in_recovery()?, s_view.in_recovery()?));

    let b_args = HolderArgs { parts: vec![PART_SUMMARY.into(), PART_DETAIL.into()], ..HolderArgs::new("holder-b", "rows=801(B)") };
    let b_write = Step::Write { accepted: true, token: 2 };
    let b_steps = [Step::Acquired { token: 2 }, Step::DeadlineOk, b_write.clone(), Step::DeadlineOk, b_write, Step::RenewAfterWrite { ok: true }, Step::Released];
    let (b_ran, b_exit) = holder_on(lab, b_host, &on_servers(b_args, Some(&s_at), &b_res))?.rest_of_output()?;
    t.check_eq("holder-b 在 lease-s 上获取 token=2，写 summary 和 detail，都被接受，释放", ending(&Steps::from(b_steps), "exit 0"), ending(&b_ran, &exit_text(b_exit)));
    let b_token = match b_ran.first() {
        Some(Step::Acquired { token }) => *token,
        _ => return Err("holder-b printed no grant".into()),
    };
    let mut token_2: Vec<String> = Vec::new();
    if let Some(a_token) = a_token {
        t.exposes(a_token == b_token, format!("I2 被打破：token={b_token} 在 lease-p 上发给了 holder-a，在 lease-s 上又发给了 holder-b"), || format!("holder-a token={a_token}, holder-b token={b_token}"));
        token_2.extend((a_token == 2).then(|| "holder-a".to_owned()));
    }
    token_2.extend((b_token == 2).then(|| "holder-b".to_owned()));
    let c_args = HolderArgs { parts: vec![PART_DETAIL.into()], ..HolderArgs::new("holder-c", "rows=802(C)") };
    let c_steps = [Step::Acquired { token: 3 }, Step::DeadlineOk, Step::Write { accepted: true, token: 3 }, Step::RenewAfterWrite { ok: true }, Step::Released];
    t.check_eq(
        "新的一侧接着发号：holder-c（也在 holder-b 主机上）在 lease-s 上获取 token=3，写 detail，被接受",
        ending(&Steps::from(c_steps), "exit 0"),
        rest(&mut holder_on(lab, b_host, &on_servers(c_args, Some(&s_at), &b_res))?)?,
    );

    if a_granted {
        a.send_line("go")?;
        let (rest, status) = a.rest_of_output()?;
        let a_detail = Step::Write { accepted: !separate, token: 2 };
        t.check_eq_shown(
            if separate { "放行 A 写 detail：它在 lease-p 上续租一直成功、检查照样通过；栅栏已见过 token=3，拒绝它" } else { "放行 A 写 detail：它写自己一侧的主库，那里的 floor 只到 2，被接受" },
            ending(&Steps::from([Step::DeadlineOk, a_detail, Step::RenewAfterWrite { ok: true }, Step::Released]), "exit 0"),
            ending(&rest, &exit_text(status)),
        );
    } else {
        t.check_eq_shown("holder-a 的获取一直没有返回，一行也没打印；父进程用 SIGKILL 结束它（收尾，不是故障）", "signal 9".to_owned(), exit_text(a.kill()?));
    }

    // Where A wrote, and the report everyone reads after the failover: the
    // separate store both times, or the old primary and the promoted
    // standby. Each read through its server's Unix socket, which no
    // partition cuts.
    let (a_wrote_to, survivor_at) = if separate {
        (resource.server().endpoint(), resource.server().endpoint())
    } else {
        (pair.primary().endpoint(), pair.standby().endpoint())
    };
    let mut survivor = ResourceView::connect_to(&survivor_at)?;
    if separate {
        let mut history = vec!["holder-b summary 2 accepted", "holder-b detail 2 accepted", "holder-c detail 3 accepted"];
        if a_granted {
            history.insert(0, "holder-a summary 2 accepted");
            history.push("holder-a detail 2 refused");
        }
        t.check_eq_shown("资源库上的写入尝试，按记录顺序", history.join(", "), listed(survivor.attempts_on(SCOPE)?));
    } else {
        let mut old = ResourceView::connect_to(&pair.primary().endpoint())?;
        t.check_eq_shown(
            "两个主库上各自的写入尝试：lease-p | lease-s",
            "holder-a summary 2 accepted, holder-a detail 2 accepted | holder-b summary 2 accepted, holder-b detail 2 accepted, holder-c detail 3 accepted".to_owned(),
            format!("{} | {}", listed(old.attempts_on(SCOPE)?), listed(survivor.attempts_on(SCOPE)?)),
        );
    }
    let outcome = judge(&mut ResourceView::connect_to(&a_wrote_to)?, &mut survivor)?;
    match (separate, a_granted) {
        (true, true) => t.exposes(outcome.accepted == 1 && outcome.lost == 1, "资源端接受了两个持有者拿同一个 token=2 的写入：A 的 summary 被 B 以相同的 token 覆盖，无从分辨；只有对面的计数跑到前面之后，A 才被拒绝", || format!("accepted {}, lost {}", outcome.accepted, outcome.lost)),
        (false, _) => t.exposes(outcome.lost == 2, "A 被接受的两次写入只在 lease-p 上；被提升的 lease-s 成为大家使用的主库，那里没有它们：它们丢了", || format!("lost {}", outcome.lost)),
        (true, false) => t.check(outcome.accepted + outcome.refused == 0, "旧的一侧没有发出授予，A 一次也没写：没有写入丢失，也没有写入需要拒绝", || format!("accepted {}, refused {}", outcome.accepted, outcome.refused)),
    };
    Ok(Outcome { token_2, ..outcome })
}
// ANCHOR_END: two_primaries

/// Asynchronous: holder-a's acquire on the cut-off primary returns at
/// once, and it writes its summary. Returns the token it was granted.
fn old_side_grants(t: &mut Transcript, a: &mut HolderGuard) -> Result<i64> {
    let acquired = a.next_steps(2)?;
    let ready = t.check_eq("holder-a 在 lease-p 上获取 token=2（这次提交到不了备库），停在检查之前", Steps::from([Step::Acquired { token: 2 }, Step::Waiting]), acquired.clone());
    require(ready, "holder-a did not acquire token 2")?;
    let Some(Step::Acquired { token }) = acquired.first().cloned() else { unreachable!("checked above") };
    a.send_line("go")?;
    t.check_eq(
        "放行 A 写 summary：被接受；它停在下一次检查之前",
        Steps::from([Step::DeadlineOk, Step::Write { accepted: true, token: 2 }, Step::Waiting]),
        a.next_steps(3)?,
    );
    Ok(token)
}

/// Synchronous: holder-a's acquire commits on the primary and waits for
/// the standby, which it cannot reach. Returns `None`: no grant.
fn old_side_waits(t: &mut Transcript, pair: &FailoverPair) -> Result<Option<i64>> {
    let mut view = ReplicationView::connect(&pair.primary().endpoint())?;
    let mut seen = None;
    // By design: the experiment waits for the commit's wait to show, as F14 does.
    poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            seen = view.wait_event_of("holder-a")?;
            Ok(seen.as_deref() == Some("IPC/SyncRep"))
        })
    })?;
    t.check_eq_shown(
        "holder-a 在 lease-p 上的获取没有返回：它的提交在等备库确认（pg_stat_activity），旧的一侧发不出授予",
        "IPC/SyncRep".to_owned(),
        seen.unwrap_or_else(|| "none".into()),
    );
    Ok(None)
}

/// holder-a's writes as the stores recorded them: accepted and refused
/// where it wrote (`wrote_to`: the separate store, or the old primary),
/// and lost: accepted, and the part in the report `survivor` holds now is
/// not holder-a's.
fn judge(wrote_to: &mut ResourceView, survivor: &mut ResourceView) -> Result<Outcome> {
    let (accepted, refused) = (wrote_to.attempts("holder-a", true)? as usize, wrote_to.attempts("holder-a", false)? as usize);
    let mut lost = 0;
    for part in [PART_SUMMARY, PART_DETAIL] {
        let wrote = wrote_to.accepted_of("holder-a", part)? > 0;
        let kept = survivor.part(SCOPE, part)?.is_some_and(|p| p.writer == "holder-a");
        if wrote && !kept {
            lost += 1;
        }
    }
    Ok(Outcome { token_2: Vec::new(), accepted, refused, lost })
}

/// A resource's history as one line: `holder-a summary 2 accepted, …`.
fn listed(history: Vec<crate::vocabulary::WriteAttempt>) -> String {
    history.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
