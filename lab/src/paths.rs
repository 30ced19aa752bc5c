//! Where things live: the project root (compiled in, so the binaries work
//! from any directory), the build directory, the evidence directory, and the
//! cluster's folder.
//!
//! The cluster's folder (its *place*) is normally `target/lab/b3-26`. When
//! the lab runs as root, the server runs as the `postgres` account, which
//! must be able to enter every folder above its data. A checkout under
//! `/root` (mode 0700) or inside `mktemp -d` is closed to it; rather than
//! change the mode of the reader's folders, the lab then keeps the cluster
//! under [`SHARED_PLACES`] (`/var/lib/lease-fencing-lab`), a folder only root
//! can create entries in, named from a hash of the checkout's path so that
//! two checkouts never share one. Never in `/tmp` or `/var/tmp`: any account
//! can create a name there first, and a name computed from the checkout's
//! path is a name anyone can compute (see the `safe_dir` module, one layer
//! up). Every process of the lab (the CLI, the tests, each holder)
//! computes the same answer from the same inputs, and every one checks the
//! place's marker before it trusts a file in it.

use nix::unistd::{Gid, Uid, User};
use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The cluster's name: batch 3, article 26.
pub const CLUSTER_NAME: &str = "b3-26";

/// The account that runs the server when the lab runs as root.
pub const SERVER_ACCOUNT: &str = "postgres";

/// The project's top level (the folder holding `Cargo.toml`, `sql/`, `evidence/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("lab/ has a parent").to_path_buf()
}

/// The lab's part of the build directory: `target/lab`.
pub fn build_dir() -> PathBuf {
    root().join("target").join("lab")
}

/// Where a reader's own run writes what it measured when no `--out` says
/// otherwise (`target/lab/bench.md`, `target/lab/output.txt` …): a reader's
/// command never changes the locked evidence; only a re-lock names
/// `evidence/26/` on purpose (`./run.sh lock`, `--out evidence/26/…`).
pub fn reader_out(file: &str) -> PathBuf {
    build_dir().join(file)
}

/// Makes `target/lab` if a fresh checkout has not got it yet: the default
/// folders of the cluster and of etcd are made inside it, and their parent
/// must exist to be judged (`safe_dir`).
pub fn make_build_dir() -> std::io::Result<()> {
    std::fs::create_dir_all(build_dir())
}

/// Where each case's last transcript is saved for `lab diff`: inside a
/// private cluster's place (`LAB_CLUSTER_DIR`, as the tests use), so that a
/// test never replaces the reader's own transcripts.
pub fn transcripts_dir() -> PathBuf {
    match std::env::var_os("LAB_CLUSTER_DIR") {
        Some(dir) => PathBuf::from(dir).join("transcripts"),
        None => build_dir().join("transcripts"),
    }
}

/// Where the pictures of a run's cases are saved (`./run.sh timeline F4`),
/// beside the transcripts.
pub fn timelines_dir() -> PathBuf {
    match std::env::var_os("LAB_CLUSTER_DIR") {
        Some(dir) => PathBuf::from(dir).join("timelines"),
        None => build_dir().join("timelines"),
    }
}

/// Where a closed checkout's cluster lives, as root: a folder only root
/// can create entries in (`/var/lib` is root's, mode 0755), made 0711 so
/// the server account can pass through to its own folder and list nothing.
pub const SHARED_PLACES: &str = "/var/lib/lease-fencing-lab";

/// The locked evidence: `output.txt`, the per-case snapshots, `LIMITS.md`.
pub fn evidence_dir() -> PathBuf {
    root().join("evidence").join("26")
}

/// Where the cluster lives, and why there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterPlace {
    /// The place: a folder the lab made and marked, holding the lab's own
    /// files (credentials, owner record, run lock) and `server/`, the
    /// server account's folder (data, socket, log); see `Cluster::place`.
    pub dir: PathBuf,
    /// Set when the lab chose a folder other than `target/lab/b3-26`: one
    /// line that says where and why, for the reader.
    pub moved: Option<String>,
}

/// The cluster's folder: `LAB_CLUSTER_DIR`, else `target/lab/b3-26`, else
/// (root, and that folder is closed to the server account) a folder under
/// [`SHARED_PLACES`]. Decided once per process; nothing is created here
/// (see `Cluster::place`).
pub fn cluster_place() -> &'static ClusterPlace {
    static PLACE: OnceLock<ClusterPlace> = OnceLock::new();
    PLACE.get_or_init(|| {
        if let Some(dir) = std::env::var_os("LAB_CLUSTER_DIR") {
            return ClusterPlace { dir: PathBuf::from(dir), moved: None };
        }
        let closed = server_account().and_then(|account| {
            // The folders above the cluster must exist to be judged; the lab
            // creates target/lab itself anyway.
            let _ = make_build_dir();
            let closed = closed_ancestor(&build_dir(), &account)?;
            let mode = std::fs::metadata(&closed).map(|m| m.mode() & 0o7777).unwrap_or(0);
            Some((account.name, closed, mode))
        });
        place_for(&root(), closed)
    })
}

/// Where the cluster of the checkout at `root` lives, given the first
/// folder above `target/lab` that the server account cannot enter (its
/// account name, path and mode), if any.
fn place_for(root: &Path, closed: Option<(String, PathBuf, u32)>) -> ClusterPlace {
    let Some((account, closed, mode)) = closed else {
        return ClusterPlace { dir: root.join("target").join("lab").join(CLUSTER_NAME), moved: None };
    };
    let dir = PathBuf::from(format!("{SHARED_PLACES}/{CLUSTER_NAME}-{:012x}", path_hash(root)));
    let moved = format!(
        "the {account} account cannot enter {} (mode {mode:o}), so the cluster lives in {} \
         (LAB_CLUSTER_DIR chooses another folder; `./run.sh cluster forget` removes it)",
        closed.display(),
        dir.display()
    );
    ClusterPlace { dir, moved: Some(moved) }
}

/// The cluster's folder (see [`cluster_place`]).
pub fn cluster_dir() -> PathBuf {
    cluster_place().dir.clone()
}

/// The server account when the lab runs as root; `None` when the lab's own
/// account runs the server (or when the account does not exist, which the
/// cluster reports when it needs it).
pub fn server_account() -> Option<User> {
    if !Uid::effective().is_root() {
        return None;
    }
    User::from_name(SERVER_ACCOUNT).ok().flatten()
}

/// The first folder from `/` down to `dir` that `account` cannot enter.
fn closed_ancestor(dir: &Path, account: &User) -> Option<PathBuf> {
    let groups = CString::new(account.name.as_str())
        .ok()
        .and_then(|name| nix::unistd::getgrouplist(&name, account.gid).ok())
        .unwrap_or_else(|| vec![account.gid]);
    let mut ancestors: Vec<&Path> = dir.ancestors().collect();
    ancestors.reverse();
    ancestors.into_iter().find(|folder| !can_enter(folder, account.uid, &groups)).map(Path::to_path_buf)
}

/// Whether `uid` (with `groups`) may search `folder`, by its mode bits.
fn can_enter(folder: &Path, uid: Uid, groups: &[Gid]) -> bool {
    let Ok(meta) = std::fs::metadata(folder) else { return false };
    let mode = meta.mode();
    if meta.uid() == uid.as_raw() {
        mode & 0o100 != 0
    } else if groups.iter().any(|g| g.as_raw() == meta.gid()) {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    }
}

/// FNV-1a over the path's bytes, cut to 48 bits: stable across runs and
/// builds (std's hasher is seeded per process).
fn path_hash(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let full = path.as_os_str().as_bytes().iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    full & 0xffff_ffff_ffff
}

/// Writes `text` to `path` whole: into a new file beside it first, then
/// renamed into place, so that a reader (or a book build) never finds half
/// a file, and an interrupted write leaves the previous file as it was.
/// Creates the folder when it is missing.
///
/// The path may be one a reader named (`--out`), and the lab may be root:
/// a link or another account's file at `path` is refused with an error
/// naming it (someone put it there; the reader should know); the new file
/// is created exclusively and never through a link (a link planted at its
/// name makes the write fail, naming the path), and the rename replaces
/// whatever sits at `path` by then, a link included, without following
/// it. So root never writes into a file someone else chose.
pub fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(found) if found.file_type().is_symlink() => {
            let target = std::fs::read_link(path).map_or_else(|_| "somewhere".to_owned(), |t| t.display().to_string());
            return Err(std::io::Error::other(format!(
                "refusing to write {}: it is a symbolic link (to {target}), which the lab never writes through; remove it or name another file",
                path.display()
            )));
        }
        Ok(found) if found.uid() != nix::unistd::geteuid().as_raw() => {
            return Err(std::io::Error::other(format!(
                "refusing to write {}: it belongs to uid {}, not to this account (uid {}); remove it or name another file",
                path.display(),
                found.uid(),
                nix::unistd::geteuid()
            )));
        }
        _ => {}
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut name = path.file_name().ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?.to_os_string();
    name.push(format!(".partial-{}-{stamp}", std::process::id()));
    let partial = path.with_file_name(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(0o644)
        .open(&partial)
        .map_err(|e| std::io::Error::new(e.kind(), format!("creating {}: {e}", partial.display())))?;
    let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&partial, path)) {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A link planted where the whole file is to be written is refused,
    /// naming it, and left as it was: the file it points to is untouched.
    /// So is another account's file (as root, which can make one).
    #[test]
    fn a_planted_link_or_foreign_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = tmp.path().join("out.md");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        let err = write_whole(&out, "the table").unwrap_err().to_string();
        assert!(err.contains(&format!("refusing to write {}: it is a symbolic link", out.display())), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink(), "the link was removed");
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains(".partial")).collect();
        assert!(leftovers.is_empty(), "a partial file was left");
        // A file of our own is replaced whole.
        let own = tmp.path().join("own.md");
        std::fs::write(&own, "old").unwrap();
        write_whole(&own, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "new");
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
            let err = write_whole(&own, "newer").unwrap_err().to_string();
            assert!(err.contains("belongs to uid 65534"), "{err}");
            assert_eq!(std::fs::read_to_string(&own).unwrap(), "new");
        }
    }

    /// An open checkout keeps its cluster inside; a closed one under the
    /// root-only folder, never in /tmp or /var/tmp, one folder per checkout.
    #[test]
    fn a_closed_checkout_keeps_its_cluster_where_only_root_creates() {
        let open = place_for(Path::new("/srv/p"), None);
        assert_eq!((open.dir, open.moved), (PathBuf::from("/srv/p/target/lab/b3-26"), None));
        let closed = |root: &str| place_for(Path::new(root), Some(("postgres".into(), PathBuf::from("/root"), 0o700)));
        let (p, q) = (closed("/root/p"), closed("/root/q"));
        assert!(p.dir.starts_with(SHARED_PLACES), "{}", p.dir.display());
        assert_eq!(p.dir.parent(), Some(Path::new(SHARED_PLACES)));
        assert_ne!(p.dir, q.dir);
        assert_eq!(p, closed("/root/p"));
        let moved = p.moved.unwrap();
        assert!(moved.contains("cannot enter /root (mode 700)") && moved.contains("cluster forget"), "{moved}");
    }

    /// A folder with no search bit for others is closed to a stranger, open to its owner.
    #[test]
    fn mode_bits_decide_who_enters() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let me = Uid::effective();
        assert!(can_enter(dir, me, &[]));
        let stranger = Uid::from_raw(me.as_raw() + 12345);
        assert!(!can_enter(dir, stranger, &[]));
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o701)).unwrap();
        assert!(can_enter(dir, stranger, &[]));
    }
}
