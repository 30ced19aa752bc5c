//! Where things live: the project root (compiled in, so the binaries work
//! from any directory), the build directory and the evidence directory.

use std::path::PathBuf;

/// The project's top level (the folder holding `Cargo.toml`, `sql/`, `evidence/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("lab/ has a parent").to_path_buf()
}

/// The lab's part of the build directory: `target/lab`.
pub fn build_dir() -> PathBuf {
    root().join("target").join("lab")
}

/// The cluster's folder (data, socket, log), unless `LAB_CLUSTER_DIR` moves it.
pub fn cluster_dir() -> PathBuf {
    match std::env::var_os("LAB_CLUSTER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => build_dir().join(crate::cluster::NAME),
    }
}

/// Where each case's last transcript is saved for `lab diff`.
pub fn transcripts_dir() -> PathBuf {
    build_dir().join("transcripts")
}

/// The locked evidence: `output.txt`, the per-case snapshots, `LIMITS.md`.
pub fn evidence_dir() -> PathBuf {
    root().join("evidence").join("26")
}
