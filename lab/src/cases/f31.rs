//! F31 — lock-delay: a resource that checks nothing, protected only by
//! time. Each new holder waits a lock-delay after its acquire before its
//! first write, so that a paused holder's write lands before it. When A's
//! pause ends inside the delay, the order holds and B's result stays; when
//! the pause outlasts the delay, A's stale write lands after B's and
//! replaces it (F5's harm, on a store with no fence). The wait is the
//! price of every takeover; claiming first on a store with a version
//! refuses A whatever its pause, with no wait.

use super::{Case, Lab};
use crate::error::Result;
use crate::object::stage::{first_write_after_grant, takeover, wait_lock_delay, LOCK_DELAY, REPORT};
use crate::object::writer::Guard;
use crate::stats::ms;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F31", title: |_| "lock-delay：资源端什么都不比较，只靠等".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    t.note(format!("资源端什么都不比较；B 获取租约之后先等 lock-delay（{} ms，旧租约的 TTL），再写第一次", ms(LOCK_DELAY)));
    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, false)?;
    let a = s.a.write_blind("rows=100(A)")?;
    wait_lock_delay(&mut s.leases)?;
    let b = s.b.write_blind("rows=200(B)")?;
    let kept = s.b.read()?;
    t.check_eq_shown("A 的停顿在 lock-delay 之内结束：A 的旧写入先落下，B 的在它之后，对象里是 B 的结果", "A accepted=true; B accepted=true; holder-b".to_owned(), format!("A accepted={a}; B accepted={b}; {}", kept.writer));
    let waited = first_write_after_grant(&mut s.leases, REPORT, "holder-b")?;
    t.check(waited >= LOCK_DELAY, "代价：B 的第一次写入比它获得租约晚了至少一个 lock-delay（按数据库时钟）", || format!("{:.1}ms", ms(waited)));

    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, false)?;
    wait_lock_delay(&mut s.leases)?;
    let b = s.b.write_blind("rows=200(B)")?;
    let a = s.a.write_blind("rows=100(A)")?;
    let kept = s.b.read()?;
    t.note(format!("A 的停顿比 lock-delay 长：B 等完写入 accepted={b}，A 随后的写入 accepted={a}，对象里是 {} 写的 {}", kept.writer, kept.body));
    t.exposes(a && kept.writer == "holder-a", "B 写完之后 A 的旧写入落下，覆盖了 B 的结果", || format!("kept {}", kept.writer));

    lab.reset()?;
    let mut s = takeover(REPORT, "rows=0", Guard::Version, true)?;
    let b = s.b.write("rows=200(B)", true)?;
    let a = s.a.write("rows=100(A)", true)?;
    let kept = s.b.read()?;
    t.check_eq_shown("先认领（按版本），不等 lock-delay：同样的次序，A 的条件写入被拒绝，对象里是 B 的结果", "A accepted=false; holder-b".to_owned(), format!("A accepted={a}; {}", kept.writer));
    t.check(b, "先认领：B 获取之后马上写，不用等", || "B's write was refused");
    Ok(())
}
