//! Folders no other account can have placed first, reached through
//! descriptors, and marked so that the lab deletes only what it made.
//!
//! The lab runs as root on shared machines, and a path is a promise only
//! while nobody else can change what it leads to. Another local account can
//! create any name in `/tmp` or `/var/tmp` before the lab does (a folder, a
//! symlink to `/etc`), and the server's account (`postgres`) can replace
//! anything inside a folder it owns. Root following such a path would
//! chown, write or delete whatever the other account chose. So:
//!
//! - **A trusted path.** [`SafeDir::open`] walks from `/` down, one folder at
//!   a time through descriptors (`openat` with `O_NOFOLLOW`), and accepts a
//!   folder only if it is a real folder (no link), owned by root or by this
//!   account, and writable by nobody else. A world-writable folder is
//!   accepted on the way only when it is root's and sticky (`/tmp`): there
//!   nobody can rename or remove an entry that is not theirs, so the next
//!   folder, which must be ours, stays ours. Symlinks an administrator put
//!   on the way (`/var/run`) are resolved once, first, and the walk then
//!   refuses any link it meets: one placed meanwhile is refused.
//! - **Descriptors, not paths,** inside a folder another account owns (the
//!   server's folder): files are opened with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS)`, checked with `fstat` (a regular file, the
//!   expected owner, one link: a hard link to `/etc/shadow` is not a log),
//!   created with `O_EXCL`, and chowned with `fchown` on the open
//!   descriptor.
//! - **A marker.** A folder the lab makes for itself holds [`MARKER`],
//!   written at creation with the checkout's path and a random id. The lab
//!   uses, resets and deletes only a folder that carries it, owned by this
//!   account; anything else is refused with a message that says what was
//!   found.

use crate::error::{Result, ResultExt};
use nix::errno::Errno;
use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, Gid, Uid, User};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

mod handed_down;
pub use handed_down::hand_down;

/// The marker file of a folder the lab made for itself.
pub const MARKER: &str = ".lab-made";

/// The marker's first line: what made the folder.
const MARKER_HEADER: &str = "made by the lease + fencing lab";

/// A folder on a trusted path, held open.
#[derive(Debug)]
pub struct SafeDir {
    /// Where it is (for messages, and for programs that take a path: the
    /// path stays good because no other account can change any folder on it).
    path: PathBuf,
    /// The folder itself, opened without following links.
    fd: OwnedFd,
}

/// Who a file or folder must belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    /// Its uid.
    pub uid: Uid,
    /// Its gid (for `fchown`).
    pub gid: Gid,
}

impl Account {
    /// The account this process runs as.
    pub fn me() -> Account {
        Account { uid: Uid::effective(), gid: Gid::effective() }
    }

    /// Another account (the server's).
    pub fn of(user: &User) -> Account {
        Account { uid: user.uid, gid: user.gid }
    }
}

/// `name` if it is one plain entry of a folder: not empty, not `.` or
/// `..`, no `/` and no NUL. Every method that takes a name relative to a
/// folder's descriptor checks it first: a name from a file or a command
/// line (a history's run name, `timeline ../x`) must never reach a file
/// outside the folder through `..` or a path.
pub fn plain_name(name: &str) -> Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(format!("{name:?} is not a plain file name (no '/', not '.' or '..')").into());
    }
    Ok(name)
}

impl SafeDir {
    /// The folder at `path`, which must exist, after checking every folder
    /// from `/` down to it (see the module's opening). The folder itself must
    /// be this account's (or root's) and writable by nobody else.
    pub fn open(path: &Path) -> Result<SafeDir> {
        SafeDir::walk(path, false)
    }

    /// [`Self::open`], for a folder the caller will create an entry in
    /// (`mkdirat`, failing if the name exists): that folder may be root's
    /// sticky `/tmp`, since the entry made there is this account's, and
    /// nobody else can rename or remove it.
    fn open_parent(path: &Path) -> Result<SafeDir> {
        SafeDir::walk(path, true)
    }

    /// Opens `path` folder by folder from `/`, checking each; or, for a
    /// folder the parent walked to, by the descriptor it handed down.
    fn walk(path: &Path, sticky_last: bool) -> Result<SafeDir> {
        let canonical = path.canonicalize().with_context(|| format!("looking up {}", path.display()))?;
        if !sticky_last {
            if let Some(handed) = handed_down::find(&canonical) {
                return handed;
            }
        }
        let mut at = PathBuf::from("/");
        let mut fd = openat(cwd(), "/", OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
        let names: Vec<_> = canonical.components().filter_map(|c| if let Component::Normal(n) = c { Some(n.to_owned()) } else { None }).collect();
        check_folder(&fstat(&fd)?, &at, names.is_empty() && !sticky_last)?;
        for (i, name) in names.iter().enumerate() {
            at.push(name);
            let last = i + 1 == names.len();
            // O_PATH on the way (a folder we may only search, not read);
            // the last one is opened for real, for fchmod and fchown.
            let flags = if last { OFlag::O_RDONLY } else { OFlag::O_PATH };
            fd = openat(&fd, name.as_os_str(), flags | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| refused_open(&at, e))?;
            check_folder(&fstat(&fd)?, &at, last && !sticky_last)?;
        }
        Ok(SafeDir { path: canonical, fd })
    }

    /// The folder at `path`, made by the lab: it carries the [`MARKER`] and
    /// belongs to this account. Created (with the marker, mode `mode`) when
    /// it does not exist, inside a parent on a trusted path; refused when
    /// something else is there.
    pub fn open_or_make(path: &Path, mode: u32) -> Result<SafeDir> {
        let (parent, name) = split(path)?;
        let parent = SafeDir::open_parent(parent).with_context(|| format!("checking the folders above {}", path.display()))?;
        match mkdirat(&parent.fd, name, Mode::from_bits_truncate(0o700)) {
            Ok(()) => {
                let fd = openat(&parent.fd, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
                    .map_err(|e| refused_open(path, e))?;
                // Made 0700 (nothing can enter before the marker is in);
                // opened to `mode` once it is.
                let dir = SafeDir { path: parent.path.join(name), fd };
                dir.write_marker()?;
                fchmod(&dir.fd, Mode::from_bits_truncate(mode))?;
                Ok(dir)
            }
            Err(Errno::EEXIST) => {
                let dir = SafeDir::open(path)?;
                dir.check_marker()?;
                fchmod(&dir.fd, Mode::from_bits_truncate(mode))?;
                Ok(dir)
            }
            Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }

    /// The folder at `path` if the lab made it (see [`Self::open_or_make`]);
    /// `None` if nothing is there; an error naming what was found if
    /// something the lab did not make is there.
    pub fn open_made(path: &Path) -> Result<Option<SafeDir>> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        let dir = SafeDir::open(path)?;
        dir.check_marker()?;
        Ok(Some(dir))
    }

    /// A folder of the lab's own for files it writes (transcripts,
    /// timelines), made if missing: its parent must be on a trusted path,
    /// and it must be this account's.
    pub fn own_folder(dir: &Path) -> Result<SafeDir> {
        let (parent, name) = split(dir)?;
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        SafeDir::open_parent(parent)?.sub_dir(name, Account::me(), 0o755)
    }

    /// Where the folder is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside this folder: created (mode `mode`, given to `owner`
    /// through its descriptor) if missing; if present, it must be a real
    /// folder that belongs to `owner` and is open to nobody else.
    pub fn sub_dir(&self, name: &str, owner: Account, mode: u32) -> Result<SafeDir> {
        plain_name(name)?;
        let path = self.path.join(name);
        let made = match mkdirat(&self.fd, name, Mode::from_bits_truncate(0o700)) {
            Ok(()) => true,
            Err(Errno::EEXIST) => false,
            Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
        };
        let fd = openat(&self.fd, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| refused_open(&path, e))?;
        if made {
            fchown(&fd, Some(owner.uid), Some(owner.gid)).with_context(|| format!("giving {} to uid {}", path.display(), owner.uid))?;
            fchmod(&fd, Mode::from_bits_truncate(mode))?;
        }
        let stat = fstat(&fd)?;
        let found_mode = stat.st_mode & 0o7777;
        if stat.st_uid != owner.uid.as_raw() || found_mode & 0o022 != 0 || found_mode & !mode != 0 {
            return Err(format!(
                "{} is owned by uid {} with mode {found_mode:o}; the lab expects uid {} and mode {mode:o} at most. \
                 It was not made this way by the lab: it uses nothing there; remove it yourself if it is yours to remove",
                path.display(),
                stat.st_uid,
                owner.uid,
            )
            .into());
        }
        Ok(SafeDir { path, fd })
    }

    /// An existing sub-folder, if there is one, checked as [`Self::sub_dir`] checks it.
    pub fn existing_sub_dir(&self, name: &str, owner: Account, mode: u32) -> Result<Option<SafeDir>> {
        plain_name(name)?;
        match nix::sys::stat::fstatat(&self.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => Ok(None),
            _ => self.sub_dir(name, owner, mode).map(Some),
        }
    }

    /// Creates `name` in this folder, mode `mode`; fails if anything is
    /// there already (`O_EXCL`, and no link is followed).
    pub fn create_file(&self, name: &str, mode: u32) -> Result<File> {
        plain_name(name)?;
        let fd = openat(
            &self.fd,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .with_context(|| format!("creating {}", self.path.join(name).display()))?;
        // The umask may have narrowed the mode; the file is ours, set it.
        fchmod(&fd, Mode::from_bits_truncate(mode))?;
        Ok(File::from(fd))
    }

    /// Opens the file at `relative` (one or more names below this folder)
    /// with `flags`, never through a link and never outside this folder; it
    /// must be a regular file with one link, owned by `owner`. `O_CREAT`
    /// in `flags` creates it when missing (then given to `owner`).
    pub fn open_file(&self, relative: &str, flags: OFlag, owner: Account) -> Result<File> {
        let path = self.path.join(relative);
        let mut how = OpenHow::new()
            .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        if flags.contains(OFlag::O_CREAT) {
            // openat2 takes a mode only with O_CREAT (EINVAL otherwise).
            how = how.mode(Mode::from_bits_truncate(0o600));
        }
        let fd = openat2(&self.fd, relative, how).map_err(|e| refused_open(&path, e))?;
        let mut stat = fstat(&fd)?;
        if flags.contains(OFlag::O_CREAT) && stat.st_uid != owner.uid.as_raw() && stat.st_uid == Uid::effective().as_raw() && stat.st_size == 0 {
            // Just made by this process, empty: give it to its owner.
            fchown(&fd, Some(owner.uid), Some(owner.gid))?;
            stat = fstat(&fd)?;
        }
        check_file(&stat, &path, owner)?;
        Ok(File::from(fd))
    }

    /// The text of the file at `relative` (see [`Self::open_file`]), `None` when it does not exist.
    pub fn read_file(&self, relative: &str, owner: Account) -> Result<Option<String>> {
        match self.open_file(relative, OFlag::O_RDONLY, owner) {
            Ok(mut file) => {
                let mut text = String::new();
                file.read_to_string(&mut text).with_context(|| format!("reading {}", self.path.join(relative).display()))?;
                Ok(Some(text))
            }
            Err(e) if is_not_found(e.as_ref()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `text` to `name` whole: into a new `<name>.partial` first
    /// (`O_EXCL`), then renamed over `name`, so a reader never sees half a
    /// file. Only in a folder of this account's own.
    pub fn write_whole(&self, name: &str, text: &str, mode: u32) -> Result<()> {
        plain_name(name)?;
        let partial = format!("{name}.partial");
        // A partial file left by an interrupted write is this account's own.
        let _ = nix::unistd::unlinkat(&self.fd, partial.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        let mut file = self.create_file(&partial, mode)?;
        file.write_all(text.as_bytes())?;
        drop(file);
        nix::fcntl::renameat(&self.fd, partial.as_str(), &self.fd, name).with_context(|| format!("writing {}", self.path.join(name).display()))?;
        Ok(())
    }

    /// Removes the file `name` from this folder, if it is there.
    pub fn remove_file(&self, name: &str) -> Result<()> {
        plain_name(name)?;
        match nix::unistd::unlinkat(&self.fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing {}", self.path.join(name).display())),
        }
    }

    /// Removes the folder `name` and everything in it. The standard
    /// library's `remove_dir_all` works through descriptors and never
    /// follows a link (since Rust 1.58.1), and this folder's path cannot
    /// change under it.
    pub fn remove_tree(&self, name: &str) -> Result<()> {
        plain_name(name)?;
        let path = self.path.join(name);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }

    /// Removes this folder, which the lab made, and everything in it.
    pub fn remove(self) -> Result<()> {
        self.check_marker()?;
        std::fs::remove_dir_all(&self.path).with_context(|| format!("removing {}", self.path.display()))
    }

    /// The folder's own descriptor, for `*at` calls.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Writes the marker into a folder the lab has just made.
    fn write_marker(&self) -> Result<()> {
        let mut id = [0u8; 8];
        File::open("/dev/urandom")?.read_exact(&mut id)?;
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{MARKER_HEADER}\ncheckout: {}\nid: {id}\n", crate::paths::root().display());
        let mut file = self.create_file(MARKER, 0o600)?;
        file.write_all(text.as_bytes())?;
        Ok(())
    }

    /// Refuses a folder without the lab's marker.
    pub fn check_marker(&self) -> Result<()> {
        let text = match self.read_file(MARKER, Account::me()) {
            Ok(Some(text)) => text,
            Ok(None) => {
                return Err(format!(
                    "{} exists but was not made by the lab (it has no {MARKER} marker): the lab will neither use nor delete it. \
                     Choose a path that does not exist yet (the lab creates it), or remove the folder yourself if it is yours",
                    self.path.display()
                )
                .into())
            }
            Err(e) => return Err(e).with_context(|| format!("checking the lab's marker in {}", self.path.display())),
        };
        if !text.starts_with(MARKER_HEADER) {
            return Err(format!("{} has a {MARKER} file the lab did not write; it will neither use nor delete the folder", self.path.display()).into());
        }
        Ok(())
    }
}

/// The parent folder and the last name of `path`.
fn split(path: &Path) -> Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{} has no folder name", path.display()))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok((parent, name))
}

/// The current directory, as a descriptor for `openat`.
fn cwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is not a descriptor but a constant the *at calls
    // read as "the current directory"; it is never closed.
    unsafe { BorrowedFd::borrow_raw(nix::libc::AT_FDCWD) }
}

/// A folder on the way is acceptable: a folder, root's or ours, writable by
/// nobody else (or root's sticky `/tmp`, on the way only).
fn check_folder(stat: &FileStat, path: &Path, last: bool) -> Result<()> {
    let me = Uid::effective().as_raw();
    let mode = stat.st_mode & 0o7777;
    if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFDIR {
        return Err(format!("{} is not a folder", path.display()).into());
    }
    if stat.st_uid != 0 && stat.st_uid != me {
        return Err(format!(
            "{} belongs to uid {}, neither root nor this account (uid {me}): that account could change what lies below it, so the lab will not use it",
            path.display(),
            stat.st_uid
        )
        .into());
    }
    let others_write = mode & 0o002 != 0 || (mode & 0o020 != 0 && stat.st_gid != 0);
    let sticky_on_the_way = !last && mode & 0o1000 != 0 && stat.st_uid == 0;
    if others_write && !sticky_on_the_way {
        return Err(format!(
            "{} is writable by other accounts (mode {mode:o}): any of them could put something there first, so the lab will not use it",
            path.display()
        )
        .into());
    }
    Ok(())
}

/// A file found where the lab expects its own (or the server's) file.
fn check_file(stat: &FileStat, path: &Path, owner: Account) -> Result<()> {
    if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
        return Err(format!("{} is not a regular file; the lab will not use it", path.display()).into());
    }
    if stat.st_uid != owner.uid.as_raw() {
        return Err(format!("{} belongs to uid {}, not uid {}; the lab will not use it", path.display(), stat.st_uid, owner.uid).into());
    }
    if stat.st_nlink != 1 {
        return Err(format!("{} has {} links (another name for some other file?); the lab will not use it", path.display(), stat.st_nlink).into());
    }
    Ok(())
}

/// An open that met a link, a non-folder, or nothing.
fn refused_open(path: &Path, errno: Errno) -> crate::error::Error {
    // O_DIRECTORY with O_NOFOLLOW on a link says ENOTDIR, not ELOOP.
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match errno {
        Errno::ELOOP | Errno::EXDEV => format!("{} is a symbolic link (or leads through one); the lab does not follow links it did not make", path.display()).into(),
        Errno::ENOTDIR if is_link => format!("{} is a symbolic link; the lab does not follow links it did not make", path.display()).into(),
        Errno::ENOTDIR => format!("{} is not a folder", path.display()).into(),
        Errno::ENOENT => Box::new(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} does not exist", path.display()))),
        e => format!("opening {}: {e}", path.display()).into(),
    }
}

/// Whether `err` (or its cause) says "no such file".
fn is_not_found(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(err);
    while let Some(e) = at {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) {
            return true;
        }
        at = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("lab-safe-dir-").tempdir().unwrap()
    }

    /// A name that is a path, `.` or `..` never reaches past the folder:
    /// nothing is written outside it, and the error names the name.
    #[test]
    fn a_name_that_is_a_path_is_refused() {
        let tmp = scratch();
        let inner = tmp.path().join("inner");
        let dir = SafeDir::open_or_make(&inner, 0o700).unwrap();
        for name in ["../outside.html", "a/b", "..", ".", "", "/etc/x"] {
            let err = dir.write_whole(name, "planted", 0o644).unwrap_err().to_string();
            assert!(err.contains("not a plain file name"), "{name:?}: {err}");
            assert!(dir.create_file(name, 0o644).is_err(), "{name:?}");
            assert!(dir.sub_dir(name, Account::me(), 0o700).is_err(), "{name:?}");
        }
        assert!(!tmp.path().join("outside.html").exists(), "a file was written outside the folder");
        dir.write_whole("F4.html", "fine", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(inner.join("F4.html")).unwrap(), "fine");
    }

    /// A folder the lab makes carries its marker; one it did not make is refused.
    #[test]
    fn only_marked_folders_are_the_labs() {
        let tmp = scratch();
        let made = tmp.path().join("made");
        SafeDir::open_or_make(&made, 0o711).unwrap();
        assert!(made.join(MARKER).is_file());
        // The mode asked for, from the first making on.
        assert_eq!(std::fs::metadata(&made).unwrap().permissions().mode() & 0o777, 0o711);
        assert!(SafeDir::open_made(&made).unwrap().is_some());
        let foreign = tmp.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        let err = SafeDir::open_or_make(&foreign, 0o700).unwrap_err().to_string();
        assert!(err.contains("not made by the lab"), "{err}");
        assert!(SafeDir::open_made(&tmp.path().join("missing")).unwrap().is_none());
    }

    /// A link anywhere on the way, or as the folder itself, is refused.
    #[test]
    fn links_are_never_followed() {
        let tmp = scratch();
        let target = tmp.path().join("target");
        std::fs::create_dir(&target).unwrap();
        symlink(&target, tmp.path().join("link")).unwrap();
        // The folder itself a link: canonicalize resolves it to `target`,
        // which carries no marker, so it is refused all the same.
        assert!(SafeDir::open_or_make(&tmp.path().join("link"), 0o700).is_err());
        let dir = SafeDir::open(tmp.path()).unwrap();
        let err = dir.sub_dir("link", Account::me(), 0o700).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::write(target.join("secret"), "x").unwrap();
        symlink(target.join("secret"), tmp.path().join("file-link")).unwrap();
        let err = dir.open_file("file-link", OFlag::O_RDONLY, Account::me()).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let err = dir.open_file("link/secret", OFlag::O_RDONLY, Account::me()).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }

    /// A folder writable by others is refused as the place itself.
    #[test]
    fn a_world_writable_folder_is_refused() {
        let tmp = scratch();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = SafeDir::open(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("writable by other accounts"), "{err}");
        // /tmp itself is fine on the way: root's, sticky.
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        SafeDir::open(tmp.path()).unwrap();
    }

    /// A file with a second name (a hard link) is not taken for the lab's own.
    #[test]
    fn a_hard_link_is_refused() {
        let tmp = scratch();
        std::fs::write(tmp.path().join("a"), "x").unwrap();
        std::fs::hard_link(tmp.path().join("a"), tmp.path().join("b")).unwrap();
        let dir = SafeDir::open(tmp.path()).unwrap();
        let err = dir.open_file("b", OFlag::O_RDONLY, Account::me()).unwrap_err().to_string();
        assert!(err.contains("2 links"), "{err}");
    }

    /// Whole writes replace the file, and never follow a link in its place.
    #[test]
    fn whole_writes_replace_without_following() {
        let tmp = scratch();
        let dir = SafeDir::open(tmp.path()).unwrap();
        dir.write_whole("f", "one", 0o600).unwrap();
        dir.write_whole("f", "two", 0o600).unwrap();
        assert_eq!(dir.read_file("f", Account::me()).unwrap().as_deref(), Some("two"));
        std::fs::write(tmp.path().join("victim"), "keep").unwrap();
        symlink(tmp.path().join("victim"), tmp.path().join("g.partial")).unwrap();
        dir.write_whole("g", "new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join("victim")).unwrap(), "keep");
        assert_eq!(dir.read_file("missing", Account::me()).unwrap(), None);
    }
}
