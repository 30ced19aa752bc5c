//! F4 — the article's main experiment: a holder that passed every
//! client-side check is frozen (SIGSTOP) just before its write; its lease
//! expires by the database clock; another holder takes over with token 2;
//! when the first resumes, the resource refuses its token-1 write.

use super::paused_holder;
use super::{Case, Lab};
use crate::error::Result;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;

/// The resource mode of F4 unless the reader picks another with `--mode`.
const MODE: FenceMode = FenceMode::FencedScope;

/// The case.
pub const CASE: Case = Case {
    id: "F4",
    title: |o| format!("暂停的旧持有者：{}，资源端模式={}", paused_holder::pause_point(o.pause_before_check), o.mode.unwrap_or(MODE)),
    run,
    mode: Some(MODE),
    modes: &FenceMode::ALL,
    needs: &[],
};

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    paused_holder::timeline(lab, t, lab.options.mode.unwrap_or(MODE))
}
