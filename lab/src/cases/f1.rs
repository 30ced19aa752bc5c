//! F1 — the normal path: acquire, write, renew, release, and the next holder
//! acquires a larger token and writes. Along the way, the state machine's
//! refusals: no acquire while the lease is held (the row stays as it was),
//! no renewal after release. At the end, each condition of renew and
//! release is shown refusing on its own: a grant naming another holder, and
//! a grant of another lease that happens to carry the same holder and token.

use super::common::{deadline_lead, part_write, renew_and_release_refused, require, token_of};
use super::{Case, Lab};
use crate::error::Result;
use crate::lease::{Grant, LeaseStore};
use crate::params::{margin, LEASE, PART_SUMMARY, SCOPE, TTL};
use crate::stats::ms;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// A second lease of the same job family: the name condition of renew and
/// release is what keeps a grant of one lease from touching the other.
const OTHER_LEASE: &str = "cleanup-job";

/// The case.
pub const CASE: Case = Case {
    id: "F1",
    title: |_| "正常路径：获取 → 写入 → 续租 → 释放 → 下一持有者获取更大 token 并写入".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let mut report = lab.store(FenceMode::FencedScope, "lab")?;
    let mut view = lab.view()?;

    let a = leases.acquire(LEASE, "holder-a", TTL, margin(TTL))?;
    t.check_eq("holder-a 获取租约，token=1", "1".to_owned(), token_of(&a));
    let mut a = a.ok_or("holder-a got no grant")?;
    // ANCHOR: deadline_check
    let lead = deadline_lead(&mut leases, &a)?;
    t.check(
        lead.covers(margin(TTL)),
        format!("holder-a 的本地截止时间比 expires_at 早至少 margin={}ms（从请求发出时刻起算，再提前 margin）", ms(margin(TTL))),
        || lead.describe(margin(TTL)),
    );
    // ANCHOR_END: deadline_check
    let held = leases.row(LEASE)?.ok_or("no lease row after the acquire")?;
    t.check_eq("租约行处于持有中：holder=holder-a，expires_at > now()", "holder-a held".to_owned(), format!("{} {}", held.holder, if held.held { "held" } else { "expired" }));

    let refused = leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?;
    t.check_eq("有效期内 holder-b 的获取被拒", "none".to_owned(), token_of(&refused));
    let after = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check(after == held, "被拒的获取没有改动租约行（holder、token、expires_at 都不变）", || format!("{held} → {after}"));

    let written = report.write(&part_write(&a, PART_SUMMARY, "rows=100(A)"))?;
    t.check_eq("holder-a 以 token=1 写入被接受", "true token=1".to_owned(), format!("{written} token={}", a.token));

    let renewed = leases.renew(&mut a)?;
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("续租成功，token 不变", "renewed token=1".to_owned(), format!("{} token={}", if renewed { "renewed" } else { "refused" }, row.token));
    t.check(row.expires_epoch > held.expires_epoch, "续租把 expires_at 推后（按数据库时钟重新计算）", || format!("{held} → {row}"));

    let released = leases.release(&a)?;
    t.check_eq("holder-a 主动释放", true, released);
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("释放后 expires_at = -infinity，token 不回退", "-infinity token=1".to_owned(), format!("{} token={}", row.expires_at, row.token));
    let late = leases.renew(&mut a)?;
    t.check_eq("释放后 holder-a 的续租被拒（已释放是已过期的特例）", false, late);

    let b = leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?;
    t.check_eq("释放后 holder-b 立即获取，token=2", "2".to_owned(), token_of(&b));
    let b = b.ok_or("holder-b got no grant")?;
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check(row.held && row.holder == "holder-b", "租约行此刻由 holder-b 持有：expires_at 按数据库时钟重新算起", || &row);
    let written = report.write(&part_write(&b, PART_SUMMARY, "rows=101(B)"))?;
    t.check_eq("holder-b 以 token=2 写入被接受", "true token=2".to_owned(), format!("{written} token={}", b.token));
    require(written, "holder-b's write was refused")?;

    t.check_eq_shown("资源端 fence_floor=2", 2, view.floor(SCOPE)?);
    let accepted = view.attempts("holder-a", true)? + view.attempts("holder-b", true)?;
    let refused = view.attempts("holder-a", false)? + view.attempts("holder-b", false)?;
    t.check_eq("write_attempt 记录两次被接受、零次被拒的写入", "2/0".to_owned(), format!("{accepted}/{refused}"));

    each_condition_on_its_own(t, &mut leases, &a, &b)
}

// ANCHOR: each_condition
/// Renew and release, each refused by one condition alone: the other
/// conditions of the statement hold, so only the one named can refuse it.
fn each_condition_on_its_own(t: &mut Transcript, leases: &mut LeaseStore, old_a: &Grant, b: &Grant) -> Result<()> {
    // The holder condition: the current name and token, another holder's name.
    let forged = Grant { holder: old_a.holder.clone(), ..b.clone() };
    let (expected, actual) = renew_and_release_refused(leases, &forged, LEASE)?;
    t.check_eq(format!("以 holder-a 的名义、用当前的 token={} 续租和释放都被拒（holder 条件），租约行不变", b.token), expected, actual);

    // The name condition: holder-a now holds another lease with token 1,
    // the very holder and token of its old report-job grant.
    let other = leases.acquire(OTHER_LEASE, &old_a.holder, TTL, margin(TTL))?.ok_or("holder-a could not acquire the other lease")?;
    require(other.token == old_a.token, "the other lease's first token is not the old grant's")?;
    let (expected, actual) = renew_and_release_refused(leases, old_a, OTHER_LEASE)?;
    t.check_eq(
        format!("holder-a 在 {OTHER_LEASE} 上也持有 token={}：它旧的 {LEASE} 授予续租和释放都被拒（name 条件），{OTHER_LEASE} 不受影响", other.token),
        expected,
        actual,
    );
    Ok(())
}
// ANCHOR_END: each_condition
