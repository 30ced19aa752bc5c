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
//!   folder, which must be ours, stays ours.
//! - **Links only of root's or ours.** The walk takes the path as given,
//!   never a resolved copy of it (`canonicalize` would follow every link
//!   before anything is checked, and the path could change between the two).
//!   A symbolic link met on the way (Debian's `/var/run -> /run`) is
//!   followed only if it belongs to root or to this account and lies in a
//!   folder that passed the checks: nobody else can have made it or can
//!   change it. The walk then goes on through its target, which is checked
//!   like the rest. A link of any other account is refused with its path
//!   and its owner, and a walk that meets more than [`MAX_LINKS`] links is
//!   taken for a loop.
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
use std::collections::VecDeque;
use std::ffi::OsString;
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

/// The most symbolic links one walk follows: the kernel's own bound
/// (`MAXSYMLINKS`), past which it answers `ELOOP`. A walk that needs more is
/// going round a loop of links, not down to a folder.
pub const MAX_LINKS: usize = 40;

/// A folder on a trusted path, held open.
#[derive(Debug)]
pub struct SafeDir {
    /// Where it is, with every link the walk followed replaced by its
    /// target (for messages, and for programs that take a path: the path
    /// stays good because no other account can change any folder on it).
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
        let asked = absolute(path)?;
        if !sticky_last {
            // Looked up by the path as asked (made absolute, nothing
            // followed): the child computes the same path from the same
            // inputs as its parent did, and the parent named the folder by
            // the path its own walk resolved, which is the same path when no
            // link lies on the way. Inside a host's user namespace the child
            // could not walk anyway (root's folders and links show as
            // `nobody`'s there), so nothing may be resolved before this.
            if let Some(handed) = handed_down::find(&asked) {
                return handed;
            }
        }
        let (path, fd) = resolve(&asked, sticky_last)?;
        Ok(SafeDir { path, fd })
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
    /// in `flags` creates it when missing (then given to `owner`), and
    /// gives `owner` an existing empty regular file of this account's with
    /// one link too (left by a call cut short between its create and its
    /// chown); `O_TRUNC` empties it, but only once it has passed the
    /// check. `O_EXCL` is refused: this call uses it itself. Opened with
    /// `O_NONBLOCK`, so that a FIFO put in the file's place cannot hold
    /// the lab in its open (the open or the check then refuses it); the
    /// flag is cleared again on the file returned.
    pub fn open_file(&self, relative: &str, flags: OFlag, owner: Account) -> Result<File> {
        let path = self.path.join(relative);
        let (create, truncate) = (flags.contains(OFlag::O_CREAT), flags.contains(OFlag::O_TRUNC));
        if flags.contains(OFlag::O_EXCL) {
            return Err(format!("opening {}: open_file makes a missing file with O_EXCL itself and opens one that exists", path.display()).into());
        }
        let open = |flags: OFlag| {
            let mut how = OpenHow::new()
                .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            if flags.contains(OFlag::O_CREAT) {
                // openat2 takes a mode only with O_CREAT (EINVAL otherwise).
                how = how.mode(Mode::from_bits_truncate(0o600));
            }
            openat2(&self.fd, relative, how)
        };
        // Made here (O_EXCL), or else opened as found. Given to `owner`
        // only if this call made it or it is an earlier call's unfinished
        // file (below); nothing else is chowned, and nothing is emptied,
        // before the check.
        let plain = flags - OFlag::O_CREAT - OFlag::O_TRUNC;
        let (fd, made) = match open(if create { plain | OFlag::O_CREAT | OFlag::O_EXCL } else { plain }) {
            Ok(fd) => (fd, create),
            Err(Errno::EEXIST) if create => (open(plain).map_err(|e| refused_open(&path, e))?, false),
            Err(e) => return Err(refused_open(&path, e)),
        };
        let found = fstat(&fd)?;
        // Made by this call, or made by an earlier one that stopped before
        // giving it away (empty, this account's, a regular file with one
        // link): given to `owner`.
        let unfinished = !made
            && create
            && found.st_uid == Uid::effective().as_raw()
            && found.st_size == 0
            && found.st_nlink == 1
            && SFlag::from_bits_truncate(found.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG;
        if made || unfinished {
            fchown(&fd, Some(owner.uid), Some(owner.gid))?;
        }
        check_file(&fstat(&fd)?, &path, owner)?;
        // A regular file: back to the flags the caller asked for.
        let status = OFlag::from_bits_truncate(nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?);
        nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(status - OFlag::O_NONBLOCK))?;
        let file = File::from(fd);
        if truncate {
            file.set_len(0).with_context(|| format!("emptying {}", path.display()))?;
        }
        Ok(file)
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

    /// The names in this folder (without `.` and `..`), each with whether
    /// it is a folder (a link is not), read through the folder's own
    /// descriptor.
    pub fn entries(&self) -> Result<Vec<(String, bool)>> {
        entries_of(&self.fd).with_context(|| format!("listing {}", self.path.display()))
    }

    /// Removes the entry `name` of this folder, and everything below it
    /// when it is a folder, through descriptors alone: each folder below
    /// is opened with `O_NOFOLLOW` from the one above, so no link is
    /// followed and no path is looked up again. For a folder another
    /// account owns, where [`Self::remove_tree`]'s path could be changed
    /// under it.
    pub fn remove_entry(&self, name: &str) -> Result<()> {
        plain_name(name)?;
        remove_at(&self.fd, name).with_context(|| format!("removing {}", self.path.join(name).display()))
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

/// The entries of the folder open at `dir`: (name, is a folder).
fn entries_of(dir: &OwnedFd) -> nix::Result<Vec<(String, bool)>> {
    let mut listing = nix::dir::Dir::openat(dir, ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    let mut found = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        // A name that is not UTF-8 is no name the lab could have made or
        // could name again: refused, not mangled.
        let name = entry.file_name().to_str().map_err(|_| Errno::EILSEQ)?.to_owned();
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            Some(kind) => kind == nix::dir::Type::Directory,
            // A file system that does not say: ask, without following.
            None => nix::sys::stat::fstatat(dir, name.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .map(|st| SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR)?,
        };
        found.push((name, is_dir));
    }
    Ok(found)
}

/// Removes `name` in the folder open at `dir`, a folder with everything
/// below it: `unlinkat` never follows a link, and each folder is entered
/// by `openat` with `O_NOFOLLOW` from its parent's descriptor.
fn remove_at(dir: &OwnedFd, name: &str) -> nix::Result<()> {
    match nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => return Ok(()),
        // A folder (Linux says EISDIR); anything else is an error.
        Err(Errno::EISDIR) => {}
        Err(e) => return Err(e),
    }
    let below = openat(dir, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())?;
    for (entry, _) in entries_of(&below)? {
        remove_at(&below, &entry)?;
    }
    nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::RemoveDir)
}

/// `path`, absolute: a relative one is taken from the current folder
/// (whose path the kernel gives without links). `.` is dropped; `..` is
/// kept for the walk, which steps back to the folder it came from.
fn absolute(path: &Path) -> Result<PathBuf> {
    let whole = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().context("finding the current folder")?.join(path)
    };
    Ok(whole.components().filter(|c| *c != Component::CurDir).collect())
}

/// One step of a walk: a name to enter, or `..`.
#[derive(Debug)]
enum Step {
    /// Back to the folder the walk came from (`/` stays `/`).
    Up,
    /// Into the entry of that name.
    Into(OsString),
}

/// The steps a path takes below `/` (or below where a relative link lies).
fn steps(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(Step::Into(name.to_owned())),
        Component::ParentDir => Some(Step::Up),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// Walks the absolute path `asked` from `/`, one entry at a time through
/// descriptors, and returns the folder it leads to with its path (every
/// link replaced by its target). Each folder on the way passes
/// [`check_folder`]; a link is followed only if it is root's or this
/// account's, in a folder that passed (see the module's opening).
///
/// `..` steps back to the folder the walk came from, as the kernel's own
/// lookup does once links are resolved: nothing is opened for it, so it
/// cannot lead anywhere the walk has not checked. (Refusing `..` would
/// refuse root's relative links that use it, like `/etc/mtab ->
/// ../proc/self/mounts` does for files.)
fn resolve(asked: &Path, sticky_last: bool) -> Result<(PathBuf, OwnedFd)> {
    let me = Uid::effective().as_raw();
    let root = openat(cwd(), "/", OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    check_folder(&fstat(&root)?, Path::new("/"), false)?;
    // The folders checked so far below `/`, each with its name, the
    // deepest last: where the walk stands, and the way back for `..`.
    let mut walked: Vec<(OsString, OwnedFd)> = Vec::new();
    let mut ahead: VecDeque<Step> = steps(asked).collect();
    let mut links = 0;
    while let Some(step) = ahead.pop_front() {
        let name = match step {
            Step::Up => {
                walked.pop();
                continue;
            }
            Step::Into(name) => name,
        };
        let here = walked.last().map_or(&root, |(_, fd)| fd);
        let at = path_of(&walked).join(&name);
        // O_PATH with O_NOFOLLOW opens whatever the entry is, a link
        // included, without following it: what is judged below is then the
        // very entry that is entered or read, not one that replaced it.
        let fd = openat(here, name.as_os_str(), OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| refused_open(&at, e))?;
        let stat = fstat(&fd)?;
        if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFLNK {
            // On the way, even the last one: the last is judged as the
            // place itself below, once it is known to be the last.
            check_folder(&stat, &at, false)?;
            walked.push((name, fd));
            continue;
        }
        // A link, in a folder that passed the checks (every folder in
        // `walked` did, and `/`).
        if stat.st_uid != 0 && stat.st_uid != me {
            return Err(format!(
                "{} is a symbolic link owned by uid {}, neither root nor this account (uid {me}): that account chose where it leads, \
                 so the lab will not follow it (on the way to {})",
                at.display(),
                stat.st_uid,
                asked.display()
            )
            .into());
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(format!(
                "more than {MAX_LINKS} symbolic links on the way to {} (the last at {}): a loop of links, which leads to no folder",
                asked.display(),
                at.display()
            )
            .into());
        }
        // An empty path reads the link the descriptor holds (O_PATH).
        let target = PathBuf::from(nix::fcntl::readlinkat(&fd, "").with_context(|| format!("reading the link {}", at.display()))?);
        if target.is_absolute() {
            walked.clear();
        }
        for step in steps(&target).rev() {
            ahead.push_front(step);
        }
    }
    let at = path_of(&walked);
    let here = walked.last().map_or(&root, |(_, fd)| fd);
    // O_PATH on the way (a folder we may only search, not read); the place
    // itself is opened for real, for fchmod and fchown, through its own
    // descriptor (`.`), so it is the folder just checked and no other.
    let fd = openat(here, ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).map_err(|e| refused_open(&at, e))?;
    check_folder(&fstat(&fd)?, &at, !sticky_last)?;
    Ok((at, fd))
}

/// The path of the folder a walk stands in.
fn path_of(walked: &[(OsString, OwnedFd)]) -> PathBuf {
    let mut path = PathBuf::from("/");
    path.extend(walked.iter().map(|(name, _)| name));
    path
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
pub(crate) fn is_not_found(err: &(dyn std::error::Error + 'static)) -> bool {
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
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    /// A fresh folder for one test, made by `tempfile` (a random name,
    /// created atomically, mode 0700: no name anyone can compute or place
    /// first) inside the suite's private folder for the group
    /// (`LAB_TEST_TMP`) when set, else inside the system's temp folder.
    fn scratch() -> tempfile::TempDir {
        let builder = tempfile::Builder::new().prefix("lab-safe-dir-").to_owned();
        match std::env::var_os("LAB_TEST_TMP") {
            Some(dir) => builder.tempdir_in(dir),
            None => builder.tempdir(),
        }
        .unwrap()
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
        // The folder itself a link (this account's, so followed) leads to
        // `target`, which carries no marker: refused all the same.
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

    /// `remove_entry` takes a folder with everything below it, a file, or
    /// a link as a link: what a link points at stays, inside or outside.
    #[test]
    fn removal_by_descriptors_never_follows_a_link() {
        let tmp = scratch();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir_all(data.join("base/1")).unwrap();
        std::fs::write(data.join("base/1/1259"), "catalog").unwrap();
        std::fs::write(data.join("old_wal"), "wal").unwrap();
        symlink(&outside, data.join("base/1/link")).unwrap();
        symlink(&outside, data.join("pg_tblspc")).unwrap();
        let dir = SafeDir::open(&data).unwrap();
        let mut names = dir.entries().unwrap();
        names.sort();
        assert_eq!(names, vec![("base".to_owned(), true), ("old_wal".to_owned(), false), ("pg_tblspc".to_owned(), false)]);
        for name in ["base", "old_wal", "pg_tblspc", "missing"] {
            dir.remove_entry(name).unwrap();
        }
        assert!(dir.entries().unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "x", "a link's target was touched");
        // A name that is not UTF-8 is refused, not mangled into another.
        use std::os::unix::ffi::OsStrExt;
        std::fs::write(data.join(std::ffi::OsStr::from_bytes(b"odd\xff")), "x").unwrap();
        assert!(dir.entries().is_err());
        assert!(dir.remove_entry("../outside").is_err());
    }

    /// A link of root's or of this account's on the way is followed, an
    /// absolute one from `/`, a relative one from its own folder, and `..`
    /// steps back from where the link led; the folder's path is the one
    /// walked, links replaced by their targets.
    #[test]
    fn a_link_of_roots_or_ours_is_followed() {
        let tmp = scratch();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(real.join("inner")).unwrap();
        symlink(&real, tmp.path().join("absolute")).unwrap();
        symlink("real", tmp.path().join("relative")).unwrap();
        symlink("relative/../absolute", tmp.path().join("chained")).unwrap();
        let owner = std::fs::symlink_metadata(tmp.path().join("absolute")).unwrap().uid();
        assert_eq!(owner, Uid::effective().as_raw(), "the test's links are this account's (root's when it runs as root)");
        // Where the walk should end: the test's folder may itself lie below
        // a link (TMPDIR), which the walk follows too.
        let expected = real.canonicalize().unwrap().join("inner");
        for via in ["absolute", "relative", "chained", "absolute/../relative"] {
            let dir = SafeDir::open(&tmp.path().join(via).join("inner")).unwrap_or_else(|e| panic!("{via}: {e}"));
            assert_eq!(dir.path(), expected, "{via}");
            // The descriptor is the folder's own.
            dir.write_whole("f", via, 0o600).unwrap();
            assert_eq!(std::fs::read_to_string(real.join("inner/f")).unwrap(), via);
        }
    }

    /// A link another account owns is never followed, even in a folder of
    /// ours: the refusal names the link and its owner.
    #[test]
    fn another_accounts_link_is_refused() {
        if !crate::test_support::needs_root("another_accounts_link_is_refused", "to give a link to uid 65534") {
            return;
        }
        let tmp = scratch();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        symlink("real", tmp.path().join("planted")).unwrap();
        let folder = File::open(tmp.path()).unwrap();
        let stranger = Uid::from_raw(65534);
        nix::unistd::fchownat(&folder, "planted", Some(stranger), Some(Gid::from_raw(65534)), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).unwrap();
        assert_eq!(std::fs::symlink_metadata(tmp.path().join("planted")).unwrap().uid(), 65534);
        let planted = tmp.path().canonicalize().unwrap().join("planted");
        let err = SafeDir::open(&tmp.path().join("planted")).unwrap_err().to_string();
        assert!(err.contains(&format!("{} is a symbolic link owned by uid 65534", planted.display())), "{err}");
        let err = SafeDir::open_or_make(&tmp.path().join("planted").join("new"), 0o700).unwrap_err();
        assert!(crate::error::chain(err.as_ref()).contains("owned by uid 65534"), "{err}");
        assert!(!tmp.path().join("real").join("new").exists(), "a folder was made through the planted link");
    }

    /// A loop of links ends with an error that says so, not with a hang or
    /// a stack overflow; so does a link to itself.
    #[test]
    fn a_loop_of_links_ends_with_an_error() {
        let tmp = scratch();
        symlink("b", tmp.path().join("a")).unwrap();
        symlink("a", tmp.path().join("b")).unwrap();
        symlink("self", tmp.path().join("self")).unwrap();
        for name in ["a", "self"] {
            let err = SafeDir::open(&tmp.path().join(name).join("x")).unwrap_err().to_string();
            assert!(err.contains(&format!("more than {MAX_LINKS} symbolic links")) && err.contains("a loop"), "{name}: {err}");
        }
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
        // Asked to empty it, or to make it, the same: checked first, so
        // the file behind the link keeps its bytes.
        for flags in [OFlag::O_WRONLY | OFlag::O_TRUNC, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC] {
            let err = dir.open_file("b", flags, Account::me()).unwrap_err().to_string();
            assert!(err.contains("2 links"), "{err}");
        }
        assert_eq!(std::fs::read_to_string(tmp.path().join("a")).unwrap(), "x", "emptied before the check");
        // A file that passes is emptied; one that is missing is made.
        std::fs::write(tmp.path().join("c"), "old").unwrap();
        dir.open_file("c", OFlag::O_WRONLY | OFlag::O_TRUNC, Account::me()).unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join("c")).unwrap(), "");
        dir.open_file("d", OFlag::O_WRONLY | OFlag::O_CREAT, Account::me()).unwrap();
        assert!(tmp.path().join("d").is_file());
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
