//! F5 — the negative control of F4: the same timeline, the same lease
//! behaviour, but a resource that does not check tokens. A's stale report
//! replaces B's: without the resource-side check no lease can help.

use super::paused_holder;
use super::{Case, Lab};
use crate::error::Result;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The resource mode of F5 unless the reader picks another with `--mode`.
const MODE: FenceMode = FenceMode::Unfenced;

/// The case.
pub const CASE: Case = Case {
    id: "F5",
    title: |o| {
        let pause = if o.pause_before_check { format!("，{}", paused_holder::pause_point(true)) } else { String::new() };
        format!("负向对照：与 F4 相同的时间线，资源端模式={}{pause}", o.mode.unwrap_or(MODE))
    },
    run,
    mode: Some(MODE),
    modes: &FenceMode::ALL,
    needs: &[],
};

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    paused_holder::timeline(lab, t, lab.options.mode.unwrap_or(MODE))
}
