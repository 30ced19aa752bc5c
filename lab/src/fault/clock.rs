//! Clocks that run wrong, injected from outside the way Jepsen's clock
//! faults are: Debian's `libfaketime`, preloaded (`LD_PRELOAD`) into one
//! process, replaces the C library's clock calls (`clock_gettime`,
//! `gettimeofday`, `time`) for that process alone. The machine's clock is
//! never touched.
//!
//! Two faults (F13):
//! - [`rate`]: a holder whose clocks, the monotonic one included, run at a
//!   fraction of real time (`FAKETIME="+0 x0.6"`). Rust's `Instant` reads
//!   `CLOCK_MONOTONIC` through the C library, so the holder's local
//!   deadline is measured on the slow clock.
//! - [`JumpFile`]: a server whose wall clock can be stepped while it runs.
//!   libfaketime reads its offset from a file on every call
//!   (`FAKETIME_TIMESTAMP_FILE`, `FAKETIME_NO_CACHE=1`); writing `+5` there
//!   moves every server process's `now()` five seconds ahead at once. The
//!   monotonic clock is left real (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a
//!   step of the system clock by NTP would leave it.
//!
//! What the preload cannot reach: a statically linked program, and a clock
//! read without the C library (a raw `rdtsc`, a direct system call). The
//! lab's holder and PostgreSQL read their clocks through the C library.

use crate::error::Result;
use crate::safe_dir::SafeDir;
use std::path::PathBuf;

/// Where Debian's `libfaketime` package puts the preload library.
pub fn library() -> Result<PathBuf> {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketime.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketime.so.1")])
        .find(|p| p.is_file());
    found.ok_or_else(|| {
        "libfaketime is not installed (Debian package `libfaketime`; ./run.sh installs it when run as root): \
         the clock faults of F13 are injected with it"
            .into()
    })
}

/// The environment that makes a process's clocks run at `rate` times real
/// time, from the moment it starts (`+0`: no offset).
pub fn rate(rate: f64) -> Result<Vec<(String, String)>> {
    Ok(vec![
        ("LD_PRELOAD".into(), library()?.display().to_string()),
        ("FAKETIME".into(), format!("+0 x{rate}")),
    ])
}

/// A file holding a clock offset for libfaketime, shared by every process
/// started with [`JumpFile::env`]; [`JumpFile::set`] steps their clocks.
pub struct JumpFile {
    /// The folder it is in: one of the lab's own (the cluster's place), so
    /// no other account can replace the file.
    dir: SafeDir,
}

/// The file's name in its folder.
const JUMP_FILE: &str = "faketime-offset";

impl JumpFile {
    /// Creates the file in `dir` with no offset, readable by every account
    /// (the server runs as `postgres` when the lab runs as root).
    pub fn create(dir: SafeDir) -> Result<JumpFile> {
        let file = JumpFile { dir };
        file.set(0)?;
        Ok(file)
    }

    /// Sets the offset: every process reading the file sees its wall clock
    /// `seconds` ahead of the real one (behind when negative), from its next
    /// clock call on. Replaced whole (a new file renamed over the old), so
    /// a reader never sees it half-written.
    pub fn set(&self, seconds: i64) -> Result<()> {
        self.dir.write_whole(JUMP_FILE, &format!("{seconds:+}\n"), 0o644)
    }

    /// The file's path, for libfaketime.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join(JUMP_FILE)
    }

    /// The environment of a process whose wall clock follows the file.
    pub fn env(&self) -> Result<Vec<(String, String)>> {
        Ok(vec![
            ("LD_PRELOAD".into(), library()?.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE".into(), self.path().display().to_string()),
            ("FAKETIME_NO_CACHE".into(), "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ])
    }
}

impl Drop for JumpFile {
    fn drop(&mut self) {
        if let Err(e) = self.dir.remove_file(JUMP_FILE) {
            eprintln!("lab: {}", crate::error::chain(e.as_ref()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset is written as libfaketime reads it: a signed number of seconds.
    #[test]
    fn offsets_are_signed_seconds() {
        let tmp = tempfile::tempdir().unwrap();
        let file = JumpFile::create(SafeDir::open(tmp.path()).unwrap()).unwrap();
        let path = file.path();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "+0\n");
        file.set(5).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "+5\n");
        file.set(-2).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "-2\n");
        drop(file);
        assert!(!path.exists());
    }
}
