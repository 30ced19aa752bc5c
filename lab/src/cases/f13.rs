//! F13 — clocks that run wrong, injected from outside with `libfaketime`
//! (see `fault::clock`), never touching the machine's clock.
//!
//! (a) The holder's clock runs slow, its monotonic clock included. The
//! local deadline is `ttl − margin` on the holder's clock; it comes no later
//! than the server's expiry as long as the holder's clock runs at least
//! `(ttl − margin) / ttl` of real time: 0.8 for the article's 1500/300 ms.
//! A holder at 0.9 finds its deadline passed by the time the database
//! expires its lease; one at 0.6 still believes itself valid, writes, and
//! only the fence refuses it. The holders run without a renewer, so the
//! lease expires one ttl after the acquire while they run.
//!
//! (b) The database server's wall clock jumps ahead by more than a ttl
//! while it runs: A's lease expires early by the database clock while A's
//! local deadline is still ahead; B acquires; both believe they hold the
//! lease; the fence refuses A's later write. The jump half of the
//! article's limit "whether the safety margin holds when clocks drift or
//! jump", made visible.

use super::common::require;
use super::{Case, Lab, Need};
use crate::error::Result;
use crate::fault::clock::{self, JumpFile};
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::params::{margin, LEASE, PART_SUMMARY, SCOPE, TTL};
use crate::stats::ms;
use crate::poll;
use crate::transcript::Transcript;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The case.
pub const CASE: Case = Case {
    id: "F13",
    title: |_| "走错的时钟：持有者的时钟变慢，数据库的时钟向前跳（libfaketime）".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[Need::Faketime],
};

/// A slow clock the margin covers: faster than the boundary.
pub const COVERED: f64 = 0.9;

/// A slow clock the margin does not cover, far enough below the boundary
/// that the parent lets the holder check well before its slow deadline.
pub const NOT_COVERED: f64 = 0.6;

/// How far the server's wall clock jumps: more than a ttl.
pub const JUMP: Duration = Duration::from_secs(5);

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let boundary = (TTL - margin(TTL)).as_secs_f64() / TTL.as_secs_f64();
    t.note(format!(
        "TTL={}ms、margin={}ms：持有者的时钟至少要走真实时间的 {boundary:.2} 倍（最多慢 {:.0}%），本地截止时间才不晚于数据库判定的过期时刻",
        ms(TTL),
        ms(margin(TTL)),
        (1.0 - boundary) * 100.0
    ));
    let mut token = 1;
    for rate in [COVERED, NOT_COVERED] {
        token = slow_clock(lab, t, rate, boundary, token)?;
    }
    server_clock_jump(lab, t, token)
}

// ANCHOR: f13_slow_clock
/// A holder whose clocks run at `rate`, without a renewer, checks its local
/// deadline right after the database expired its lease; returns the next token.
fn slow_clock(lab: &Lab, t: &mut Transcript, rate: f64, boundary: f64, token: i64) -> Result<i64> {
    let args = HolderArgs {
        waits: vec![WaitPoint::BeforeCheck, WaitPoint::BeforeWrite],
        no_renewer: true,
        ..HolderArgs::new("holder-a", &format!("rows=700(A x{rate})"))
    };
    let env = clock::rate(rate)?;
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut a = HolderGuard::spawn_with_env(&lab.holder_bin, &args, &env)?;
    let started = t.check_eq(
        format!("时钟 x{rate} 的 A 获取 token={token}（没有续租线程），在检查前等待"),
        Steps::from([Step::Acquired { token }, Step::Waiting]),
        a.next_steps(2)?,
    );
    require(started, "holder-a did not start")?;
    lab.leases("lab observer")?.wait_until_expired(LEASE)?;
    a.send_line("go")?;
    if rate >= boundary {
        let (lines, _) = a.rest_of_output()?;
        t.check_eq(
            format!("x{rate} 在 margin 覆盖之内：数据库判定过期之后，A 自己也发现本地截止时间已过，放弃写入"),
            Steps::from([Step::DeadlinePassed]),
            lines,
        );
        return Ok(token + 1);
    }
    // Whether the fault took hold: only a clock that really runs slow keeps
    // A believing itself valid. A holder that gave up after all has ended,
    // and the rest of this rate has nothing left to show.
    let believes = t.check_eq(
        format!("x{rate} 超出 margin：租约已按数据库时钟过期，A 的慢时钟却说本地截止时间还没到"),
        Steps::from([Step::DeadlineOk, Step::Waiting]),
        a.up_to_steps(2)?,
    );
    if !believes {
        return Ok(token + 1);
    }
    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs::new("holder-b", "rows=701(B)"))?;
    let (b_lines, _) = b.rest_of_output()?;
    let b_token = token + 1;
    t.check_eq(
        format!("B 获取 token={b_token} 并写入"),
        Steps::from([Step::Acquired { token: b_token }, Step::DeadlineOk, Step::Write { accepted: true, token: b_token }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        b_lines,
    );
    a.send_line("go")?;
    let (lines, _) = a.rest_of_output()?;
    t.check_eq(
        format!("x{rate} 的 A 以为自己仍有效，它的写入（token={token}）被栅栏拒绝"),
        Steps::from([Step::Write { accepted: false, token }, Step::RenewAfterWrite { ok: false }, Step::LeaseLost]),
        lines,
    );
    Ok(b_token + 1)
}
// ANCHOR_END: f13_slow_clock

/// The server's wall clock minus this machine's, in seconds.
fn server_skew() -> Result<f64> {
    let mut db = crate::db::connect(crate::db::LEASE_DB, "lab observer")?;
    let local = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs_f64();
    // clock_timestamp(): the server's wall clock at this very call.
    let server: f64 = db.query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])?.get(0);
    Ok(server - local)
}

// ANCHOR: f13_clock_jump
/// The server runs under libfaketime, its wall clock read from a file the
/// lab steps while A holds the lease.
fn server_clock_jump(lab: &Lab, t: &mut Transcript, token: i64) -> Result<()> {
    let jump = JumpFile::create(lab.cluster.place()?)?;
    poll::designed(|| lab.cluster.restart_with(&jump.env()?))?;
    let outcome = jump_timeline(lab, t, &jump, token);
    // Whatever happened, the server gets its real clock back.
    poll::designed(|| lab.cluster.restart_with(&[]))?;
    let skew = server_skew()?;
    t.check(skew.abs() < 1.0, "重启后数据库服务器用回真实时钟", || format!("skew {skew:.1}s"));
    outcome
}

fn jump_timeline(lab: &Lab, t: &mut Transcript, jump: &JumpFile, token: i64) -> Result<()> {
    let mut leases = lab.leases("lab observer")?;
    t.note("数据库服务器已在 libfaketime 下重启：它的墙上时钟读一个偏移量文件，运行中可以改");
    let mut a = HolderGuard::spawn(&lab.holder_bin, &HolderArgs { waits: vec![WaitPoint::BeforeWrite], ..HolderArgs::new("holder-a", "rows=710(A)") })?;
    let ready = t.check_eq(
        format!("A 获取 token={token}，通过本地检查，等待放行"),
        Steps::from([Step::Acquired { token }, Step::DeadlineOk, Step::Waiting]),
        a.next_steps(3)?,
    );
    require(ready, "holder-a is not ready to write")?;
    jump.set(JUMP.as_secs() as i64)?;
    let skew = server_skew()?;
    t.check((skew - JUMP.as_secs_f64()).abs() < 1.0, format!("数据库服务器的墙上时钟向前跳了 {}s（本机时钟没动）", JUMP.as_secs()), || {
        format!("skew {skew:.1}s")
    });
    let row = leases.row(LEASE)?.ok_or("no lease row")?;
    t.check(!row.held && row.holder == "holder-a", "A 的租约按数据库时钟提前过期：TTL 还没过完，A 刚刚通过本地检查", || &row);

    let b_token = token + 1;
    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs::new("holder-b", "rows=711(B)"))?;
    let (b_lines, _) = b.rest_of_output()?;
    t.check_eq(
        format!("B 获取 token={b_token} 并写入：此刻 A 和 B 都认为自己持有租约"),
        Steps::from([Step::Acquired { token: b_token }, Step::DeadlineOk, Step::Write { accepted: true, token: b_token }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        b_lines,
    );
    a.send_line("go")?;
    let (lines, _) = a.rest_of_output()?;
    t.check_eq(
        format!("A 的写入（token={token}）被栅栏拒绝"),
        Steps::from([Step::Write { accepted: false, token }, Step::RenewAfterWrite { ok: false }, Step::LeaseLost]),
        lines,
    );
    t.check_eq("summary 是 B 的", "rows=711(B) by holder-b token=".to_owned() + &b_token.to_string(), lab.view()?.part_text(SCOPE, PART_SUMMARY)?);
    Ok(())
}
// ANCHOR_END: f13_clock_jump
