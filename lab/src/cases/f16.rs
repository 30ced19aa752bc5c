//! F16 — the lease on a three-member etcd cluster: F4's timeline is refused
//! by the same fence, and after the etcd leader is killed between two
//! acquires, the next token is still larger than every earlier one.
//!
//! The lease store is `etcd-26` (`cluster::etcd`), started by this run from
//! empty data (so its revisions, the tokens, start at 1 and the transcript
//! can lock them) and ended by it on every exit path: the cluster's drop at
//! the end of the case or on an error, the interrupt cleanup on Ctrl-C, the
//! kernel's parent-death signal if the run itself is killed. The members are
//! started and restarted from this thread, the case's, because that signal
//! follows the thread that started a member. The resource is `res26`, as in
//! every case: it sees only a token. The holders are the same `holder`
//! processes as F4's, with `--lease-backend etcd`.
//!
//! (一) F4's timeline ([`paused_holder::timeline_on`]) on etcd: A acquires
//! (its token is the lock key's create revision), keeps its lease alive,
//! passes its local check and is frozen with SIGSTOP; its keep-alives stop,
//! the etcd leader's lessor expires the lease and its revocation deletes the
//! key (asked of etcd, with a bound); B acquires with a larger revision and
//! writes; A resumes and `FENCED_SCOPE` refuses its write.
//!
//! (二) The leader killed: holder-c acquires and waits before its write; a
//! probe lease that is never renewed is read down to half its TTL; the
//! parent sends the leader's process SIGKILL, as a crash would. etcd elects
//! another leader (read from etcd: the member list, each member's status,
//! the leader's id and term). The probe's remaining TTL goes *up*: the new
//! leader restarts every countdown. holder-c's acquire is still there, its
//! keep-alives reach the new leader, its write passes; holder-d's token is
//! larger than every token issued before. Contrast F14, where a promoted
//! asynchronous standby issued token 2 a second time: an etcd acquire
//! returns only once a majority has it in its log, and a new leader can
//! only come from a member that has everything the majority committed.
//!
//! Parameters (`params.rs`): etcd counts a lease's TTL in whole seconds, so
//! the article's 1500 ms cannot be asked for. The holders use
//! [`ETCD_TTL`] = 2 s (the nearest whole second above it, and etcd's
//! minimum under its default timing), a margin of 400 ms and a keep-alive
//! every [`ETCD_RENEW_EVERY`] = 500 ms, the article's proportions; the
//! parent watches A renew for [`ETCD_OBSERVE`] = 4 s, twice the TTL. The
//! probe's TTL is [`TTL_PROBE`] = 4 s, and the leader dies when 2 s are left.
//!
//! What a reader choosing TTLs must know, shown in (二): etcd's leader keeps
//! every lease's countdown in its memory only, and a new leader starts each
//! one again at its full TTL plus an election timeout. A leader change makes
//! leases longer, never shorter: the holder's local deadline stays on the
//! safe side, but the lease of a holder that died lives up to a whole TTL
//! longer before anyone else can acquire it.
//!
//! Why this file stays whole: one file per case, and this
//! case's two timelines share its lease side and its cluster.

use super::common::{leader_text, lines_of, on_etcd, require, rest};
use super::paused_holder::{self, LeaseSide, Reading};
use super::{Case, Lab, Need};
use crate::call_log;
use crate::cluster::etcd::{EtcdCluster, ELECTION_TIMEOUT, HEARTBEAT, MEMBERS};
use crate::error::Result;
use crate::etcd_lease::{EtcdGrant, EtcdLeaseStore};
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::lease::LeaseService;
use crate::lease_stores::{median_acquire_ms, SAMPLES};
use crate::params::{margin, ETCD_OBSERVE, ETCD_RENEW_EVERY, ETCD_TTL, LEASE, SCOPE, TTL_PROBE, TTL_PROBE_KILL_AT};
use crate::poll;
use crate::stats::ms;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use std::path::Path;
use std::time::{Duration, Instant};

/// The case.
pub const CASE: Case = Case {
    id: "F16",
    title: |_| "租约放在三成员 etcd 上：F4 的时间线照样被栅栏拦下；两次获取之间杀掉 leader，token 仍然递增，租约倒计时被新 leader 重置".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Etcd],
};

/// The lease whose countdown is read across the leader change.
const PROBE: &str = "ttl-probe";

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let cluster = EtcdCluster::locate()?;
    // The experiment's own lease store, started for it as F14 builds its
    // standby: time waited by design, not the lab's overhead.
    poll::designed(|| cluster.start_fresh_for_run())?;
    let store = EtcdLeaseStore::new(cluster.gateway().another());
    t.note(format!(
        "租约库：etcd 集群 {}，三个成员 m1–m3，不监听任何 TCP 端口，客户端和成员之间都走集群目录里的 Unix 套接字；心跳 {}ms、选举超时 {}ms；本次运行从空数据启动它，用例结束时结束它",
        crate::cluster::etcd::NAME,
        HEARTBEAT.as_millis(),
        ELECTION_TIMEOUT.as_millis()
    ));
    // etcd lists members by id, and an id is a hash of the member's peer
    // URLs and the cluster token: the order follows the port block.
    let mut names: Vec<String> = store
        .gateway()
        .member_list()?
        .into_iter()
        .map(|(id, name)| name.ok_or_else(|| format!("etcd's member list has no name for member {id:x}")))
        .collect::<std::result::Result<_, String>>()?;
    names.sort();
    t.check_eq_shown("etcd 的成员列表（member list，按名字排序）", "m1, m2, m3".to_owned(), names.join(", "));
    t.check_eq_shown("空集群的 revision：还没有任何写入", 1, store.holding(LEASE)?.1);

    t.note(format!(
        "（一）F4 的时间线，租约在 etcd 上：持有者进程带 --lease-backend etcd，TTL={}ms（etcd 的 TTL 以整秒计）、每 {}ms 一次 keep-alive、margin {}ms；token 是锁键 {} 的 create_revision",
        ms(ETCD_TTL),
        ms(ETCD_RENEW_EVERY),
        ms(margin(ETCD_TTL)),
        crate::etcd_lease::key(LEASE)
    ));
    let mut side = EtcdSide { store: &store, tokens: Vec::new() };
    paused_holder::timeline_on(lab, t, FenceMode::FencedScope, false, &mut side)?;
    leader_killed(lab, t, &cluster, &mut side)?;

    // The timed acquires are the measurement this line reports, as F14's
    // are (its whole run is counted so): the experiment's time, not the
    // lab's overhead.
    let mut probe = store.another_session("lab")?;
    let median = poll::designed(|| median_acquire_ms(&mut probe, ETCD_TTL))?;
    t.figure("acquire_median_ms", median);
    t.note(format!("etcd 上一次获取（lease grant + txn：两次经 raft 的提交）的延迟中位数（{SAMPLES} 次）：{median:.1}ms"));

    // The cluster's one owner ends it here (SIGKILL, reaped); the pids
    // are asked of the kernel afterwards, not of the lab's records.
    let pids: Vec<Option<u32>> = (0..MEMBERS).map(|i| cluster.pid(i)).collect();
    drop(cluster);
    let alive = not_shown_ended(&pids, |pid| Path::new(&format!("/proc/{pid}")).exists());
    t.check_eq_shown(format!("用例结束：本次运行启动的 {} 个 etcd 成员进程都已结束并被回收（/proc）", pids.len()), 0, alive);
    Ok(())
}

/// Of the members the run started (one entry each, its pid while it ran),
/// how many are not shown to have ended: those whose process `exists`,
/// and those whose pid the run could not read, which it cannot show ended.
/// An empty list of pids proves nothing, so it cannot pass for three.
fn not_shown_ended(pids: &[Option<u32>], exists: impl Fn(u32) -> bool) -> usize {
    pids.iter().filter(|pid| pid.is_none_or(&exists)).count()
}

/// The etcd side of F4's timeline: the lock key, its create revision as
/// the token, expiry as the key's deletion.
struct EtcdSide<'a> {
    /// The parent's client.
    store: &'a EtcdLeaseStore,
    /// Every token the case has seen issued, oldest first.
    tokens: Vec<i64>,
}

impl EtcdSide<'_> {
    /// The lock key and the cluster's revision, as one reading.
    fn key_state(&self) -> Result<String> {
        let (holding, revision) = self.store.holding(LEASE)?;
        Ok(match holding {
            None => format!("no key, revision={revision}"),
            Some(h) => format!("{}/{} held, revision={revision}", h.holder, h.token),
        })
    }
}

impl LeaseSide for EtcdSide<'_> {
    fn holder(&self, args: HolderArgs) -> HolderArgs {
        on_etcd(args)
    }

    fn observe(&self) -> Duration {
        ETCD_OBSERVE
    }

    fn next_token(&mut self) -> Result<i64> {
        // The acquire's txn is the cluster's next write, and every write
        // raises the one revision counter by one: the key it creates gets
        // the revision after the current one.
        let token = self.store.holding(LEASE)?.1 + 1;
        self.tokens.push(token);
        Ok(token)
    }

    fn held_by(&mut self, holder: &str, token: i64) -> Result<(bool, String)> {
        let (holding, _) = self.store.holding(LEASE)?;
        let held = holding.as_ref().is_some_and(|h| h.holder == holder && h.token == token);
        Ok((held, self.key_state()?))
    }

    fn wait_until_expired(&mut self) -> Result<&'static str> {
        self.store.wait_until_free(LEASE)?;
        Ok("租约按 etcd leader 的时钟过期：它撤销了租约，锁键随之删除；此时 A 仍停止")
    }

    fn after_release(&mut self, b: i64) -> Result<Reading> {
        Ok(Reading {
            // The revoke deleted B's key: one write, the revision after B's.
            label: "A 恢复前 B 已释放（revoke）：锁键此刻不存在".into(),
            expected: format!("no key, revision={}", b + 1),
            actual: self.key_state()?,
        })
    }

    fn after_a(&mut self, b: i64, a_wrote: bool) -> Result<Reading> {
        Ok(Reading {
            label: if a_wrote {
                "A 之后 etcd 上没有任何写入：锁键仍不存在，revision 未变（A 的 keep-alive 被拒，它也没有释放别人的租约）".into()
            } else {
                "A 放弃之后 etcd 上没有任何写入：锁键仍不存在，revision 未变".into()
            },
            expected: format!("no key, revision={}", b + 1),
            actual: self.key_state()?,
        })
    }
}

// ANCHOR: leader_killed
/// (二): the leader killed between holder-c's acquire and holder-d's.
fn leader_killed(lab: &Lab, t: &mut Transcript, cluster: &EtcdCluster, side: &mut EtcdSide) -> Result<()> {
    let store = side.store;
    let old = cluster.leader()?.ok_or("etcd has no leader")?;
    t.note(format!("（二）两次获取之间杀掉 etcd 的 leader。此刻 {}", leader_text(&old)));

    let c_token = side.next_token()?;
    let c_args = side.holder(HolderArgs { waits: vec![WaitPoint::BeforeWrite], ..HolderArgs::new("holder-c", "rows=300(C)") });
    let mut c = HolderGuard::spawn(&lab.holder_bin, &c_args)?;
    let ready = t.check_eq(
        format!("holder-c 获取 token={c_token}，通过本地检查，停在写入之前（续租线程照常 keep-alive）"),
        Steps::from([Step::Acquired { token: c_token }, Step::DeadlineOk, Step::Waiting]),
        c.next_steps(3)?,
    );
    require(ready, "holder-c is not ready to write")?;

    let probe = probe_lease(t, side)?;
    let before = remaining_down_to(store, &probe, TTL_PROBE_KILL_AT)?;
    let killed_at = Instant::now();
    cluster.kill_member(old.index)?;
    t.note(format!(
        "故障注入：SIGKILL 发给 leader={} 的进程（无法捕获：它来不及交出 leadership，其余成员只能从心跳停止得知）",
        old.name
    ));
    // The election is what the experiment waits for; the check below
    // still judges what the wait returns.
    let new = poll::designed(|| cluster.wait_for_leader_after(&old))?;
    let elected = killed_at.elapsed();
    t.figure("election_ms", ms(elected));
    t.check(new.id != old.id && new.term > old.term, format!("etcd 选出新的 leader（不是被杀的成员，term 更大）：{}，杀掉之后 {:.1}ms", leader_text(&new), ms(elected)), || {
        format!("{} → {}", leader_text(&old), leader_text(&new))
    });
    let statuses = cluster.gateway().statuses();
    let answering = statuses.iter().flatten().count();
    let following = statuses.iter().flatten().filter(|s| s.leader == Some(new.id)).count();
    t.check_eq_shown(
        "member list 中的成员数；应答的成员数；其中跟随新 leader 的成员数",
        "3; 2; 2".to_owned(),
        format!("{}; {answering}; {following}", store.gateway().member_list()?.len()),
    );

    // Until the new leader has applied the first entry of its term, its
    // lessor still counts no lease down and reports "forever": wait for a
    // countdown, at most the probe's TTL.
    let after = remaining_down_to(store, &probe, TTL_PROBE)?;
    t.figure("remaining_before_s", before.as_secs() as f64);
    t.figure("remaining_after_s", after.as_secs() as f64);
    t.check(
        after > before,
        format!(
            "新 leader 重新开始了每个租约的倒计时：探针租约（TTL={}s，从未续租）切换前 remaining={}s，切换后 remaining={}s",
            TTL_PROBE.as_secs(),
            before.as_secs(),
            after.as_secs()
        ),
        || "the remaining TTL did not go up",
    );
    t.note(format!(
        "etcd 的租约倒计时只在 leader 的内存里（etcd 3.4 默认不把剩余时间写进日志）；新 leader 上任时把每个租约的到期时间重设为“现在 + TTL + 一个选举超时（{}ms）”。leader 变更只会让租约变长：持有者从发送时刻算起的本地截止时间仍在安全一侧，但一个已经死掉的持有者，它的租约从新 leader 上任起还要再过一个 TTL 加一个选举超时才到期，别人才能获取",
        ELECTION_TIMEOUT.as_millis()
    ));

    let holding = store.holding(LEASE)?.0.map_or("no key".to_owned(), |h| format!("{}/{}", h.holder, h.token));
    t.check_eq_shown("新 leader 上的锁键：holder-c 的获取还在（获取返回之前已写入多数派的日志）", format!("holder-c/{c_token}"), holding);
    // I1 under the new leader: the acquire txn's compare (the key must not
    // exist) refuses a second holder.
    let refused = store.acquire(LEASE, "holder-x", ETCD_TTL, margin(ETCD_TTL))?;
    t.check_eq_shown(
        "新 leader 上 holder-x 来获取：被拒，holder-c 仍持有",
        "none".to_owned(),
        refused.as_ref().map_or("none".into(), |g| format!("token={}", g.grant.token)),
    );
    if let Some(wrongly) = refused {
        store.release(&wrongly)?;
    }
    // A keep-alive that holder-c's renewer sent while the members were
    // electing comes back later than the election ends: part of the leader
    // change this timeline shows. Waited for on the calls holder-c
    // reports, so that the release below does not wait on it.
    let answered = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::error::Error>(call_log::in_flight("holder-c") == 0)))?;
    require(answered, "holder-c's keep-alive from the election never returned")?;
    c.send_line("go")?;
    t.check_eq(
        format!("放行 holder-c：token={c_token} 的写入被接受；它的 keep-alive 经新 leader 续上，随后释放并退出"),
        lines_of([Step::Write { accepted: true, token: c_token }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        rest(&mut c)?,
    );
    t.check_eq("探针租约撤销（revoke）", true, store.release(&probe)?);

    let d_token = side.next_token()?;
    let earlier = &side.tokens[..side.tokens.len() - 1];
    t.check(
        earlier.iter().all(|&e| d_token > e),
        format!("leader 变更之后的下一个 token={d_token} 大于此前发出的每一个 token {earlier:?}"),
        || format!("{d_token} vs {earlier:?}"),
    );
    let mut d = HolderGuard::spawn(&lab.holder_bin, &side.holder(HolderArgs::new("holder-d", "rows=301(D)")))?;
    t.check_eq_shown(
        "holder-d 获取并写入",
        lines_of([
            Step::Acquired { token: d_token },
            Step::DeadlineOk,
            Step::Write { accepted: true, token: d_token },
            Step::RenewAfterWrite { ok: true },
            Step::Released,
        ]),
        rest(&mut d)?,
    );
    t.note("对照 F14：异步复制的 PostgreSQL 在主库崩溃、备库提升之后把 token=2 又发了一次；etcd 的 revision 记在 raft 日志里，一次获取要等多数派写入日志才返回，而新 leader 只能是拥有全部已提交日志的成员，所以编号只会接着增大");

    let mut view = lab.view()?;
    let b_token = side.tokens[1];
    t.check_eq_shown(
        "资源端：fence_floor；被接受的写入的 token（B、holder-c、holder-d）",
        format!("{d_token}; [{b_token}, {c_token}, {d_token}]"),
        format!("{}; {:?}", view.floor(SCOPE)?, view.accepted_tokens(SCOPE)?),
    );

    poll::designed(|| cluster.restart_member(old.index))?;
    let revision = store.holding(LEASE)?.1;
    let mut seen = Vec::new();
    poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
        seen = cluster.gateway().statuses().iter().map(|s| s.as_ref().map(|s| s.revision)).collect();
        Ok(seen.iter().all(|r| *r == Some(revision)))
    }))?;
    let shown: Vec<String> = seen.iter().map(|r| r.map_or("no answer".into(), |r| r.to_string())).collect();
    t.check_eq_shown(
        "被杀的成员从自己的数据重启并追上日志：m1、m2、m3 各自报告的 revision",
        [revision.to_string(), revision.to_string(), revision.to_string()].join(", "),
        shown.join(", "),
    );
    Ok(())
}
// ANCHOR_END: leader_killed

/// The probe: a lease acquired by the parent and never renewed.
fn probe_lease(t: &mut Transcript, side: &mut EtcdSide) -> Result<EtcdGrant> {
    let token = side.next_token()?;
    let probe = side.store.acquire(PROBE, "lab observer", TTL_PROBE, margin(TTL_PROBE))?.ok_or("the probe lease is held")?;
    t.check_eq_shown(
        format!("探针租约 {PROBE}：父进程获取（TTL={}s），之后从不续租", TTL_PROBE.as_secs()),
        format!("token={token}"),
        format!("token={}", probe.grant.token),
    );
    Ok(probe)
}

/// Waits, asking etcd, until the probe's remaining TTL is down to `at`;
/// returns that reading. A lease that is gone is an error.
fn remaining_down_to(store: &EtcdLeaseStore, probe: &EtcdGrant, at: Duration) -> Result<Duration> {
    let mut seen = None;
    let reached = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
        seen = store.remaining_ttl(probe.lease_id)?;
        Ok(seen.is_some_and(|left| left <= at))
    }))?;
    match seen {
        Some(left) if reached => Ok(left),
        _ => Err(format!("the probe lease's remaining TTL did not come down to {at:?} (last seen {seen:?})").into()),
    }
}


#[cfg(test)]
mod tests {
    use super::not_shown_ended;

    /// A member whose pid was never read counts as alive: reading no pid
    /// is not seeing three processes end.
    #[test]
    fn a_member_without_a_pid_is_not_shown_ended() {
        let gone = |_| false;
        assert_eq!(not_shown_ended(&[Some(10), Some(11), Some(12)], gone), 0);
        assert_eq!(not_shown_ended(&[None, None, None], gone), 3);
        assert_eq!(not_shown_ended(&[Some(10), None, Some(12)], |pid| pid == 12), 2);
    }
}
