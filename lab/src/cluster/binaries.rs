//! Finding the PostgreSQL server binaries: `LAB_PG_BIN`, then `PATH`, then
//! Debian's versioned folders, newest first. `run.sh` asks `lab` (through
//! `lab cluster status`) rather than searching again itself.

use crate::error::Result;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest PostgreSQL major version the lab runs on.
pub const MIN_MAJOR: u32 = 15;

/// The programs the lab runs itself; `psql` is optional (for the reader).
const REQUIRED: [&str; 4] = ["initdb", "pg_ctl", "postgres", "pg_controldata"];

/// Finds a folder with the server programs of version 15 or newer.
pub fn find_server_bin() -> Result<(PathBuf, u32)> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("LAB_PG_BIN") {
        candidates.push(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    let mut versioned: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .collect();
    versioned.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    candidates.extend(versioned.into_iter().map(|(_, dir)| dir));

    let mut too_old = Vec::new();
    for dir in candidates {
        if !REQUIRED.iter().all(|p| dir.join(p).is_file()) {
            continue;
        }
        match server_major(&dir) {
            Some(major) if major >= MIN_MAJOR => return Ok((dir, major)),
            Some(major) => too_old.push(format!("{} (version {major})", dir.display())),
            None => too_old.push(format!("{} (version unreadable)", dir.display())),
        }
    }
    let found = if too_old.is_empty() { String::new() } else { format!(" Found only: {}.", too_old.join(", ")) };
    Err(format!(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres, pg_controldata; version {MIN_MAJOR} or newer) \
         in LAB_PG_BIN, PATH or /usr/lib/postgresql/*/bin.{found} Install the server package `postgresql` \
         ({MIN_MAJOR} or newer; on Debian 12: `apt-get install postgresql-15`; `./run.sh` does this itself when run as root), \
         or point LAB_PG_BIN at its bin folder."
    )
    .into())
}

/// The major version `postgres --version` reports, e.g. 15 for "postgres (PostgreSQL) 15.18".
fn server_major(dir: &Path) -> Option<u32> {
    let out = Command::new(dir.join("postgres")).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().last()?;
    version.split(['.', 'b', 'r']).next()?.parse().ok()
}
