//! The scratch copy in which a mutation is applied, built and run, so that
//! the reader's own files are never touched.
//!
//! `target/mutants/tree` (or `$LAB_SCRATCH_DIR/tree`: the test suite gives
//! each of its two mutation groups a scratch copy of its own) holds a copy of the project's files (what git
//! tracks, plus untracked files it does not ignore: a developer's new files
//! count). `target/mutants/target` is its build folder, kept between runs,
//! so each mutant is an incremental build of one crate (about a second).
//! The mutants run against a private cluster of their own, inside the
//! reader's cluster's place (`…/b3-26/mutants`, a place of its own, on a
//! free port), started once for the whole run and stopped at its end, on an
//! error, and on Ctrl-C.
//!
//! Every child (cargo, a mutant's `lab run`) runs in a process group of
//! its own and is registered with [`crate::interrupt`], which kills it on
//! Ctrl-C; the cluster's stop is registered as a cleanup.

use crate::error::{panic_message, Result, ResultExt};
use crate::{interrupt, paths};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use parking_lot::Mutex;

/// The scratch project and its private cluster.
pub struct Scratch {
    /// An exclusive lock on `target/mutants/lock`: two runs (`mutants`,
    /// `try`) would patch and rebuild one tree under each other's feet.
    _lock: Flock<std::fs::File>,
    /// The copy of the project's files.
    tree: PathBuf,
    /// Its build folder.
    target: PathBuf,
    /// The private cluster's folder (`LAB_CLUSTER_DIR` of every mutant run).
    cluster_dir: PathBuf,
    /// The private cluster's port (`LAB_PORT`).
    port: u16,
    /// The first of the private etcd cluster's ports (`LAB_ETCD_PORT_BASE`),
    /// for the mutants F16 kills.
    etcd_port_base: u16,
}

/// A `lab` binary and the variables that point it at a cluster.
type LabAt = (PathBuf, Vec<(String, String)>);

/// Makes `to` a copy of the project's files: what git tracks, plus untracked
/// files it does not ignore (a developer's new files count). A file is
/// rewritten only when it differs (whole: a new file renamed over the old),
/// so unchanged files keep their times and builds stay incremental; a file
/// the project no longer has (moved, deleted) is deleted from the copy, so
/// a stale module cannot break its build. The top-level names in `keep`
/// (its build folder, its own repository) are left alone.
pub fn mirror(to: &Path, keep: &[&str]) -> Result<()> {
    let root = paths::root();
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .context("running git ls-files (the copy holds what git tracks)")?;
    if !listed.status.success() {
        return Err(format!("git ls-files failed in {}: copying the project needs a git checkout", root.display()).into());
    }
    let mut wanted = std::collections::BTreeSet::new();
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = PathBuf::from(std::str::from_utf8(name)?);
        let (from, to) = (root.join(&name), to.join(&name));
        let Ok(content) = std::fs::read(&from) else { continue }; // listed but deleted in the working tree
        wanted.insert(name.clone());
        if std::fs::read(&to).ok().as_deref() != Some(content.as_slice()) {
            std::fs::create_dir_all(to.parent().expect("a file has a folder"))?;
            let partial = to.with_extension(format!("mirror-{}", std::process::id()));
            std::fs::write(&partial, content).with_context(|| format!("copying {}", name.display()))?;
            // Keep the executable bit (run.sh, the tools' scripts).
            std::fs::set_permissions(&partial, std::fs::metadata(&from)?.permissions())?;
            std::fs::rename(&partial, &to)?;
        }
    }
    remove_strays(to, Path::new(""), &wanted, keep)
}

/// Gives a build folder that has never built anything the compiled
/// dependencies of `from` (another build folder of the same project, same
/// compiler), as hard links: cargo then compiles only the project's own
/// crate, not its hundred dependencies again (a cold build of the scratch
/// copy took minutes on a busy 2-core machine, a seeded one seconds). A
/// dependency's files are named by the hash of everything it was built
/// from, so the seeded folder only ever adds files beside them, never
/// rewrites one in place.
///
/// The project's own crate is the exception, and is never shared (see
/// [`unshare_own_units`]): a workspace member's hash leaves out its path,
/// so the copy's `lab` units have the very names of the project's, and
/// cargo rewrites a unit's fingerprint files in place. Shared, they would
/// be one file for two trees; and the fingerprint names by absolute path
/// the files outside the crate's folder that the crate includes (the
/// schemas in `sql/`), so a seeded copy would judge its own `sql/` by the
/// project's and never rebuild for a patch there.
pub fn seed_build(from: &Path, to: &Path) -> Result<()> {
    let (from_debug, to_debug) = (from.join("debug"), to.join("debug"));
    if !to_debug.exists() && from_debug.join("deps").is_dir() {
        link_all(&from_debug, &to_debug)?;
    }
    unshare_own_units(&to_debug)
}

/// Hard-links `from`'s compiled units into `to` (see [`seed_build`]).
fn link_all(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for part in ["deps", "build", ".fingerprint"] {
        if from.join(part).is_dir() {
            let out = Command::new("cp").arg("-al").arg(from.join(part)).arg(&to).output().context("running cp -al")?;
            if !out.status.success() {
                return Err(format!("seeding {} from {}: {}", to.display(), from.display(), String::from_utf8_lossy(&out.stderr)).into());
            }
        }
    }
    Ok(())
}

/// The workspace's own packages: their units are built in each copy.
const OWN_PACKAGES: [&str; 2] = ["lab", "lab-queues"];

/// Removes from the build folder `debug` every unit of the project's own
/// packages ([`OWN_PACKAGES`]: their libraries, binaries and tests) that is still a hard
/// link shared with another folder: its fingerprint (`.fingerprint/lab-*`)
/// and its outputs (the files in `deps/` and `build/` named with the same
/// hash). Cargo then builds those units here, into files of this folder's
/// own. Idempotent, and it heals a folder seeded before this rule.
fn unshare_own_units(debug: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let shared = |path: &Path| std::fs::symlink_metadata(path).map(|m| m.nlink() > 1).unwrap_or(false);
    let Ok(units) = std::fs::read_dir(debug.join(".fingerprint")) else { return Ok(()) };
    let mut hashes = Vec::new();
    for unit in units.flatten() {
        let name = unit.file_name().to_string_lossy().into_owned();
        // `<package>-<hash>`: the hash has no dash, a package name may.
        let Some((package, hash)) = name.rsplit_once('-') else { continue };
        if !OWN_PACKAGES.contains(&package) {
            continue;
        }
        let files: Vec<PathBuf> = std::fs::read_dir(unit.path())?.flatten().map(|f| f.path()).collect();
        if files.iter().any(|f| shared(f)) {
            std::fs::remove_dir_all(unit.path()).with_context(|| format!("unsharing {}", unit.path().display()))?;
            hashes.push(format!("-{hash}"));
        }
    }
    for part in ["deps", "build"] {
        let Ok(entries) = std::fs::read_dir(debug.join(part)) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if hashes.iter().any(|h| name.contains(h.as_str())) {
                let path = entry.path();
                if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }
                    .with_context(|| format!("unsharing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Deletes the files under `to/at` that are not `wanted`.
fn remove_strays(to: &Path, at: &Path, wanted: &std::collections::BTreeSet<PathBuf>, keep: &[&str]) -> Result<()> {
    for entry in std::fs::read_dir(to.join(at))? {
        let entry = entry?;
        let name = at.join(entry.file_name());
        if at.as_os_str().is_empty() && keep.iter().any(|k| entry.file_name() == *k) {
            continue;
        }
        // Not followed: a link in the copy is a file of the copy's.
        if entry.file_type()?.is_dir() {
            remove_strays(to, &name, wanted, keep)?;
        } else if !wanted.contains(&name) && !entry.file_name().to_string_lossy().contains(".mirror-") {
            // (A `.mirror-<pid>` file is another process's copy in flight.)
            std::fs::remove_file(entry.path()).with_context(|| format!("removing the stale {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The scratch `lab` binary and its cluster variables, for the cleanup that
/// an interrupt runs (a plain `fn()` cannot capture them).
static CLUSTER: Mutex<Option<LabAt>> = Mutex::new(None);

impl Scratch {
    /// Copies the project into the scratch tree and starts the private
    /// cluster; each mutant is built by [`Scratch::build`].
    pub fn prepare() -> Result<Scratch> {
        let base = match std::env::var_os("LAB_SCRATCH_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => paths::root().join("target").join("mutants"),
        };
        // The reader's place, made if needed: the mutants' place goes inside it.
        let place = crate::cluster::Cluster::locate()?.place()?;
        std::fs::create_dir_all(&base)?;
        let _lock = lock(&base.join("lock"))?;
        let scratch = Scratch {
            _lock,
            tree: base.join("tree"),
            target: base.join("target"),
            cluster_dir: place.path().join("mutants"),
            port: crate::cluster::free_ports(crate::cluster::PORTS)?,
            etcd_port_base: crate::cluster::free_ports(crate::cluster::etcd::PORTS)?,
        };
        scratch.sync()?;
        seed_build(&paths::root().join("target"), &scratch.target)?;
        // No unmutated build here: the mutant's build (`harness::judge`)
        // takes the last run's revert and this run's patch in one
        // incremental build; a build before it would double every `try`.
        // The private cluster is started and stopped by this very binary,
        // the reader's unmutated lab, never by a mutant.
        let unmutated = std::env::current_exe().context("finding the running lab binary")?;
        *CLUSTER.lock() = Some((unmutated.clone(), scratch.env()));
        interrupt::on_stop(stop_cluster);
        let mut start = Command::new(unmutated);
        start.args(["cluster", "start"]).envs(scratch.env());
        let out = run_child(start)?;
        if !out.status.success() {
            return Err(format!("cannot start the mutants' cluster: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(scratch)
    }

    /// The scratch tree's `lab` binary.
    pub fn lab_bin(&self) -> PathBuf {
        self.target.join("debug").join("lab")
    }

    /// The variables that point a mutant's run at the private cluster.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LAB_CLUSTER_DIR".into(), self.cluster_dir.display().to_string()),
            ("LAB_PORT".into(), self.port.to_string()),
            ("LAB_ETCD_PORT_BASE".into(), self.etcd_port_base.to_string()),
        ]
    }

    /// Makes the scratch tree equal to the project's files (see [`mirror`]).
    fn sync(&self) -> Result<()> {
        mirror(&self.tree, &["target"])
    }

    /// Applies a patch to the scratch tree (`git apply`, which works
    /// outside a repository too), and proves the reader's own copies of
    /// the patched files did not change.
    pub fn apply(&self, patch: &Path) -> Result<()> {
        let text = std::fs::read_to_string(patch).with_context(|| format!("reading {}", patch.display()))?;
        let touched: Vec<PathBuf> = text.lines().filter_map(|l| l.strip_prefix("+++ b/")).map(|f| paths::root().join(f)).collect();
        let before: Vec<Option<Vec<u8>>> = touched.iter().map(|f| std::fs::read(f).ok()).collect();
        self.git_apply(patch, false)?;
        for (file, was) in touched.iter().zip(before) {
            if std::fs::read(file).ok() != was {
                return Err(format!("applying {} changed the reader's own {}: stopped", patch.display(), file.display()).into());
            }
        }
        Ok(())
    }

    /// Takes a patch back out.
    pub fn revert(&self, patch: &Path) -> Result<()> {
        self.git_apply(patch, true)
    }

    fn git_apply(&self, patch: &Path, reverse: bool) -> Result<()> {
        let mut cmd = Command::new("git");
        cmd.arg("apply");
        if reverse {
            cmd.arg("-R");
        }
        // The scratch tree lies inside the reader's checkout: without a
        // ceiling, git would find that repository and patch the reader's own
        // files. Above the tree's folder, git must not look.
        let ceiling = self.tree.parent().expect("target/mutants");
        let out = cmd
            .arg(patch)
            .current_dir(&self.tree)
            .env("GIT_CEILING_DIRECTORIES", ceiling)
            .output()
            .context("running git apply")?;
        if !out.status.success() {
            return Err(format!(
                "{} does not apply{} to the current code: {}",
                patch.display(),
                if reverse { " in reverse" } else { "" },
                String::from_utf8_lossy(&out.stderr).trim()
            )
            .into());
        }
        Ok(())
    }

    /// Builds the scratch tree's binaries; `Ok(Err(stderr))` when the code
    /// does not compile.
    pub fn build(&self) -> Result<std::result::Result<(), String>> {
        let mut cmd = Command::new("cargo");
        cmd.args(["build", "--bins", "--quiet"]).current_dir(&self.tree).env("CARGO_TARGET_DIR", &self.target);
        let out = run_child(cmd)?;
        Ok(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
    }

    /// Runs the scratch `lab` with `args` against the private cluster.
    pub fn lab(&self, args: &[&str]) -> Result<Output> {
        let mut cmd = Command::new(self.lab_bin());
        cmd.args(args).envs(self.env());
        run_child(cmd)
    }

    /// Replaces the scratch tree's own paths with stable names, so that a
    /// mutant's transcript can be locked whatever the checkout's folder.
    pub fn normalise(&self, text: &str) -> String {
        text.replace(&self.cluster_dir.display().to_string(), "<mutants cluster>")
            .replace(&self.tree.display().to_string(), "<scratch>")
            .replace(&format!(":{}", self.port), ":<port>")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        stop_cluster();
    }
}

/// Takes the scratch tree's lock without waiting; a second run is told
/// which process holds it. The file is private (0600, never opened through
/// a link): another account that could open it could `flock` it too, and
/// so stop every run of the mutants.
fn lock(path: &Path) -> Result<Flock<std::fs::File>> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("opening the scratch copy's lock {}: {e}", path.display()))?;
    // One made 0644 by an earlier version of the lab becomes private too.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            lock.set_len(0)?;
            write!(*lock, "{}", std::process::id())?;
            Ok(lock)
        }
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            Err(format!("another `mutants` or `try` run (pid {}) is using the scratch copy; wait for it to finish", pid.trim()).into())
        }
    }
}

/// Stops the private cluster (at the end of a run, or on Ctrl-C).
fn stop_cluster() {
    let taken = CLUSTER.lock().take();
    if let Some((lab, env)) = taken {
        let _ = Command::new(lab).args(["cluster", "stop"]).envs(env).output();
    }
}

/// Runs a child (cargo, or the mutant's lab running its case) in its own
/// process group, registered with the interrupt handler while it runs, and
/// returns its output.
fn run_child(mut cmd: Command) -> Result<Output> {
    // Its own process group: Ctrl-C at the terminal reaches only the lab,
    // whose interrupt handler then passes the SIGINT on to the child and
    // waits for it. SIGINT first, not SIGKILL: it lets the mutant's lab
    // stop the daemon servers it owns (a postmaster started by pg_ctl),
    // which SIGKILL would leave running.
    cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = interrupt::spawn_cleaning_child(&mut cmd)
        .with_context(|| format!("starting {:?}", cmd.get_program()))?
        .ok_or("interrupted")?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (mut out_pipe, mut err_pipe) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let (stdout, stderr, status) = std::thread::scope(|s| {
        let out = s.spawn(move || read_all(&mut out_pipe));
        let err = s.spawn(move || read_all(&mut err_pipe));
        // Wait for the exit without reaping it (WNOWAIT), unregister, and
        // only then reap: once reaped, the pid may be reused by an unrelated
        // process, which must never receive the interrupt handler's SIGKILL.
        let _ = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT);
        interrupt::unregister_cleaning_child(pid);
        let status = child.wait();
        (out.join(), err.join(), status)
    });
    // The output decides a mutant's verdict: a reader that panicked or
    // could not read is an error, never a shorter output.
    let joined = |r: std::thread::Result<std::io::Result<Vec<u8>>>| -> Result<Vec<u8>> {
        let read = r.map_err(|panic| format!("a child's output reader panicked: {}", panic_message(&*panic)))?;
        read.context("reading a child's output")
    };
    Ok(Output { status: status?, stdout: joined(stdout)?, stderr: joined(stderr)? })
}

/// Everything a pipe delivers until the writer closes it.
fn read_all(pipe: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    pipe.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded folder keeps the dependencies' units as shared links and
    /// gets its own crate's units removed, so cargo builds them itself.
    #[test]
    fn seeding_shares_dependencies_and_never_the_own_crate() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        for (folder, file) in [
            (".fingerprint/lab-1234", "lib-lab"),
            (".fingerprint/serde-99", "lib-serde"),
            ("deps", "liblab-1234.rlib"),
            ("deps", "holder-1234"),
            ("deps", "libserde-99.rlib"),
        ] {
            std::fs::create_dir_all(from.join("debug").join(folder)).unwrap();
            std::fs::write(from.join("debug").join(folder).join(file), file).unwrap();
        }
        seed_build(&from, &to).unwrap();
        let there = |p: &str| to.join("debug").join(p).exists();
        assert!(there(".fingerprint/serde-99/lib-serde") && there("deps/libserde-99.rlib"), "the dependencies are seeded");
        assert!(!there(".fingerprint/lab-1234") && !there("deps/liblab-1234.rlib") && !there("deps/holder-1234"), "the own crate is not");
        // Once the copy has built its own crate, its files are its own and stay.
        std::fs::create_dir_all(to.join("debug/.fingerprint/lab-1234")).unwrap();
        std::fs::write(to.join("debug/.fingerprint/lab-1234/lib-lab"), "own").unwrap();
        seed_build(&from, &to).unwrap();
        assert!(there(".fingerprint/lab-1234/lib-lab"));
    }

    /// The scratch copy's lock is private, never taken through a link, and
    /// a second run is told who holds it.
    #[test]
    fn the_lock_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("lock");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let held = lock(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let second = lock(&path).unwrap_err().to_string();
        assert!(second.contains(&format!("pid {}", std::process::id())), "{second}");
        drop(held);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(lock(&link).is_err(), "a lock taken through a link");
    }
}
