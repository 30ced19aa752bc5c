//! Folders a parent walked to and hands down to a child, open.
//!
//! A holder on a host of the lab's network runs inside a user namespace of
//! the run's when the lab is not root (see `hosts`). There every file of an
//! account the namespace does not map, root's included, shows as owned by
//! `nobody`: the walk from `/` ([`SafeDir::open`]) can no longer tell root's
//! `/home` from a folder another account made, and refuses it. So the lab
//! walks to each folder the holder reads (its servers' credentials) before
//! the holder starts, and the holder inherits it as an open descriptor,
//! named in `LAB_HANDED_DOWN` (one `<descriptor> <path>` a line). A folder
//! handed down is still checked where it stands (a folder, this account's,
//! writable by nobody else, the lab's marker); only the walk above it is
//! the parent's. Nothing inside is reached but through the descriptor.

use super::{check_folder, SafeDir};
use crate::error::{Result, ResultExt};
use nix::sys::stat::fstat;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The variable that names the folders handed down.
const VAR: &str = "LAB_HANDED_DOWN";

/// Names `folders` to the child `cmd` will start; returns their descriptors,
/// which the child must inherit (the caller keeps them open until it has
/// started: see `hosts::Host::enter`).
pub fn hand_down(cmd: &mut Command, folders: Vec<SafeDir>) -> Vec<OwnedFd> {
    let lines: Vec<String> = folders.iter().map(|f| format!("{} {}", f.fd.as_raw_fd(), f.path.display())).collect();
    cmd.env(VAR, lines.join("\n"));
    folders.into_iter().map(|f| f.fd).collect()
}

/// The folder at `path` if the parent handed it down.
pub(super) fn find(path: &Path) -> Option<Result<SafeDir>> {
    let fd = table().iter().find(|(p, _)| p == path)?.1;
    Some(open(path, fd))
}

fn open(path: &Path, fd: RawFd) -> Result<SafeDir> {
    // SAFETY: the parent named this descriptor for this folder and the
    // process never closes it; it is duplicated, not taken.
    let inherited = unsafe { BorrowedFd::borrow_raw(fd) };
    let fd = inherited.try_clone_to_owned().with_context(|| format!("the folder {} handed down as descriptor {fd}", path.display()))?;
    check_folder(&fstat(&fd)?, path, true)?;
    let dir = SafeDir { path: path.to_path_buf(), fd };
    dir.check_marker()?;
    Ok(dir)
}

/// `LAB_HANDED_DOWN`, read once.
fn table() -> &'static [(PathBuf, RawFd)] {
    static TABLE: OnceLock<Vec<(PathBuf, RawFd)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let text = std::env::var(VAR).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (fd, path) = line.split_once(' ')?;
                Some((PathBuf::from(path), fd.parse().ok()?))
            })
            .collect()
    })
}
