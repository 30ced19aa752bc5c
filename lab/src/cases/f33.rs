//! F33 — an unknown outcome. Holder A adds one to a counter with a write
//! conditional on the version it read; the store applies it and the answer
//! is lost. Reading again and writing again adds one twice; sending the
//! same conditional write again is refused, and A believes it failed. When
//! each write carries a mark of its own (A's token and the write's
//! sequence number), A reads back, finds its write, and stops: the count is
//! right. Had it not found it, A would only resend the same conditional
//! write (which lands or is refused), never reread and retry.

use super::{Case, Lab};
use crate::error::Result;
use crate::lease::LeaseStore;
use crate::object::uncertain::{count_of, Counter, COUNTER};
use crate::object::ObjectStore;
use crate::params::{margin, LEASE, TTL};
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F33", title: |_| "结果不确定的写入：重读重试把一次加一做了两遍".into(), run, mode: None, modes: &[], needs: &[] };

/// A fresh counter at `runs=0`, and holder A's lease token.
fn fresh(lab: &Lab) -> Result<i64> {
    lab.reset()?;
    ObjectStore::reset(COUNTER, "runs=0")?;
    let grant = LeaseStore::connect("lab objects")?.acquire(LEASE, "holder-a", TTL, margin(TTL))?.ok_or("holder-a could not acquire a free lease")?;
    Ok(grant.token)
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let token = fresh(lab)?;
    let mut a = Counter::start("holder-a", token, false)?;
    let first = a.add_one(true)?;
    let applied = count_of(&a.read()?.body)?;
    t.note(format!("计数对象从 runs=0 开始；A（token={token}）以读到的版本为条件把它加一：结果 {first}，而对象里已经是 runs={applied}"));
    let retry = a.reread_and_retry()?;
    let count = count_of(&a.read()?.body)?;
    t.note(format!("重读再试：A 读到的是自己刚才那次写下的值，再加一，{retry}；对象里是 runs={count}"));
    t.exposes(count == 2, "一次加一被做了两遍", || format!("runs={count}"));

    let token = fresh(lab)?;
    let mut a = Counter::start("holder-a", token, false)?;
    a.add_one(true)?;
    let resent = a.resend()?;
    let count = count_of(&a.read()?.body)?;
    t.check_eq_shown("同样的条件原样重发：被拒绝（A 自己的写入已经让版本前进了），A 以为没写成，对象里其实已经加过一", "refused; runs=1".to_owned(), format!("{resent}; runs={count}"));

    let token = fresh(lab)?;
    let mut a = Counter::start("holder-a", token, true)?;
    a.add_one(true)?;
    let landed = a.landed()?;
    if !landed {
        // Not found: the same conditional write again, which either lands
        // (the first was lost) or is refused (someone wrote since); never a
        // reread and retry.
        a.resend()?;
    }
    let now = a.read()?;
    t.note(format!("每次写入带上自己的标识：对象里是 {}", now.body));
    t.check_eq_shown("A 读回对象，看到自己的 token 和序号，知道已经写进去了，不再重试", "landed=true; runs=1".to_owned(), format!("landed={landed}; runs={}", count_of(&now.body)?));
    Ok(())
}
