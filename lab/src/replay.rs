//! `lab model --replay MODE`: a counterexample of the model, replayed
//! against the real cluster with real holders, and then the same schedule
//! with the resource fenced.
//!
//! The path's steps become a schedule ([`Op`]) for holder processes (the
//! `holder` binary, as in F4), each stopped at its wait points (before its
//! deadline check, before its write, and for CHECK_THEN_WRITE inside the
//! write, after its read of the floor) until the schedule lets it go on:
//! a holder waiting there is a paused holder, whose renewer still renews.
//! The store's expiry is the one step the holders must not outrun: before
//! it, every holder with a live holding is frozen with SIGSTOP (its renewer
//! with it), and the replay asks PostgreSQL's `now()` until the lease has
//! expired. Nothing waits for a time that "should be long enough": each
//! step ends when a holder's protocol line or the database says it is done.
//!
//! A step the real code cannot be stopped before (CHECK_THEN_WRITE's
//! upsert right after its floor write: there is no gap between them) must
//! follow its predecessor in the path; a path that needs otherwise is
//! refused as not replayable, and the next broken property's is tried.
//!
//! The same schedule, fenced: the resource in FENCED_SCOPE, each write run
//! whole where the counterexample ran its last statement; a write whose
//! statements other holders' steps came between is sent at its first and
//! held on the wire by a delay proxy (F12's) until its last: a write
//! delayed in flight. PostgreSQL must then show the refusal where the
//! broken mode showed the violation.
//!
//! On an asynchronous standby the counterexample is a failover (acquire,
//! promote, acquire): it runs on F14's pair of servers (`FailoverPair`),
//! with each holder's lease and resource sessions opened in its name by the
//! replay itself, as F14 does (a holder process reaches one server for both
//! its lease and its resource, and the pair holds only the lease).

use crate::chaos::checker;
use crate::model::holder::{letter, name};
use crate::model::properties::name as property;
use crate::model::table::{check, steps};
use crate::model::{Action, Config, LeaseModel, State, StoreKind};
use crate::vocabulary::Act;
use crate::cases::common::{part_write, require};
use crate::cases::Lab;
use crate::cluster::replica::FailoverPair;
use crate::cluster::Session;
use crate::db::{self, replication};
use crate::error::Result;
use crate::events;
use crate::fault::DelayProxy;
use crate::holder::{HolderArgs, Step, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::lease::LeaseStore;
use crate::params::{margin, CRASH_TTL, LEASE, SCOPE, TTL};
use crate::vocabulary::WriteAttempt;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use stateright::Path;
use std::path::PathBuf;

/// One thing the replay does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Start holder `h`: it acquires at once.
    Acquire(usize),
    /// Let holder `h` pass its wait before the deadline check.
    Check(usize),
    /// Let holder `h` write one part, whole; `Some(accepted)`: what the
    /// model says the resource answers.
    Write(usize, Option<bool>),
    /// Let holder `h` start its write and stop inside it (CHECK_THEN_WRITE:
    /// after its read of the floor).
    WriteToGap(usize),
    /// Let holder `h` finish the write it stopped inside (with the model's
    /// answer, as for `Write`).
    Finish(usize, Option<bool>),
    /// Let holder `h` send its write, and hold it on the wire: the delay
    /// proxy between `h` and the server keeps every byte `h` sends (its
    /// renewals too), as F12's slow link does.
    Send(usize),
    /// Let the write held on `h`'s wire arrive, and read the answer (with
    /// the model's, as for `Write`; none when replayed fenced).
    Arrive(usize, Option<bool>),
    /// Freeze every holder that holds, and wait for the database's clock
    /// to pass the lease's expiry.
    Expire,
    /// SIGKILL holder `h`.
    Crash(usize),
}

// ANCHOR: schedule
/// The schedule of `path` for holders in `mode`: for each op, the number
/// of the model step it stands for. `fenced` runs each write whole at its
/// last statement's step. `Err` names the step the real holders cannot be
/// stopped before.
pub fn schedule(model: &LeaseModel, path: &Path<State, Action>, fenced: bool) -> Result<Vec<(usize, Op)>> {
    let actions: Vec<Action> = path.clone().into_actions();
    let states: Vec<State> = path.clone().into_states();
    let mut ops = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        let step = i + 1;
        let (before, after) = (&states[i], &states[i + 1]);
        let op = match *action {
            Action::Acquire(h) => Some(Op::Acquire(h)),
            Action::Check(h) => Some(Op::Check(h)),
            Action::Write(h, stmt) => {
                let crate::model::Phase::Write { statement, .. } = before.holders[h].phase else { return Err("a write step of a holder not writing".into()) };
                // What the model says the resource answers this write (a
                // write the path leaves unfinished runs on: accepted); the
                // fenced replay has no answer from this model.
                let answer = if fenced { None } else { Some(model.outcome(before, h, stmt) != crate::model::resource::Outcome::Refused) };
                // The write's last statement in the path: it ends the write,
                // or the path ends before the write does.
                let last = !matches!(after.holders[h].phase, crate::model::Phase::Write { .. }) || !actions[step..].iter().any(|a| matches!(a, Action::Write(x, _) if *x == h));
                // Fenced, a write whose statements others' steps come between
                // left at its first statement and arrives at its last: it is
                // delayed in flight.
                let later = actions[step..].iter().position(|a| !matches!(a, Action::Write(x, _) if *x == h)).map(|k| step + k);
                let spans = |at: usize| actions[at..].iter().any(|a| matches!(a, Action::Write(x, _) if *x == h));
                if fenced && statement == 0 && !last && later.is_some_and(spans) {
                    ops.push((step, Op::Send(h)));
                    continue;
                }
                if fenced && last && ops.iter().rev().find_map(|(_, op)| match op { Op::Send(x) | Op::Write(x, _) | Op::Arrive(x, _) if *x == h => Some(*op), _ => None }) == Some(Op::Send(h)) {
                    ops.push((step, Op::Arrive(h, answer)));
                    continue;
                }
                match (fenced || model.config.mode != FenceMode::CheckThenWrite, statement, last) {
                    // A one-statement write, or any write replayed fenced: whole, at its last step.
                    (true, _, true) => Some(Op::Write(h, answer)),
                    (true, _, false) => None,
                    // CHECK_THEN_WRITE: the read, refused (whole), or stopping in the gap.
                    (false, 0, true) => Some(Op::Write(h, answer)),
                    (false, 0, false) => Some(Op::WriteToGap(h)),
                    // The floor write: from the gap to the end of the write.
                    (false, 1, _) => Some(Op::Finish(h, answer)),
                    // The upsert follows the floor write with no gap: it
                    // must come right after it in the path.
                    (false, _, _) => {
                        if actions.get(i.wrapping_sub(1)) != Some(&Action::Write(h, crate::model::Statement::SetFloor)) {
                            return Err(format!("step {step} ({}) cannot be forced: the code runs it right after the floor write", crate::model::table::action_text(action)).into());
                        }
                        None
                    }
                }
            }
            Action::Expire => Some(Op::Expire),
            Action::Crash(h) => Some(Op::Crash(h)),
            // Renewal and release follow a holder's last write on their own.
            Action::Renew(_) | Action::Release(_) => None,
            Action::Restart(_) | Action::Replicate | Action::Promote => {
                return Err(format!("step {step} ({}) has no replay against one server", crate::model::table::action_text(action)).into())
            }
        };
        if let Some(op) = op {
            ops.push((step, op));
        }
    }
    Ok(ops)
}
// ANCHOR_END: schedule

/// The counterexample of `mode` on `store` that the real holders can be
/// forced through: the most important broken invariant whose path has a
/// schedule. `None` when the mode is safe there.
pub fn counterexample(mode: FenceMode, store: StoreKind) -> Result<Option<(&'static str, Path<State, Action>)>> {
    let verdict = check(Config::new(mode, store));
    if verdict.is_safe() {
        return Ok(None);
    }
    if store == StoreKind::Async {
        return Ok(verdict.broken.into_iter().find(|(n, _)| *n == property::I2));
    }
    let model = LeaseModel::new(verdict.config);
    let mut refused = Vec::new();
    for (name, path) in verdict.broken {
        match schedule(&model, &path, false) {
            Ok(_) => return Ok(Some((name, path))),
            Err(why) => refused.push(format!("{name}: {why}")),
        }
    }
    Err(format!("no counterexample of {mode} can be replayed: {}", refused.join("; ")).into())
}

/// `lab model --replay MODE`: replays `mode`'s counterexample on `store`,
/// then the same schedule fenced; prints the transcript, and with `out`
/// writes it there, redacted as the evidence is. True when both showed
/// what the model said, with no FAIL line.
pub fn run(mode: FenceMode, store: StoreKind, holder_bin: PathBuf, out: Option<&std::path::Path>) -> Result<bool> {
    let mut t = Transcript::streaming(crate::interrupt::QuietAfterStop(std::io::stdout()));
    let replayed = replay(mode, store, holder_bin, &mut t);
    if let Err(e) = &replayed {
        t.abort(crate::error::chain(e.as_ref()));
    }
    t.summary();
    if let Some(out) = out {
        crate::paths::write_whole(out, &crate::evidence::redact(t.text()))?;
    }
    Ok(replayed.is_ok() && t.failed() == 0)
}

/// Replays into `t` (the test and `run` share it).
pub fn replay(mode: FenceMode, store: StoreKind, holder_bin: PathBuf, t: &mut Transcript) -> Result<()> {
    let Some((broken, path)) = counterexample(mode, store)? else {
        return Err(format!("the model finds {mode} safe on {}: there is no counterexample to replay; replay a broken mode, whose schedule is also run fenced", store.name()).into());
    };
    if !holder_bin.is_file() {
        return Err(format!("the holder binary is missing ({}): build with `cargo build`", holder_bin.display()).into());
    }
    let model = LeaseModel::new(Config::new(mode, store));
    let session = Session::begin()?;
    db::setup::recreate_databases()?;
    let lab = Lab { holder_bin, cluster: session.cluster().clone(), options: Default::default(), own: Default::default() };
    let shown = steps(&model, &path);
    let title = |m: FenceMode| format!("模型反例的重放：{mode} 在 {} 上的 `{broken}`（{} 步），资源端模式={m}", store.name(), shown.len());
    t.case("REPLAY", &title(mode));
    t.note(format!("模型给出的反例：{}", shown.iter().enumerate().map(|(i, s)| format!("{}. {s}", i + 1)).collect::<Vec<_>>().join("；")));
    if store == StoreKind::Async {
        return failover(&lab, t, &path);
    }
    lab.reset()?;
    let ops = schedule(&model, &path, false)?;
    run_schedule(&lab, t, &model, &ops, mode, &shown)?;
    judge_violation(&lab, t, broken)?;

    let fenced = FenceMode::FencedScope;
    t.case("REPLAY", &title(fenced));
    t.note(format!("同一个调度，资源端换成 {fenced}：每次写入整体在反例里它最后一条语句的那一步执行"));
    lab.reset()?;
    let ops = schedule(&model, &path, true)?;
    run_schedule(&lab, t, &model, &ops, fenced, &shown)?;
    judge_refusal(&lab, t)
}

/// The holder processes of one replay, by model index, and which are frozen.
struct Holders {
    /// Started holders (`None` before their acquire, or once reaped).
    procs: Vec<Option<HolderGuard>>,
    /// Frozen by the replay's SIGSTOP.
    stopped: Vec<bool>,
    /// Whether each still holds (acquired, not yet ended its run).
    holding: Vec<bool>,
    /// Each one's token, from its ACQUIRED line.
    tokens: Vec<i64>,
}

// ANCHOR: run_schedule
/// Runs `ops` with holders whose resource judges in `mode`.
fn run_schedule(lab: &Lab, t: &mut Transcript, model: &LeaseModel, ops: &[(usize, Op)], mode: FenceMode, shown: &[String]) -> Result<()> {
    let n = model.config.bounds.holders;
    let mut hs = Holders { procs: (0..n).map(|_| None).collect(), stopped: vec![false; n], holding: vec![false; n], tokens: vec![0; n] };
    let mut leases = lab.leases("lab observer")?;
    let gap = mode == FenceMode::CheckThenWrite && model.config.mode == mode;
    // A holder whose write the schedule delays in flight reaches the
    // server through a delay proxy of its own: all its sessions (lease,
    // renewer, resource) go through it, as in F12.
    let server = crate::cases::common::lab_socket()?;
    let mut proxies: Vec<Option<DelayProxy>> = (0..n).map(|_| None).collect();
    for &(step, op) in ops {
        let label = |what: &str| format!("步 {step}（{}）：{what}", shown[step - 1]);
        match op {
            Op::Acquire(h) => {
                let parts: Vec<String> = (0..model.parts(h)).map(|i| crate::model::resource::PARTS[usize::from(model.part(h, i as u8))].to_owned()).collect();
                let mut waits = vec![WaitPoint::BeforeCheck, WaitPoint::BeforeWrite];
                if gap {
                    waits.push(WaitPoint::InsideFence);
                }
                let args = HolderArgs { mode, parts, waits, ..HolderArgs::new(&name(h), &format!("rows=20{h}({})", letter(h))) };
                let mut holder = if ops.iter().any(|(_, op)| *op == Op::Send(h)) {
                    let proxy = DelayProxy::start(server.clone())?;
                    let args = args.via_proxy(proxy.port());
                    proxies[h] = Some(proxy);
                    HolderGuard::spawn(&lab.holder_bin, &args)?
                } else {
                    HolderGuard::spawn(&lab.holder_bin, &args)?
                };
                let acquired = holder.next_step()?;
                let token = match acquired {
                    Step::Acquired { token } => Some(token),
                    _ => None,
                };
                t.check(token.is_some(), label(&format!("{} 启动并获取：{acquired}", name(h))), || acquired.clone());
                require(token.is_some(), &format!("{} did not acquire", name(h)))?;
                t.check_eq(label(&format!("{} 停在第一次本地截止时间检查之前", name(h))), Step::Waiting, holder.next_step()?);
                hs.procs[h] = Some(holder);
                hs.holding[h] = true;
                hs.tokens[h] = token.unwrap_or_default();
            }
            Op::Check(h) => {
                let holder = go(&mut hs, h)?;
                let step = holder.next_step()?;
                if step == Step::DeadlineOk {
                    t.check_eq(label(&format!("{} 通过检查，停在写入之前", name(h))), Step::Waiting, holder.next_step()?);
                } else {
                    t.check_eq(label(&format!("{} 发现本地截止时间已过，放弃", name(h))), Step::DeadlinePassed, step);
                    end(&mut hs, h)?;
                }
            }
            Op::WriteToGap(h) => {
                let holder = go(&mut hs, h)?;
                t.check_eq(label(&format!("{} 读了 floor、通过比较，停在写 floor 之前", name(h))), Step::InFence, holder.next_step()?);
            }
            Op::Send(h) => {
                let proxy = proxies[h].as_ref().ok_or("a delayed write without its proxy")?;
                // From here the proxy keeps every byte h sends; then h is
                // let go, and its write leaves and stays on the wire.
                proxy.hold();
                events::record(&name(h), Act::Hold);
                go(&mut hs, h)?;
                let held = proxy.wait_until_held(crate::poll::BOUND);
                t.check(held, label(&format!("{} 的写入离开它，扣在代理里（它的续租也扣在那里）", name(h))), || "the proxy holds nothing");
            }
            Op::Write(h, answer) | Op::Finish(h, answer) | Op::Arrive(h, answer) => {
                let token = hs.tokens[h];
                let holder = if matches!(op, Op::Arrive(..)) {
                    let proxy = proxies[h].as_ref().ok_or("a delayed write without its proxy")?;
                    proxy.release();
                    events::record(&name(h), Act::Release);
                    let holder = hs.procs[h].as_mut().ok_or_else(|| format!("{} is not running", name(h)))?;
                    if hs.stopped[h] {
                        // SIGCONT: it wakes inside its write, which now arrives.
                        holder.resume()?;
                        hs.stopped[h] = false;
                    }
                    holder
                } else {
                    go(&mut hs, h)?
                };
                let step = holder.next_step()?;
                match answer {
                    Some(accepted) => {
                        t.check_eq_shown(label(&format!("{} 写入，资源端的回答与模型的相同", name(h))), Step::Write { accepted, token }, step);
                    }
                    None => {
                        t.check(matches!(step, Step::Write { .. }), label(&format!("{} 写入：{step}", name(h))), || step.clone());
                    }
                }
                let next = holder.next_step()?;
                if next != Step::Waiting {
                    // Its last part: the renewal and the release, or the lost lease.
                    let last = holder.next_step()?;
                    t.note(format!("{} 写完最后一个分片：{next}；{last}", name(h)));
                    end(&mut hs, h)?;
                }
            }
            Op::Expire => {
                let mut frozen = Vec::new();
                for h in 0..n {
                    if hs.holding[h] && !hs.stopped[h] {
                        if let Some(holder) = hs.procs[h].as_mut() {
                            // SIGSTOP: the holder and its renewer stop where they are.
                            holder.stop()?;
                            hs.stopped[h] = true;
                            frozen.push(name(h));
                        }
                    }
                }
                leases.wait_until_expired(LEASE)?;
                let row = leases.row(LEASE)?.ok_or("no lease row")?;
                let frozen = if frozen.is_empty() { "（没有要冻结的持有者）".to_owned() } else { frozen.join("、") };
                t.check(!row.held, label(&format!("SIGSTOP {frozen}，租约按数据库时钟过期：{}/{} expired", row.holder, row.token)), || row.to_string());
            }
            Op::Crash(h) => {
                if let Some(holder) = hs.procs[h].as_mut() {
                    let status = holder.kill()?;
                    t.note(label(&format!("SIGKILL {}：{status}", name(h))));
                }
                hs.procs[h] = None;
                hs.holding[h] = false;
            }
        }
    }
    // Whatever is left runs to its end; nothing lands after the checks.
    for h in 0..n {
        if let Some(mut holder) = hs.procs[h].take() {
            if hs.stopped[h] {
                holder.resume()?;
            }
            drop(holder);
        }
    }
    // Dropped after the holders: nothing is held for a process still waiting.
    drop(proxies);
    Ok(())
}
// ANCHOR_END: run_schedule

/// Resumes holder `h` if frozen and lets it past its wait: the line first,
/// then SIGCONT, so it reads the line as it wakes (as F4 does).
fn go(hs: &mut Holders, h: usize) -> Result<&mut HolderGuard> {
    let holder = hs.procs[h].as_mut().ok_or_else(|| format!("{} is not running", name(h)))?;
    holder.send_line("go")?;
    if hs.stopped[h] {
        holder.resume()?;
        hs.stopped[h] = false;
    }
    Ok(holder)
}

/// Holder `h` has printed its last line: it exits, and is reaped.
fn end(hs: &mut Holders, h: usize) -> Result<()> {
    if let Some(mut holder) = hs.procs[h].take() {
        holder.wait_exit()?;
    }
    hs.holding[h] = false;
    Ok(())
}

/// The first accepted write below a token accepted before it, in the
/// order of acceptance (I3 broken: the checker's own scan), as `writer
/// part token=t 在 writer token=u 之后被接受`.
fn stale_accepted(history: &[WriteAttempt]) -> Option<String> {
    let attempts: Vec<&WriteAttempt> = history.iter().collect();
    let (a, b) = checker::stale_accepted(&attempts).into_iter().next()?;
    Some(format!("{} {} token={} 在 {} token={} 之后被接受", a.writer, a.part, a.token, b.writer, b.token))
}

/// The first step down of the floor among the attempts' `floor_after`
/// (the checker's own scan).
fn floor_regression(history: &[WriteAttempt]) -> Option<String> {
    let attempts: Vec<&WriteAttempt> = history.iter().collect();
    let (a, before) = checker::floor_regressions(&attempts).into_iter().next()?;
    Some(format!("floor {} → {}", before.floor_after?, a.floor_after?))
}

/// The history as `writer part token accepted floor_after`, one per attempt.
fn shown(history: &[WriteAttempt]) -> String {
    history.iter().map(|a| format!("{} {} token={} accepted={} floor_after={}", a.writer, a.part, a.token, a.accepted, a.floor_after.map_or("NULL".into(), |f| f.to_string()))).collect::<Vec<_>>().join("；")
}

/// PostgreSQL shows the counterexample's violation.
fn judge_violation(lab: &Lab, t: &mut Transcript, broken: &str) -> Result<()> {
    let history = lab.view()?.attempts_on(SCOPE)?;
    t.note(format!("write_attempt（按 id）：{}", shown(&history)));
    require(!history.is_empty(), "the replay wrote nothing")?;
    match broken {
        property::FLOOR => {
            let seen = floor_regression(&history);
            t.exposes(seen.is_some(), format!("PostgreSQL 里同样的违反（{broken}）：{}", seen.clone().unwrap_or_default()), || "no step down of floor_after");
        }
        _ => {
            let seen = stale_accepted(&history);
            t.exposes(seen.is_some(), format!("PostgreSQL 里同样的违反（{broken}）：{}", seen.clone().unwrap_or_default()), || "no accepted write below an earlier one");
        }
    }
    Ok(())
}

/// PostgreSQL shows the fence refusing the stale write, and nothing broken.
fn judge_refusal(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let history = lab.view()?.attempts_on(SCOPE)?;
    t.note(format!("write_attempt（按 id）：{}", shown(&history)));
    let refused: Vec<&WriteAttempt> = history.iter().filter(|a| !a.accepted).collect();
    let stale = history.iter().filter(|a| a.accepted).map(|a| a.token).max().unwrap_or(0);
    t.check(
        refused.iter().any(|a| a.token < stale),
        format!("栅栏拒绝了过期的写入：{}", refused.iter().map(|a| format!("{} {} token={}", a.writer, a.part, a.token)).collect::<Vec<_>>().join("，")),
        || shown(&history),
    );
    t.check_eq_shown("被接受的写入里没有低于之前 token 的（I3）", "none".to_owned(), stale_accepted(&history).unwrap_or_else(|| "none".into()));
    t.check_eq_shown("floor 没有倒退", "none".to_owned(), floor_regression(&history).unwrap_or_else(|| "none".into()));
    Ok(())
}

// ANCHOR: failover
/// The asynchronous standby's counterexample: A acquires on the primary,
/// whose standby has been cut off (the model's standby never replays it);
/// the primary crashes and the standby is promoted; B acquires there, and
/// gets A's token again. Both write, and the resource, fenced, accepts
/// both: equal tokens pass.
fn failover(lab: &Lab, t: &mut Transcript, path: &Path<State, Action>) -> Result<()> {
    let actions = path.clone().into_actions();
    require(actions == [Action::Acquire(0), Action::Promote, Action::Acquire(1)], "the async counterexample is not acquire, promote, acquire")?;
    lab.reset()?;
    let pair = FailoverPair::beside(&lab.cluster)?;
    replication::build(&pair, replication::Mode::Async)?;
    replication::cut_standby(&pair)?;
    let (primary, standby) = (pair.primary().endpoint(), pair.standby().endpoint());
    let mut a_leases = LeaseStore::connect_to(&primary, "holder-a")?;
    let a = a_leases.acquire(LEASE, "holder-a", CRASH_TTL, margin(CRASH_TTL))?.ok_or("holder-a did not acquire")?;
    t.note(format!("步 1：备库的 primary_conninfo 改为不存在的地址（它收不到这次提交）；holder-a 在主库获取 token={}", a.token));
    pair.crash_primary()?;
    pair.promote_standby()?;
    t.note("步 2：主库 pg_ctl stop -m immediate，备库 pg_ctl promote；客户端改连提升后的服务器");
    let mut b_leases = LeaseStore::connect_to(&standby, "holder-b")?;
    let b = b_leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?.ok_or("holder-b did not acquire")?;
    t.exposes(a.token == b.token, format!("步 3：holder-b 在提升后的备库获取 token={}，与 holder-a 的相同（I2）", b.token), || format!("A {} B {}", a.token, b.token));
    let (mut a_store, mut b_store) = (lab.store(FenceMode::FencedScope, "holder-a")?, lab.store(FenceMode::FencedScope, "holder-b")?);
    let b_ok = b_store.write(&part_write(&b, "summary", "rows=201(B)"))?;
    let a_ok = a_store.write(&part_write(&a, "detail", "rows=200(A)"))?;
    let history = lab.view()?.attempts_on(SCOPE)?;
    t.note(format!("write_attempt（按 id）：{}", shown(&history)));
    let both = history.iter().filter(|w| w.accepted && w.token == a.token).count();
    t.exposes(a_ok && b_ok && both == 2, format!("FENCED_SCOPE 分不出两个相同的 token：token={} 的两次写入都被接受", a.token), || format!("A {a_ok} B {b_ok}, {both} accepted"));
    Ok(())
}
// ANCHOR_END: failover

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(writer: &str, token: i64, accepted: bool, floor_after: i64) -> WriteAttempt {
        let (scope, mode) = ("daily-report".into(), crate::vocabulary::FenceMode::FencedScope);
        WriteAttempt { id: 0, scope, part: "summary".into(), writer: writer.into(), token, mode, accepted, floor_after: Some(floor_after), at_ms: 0.0 }
    }

    /// The judges see a planted violation and see none in a clean history:
    /// a replay that saw nothing cannot pass as one that saw the violation.
    #[test]
    fn judges_find_planted_violations_only() {
        let clean = [attempt("holder-a", 1, true, 1), attempt("holder-b", 2, true, 2), attempt("holder-a", 1, false, 2)];
        assert_eq!((stale_accepted(&clean), floor_regression(&clean)), (None, None));
        let stale = [attempt("holder-b", 2, true, 2), attempt("holder-a", 1, true, 2)];
        assert_eq!(stale_accepted(&stale).as_deref(), Some("holder-a summary token=1 在 holder-b token=2 之后被接受"));
        let down = [attempt("holder-b", 2, true, 2), attempt("holder-a", 1, true, 1)];
        assert_eq!(floor_regression(&down).as_deref(), Some("floor 2 → 1"));
        // Equal tokens are no violation (one grant writes many times).
        assert_eq!(stale_accepted(&[attempt("holder-a", 1, true, 1), attempt("holder-a", 1, true, 1)]), None);
    }

    /// Each broken mode's replayed counterexample is the one the table
    /// expects, and CHECK_THEN_WRITE's I3 path (which needs a stop between
    /// its floor write and its upsert) is refused, so its floor path is
    /// replayed instead.
    #[test]
    fn the_replayed_counterexamples() {
        let name = |m, s| counterexample(m, s).unwrap().map(|(n, _)| n);
        assert_eq!(name(FenceMode::Unfenced, StoreKind::Single), Some(property::I3));
        assert_eq!(name(FenceMode::FencedRow, StoreKind::Single), Some(property::I3));
        assert_eq!(name(FenceMode::CheckThenWrite, StoreKind::Single), Some(property::FLOOR));
        assert_eq!(name(FenceMode::FencedScope, StoreKind::Async), Some(property::I2));
        assert_eq!(name(FenceMode::FencedScope, StoreKind::Single), None);
        // On a sync standby the broken modes' counterexamples are the same
        // paths as on one server (no failover in them): replaying those is
        // replaying these. On an async standby every mode's is the failover.
        let actions = |m, s| counterexample(m, s).unwrap().map(|(_, p)| p.into_actions());
        for mode in [FenceMode::Unfenced, FenceMode::FencedRow, FenceMode::CheckThenWrite, FenceMode::VersionCas] {
            assert_eq!(actions(mode, StoreKind::Sync), actions(mode, StoreKind::Single), "{mode}");
        }
        for mode in FenceMode::ALL {
            assert_eq!(actions(mode, StoreKind::Async), actions(FenceMode::FencedScope, StoreKind::Async), "{mode}");
        }
        let v = check(Config::new(FenceMode::CheckThenWrite, StoreKind::Single));
        let i3 = &v.broken.iter().find(|(n, _)| *n == property::I3).unwrap().1;
        let err = schedule(&LeaseModel::new(v.config), i3, false).unwrap_err().to_string();
        assert!(err.contains("UPSERT") && err.contains("cannot be forced"), "{err}");
    }

    /// CHECK_THEN_WRITE's schedule stops A in its gap after the read; the
    /// same schedule fenced sends A's write before the expiry and holds it
    /// on the wire until B has written: F12's delayed write.
    #[test]
    fn check_then_write_fenced_is_a_delayed_write() {
        let (_, path) = counterexample(FenceMode::CheckThenWrite, StoreKind::Single).unwrap().unwrap();
        let model = LeaseModel::new(Config::new(FenceMode::CheckThenWrite, StoreKind::Single));
        let ops = |fenced| schedule(&model, &path, fenced).unwrap().into_iter().map(|(_, op)| op).collect::<Vec<Op>>();
        assert_eq!(ops(false), [Op::Acquire(0), Op::Check(0), Op::WriteToGap(0), Op::Expire, Op::Acquire(1), Op::Check(1), Op::WriteToGap(1), Op::Finish(1, Some(true)), Op::Finish(0, Some(true))]);
        assert_eq!(ops(true), [Op::Acquire(0), Op::Check(0), Op::Send(0), Op::Expire, Op::Acquire(1), Op::Check(1), Op::Write(1, None), Op::Arrive(0, None)]);
    }

    /// The unfenced schedule is F5's: start A, check, expire, start B,
    /// check, B writes, A writes.
    #[test]
    fn unfenced_schedule() {
        let (_, path) = counterexample(FenceMode::Unfenced, StoreKind::Single).unwrap().unwrap();
        let model = LeaseModel::new(Config::new(FenceMode::Unfenced, StoreKind::Single));
        let ops: Vec<Op> = schedule(&model, &path, false).unwrap().into_iter().map(|(_, op)| op).collect();
        assert_eq!(ops, [Op::Acquire(0), Op::Check(0), Op::Expire, Op::Acquire(1), Op::Check(1), Op::Write(1, Some(true)), Op::Write(0, Some(true))]);
    }
}
