//! F12 — a write delayed in the network. Holder A reaches the database
//! server through a delaying TCP proxy of the lab's own (loopback only):
//! one slow link for its lease sessions and its resource session. A is
//! valid and passes its local check; its write leaves A and is held in the
//! proxy, and so are its renewals, so its lease expires by the database
//! clock while A runs; B acquires and writes; then the proxy lets A's
//! requests through. `FENCED_SCOPE` refuses the stale write; `UNFENCED`
//! (the negative control) lets it overwrite B's. No process is paused: the
//! request goes stale in flight.

use crate::vocabulary::Act;
use super::common::{lab_socket, require};
use super::{Case, Lab};
use crate::error::Result;
use crate::events;
use crate::fault::DelayProxy;
use crate::holder::{HolderArgs, Step, Steps, WaitPoint};
use crate::holder_guard::HolderGuard;
use crate::params::{LEASE, PART_SUMMARY, SCOPE};
use crate::poll;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case {
    id: "F12",
    title: |_| "网络里迟到的写入：A 没有暂停，写请求在代理里过期".into(),
    run,
    mode: None,
    modes: &[],
    needs: &[],
};

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let fenced = delayed_write(lab, t, FenceMode::FencedScope)?;
    t.check_eq("FENCED_SCOPE：迟到的 token=1 写入被拒，summary 仍是 B 的", "rows=601(B) by holder-b token=2".to_owned(), fenced);
    lab.reset()?;
    let unfenced = delayed_write(lab, t, FenceMode::Unfenced)?;
    t.exposes(unfenced == "rows=600(A) by holder-a token=1", "资源端不检查 token 时，迟到的写入覆盖了 B 的结果", || &unfenced);
    Ok(())
}

// ANCHOR: f12_timeline
/// One run of the timeline with the resource in `mode`; returns the final summary.
fn delayed_write(lab: &Lab, t: &mut Transcript, mode: FenceMode) -> Result<String> {
    let mut leases = lab.leases("lab observer")?;
    let proxy = DelayProxy::start(lab_socket()?)?;
    // All of A's sessions (lease, renewer, resource) go through the proxy.
    let args = HolderArgs { mode, waits: vec![WaitPoint::BeforeWrite], ..HolderArgs::new("holder-a", "rows=600(A)") }.via_proxy(proxy.port());
    let mut a = HolderGuard::spawn(&lab.holder_bin, &args)?;
    let ready = t.check_eq(
        format!("{mode}：A 获取 token=1，通过本地检查，等待放行"),
        Steps::from([Step::Acquired { token: 1 }, Step::DeadlineOk, Step::Waiting]),
        a.next_steps(3)?,
    );
    require(ready, "holder-a is not ready to write")?;
    t.check_eq(format!("{mode}：A 的三个会话（获取、续租线程、资源）都经过代理"), 3, proxy.connections());

    // From here the proxy holds every byte A sends; then A is let go and
    // sends its write, which stays on the wire.
    proxy.hold();
    events::record("holder-a", Act::Hold);
    a.send_line("go")?;
    let in_flight = proxy.wait_until_held(poll::BOUND);
    t.check(in_flight, format!("{mode}：放行后 A 发出的请求（它写入事务的第一条）停在代理里，没有到达服务器"), || "the proxy holds nothing");
    leases.wait_until_expired(LEASE)?;
    t.check_eq(format!("{mode}：A 的续租也卡在代理里，租约按数据库时钟过期；A 一直在运行，没有被暂停（/proc 状态 S）"), 'S', a.state()?);

    let mut b = HolderGuard::spawn(&lab.holder_bin, &HolderArgs { mode, ..HolderArgs::new("holder-b", "rows=601(B)") })?;
    let (b_lines, _) = b.rest_of_output()?;
    t.check_eq(
        format!("{mode}：B 获取 token=2 并写入"),
        Steps::from([Step::Acquired { token: 2 }, Step::DeadlineOk, Step::Write { accepted: true, token: 2 }, Step::RenewAfterWrite { ok: true }, Step::Released]),
        b_lines,
    );

    proxy.release();
    events::record("holder-a", Act::Release);
    let (a_lines, _) = a.rest_of_output()?;
    // The late write must arrive and be answered: a summary that stays B's
    // proves nothing if A's request never reached the resource.
    let accepted = mode == FenceMode::Unfenced;
    t.check_eq_shown(
        format!("{mode}：代理放行后，A 的写入到达资源端并得到回答；它随后的续租失败"),
        Steps::from([Step::Write { accepted, token: 1 }, Step::RenewAfterWrite { ok: false }, Step::LeaseLost]),
        a_lines,
    );
    lab.view()?.part_text(SCOPE, PART_SUMMARY)
}
// ANCHOR_END: f12_timeline
