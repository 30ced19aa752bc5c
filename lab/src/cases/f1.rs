//! F1 — the normal path: acquire, write, renew, release, and the next holder
//! acquires a larger token and writes. Along the way, the state machine's
//! refusals: no acquire while the lease is held (the row stays as it was),
//! no renewal after release.

use super::common::{part_write, require, token_of};
use super::{Case, Lab};
use crate::error::Result;
use crate::params::{margin, LEASE, PART_SUMMARY, SCOPE, TTL};
use crate::resource::FenceMode;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case {
    id: "F1",
    title: |_| "正常路径：获取 → 写入 → 续租 → 释放 → 下一持有者获取更大 token 并写入".into(),
    run,
};

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut leases = lab.leases("lab")?;
    let mut report = lab.store(FenceMode::FencedScope, "lab")?;
    let mut view = lab.view()?;

    let a = leases.acquire(LEASE, "holder-a", TTL, margin(TTL))?;
    t.check_eq("holder-a 获取租约，token=1", "1".to_owned(), token_of(&a));
    let mut a = a.ok_or("holder-a got no grant")?;
    let held = leases.row(LEASE)?.ok_or("no lease row after the acquire")?;
    t.check_eq("租约行处于持有中：holder=holder-a，expires_at > now()", "holder-a held".to_owned(), format!("{} {}", held.holder, if held.held { "held" } else { "expired" }));

    let refused = leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?;
    t.check_eq("有效期内 holder-b 的获取被拒", "none".to_owned(), token_of(&refused));
    let after = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check(after == held, "被拒的获取没有改动租约行（holder、token、expires_at 都不变）");

    let written = report.write(&part_write(&a, PART_SUMMARY, "rows=100(A)"))?;
    t.check_eq("holder-a 以 token=1 写入被接受", true, written);

    let renewed = leases.renew(&mut a)?;
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("续租成功，token 不变", "renewed token=1".to_owned(), format!("{} token={}", if renewed { "renewed" } else { "refused" }, row.token));
    t.check(row.expires_epoch > held.expires_epoch, "续租把 expires_at 推后（按数据库时钟重新计算）");

    let released = leases.release(&a)?;
    t.check_eq("holder-a 主动释放", true, released);
    let row = leases.row(LEASE)?.ok_or("the lease row vanished")?;
    t.check_eq("释放后 expires_at = -infinity，token 不回退", "-infinity token=1".to_owned(), format!("{} token={}", row.expires_at, row.token));
    let late = leases.renew(&mut a)?;
    t.check_eq("释放后 holder-a 的续租被拒（已释放是已过期的特例）", false, late);

    let b = leases.acquire(LEASE, "holder-b", TTL, margin(TTL))?;
    t.check_eq("释放后 holder-b 立即获取，token=2", "2".to_owned(), token_of(&b));
    let b = b.ok_or("holder-b got no grant")?;
    let written = report.write(&part_write(&b, PART_SUMMARY, "rows=101(B)"))?;
    t.check_eq("holder-b 以 token=2 写入被接受", true, written);
    require(written, "holder-b's write was refused")?;

    t.check_eq_shown("资源端 fence_floor=2", 2, view.floor(SCOPE)?);
    let accepted = view.attempts("holder-a", true)? + view.attempts("holder-b", true)?;
    let refused = view.attempts("holder-a", false)? + view.attempts("holder-b", false)?;
    t.check_eq("write_attempt 记录两次被接受、零次被拒的写入", "2/0".to_owned(), format!("{accepted}/{refused}"));
    Ok(())
}
