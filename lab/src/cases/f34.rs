//! F34 — the report as one object of a store that compares only its own
//! version: the resource modes VERSION_CAS and CLAIM_FIRST, which the chaos
//! run, the bench and the model run beside the fences.
//!
//! First F7's timeline: A (token 1) writes summary, its lease expires, B
//! (token 2) rewrites summary, then A writes detail. A VERSION_CAS holder
//! reads the version afresh before each put and retries a put it lost, so
//! A's detail lands after B's summary: the compare-and-swap kept a write in
//! between from being overwritten unseen, and did nothing against a stale
//! holder. A CLAIM_FIRST holder put its token into the object before its
//! first write and puts conditional on the version of its own last write,
//! never reading again: B's claim moved the version, and A is refused.
//!
//! Then the read's own race: A reads the object and stops before its put
//! (the gap hook) while its lease expires and B writes summary. A
//! VERSION_CAS put is refused, read again and retried, and lands. A
//! CLAIM_FIRST claim is refused, read again, finds B's larger token in the
//! object, and gives up.

use super::common::{acquire, pause_in_gap, part_write};
use super::{Case, Lab};
use crate::error::Result;
use crate::latch::BOUND;
use crate::params::{LEASE, PART_DETAIL, PART_SUMMARY, SCOPE, SHORT_TTL, TTL};
use crate::transcript::Transcript;
use crate::vocabulary::FenceMode;

/// The case.
pub const CASE: Case = Case { id: "F34", title: |_| "报告是版本存储里的一个对象：只比版本的条件写与先认领".into(), run, mode: None, modes: &[], needs: &[] };


/// What A's write did after the read's race.
struct Overtaken {
    /// Whether A's detail was accepted.
    accepted: bool,
    /// The puts A lost and made again.
    lost_puts: u64,
    /// A's rows in `write_attempt`: refused, accepted.
    refused: i64,
    recorded_accepted: i64,
    /// The token claimed in the object.
    claim: Option<i64>,
}

/// The read's race in `mode`: A reads, stops in the gap; its lease expires
/// and B writes summary; then A goes on.
// ANCHOR: f34_gap
fn read_then_overtaken(lab: &Lab, mode: FenceMode) -> Result<Overtaken> {
    lab.reset()?;
    let mut leases = lab.leases("lab")?;
    let a = acquire(&mut leases, "holder-a", SHORT_TTL)?;
    let (a_store, inside, go) = pause_in_gap(lab.store(mode, "holder-a")?);
    let mut b_store = lab.store(mode, "holder-b")?;
    let a_grant = a.clone();
    let writer = std::thread::spawn(move || {
        let mut a_store = a_store;
        let accepted = a_store.write(&part_write(&a_grant, PART_DETAIL, "detail(A)"))?;
        Ok::<_, crate::Error>((accepted, a_store.lost_puts()))
    });
    // A has read the object and stands before its put.
    let stood = inside.wait(BOUND);
    let overtaken = (|| {
        leases.wait_until_expired(LEASE)?;
        let b = acquire(&mut leases, "holder-b", TTL)?;
        b_store.write(&part_write(&b, PART_SUMMARY, "summary(B)"))
    })();
    go.open();
    let (accepted, lost_puts) = writer.join().map_err(|_| "holder-a's writer thread panicked")??;
    if !stood {
        return Err("holder-a never reached the point between its read and its put".into());
    }
    if !overtaken? {
        return Err("holder-b's summary was refused, so nothing overtook holder-a".into());
    }
    let mut view = lab.view()?;
    let (refused, recorded_accepted) = (view.attempts("holder-a", false)?, view.attempts("holder-a", true)?);
    let claim = lab.store(mode, "lab")?.read_object(SCOPE)?.and_then(|o| o.claim);
    Ok(Overtaken { accepted, lost_puts, refused, recorded_accepted, claim })
}
// ANCHOR_END: f34_gap

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    // F7's timeline, on the version store.
    let cas = super::f7::timeline(lab, FenceMode::VersionCas)?;
    t.check_eq("VERSION_CAS：A(token=1) 在租约有效时写 summary 被接受", true, cas.a_summary);
    t.note(format!("VERSION_CAS：B(token=2) summary accepted={}，A(token=1) detail accepted={}", cas.b_summary, cas.a_detail));
    t.exposes(cas.b_summary && cas.a_detail, "每次写前重读版本：A 读到 B 写后的版本，旧持有者的 detail 写入成功", || {
        format!("B summary accepted={}, A detail accepted={}", cas.b_summary, cas.a_detail)
    });
    t.check_eq_shown("VERSION_CAS：报告被撕开，detail 是旧持有者的", "detail(A) by holder-a token=1".to_owned(), cas.detail);

    let claim = super::f7::timeline(lab, FenceMode::ClaimFirst)?;
    t.check_eq("CLAIM_FIRST：A(token=1) 认领后写 summary 被接受", true, claim.a_summary);
    t.note(format!("CLAIM_FIRST：B(token=2) summary accepted={}，A(token=1) detail accepted={}", claim.b_summary, claim.a_detail));
    t.check_eq("先认领：B 的认领改了版本，A 以自己上次写下的版本为条件写 detail 被拒", "B true, A false".to_owned(), format!("B {}, A {}", claim.b_summary, claim.a_detail));
    t.check_eq_shown("CLAIM_FIRST：detail 不存在", "absent".to_owned(), claim.detail);

    let cas = read_then_overtaken(lab, FenceMode::VersionCas)?;
    t.note(format!("VERSION_CAS：A 读完版本、写之前停住，其间租约过期、B 写了 summary；A 输掉的条件写 {} 次，它的 detail accepted={}", cas.lost_puts, cas.accepted));
    t.exposes(cas.accepted && cas.lost_puts == 1, "A 的条件写输给 B 的写后重读重试：重试循环把旧持有者送了进去", || {
        format!("accepted={}, lost puts={}", cas.accepted, cas.lost_puts)
    });
    t.check_eq_shown("write_attempt 里 A 这次写只有一行，被接受", "0/1".to_owned(), format!("{}/{}", cas.refused, cas.recorded_accepted));

    let claim = read_then_overtaken(lab, FenceMode::ClaimFirst)?;
    let claimed = claim.claim.map_or("none".to_owned(), |c| format!("token={c}"));
    t.note(format!("CLAIM_FIRST：A 读完对象、认领之前停住，其间租约过期、B 认领并写了 summary；A 的 detail accepted={}", claim.accepted));
    t.check_eq_shown("A 的认领输给 B 的写，重读见到 token=2 的认领，放弃：write_attempt 里被拒 1 次、被接受 0 次", "1/0".to_owned(), format!("{}/{}", claim.refused, claim.recorded_accepted));
    t.check_eq_shown("CLAIM_FIRST：对象里的认领是 B 的", "token=2".to_owned(), claimed);
    Ok(())
}
