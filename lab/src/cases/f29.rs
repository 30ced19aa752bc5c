//! F29 — a conditional write protects the object, not the lease. Holder A
//! reads the object's version and stands still; its lease runs out and B
//! acquires. If nobody wrote in between, A's write conditional on the
//! version it read is accepted, though A no longer holds the lease, and B's
//! is refused. Only a write in between makes the store refuse A. Claiming
//! first (each holder writes its token into the object right after its
//! acquire, conditional on what it read) is that write, made on purpose.

use super::{Case, Lab};
use crate::error::Result;
use crate::object::stage::{takeover, REPORT};
use crate::object::writer::Guard;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F29", title: |_| "条件写入保护的是对象，不是租约".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, false)?;
    t.note(format!(
        "按版本的条件写入：A 获取 token={}，读到 version={}，然后停住；租约按数据库时钟过期，B 获取 token={}，读到 version={}",
        s.a.token,
        s.a.seen().version,
        s.b.token,
        s.b.seen().version
    ));
    let a = s.a.write("rows=100(A)", false)?;
    let b = s.b.write("rows=200(B)", false)?;
    let kept = s.b.read()?;
    t.note(format!("B 还没写的时候 A 恢复：A 的条件写入 accepted={a}，B 随后的条件写入 accepted={b}，对象里是 {} 写的 {}（version={}）", kept.writer, kept.body, kept.version));
    t.exposes(a && !b && kept.writer == "holder-a", "版本没变，已经失去租约的 A 写入成功，持有租约的 B 反被拒绝", || format!("A accepted={a}, B accepted={b}, kept {}", kept.writer));

    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, false)?;
    let b = s.b.write("rows=200(B)", false)?;
    let a = s.a.write("rows=100(A)", false)?;
    t.check_eq_shown("B 先写了一次：A 按它读到的 version=1 写入，被拒绝；对象里是 B 的结果", "B accepted=true; A accepted=false; holder-b".to_owned(), format!("B accepted={b}; A accepted={a}; {}", s.b.read()?.writer));

    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, true)?;
    t.note(format!("先认领：A 获取后把 token={} 写进对象，B 获取后把 token={} 写进对象（version={}），都以各自读到的版本为条件", s.a.token, s.b.token, s.b.seen().version));
    let a = s.a.write("rows=100(A)", true)?;
    t.check_eq_shown("先认领：B 还没写结果的时候 A 恢复，A 的条件写入被拒绝", "accepted=false".to_owned(), format!("accepted={a}"));
    let b = s.b.write("rows=200(B)", true)?;
    let kept = s.b.read()?;
    t.check_eq_shown("先认领：B 的写入被接受，对象里是 B 的结果", "accepted=true; token=2; rows=200(B)".to_owned(), format!("accepted={b}; {}", kept.body));
    Ok(())
}
