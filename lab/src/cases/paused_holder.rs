//! The timeline of F4, F5 and F16, with two parameters: the resource mode,
//! and the lease store under it ([`LeaseSide`]).
//!
//! Holder A, a separate process, acquires (ttl 1500 ms), renews in the
//! background every 400 ms, passes its local deadline check and stops just
//! before its write. The parent watches the lease stay valid for 3000 ms
//! (twice the ttl: only renewal can explain that), then freezes A with
//! SIGSTOP. The renewer freezes with it, the lease expires by the database
//! clock, and holder B, a second process, acquires token 2, writes, renews and
//! releases. The parent writes A's release line and sends SIGCONT: A writes
//! with token 1, and its renewal fails.
//!
//! The lease side behaves the same in every mode. Only the resource decides
//! whether A's stale report replaces B's.
//!
//! On etcd (F16) the same holders run with `--lease-backend etcd` and etcd's
//! parameters (ttl 2 s, renewal 500 ms); the lease expires by the etcd
//! leader's clock, which deletes the key, and the tokens are the key's
//! create revisions. Which token comes next, who holds the lease, and how
//! its expiry shows are the store's to say: the timeline asks its
//! [`LeaseSide`], and expects what the store itself predicts.

use super::common::require;
use super::Lab;
use crate::error::Result;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::{ending, exit_text, HolderGuard};
use crate::lease::LeaseStore;
use crate::params::{LEASE, OBSERVE, PART_SUMMARY, SCOPE};
use crate::stats::ms;
use crate::poll;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use std::time::Duration;

// ANCHOR: lease_side
/// The lease store under the timeline, as the parent watches it: the
/// `lease` row in PostgreSQL (F4, F5) or the lock key on etcd (F16).
pub trait LeaseSide {
    /// A holder's parameters on this store: its backend, ttl, renewal, margin.
    fn holder(&self, args: HolderArgs) -> HolderArgs;
    /// How long the parent watches A renew before freezing it: twice the ttl.
    fn observe(&self) -> Duration;
    /// The token the next acquire will issue, as the store predicts it.
    fn next_token(&mut self) -> Result<i64>;
    /// Whether `holder` holds the lease now with `token`; and what the store
    /// shows, for a failed check.
    fn held_by(&mut self, holder: &str, token: i64) -> Result<(bool, String)>;
    /// Waits, asking the store, until it has ended A's holding by its own
    /// clock; returns the line that says so.
    fn wait_until_expired(&mut self) -> Result<&'static str>;
    /// The store once B has released its holding (token `b`).
    fn after_release(&mut self, b: i64) -> Result<Reading>;
    /// The store once A has ended, B's release untouched; `a_wrote`: A went
    /// on to its write (not stopped by its own deadline check).
    fn after_a(&mut self, b: i64, a_wrote: bool) -> Result<Reading>;
}

/// One reading of the store, for one `check_eq` line.
pub struct Reading {
    /// The line.
    pub label: String,
    /// What the store should show.
    pub expected: String,
    /// What it shows.
    pub actual: String,
}
// ANCHOR_END: lease_side

/// The article's store: the `lease` row in `lease26`, and the article's
/// parameters (the holder's defaults).
pub struct PostgresSide {
    /// The parent's own session, `lab observer`.
    leases: LeaseStore,
}

impl PostgresSide {
    /// Connects the observer.
    pub fn connect(lab: &Lab) -> Result<PostgresSide> {
        Ok(PostgresSide { leases: lab.leases("lab observer")? })
    }

    /// The row as `holder/token released`, the form the last check compares.
    fn row_state(&mut self) -> Result<(String, i64, bool)> {
        let row = self.leases.row(LEASE)?.ok_or("no lease row")?;
        Ok((row.holder, row.token, row.released))
    }
}

impl LeaseSide for PostgresSide {
    fn holder(&self, args: HolderArgs) -> HolderArgs {
        // The defaults are the article's F4 parameters (params.rs).
        args
    }

    fn observe(&self) -> Duration {
        OBSERVE
    }

    fn next_token(&mut self) -> Result<i64> {
        // The acquire inserts token 1, or sets token + 1 (ACQUIRE).
        Ok(self.leases.row(LEASE)?.map_or(1, |row| row.token + 1))
    }

    fn held_by(&mut self, holder: &str, token: i64) -> Result<(bool, String)> {
        let row = self.leases.row(LEASE)?.ok_or("no lease row")?;
        Ok((row.held && row.holder == holder && row.token == token, row.to_string()))
    }

    fn wait_until_expired(&mut self) -> Result<&'static str> {
        self.leases.wait_until_expired(LEASE)?;
        Ok("租约按数据库时钟过期，此时 A 仍停止")
    }

    fn after_release(&mut self, b: i64) -> Result<Reading> {
        let (_, token, released) = self.row_state()?;
        Ok(Reading {
            label: "A 恢复前租约已被 B 释放：租约表此刻空闲".into(),
            expected: format!("released token={b}"),
            actual: format!("{} token={token}", if released { "released" } else { "not released" }),
        })
    }

    fn after_a(&mut self, b: i64, a_wrote: bool) -> Result<Reading> {
        let (holder, token, released) = self.row_state()?;
        Ok(Reading {
            label: if a_wrote {
                format!("租约行最后仍是 holder-b/{b}（已释放）：A 的失败续租没有改动它")
            } else {
                format!("租约行最后仍是 holder-b/{b}（已释放）：A 放弃后没有再碰它")
            },
            expected: format!("holder-b/{b} released"),
            actual: format!("{holder}/{token} {}", if released { "released" } else { "not released" }),
        })
    }
}

/// Whether the resource in `mode` refuses a stale token's rewrite of a part
/// that a newer token already wrote, when the two writes do not overlap in
/// time, as in this timeline. Every mode but `Unfenced` and `VersionCas`
/// (which reads the version afresh, after B's write) refuses that one; F6,
/// F7 and F34 show the races and gaps that tell the others apart.
fn refuses_serial_stale_rewrite(mode: FenceMode) -> bool {
    !matches!(mode, FenceMode::Unfenced | FenceMode::VersionCas)
}

/// Where A is frozen, for the case titles.
pub fn pause_point(pause_before_check: bool) -> &'static str {
    if pause_before_check {
        "A 在本地截止时间检查之前被 SIGSTOP"
    } else {
        "A 通过写前检查后被 SIGSTOP"
    }
}

fn holder(side: &impl LeaseSide, name: &str, content: &str, mode: FenceMode, wait: WaitPoint) -> HolderArgs {
    side.holder(HolderArgs { mode, waits: vec![wait], ..HolderArgs::new(name, content) })
}

/// F4 and F5: the timeline on the article's store, with the reader's
/// `--pause-before-check`.
pub fn timeline(lab: &Lab, t: &mut Transcript, mode: FenceMode) -> Result<()> {
    timeline_on(lab, t, mode, lab.options.pause_before_check, &mut PostgresSide::connect(lab)?)
}

// ANCHOR: timeline
/// Runs the timeline with the resource in `mode`, the lease on `side`.
pub fn timeline_on(lab: &Lab, t: &mut Transcript, mode: FenceMode, pause_before_check: bool, side: &mut impl LeaseSide) -> Result<()> {
    let mut view = lab.view()?;

    let wait = if pause_before_check { WaitPoint::BeforeCheck } else { WaitPoint::BeforeWrite };
    let a_args = holder(side, "holder-a", "rows=200(A)", mode, wait);
    let a_token = side.next_token()?;
    let mut a = HolderGuard::spawn(&lab.holder_bin, &a_args)?;
    let acquired = a.next_step()?;
    let acquired_ok = t.check_eq_shown(format!("A 获取租约，token={a_token}"), Step::Acquired { token: a_token }, acquired);
    require(acquired_ok, &format!("holder-a did not acquire token {a_token}"))?;
    if !pause_before_check {
        a.expect_step(Step::DeadlineOk)?;
    }
    let waiting = a.next_step()?;
    let stopped_where = if pause_before_check { "A 停在本地截止时间检查之前，等待放行行" } else { "A 通过本地截止时间检查，停在写入之前，等待放行行" };
    t.check_eq(stopped_where, Step::Waiting, waiting);

    // A fixed observation window, not a synchronisation: whatever happens
    // in it, the check below asks the store whether the lease is held.
    poll::designed(|| std::thread::sleep(side.observe()));
    let (held, shown) = side.held_by("holder-a", a_token)?;
    t.check(held, format!("A 未暂停期间（等待 {}ms，TTL={}ms）续租维持租约", ms(side.observe()), a_args.ttl_ms), || shown);

    let state = a.stop()?;
    t.check_eq_shown("SIGSTOP 后 /proc 中 A 的状态为 T（续租线程同样停止）", 'T', state);
    t.check_eq("/proc/<pid>/task 中名为 renewer 的线程同样处于 T 状态", "T".to_owned(), a.thread_state("renewer")?);
    let expired = side.wait_until_expired()?;
    t.check_eq(expired, 'T', a.state()?);

    let b_token = side.next_token()?;
    let mut b = HolderGuard::spawn(&lab.holder_bin, &holder(side, "holder-b", "rows=201(B)", mode, WaitPoint::None))?;
    let b_acquired = b.next_step()?;
    t.check_eq_shown(format!("B 获取租约，token={b_token}"), Step::Acquired { token: b_token }, b_acquired);
    b.expect_step(Step::DeadlineOk)?;
    t.check_eq_shown("B 写入被接受", Step::Write { accepted: true, token: b_token }, b.next_step()?);
    let b_end = b.next_steps(2)?;
    let b_status = b.wait_exit()?;
    t.check_eq(
        "B 续租成功、释放并退出",
        ending(&Steps::from([Step::RenewAfterWrite { ok: true }, Step::Released]), "exit 0"),
        ending(&b_end, &exit_text(b_status)),
    );
    let free = side.after_release(b_token)?;
    t.check_eq(free.label, free.expected, free.actual);
    t.check_eq("B 运行期间 A 一直停止", 'T', a.state()?);

    // The release line goes into the pipe first; SIGCONT then lets A read it.
    a.send_line("go")?;
    a.resume()?;
    // Everything A prints until it exits: the resource is read only after
    // A is gone, so nothing A does can land after the checks below.
    let (a_lines, a_status) = a.rest_of_output()?;
    let a_writes = !pause_before_check;
    let judged = if a_writes {
        let (write, renew) = (a_lines.at(0), a_lines.at(1));
        t.note(format!("A 恢复后：{write}；{renew}"));
        if refuses_serial_stale_rewrite(mode) {
            t.check_eq_shown("资源端拒绝 A 的旧 token", Steps::from([Step::Write { accepted: false, token: a_token }]), write);
        }
        t.check_eq_shown("A 的续租失败：token 已被取代", Steps::from([Step::RenewAfterWrite { ok: false }]), renew);
        2
    } else {
        let gave_up = a_lines.at(0);
        t.note(format!("A 恢复后：{gave_up}"));
        t.check_eq_shown("A 自己发现本地截止时间已过，放弃写入", Steps::from([Step::DeadlinePassed]), gave_up);
        1
    };

    let summary = view.part_text(SCOPE, PART_SUMMARY)?;
    let floor = view.floor(SCOPE)?;
    t.note(format!("最终 summary = {summary}；fence_floor={floor}"));
    let b_report = format!("rows=201(B) by holder-b token={b_token}");
    if !a_writes || refuses_serial_stale_rewrite(mode) {
        t.check_eq_shown("B 的结果保留", b_report, summary.clone());
    } else {
        t.exposes(summary == format!("rows=200(A) by holder-a token={a_token}"), "资源端不检查 token 时，A 的旧结果覆盖了 B 的结果", || &summary);
    }

    let refused = view.attempts("holder-a", false)?;
    let accepted = view.attempts("holder-a", true)?;
    if !a_writes {
        t.check_eq_shown("write_attempt 中没有 A 的尝试", 0, refused + accepted);
    } else if refuses_serial_stale_rewrite(mode) {
        t.check_eq_shown("write_attempt 记录一次 A 的被拒尝试", 1, refused);
    } else {
        t.check_eq_shown("write_attempt 记录 A 的那次尝试为被接受", 1, accepted);
    }

    let expected_end = Steps(if a_writes { vec![Step::LeaseLost] } else { Vec::new() });
    t.check_eq("A 不释放别人的租约，随后退出", ending(&expected_end, "exit 0"), ending(&a_lines.from_index(judged), &exit_text(a_status)));
    let untouched = side.after_a(b_token, a_writes)?;
    t.check_eq(untouched.label, untouched.expected, untouched.actual);
    Ok(())
}
// ANCHOR_END: timeline
