//! F17 — a holder cut off from the lease store but not from the resource:
//! its renewals stop arriving, so its local deadline stops moving, and it
//! stops writing before the lease store declares the lease expired (the
//! margin at work); with its local check disabled, it writes late, across
//! the same partition, and the fence refuses the write.
//!
//! Four hosts of the lab's network (`crate::hosts`): holder-a, holder-b,
//! the lease store `b3-26-lease` on `lease`, the resource `b3-26-resource`
//! on `resource`. The fault is a real partition: the switch between the
//! hosts drops every IPv4 frame between holder-a and lease, silently, while
//! holder-a still reaches the resource and holder-b reaches both. Nobody
//! pauses A: it runs all along (`/proc` state S); what it loses is the
//! network path to one server.
//!
//! Every interleaving is forced by a server's own state: A waits before
//! its deadline check until the parent lets it go; the parent lets it go
//! (一) when the lease store's own clock shows less than a margin left
//! (so A's local deadline has passed, by arithmetic, and its lease has
//! not), and (二) once holder-b has written with the next token. The
//! partition is healed only after A's decision, so its stuck renewal (a
//! TCP segment the switch kept dropping) finally arrives and is refused.

use super::common::require;
use super::partitioned::{self, holder_on, on_servers, show_reach, Probe, LEASE_OFFSET};
use super::{Case, Lab, Need};
use crate::cluster::tied::drop_together;
use crate::cluster::tied::TiedServer;
use crate::db;
use crate::error::Result;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::{ending, exit_text};
use crate::hosts::{Network, Reach};
use crate::lease::{LeaseRow, LeaseStore};
use crate::params::{margin, LEASE, PART_SUMMARY, SCOPE, TTL};
use crate::poll;
use crate::resource::ResourceView;
use crate::stats::ms;
use crate::transcript::Transcript;
use std::time::Duration;

/// The case.
pub const CASE: Case = Case {
    id: "F17",
    title: |_| "网络分区：持有者连不上租约库、仍连得上资源库；本地截止时间让它在过期之前停手，关掉本地检查则由栅栏拒绝它迟到的写入".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Hosts],
};

/// The hosts, in the order of their addresses (10.26.0.1 …).
const HOSTS: [&str; 4] = ["holder-a", "holder-b", "lease", "resource"];

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let net = Network::create(&HOSTS)?;
    // The lease store boots while the resource starts.
    let lease = partitioned::launch_server(lab, "lease", LEASE_OFFSET, net.host("lease"))?;
    let resource = partitioned::start_server(lab, "resource", partitioned::RESOURCE_OFFSET, net.host("resource"))?;
    let lease = lease.ready()?;
    let hosts: Vec<String> = net.hosts().iter().map(|h| format!("{} {}", h.name(), h.addr())).collect();
    t.note(format!(
        "四台主机，各是一个网络命名空间，插在同一台虚拟交换机上：{}；租约库 {} 在 lease 上，资源库 {} 在 resource 上",
        hosts.join("、"),
        lease.server().name(),
        resource.server().name()
    ));
    for check in [true, false] {
        // Both stores from an empty schema, the two resets at once.
        partitioned::at_once(|| partitioned::fresh_resource(&resource), || db::setup::reloaded_databases(&lease.server().endpoint(), &[(db::LEASE_DB, db::LEASE_SCHEMA)]))?;
        let cut = cut_off(lab, t, &net, &lease, &resource, check);
        // Whatever happened, the next half (and the case's end) starts healed.
        net.heal()?;
        partitioned::keep_for_timeline(&[lease.server()], &[resource.server()]);
        cut?;
    }
    // The two servers stop at once; the network goes after them.
    drop_together(lease, resource);
    Ok(())
}

// ANCHOR: cut_off
/// One half: holder-a cut off from the lease store while it holds the
/// lease, with its local deadline check (`check`) or without it.
fn cut_off(lab: &Lab, t: &mut Transcript, net: &Network, lease: &TiedServer, resource: &TiedServer, check: bool) -> Result<()> {
    let (lease_at, resource_at) = (lease.server().network_endpoint()?, resource.server().network_endpoint()?);
    let (a_host, b_host) = (net.host("holder-a"), net.host("holder-b"));
    // The parent reads the lease store through its Unix socket, a file in
    // the lab's folder: no partition ever stands between them.
    let mut leases = LeaseStore::connect_to(&lease.server().endpoint(), "lab observer")?;
    t.note(if check { "（一）本地检查开着" } else { "（二）同一条时间线，A 带 --skip-deadline-check：写之前不看本地截止时间" });

    let a_args = HolderArgs { waits: vec![WaitPoint::BeforeCheck], skip_deadline_check: !check, ..HolderArgs::new("holder-a", "rows=700(A)") };
    let mut a = holder_on(lab, a_host, &on_servers(a_args, Some(&lease_at), &resource_at))?;
    let ready = t.check_eq(
        "A 在 holder-a 上获取 token=1，停在本地截止时间检查之前（续租线程照常续租）",
        Steps::from([Step::Acquired { token: 1 }, Step::Waiting]),
        a.next_steps(2)?,
    );
    require(ready, "holder-a is not holding and waiting")?;
    let acquired = leases.row(LEASE)?.ok_or("the lease has no row")?.expires_epoch;
    // A renews on its own timer (every RENEW_EVERY): waiting for that
    // renewal is the experiment's time, not the lab's overhead.
    let renewed = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::Error>(leases.row(LEASE)?.is_some_and(|r| r.expires_epoch > acquired))))?;
    t.check(renewed, "切断之前，A 的续租到达租约库：expires_at 向后推进了", || "expires_at never moved");

    net.split(&["holder-a"], &["lease"])?;
    t.note("故障注入：交换机丢弃 holder-a 与 lease 之间的每一个 IPv4 帧（nftables 的 bridge 表，drop）：两边发出的包都没有回音，也不报任何错；其余主机之间照常");
    let premise = show_reach(t, "从主机连服务器（一次 TCP 连接尝试，最多等 1s）", &[
        Probe { from: a_host, to: "lease", at: lease_at.socket_addr(), expect: Reach::Silent },
        Probe { from: a_host, to: "resource", at: resource_at.socket_addr(), expect: Reach::Answered },
        Probe { from: b_host, to: "lease", at: lease_at.socket_addr(), expect: Reach::Answered },
    ])?;
    require(premise, "the partition is not the one this case needs")?;

    if check {
        // Let A check only once the store's own clock shows less than a
        // margin left: its local deadline (the last renewal's send + ttl −
        // margin) has passed by then, and the lease has not.
        let mut left = 0.0;
        let below = poll::designed(|| {
            poll::poll_until(poll::BOUND, Duration::from_millis(2), || -> Result<bool> {
                left = leases.remaining_ms(LEASE)?;
                Ok(left < ms(margin(TTL)))
            })
        })?;
        t.check(
            below && left > 0.0,
            format!("A 的续租到不了租约库：租约库上它的租约只剩不到 margin={}ms，还没有过期", ms(margin(TTL))),
            || format!("remaining {left:.1}ms"),
        );
        a.send_line("go")?;
        t.check_eq_shown("放行 A：它自己发现本地截止时间已过，放弃写入", Steps::from([Step::DeadlinePassed]), Steps(vec![a.next_step()?]));
        t.check_eq_shown(
            "A 放弃时租约库上的租约行：仍是 holder-a/1 有效，A 在租约库宣布过期之前就停了手",
            "holder-a/1 held".to_owned(),
            LeaseRow::brief(leases.row(LEASE)?.as_ref()),
        );
    }
    leases.wait_until_expired(LEASE)?;
    t.check_eq("租约按租约库的时钟过期；A 一直在运行，没有被暂停（/proc 状态 S）", 'S', a.state()?);

    let b_args = on_servers(HolderArgs::new("holder-b", "rows=701(B)"), Some(&lease_at), &resource_at);
    let (b_steps, b_exit) = holder_on(lab, b_host, &b_args)?.rest_of_output()?;
    t.check_eq(
        "B 在 holder-b 上获取 token=2，写入、续租、释放",
        ending(&Steps::from([Step::Acquired { token: 2 }, Step::DeadlineOk, Step::Write { accepted: true, token: 2 }, Step::RenewAfterWrite { ok: true }, Step::Released]), "exit 0"),
        ending(&b_steps, &exit_text(b_exit)),
    );

    if !check {
        a.send_line("go")?;
        t.check_eq_shown(
            "放行 A：它不看截止时间，直接写；写入经交换机到达资源库（这条路没断），被栅栏拒绝",
            Steps::from([Step::Write { accepted: false, token: 1 }]),
            Steps(vec![a.next_step()?]),
        );
    }
    net.heal()?;
    t.note("恢复：交换机换上一个没有切口的分区。A 卡在路上的续租（被丢弃的 TCP 段，内核一直在重传）这才到达租约库");
    // A's stuck renewals arrive when the kernel next retransmits their
    // dropped segments, on TCP's own backing-off timer: by design too.
    let (a_rest, a_exit) = poll::designed(|| a.rest_of_output())?;
    let expected = if check { Steps::default() } else { Steps::from([Step::RenewAfterWrite { ok: false }, Step::LeaseLost]) };
    t.check_eq(
        if check { "A 随后退出：它的续租线程收到拒绝（B 已接手），没有写" } else { "A 的续租被拒，它不释放别人的租约，随后退出" },
        ending(&expected, "exit 0"),
        ending(&a_rest, &exit_text(a_exit)),
    );

    let mut view = ResourceView::connect_to(&resource.server().endpoint())?;
    t.check_eq_shown(
        "资源端：summary；fence_floor；A 被接受 | 被拒的写入次数",
        format!("rows=701(B) by holder-b token=2; 2; 0 | {}", if check { 0 } else { 1 }),
        format!("{}; {}; {} | {}", view.part_text(SCOPE, PART_SUMMARY)?, view.floor(SCOPE)?, view.attempts("holder-a", true)?, view.attempts("holder-a", false)?),
    );
    Ok(())
}
// ANCHOR_END: cut_off
