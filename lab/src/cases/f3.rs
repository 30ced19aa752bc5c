//! F3 — concurrent acquires: sixteen threads, each with its own connection,
//! released together by a barrier, race for the lease three times. When the
//! lease is new exactly one wins; while it is held none does (and the row is
//! untouched); after it expires exactly one wins again. The single
//! `INSERT … ON CONFLICT DO UPDATE … WHERE` statement is the whole reason.

use crate::params::{margin, LEASE, TTL};
use super::{Case, Lab};
use crate::error::Result;
use crate::lease::{Grant, LeaseStore};
use crate::transcript::Transcript;
use std::sync::Barrier;

/// The case.
pub const CASE: Case = Case {
    id: "F3",
    title: |o| format!("并发获取：{} 个线程各自连接，由屏障同时放行", o.threads),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

/// The racers, each with its own connection.
type Racers = Vec<(String, LeaseStore)>;

/// Connects the racers, once for all three rounds: a failed connection is
/// then an error here instead of a thread that never reaches the barrier,
/// and round 2 follows round 1 within milliseconds, well inside the ttl.
fn connect(lab: &Lab, threads: usize) -> Result<Racers> {
    (1..=threads)
        .map(|i| {
            let holder = format!("holder-{i:02}");
            lab.leases(&holder).map(|store| (holder, store))
        })
        .collect()
}

/// One round: all racers wait at the barrier, then acquire at once, each
/// on its own connection.
fn round(stores: &mut Racers) -> Result<Vec<Option<Grant>>> {
    let threads = stores.len();
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let racers: Vec<_> = stores
            .iter_mut()
            .map(|(holder, store)| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    store.acquire(LEASE, holder, TTL, margin(TTL))
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().map_err(|_| "an acquiring thread panicked")?).collect()
    })
}

fn winners(results: &[Option<Grant>]) -> Vec<&Grant> {
    results.iter().flatten().collect()
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let threads = lab.options.threads;
    let mut observer = lab.leases("lab observer")?;
    let mut racers = connect(lab, threads)?;
    let mut attempts = 0;

    let first = round(&mut racers)?;
    attempts += first.len();
    let won = winners(&first);
    t.check_eq_shown("新建一轮：恰好一个获胜者", 1, won.len());
    t.check_eq("获胜者拿到 token=1", "1".to_owned(), won.iter().map(|g| g.token.to_string()).collect::<Vec<_>>().join(","));

    let before = observer.row(LEASE)?.ok_or("no lease row after the first round")?;
    let second = round(&mut racers)?;
    attempts += second.len();
    let after = observer.row(LEASE)?.ok_or("the lease row vanished")?;
    // The lease must have been valid from before the round until after it,
    // or "no winner" would prove nothing.
    t.check(before.held && after.held, "第二轮全程租约有效（轮前轮后数据库都判定持有中）", || format!("before {before}, after {after}"));
    t.check_eq_shown("有效期内一轮：没有获胜者", 0, winners(&second).len());
    t.check(after == before, format!("{threads} 次被拒的获取没有改动租约行（holder、token、expires_at 不变）"), || format!("{before} → {after}"));

    observer.wait_until_expired(LEASE)?;
    let third = round(&mut racers)?;
    attempts += third.len();
    let won = winners(&third);
    t.check_eq_shown("过期后一轮：恰好一个获胜者", 1, won.len());
    let row = observer.row(LEASE)?.ok_or("the lease row vanished")?;
    let winner = won.first().map_or("none".to_owned(), |g| g.holder.clone());
    t.check_eq("租约行的 holder 就是第三轮的获胜者", winner, row.holder.clone());
    t.check_eq_shown(format!("{attempts} 次尝试后 token=2"), 2, row.token);
    Ok(())
}
