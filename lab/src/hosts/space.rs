//! Whose the hosts are: the user namespace that owns their network
//! namespaces, and how a process is started inside one of them.
//!
//! Making a network namespace, a veth pair or an nftables rule takes
//! CAP_SYS_ADMIN and CAP_NET_ADMIN *in the user namespace that owns the
//! network namespace*. Root has them in the machine's own. Any other
//! account gets them the way rootless containers do: it makes a user
//! namespace of its own, in which its uid is mapped to 0 (`0 <uid> 1`,
//! the one mapping the kernel lets an ordinary account write for itself),
//! and makes the hosts' namespaces inside it. That needs no setuid helper
//! and no `/etc/subuid`; the kernel must allow unprivileged user
//! namespaces ([`refusal`] names the setting when it does not).
//!
//! - **The run's space** ([`Space`]): for root, the machine's user
//!   namespace (nothing is made: root already has what it needs, and its
//!   servers keep running as the `postgres` account); for anyone else, one
//!   user namespace made by the first network of the process and held by
//!   a descriptor until the process ends.
//! - **Entering a host** ([`Entry`]): a process is put into a host between
//!   `fork` and `exec` (`pre_exec`): it joins the space (`setns`, allowed
//!   because the lab's account owns it), then the host's network
//!   namespace. The lab's own threads never move: joining a user namespace
//!   is refused to a process with more than one thread, and the lab has
//!   many. Its own sockets in a host come from the host's helper instead
//!   (`netns.rs`).
//! - **Not root of the space.** PostgreSQL refuses to run as uid 0, and a
//!   holder has no business configuring the network. A server, holder or
//!   etcd member therefore makes one more user namespace, nested in the
//!   space, that maps the lab's own uid back to itself (`<uid> 0 1`): it
//!   runs there as the account that started it (root's lab: as root, whose
//!   files it may still read), with no capability over the hosts' links or
//!   rules. Only `ip` and `nft` ([`Role::Admin`]) run as the space's root.
//!   When the lab is root, a PostgreSQL server instead switches to its
//!   account after entering the host (after: only root may enter), which
//!   has no capability anywhere.
//!
//! Every call made between `fork` and `exec` is a raw system call on data
//! prepared before the fork: no allocation, no lock (the lab is
//! multithreaded, and another thread may have held the allocator's lock at
//! the moment of the fork).

use super::netns::Netns;
use crate::error::Result;
use nix::libc;
use nix::unistd::{Gid, Uid, User};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// The user namespace the run's network namespaces belong to.
pub struct Space {
    /// The run's own user namespace; `None` when the lab is root and its
    /// hosts belong to the machine's.
    user: Option<OwnedFd>,
    /// The lab's account, as the kernel knows it (outside every namespace).
    me: (Uid, Gid),
}

/// Who a process started inside a host runs as.
#[derive(Clone, Debug)]
pub enum Role {
    /// The host's administrator, `ip` and `nft`: root of the space.
    Admin,
    /// A server, a holder, an etcd member: never root of the space. Root's
    /// lab may name the account it runs as (the server's); otherwise it runs
    /// as the lab's own account, in a nested user namespace.
    Process {
        /// The account to switch to after entering, when the lab is root.
        run_as: Option<User>,
    },
}

impl Space {
    /// This process's space, made the first time it is asked for.
    pub fn get() -> Result<&'static Space> {
        static SPACE: OnceLock<std::result::Result<Space, String>> = OnceLock::new();
        SPACE.get_or_init(Space::make).as_ref().map_err(|e| e.clone().into())
    }

    fn make() -> std::result::Result<Space, String> {
        let me = (Uid::effective(), Gid::effective());
        if me.0.is_root() {
            return Ok(Space { user: None, me });
        }
        // The account's uid and gid become 0 inside: the mapping an ordinary
        // account may write for itself (user_namespaces(7)).
        let uid_map = format!("0 {} 1", me.0);
        let gid_map = format!("0 {} 1", me.1);
        let user = super::netns::fork_for_descriptor(|| {
            // SAFETY: raw system calls on data made before the fork.
            unsafe {
                if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                    return Err(Step::UnshareUser);
                }
                // setgroups must be denied before an ordinary account may
                // write a gid map (it could otherwise drop a group that
                // denies it access).
                write_proc(c"/proc/self/setgroups", b"deny").map_err(|()| Step::Setgroups)?;
                write_proc(c"/proc/self/uid_map", uid_map.as_bytes()).map_err(|()| Step::UidMap)?;
                write_proc(c"/proc/self/gid_map", gid_map.as_bytes()).map_err(|()| Step::GidMap)?;
                open_proc(c"/proc/self/ns/user").map_err(|()| Step::OpenNamespace)
            }
        })
        .map_err(|e| refusal(&e))?;
        Ok(Space { user: Some(user), me })
    }

    /// Whether the space is a user namespace of the run's own.
    pub fn is_own(&self) -> bool {
        self.user.is_some()
    }

    /// The space's user namespace, for the helper that joins it; `None`:
    /// the machine's own, which every process is in already.
    pub(super) fn user_fd(&self) -> Option<RawFd> {
        self.user.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// What a child started as `role` inside `netns` does between fork and
    /// exec; `keep` are descriptors it must inherit (they lose their
    /// close-on-exec flag in the child only).
    pub(super) fn entry(&'static self, netns: Arc<Netns>, role: Role, keep: Vec<OwnedFd>) -> Result<Entry> {
        let (nested, run_as) = match role {
            Role::Admin => (None, None),
            // The account's uid, seen as 0 in the space (root's own 0 in the
            // machine's), mapped back to itself.
            Role::Process { run_as: None } => (Some((format!("{} 0 1", self.me.0).into_bytes(), format!("{} 0 1", self.me.1).into_bytes())), None),
            Role::Process { run_as: Some(user) } if self.is_own() => {
                return Err(format!("only root can run a process in a host as another account ({})", user.name).into())
            }
            Role::Process { run_as: Some(user) } => (None, Some((user.uid, user.gid))),
        };
        Ok(Entry { space: self, netns, nested, run_as, keep })
    }
}

/// Entering a host between fork and exec (see the module's opening).
pub struct Entry {
    /// The space to join first, when it is the run's own.
    space: &'static Space,
    /// The host's network namespace, held until the child has entered it.
    netns: Arc<Netns>,
    /// The uid and gid maps of the nested namespace a process makes, when
    /// it must not stay root of the space.
    nested: Option<(Vec<u8>, Vec<u8>)>,
    /// The account root's lab switches the process to, once inside.
    run_as: Option<(Uid, Gid)>,
    /// Descriptors the process inherits, held until it has started.
    keep: Vec<OwnedFd>,
}

impl Entry {
    /// Makes `cmd` start inside the host.
    pub fn apply_to(self, cmd: &mut Command) {
        // SAFETY: `enter` makes only system calls, on data prepared here.
        unsafe {
            cmd.pre_exec(move || self.enter());
        }
    }

    /// Runs in the child. The parent-death signal another `pre_exec` may
    /// have set is kept: the kernel clears it when the credentials change,
    /// and they do here (joining a user namespace, switching accounts).
    fn enter(&self) -> io::Result<()> {
        let death = nix::sys::prctl::get_pdeathsig()?;
        // SAFETY: raw system calls on descriptors this entry holds open.
        unsafe {
            if let Some(user) = self.space.user_fd() {
                check(libc::setns(user, libc::CLONE_NEWUSER))?;
            }
            check(libc::setns(self.netns.fd(), libc::CLONE_NEWNET))?;
            if let Some((uid_map, gid_map)) = &self.nested {
                check(libc::unshare(libc::CLONE_NEWUSER))?;
                // Denied in the space already; said again, as the gid map requires.
                write_proc(c"/proc/self/setgroups", b"deny").map_err(|()| io::Error::last_os_error())?;
                write_proc(c"/proc/self/uid_map", uid_map).map_err(|()| io::Error::last_os_error())?;
                write_proc(c"/proc/self/gid_map", gid_map).map_err(|()| io::Error::last_os_error())?;
            }
            if let Some((uid, gid)) = self.run_as {
                // What std's Command::uid would do, but after the entry:
                // once it is no longer root, the process could not enter.
                check(libc::setgroups(0, std::ptr::null()))?;
                check(libc::setgid(gid.as_raw()))?;
                check(libc::setuid(uid.as_raw()))?;
            }
            for fd in &self.keep {
                check(libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0))?;
            }
        }
        if death.is_some() {
            nix::sys::prctl::set_pdeathsig(death)?;
        }
        Ok(())
    }
}

/// Which step of making a namespace, or of answering for one, failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Step {
    UnshareUser = 1,
    Setgroups,
    UidMap,
    GidMap,
    OpenNamespace,
    JoinSpace,
    UnshareNet,
    Socket,
}

impl Step {
    pub(super) fn from_raw(raw: u32) -> Option<Step> {
        use Step::*;
        [UnshareUser, Setgroups, UidMap, GidMap, OpenNamespace, JoinSpace, UnshareNet, Socket].into_iter().find(|s| *s as u32 == raw)
    }

    fn what(self) -> &'static str {
        match self {
            Step::UnshareUser => "making a user namespace (unshare CLONE_NEWUSER)",
            Step::Setgroups => "writing /proc/self/setgroups",
            Step::UidMap => "writing /proc/self/uid_map",
            Step::GidMap => "writing /proc/self/gid_map",
            Step::OpenNamespace => "opening the new namespace",
            Step::JoinSpace => "joining the run's user namespace (setns)",
            Step::UnshareNet => "making a network namespace (unshare CLONE_NEWNET)",
            Step::Socket => "making a socket inside the host",
        }
    }
}

/// A step that failed, with the kernel's answer.
#[derive(Debug)]
pub(super) struct Failed {
    /// Where it failed.
    pub step: Step,
    /// errno.
    pub errno: i32,
}

impl std::error::Error for Failed {}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.step.what(), io::Error::from_raw_os_error(self.errno))
    }
}

/// What to tell an ordinary account whose kernel refuses it a user
/// namespace: the setting that refuses it, and what to do.
fn refusal(failed: &crate::Error) -> String {
    let read = |path: &str| std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned());
    let errno = failed.downcast_ref::<Failed>().map(|f| f.errno);
    let setting = if errno == Some(libc::ENOSPC) {
        "the limit on user namespaces is reached: user.max_user_namespaces, here or in a user namespace this one runs in \
         (a container's), is too low (sudo sysctl -w user.max_user_namespaces=15000)"
            .to_owned()
    } else if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        "kernel.unprivileged_userns_clone is 0 (Debian's and older Ubuntu kernels): sudo sysctl -w kernel.unprivileged_userns_clone=1".to_owned()
    } else if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10 and later): sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, \
         or an AppArmor profile that allows userns for target/debug/lab"
            .to_owned()
    } else {
        "none of the settings this lab knows of (kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns, \
         user.max_user_namespaces) says why; a container's seccomp profile can forbid unshare too"
            .to_owned()
    };
    format!(
        "the kernel refused this account a user namespace ({}). The network hosts of F15, F17-F19 and the chaos run \
         live in one the lab makes for the run, as rootless containers do; {setting}. Or run them as root",
        crate::error::chain(failed.as_ref())
    )
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes `bytes` to the /proc file `path` in one write(2), as the kernel
/// requires of the id maps. Async-signal-safe.
///
/// # Safety
/// Raw system calls only; callable between fork and exec.
pub(super) unsafe fn write_proc(path: &CStr, bytes: &[u8]) -> std::result::Result<(), ()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(());
    }
    let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    // The write's errno, not the close's, is the one to report.
    let errno = *libc::__errno_location();
    libc::close(fd);
    if written != bytes.len() as isize {
        *libc::__errno_location() = errno;
        return Err(());
    }
    Ok(())
}

/// Opens the /proc file `path` read-only (a namespace, to hold it).
///
/// # Safety
/// Raw system calls only; callable between fork and exec.
pub(super) unsafe fn open_proc(path: &CStr) -> std::result::Result<OwnedFd, ()> {
    let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(());
    }
    Ok(OwnedFd::from_raw_fd(fd))
}
