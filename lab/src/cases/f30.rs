//! F30 — ABA: an ETag is the MD5 of the body, so a body written again
//! brings its ETag back. Holder A reads the job's status `state=idle` and
//! its ETag, and stands still; B acquires, sets the status to running, does
//! the job, and sets it back to idle. A's `If-Match` on the ETag it read
//! is accepted: the object looks unchanged. A write conditional on the
//! store's version is refused (versions never come back), and so is A's
//! `If-Match` when every holder claims first: its token in the body makes
//! every body new.

use super::{Case, Lab};
use crate::error::Result;
use crate::object::stage::{takeover, STATUS};
use crate::object::writer::Guard;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F30", title: |_| "ETag 的 ABA：内容回到原样，过期的条件写入被接受".into(), run, mode: None, modes: &[], needs: &[] };

/// B's job, as it shows on the status: running, then idle again.
fn b_runs_the_job(s: &mut crate::object::stage::Takeover, claimed: bool) -> Result<bool> {
    Ok(s.b.write("state=running", claimed)? && s.b.write("state=idle", claimed)?)
}

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    lab.reset()?;
    let mut s = takeover(STATUS, "state=idle", Guard::Etag, false)?;
    let read = s.a.seen().clone();
    t.note(format!("按 ETag 的条件写入（If-Match）：A 获取 token={}，读到 {}（ETag {}…），然后停住；租约过期，B 获取 token={}", s.a.token, read.body, read.etag_short(), s.b.token));
    let b = b_runs_the_job(&mut s, false)?;
    let after = s.b.read()?;
    t.note(format!("B 把状态改成 running，干完活又改回 idle（两次都 accepted={b}）：现在是 {}，ETag {}…，version={}", after.body, after.etag_short(), after.version));
    let a = s.a.write("state=running", false)?;
    t.exposes(a && after.etag == read.etag, "内容回到原样，ETag 也回到原样，过期的 A 的 If-Match 被接受，它以为作业还没人跑", || format!("A accepted={a}, ETag back={}", after.etag == read.etag));

    lab.reset()?;
    let mut s = takeover(STATUS, "state=idle", Guard::Version, false)?;
    b_runs_the_job(&mut s, false)?;
    let a = s.a.write("state=running", false)?;
    t.check_eq_shown("同样的时间线，按版本写：A 的条件写入被拒绝（它读到的 version=1，版本不会回来）", "accepted=false".to_owned(), format!("accepted={a}"));

    lab.reset()?;
    let mut s = takeover(STATUS, "state=idle", Guard::Etag, true)?;
    let a_read = s.a.seen().clone();
    b_runs_the_job(&mut s, true)?;
    let after = s.b.read()?;
    let a = s.a.write("state=running", true)?;
    t.note(format!("先认领（仍按 ETag）：A 写下的是 {}，B 改回 idle 之后是 {}", a_read.body, after.body));
    t.check_eq_shown("先认领：body 里带着 token，ETag 回不到 A 看到的那个，A 的 If-Match 被拒绝", "accepted=false".to_owned(), format!("accepted={a}"));
    Ok(())
}
