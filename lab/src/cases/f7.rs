//! F7 — the fence's granularity must match what the lease protects. A
//! (token 1) writes `summary`, its lease expires, B (token 2) rewrites only
//! `summary`; then A writes `detail`, which B never touched. A per-row fence
//! has no old token on that row to compare with and accepts the stale write;
//! the per-scope fence refuses it. A second scope, which nobody writes,
//! shows the scope fence's other half: it moves only its own scope's floor.
//! `--mode fenced-scope-cte` runs the scope half with the one-statement form,
//! `--mode fenced-scope-shared` with the reader/writer fence.

use super::common::{acquire, part_write};
use super::{Case, Lab, CaseOptions};
use crate::db;
use crate::error::Result;
use crate::lease::Grant;
use crate::params::{LEASE, PART_DETAIL, PART_SUMMARY, SCOPE, SHORT_TTL, TTL};
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The mode of the scope half unless the reader picks another scope fence with `--mode`.
const MODE: FenceMode = FenceMode::FencedScope;

/// The case.
pub const CASE: Case = Case { id: "F7", title, run, mode: Some(MODE), modes: &FenceMode::SCOPE_FENCES, needs: &[] };

fn title(options: &CaseOptions) -> String {
    let mut title = "栅栏粒度：逐行比较与作用域级比较".to_owned();
    if let Some(mode) = CASE.mode_in_force(options).filter(|m| *m != MODE) {
        title.push_str(&format!("，作用域级一侧的资源端模式={mode}"));
    }
    title
}

/// What happened in one mode (F34 runs the same timeline on a version store).
pub(super) struct Outcome {
    /// A's first write of summary, while its lease was valid.
    pub(super) a_summary: bool,
    /// B's rewrite of summary with token 2.
    pub(super) b_summary: bool,
    /// A's stale write of detail with token 1.
    pub(super) a_detail: bool,
    /// The stored detail afterwards.
    pub(super) detail: String,
    /// A's grant, for one more stale write.
    pub(super) a: Grant,
    /// B's token.
    pub(super) b_token: i64,
}

/// A scope nobody writes in this case: its floor must stay where it was.
const OTHER_SCOPE: &str = "weekly-report";

// ANCHOR: f7_timeline
pub(super) fn timeline(lab: &Lab, mode: FenceMode) -> Result<Outcome> {
    lab.reset()?;
    let mut leases = lab.leases("lab")?;
    let mut a_store = lab.store(mode, "holder-a")?;
    let mut b_store = lab.store(mode, "holder-b")?;
    let mut view = lab.view()?;
    // A second scope exists before the writes, with its floor at 0, like
    // the seeded daily-report (sql/res26.sql).
    db::connect(db::RES_DB, "lab")?.execute("INSERT INTO fence_floor (scope, max_token) VALUES ($1, 0)", &[&OTHER_SCOPE])?;
    let a = acquire(&mut leases, "holder-a", SHORT_TTL)?;
    let a_summary = a_store.write(&part_write(&a, PART_SUMMARY, "summary(A)"))?;
    leases.wait_until_expired(LEASE)?;
    let b = acquire(&mut leases, "holder-b", TTL)?;
    let b_summary = b_store.write(&part_write(&b, PART_SUMMARY, "summary(B)"))?;
    let a_detail = a_store.write(&part_write(&a, PART_DETAIL, "detail(A)"))?;
    let detail = view.part_text(SCOPE, PART_DETAIL)?;
    Ok(Outcome { a_summary, b_summary, a_detail, detail, a, b_token: b.token })
}
// ANCHOR_END: f7_timeline

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let row = timeline(lab, FenceMode::FencedRow)?;
    t.check_eq("FENCED_ROW：A 持 token=1，其租约过期后 B 持 token=2", "1/2".to_owned(), format!("{}/{}", row.a.token, row.b_token));
    t.check_eq(format!("FENCED_ROW：A(token={}) 在租约有效时写 summary 被接受", row.a.token), true, row.a_summary);
    t.note(format!("FENCED_ROW：B summary accepted={}，A(token={}) detail accepted={}", row.b_summary, row.a.token, row.a_detail));
    t.exposes(row.b_summary && row.a_detail, "行级比较只看被写的那一行；新行没有旧 token 可比，旧持有者写入成功", || {
        format!("B summary accepted={}, A detail accepted={}", row.b_summary, row.a_detail)
    });
    t.check_eq_shown("FENCED_ROW：detail 现在是旧持有者的", "detail(A) by holder-a token=1".to_owned(), row.detail);
    // The per-row fence does guard rows that already exist, which is why it looks right.
    let mut a_again = lab.store(FenceMode::FencedRow, "holder-a")?;
    let rewrite = a_again.write(&part_write(&row.a, PART_SUMMARY, "summary(A) again"))?;
    t.check_eq(format!("FENCED_ROW 对已存在的行确实拒绝旧 token：A(token={}) 重写 summary 被拒", row.a.token), false, rewrite);

    let mode = CASE.mode_in_force(&lab.options).unwrap_or(MODE);
    let scope = timeline(lab, mode)?;
    t.check_eq(format!("{mode}：A 持 token=1，其租约过期后 B 持 token=2"), "1/2".to_owned(), format!("{}/{}", scope.a.token, scope.b_token));
    t.check_eq(format!("{mode}：A(token={}) 在租约有效时写 summary 被接受", scope.a.token), true, scope.a_summary);
    t.note(format!("{mode}：B summary accepted={}，A(token={}) detail accepted={}", scope.b_summary, scope.a.token, scope.a_detail));
    t.check_eq("作用域级 floor 拒绝 A 对 B 尚未触及的分片的写入", "B true, A false".to_owned(), format!("B {}, A {}", scope.b_summary, scope.a_detail));
    t.check_eq_shown(format!("{mode}：detail 不存在"), "absent".to_owned(), scope.detail);
    let mut view = lab.view()?;
    t.check_eq(format!("{mode}：daily-report 的 fence_floor 为 2"), 2, view.floor(SCOPE)?);
    t.check_eq(format!("无人写入的 {OTHER_SCOPE} 的 fence_floor 仍为 0：栅栏只推进自己作用域的 floor"), 0, view.floor(OTHER_SCOPE)?);
    Ok(())
}
