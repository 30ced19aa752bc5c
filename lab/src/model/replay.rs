//! `lab model --replay MODE`: a counterexample replayed against PostgreSQL.

use super::StoreKind;
use crate::error::Result;
use crate::resource::FenceMode;
use std::path::PathBuf;

/// Replays `mode`'s counterexample on `store`.
pub fn run(_mode: FenceMode, _store: StoreKind, _holder_bin: PathBuf) -> Result<bool> {
    Err("not yet".into())
}
