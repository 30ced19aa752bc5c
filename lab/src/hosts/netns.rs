//! One network namespace of the lab's: made by a helper process, held by
//! a descriptor, and gone with the last process or descriptor that holds it.
//!
//! No namespace of the lab's has a name: none is bind-mounted under
//! `/run/netns` (`ip netns add` would need root, and a named namespace
//! lives on after its run unless someone deletes it). The kernel ends a
//! network namespace, and every link and rule inside it, once nothing
//! refers to it any more: no process inside, no open descriptor. The lab
//! holds one descriptor per namespace; the processes it starts inside are
//! its children, which end with it. So a network ends with its run on
//! every exit path, `kill -9` included, with nothing to sweep afterwards.
//!
//! **The helper.** A namespace is made by a small helper process, forked
//! from the lab: it joins the run's space (`space.rs`), makes a new
//! network namespace for itself (`unshare`), sends the lab a descriptor of
//! it, and then stays, answering each request with a new TCP socket made
//! inside. A socket belongs to the namespace it was made in, whichever
//! process uses it: that is how the lab's own threads, which never change
//! namespace, listen and connect inside a host (its probes, the delay
//! proxy's listener, its reads of the etcd members). The helper runs only
//! raw system calls on memory it was forked with, keeps no descriptor but
//! its channel, and exits when the channel closes: when the lab drops the
//! namespace, or when the lab dies and the kernel closes its descriptors.

use super::space::{open_proc, Failed, Space, Step};
use crate::error::{Result, ResultExt};
use nix::libc;
use nix::sys::socket::{recvmsg, socketpair, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use parking_lot::Mutex;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A network namespace, held open, with the helper that makes sockets in it.
#[derive(Debug)]
pub struct Netns {
    /// The namespace itself (for `setns` in a child, and for `ip … netns`).
    fd: OwnedFd,
    /// The channel to the helper; `None` once closed.
    helper: Mutex<Option<OwnedFd>>,
    /// The helper's pid, to reap it.
    pid: Pid,
}

impl Netns {
    /// Makes a new network namespace in `space`.
    pub fn make(space: &Space) -> Result<Netns> {
        let user = space.user_fd();
        let (ours, theirs) = channel()?;
        let chan = theirs.as_raw_fd();
        let mut keep = vec![chan];
        keep.extend(user);
        let pid = fork_child(&keep, move || {
            // SAFETY: raw system calls on descriptors the child holds.
            unsafe { serve(chan, user) }
        })?;
        drop(theirs);
        match receive(&ours) {
            Ok(fd) => Ok(Netns { fd, helper: Mutex::new(Some(ours)), pid }),
            Err(e) => {
                drop(ours);
                let _ = waitpid(pid, None);
                Err(e)
            }
        }
    }

    /// The namespace's descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The helper's pid.
    #[cfg(test)]
    pub fn helper(&self) -> Pid {
        self.pid
    }

    /// A second descriptor of the namespace (close-on-exec), for a child to inherit.
    pub fn duplicate(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// A new TCP socket (IPv4, close-on-exec) inside the namespace, from
    /// the helper.
    pub fn tcp_socket(&self) -> std::io::Result<OwnedFd> {
        let helper = self.helper.lock();
        let chan = helper.as_ref().ok_or_else(|| std::io::Error::other("the namespace is closed"))?;
        let request = [b's'];
        // SAFETY: a one-byte send on an open socket.
        if unsafe { libc::send(chan.as_raw_fd(), request.as_ptr().cast(), 1, libc::MSG_NOSIGNAL) } != 1 {
            return Err(std::io::Error::other(format!("the host's helper (pid {}) is gone: {}", self.pid, std::io::Error::last_os_error())));
        }
        receive(chan).map_err(|e| std::io::Error::other(crate::error::chain(e.as_ref())))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The helper exits when its channel closes; reaped here.
        drop(self.helper.lock().take());
        let _ = waitpid(self.pid, None);
    }
}

/// A connected pair of packet sockets: one message per answer, with its
/// descriptor.
fn channel() -> Result<(OwnedFd, OwnedFd)> {
    socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).context("making a channel to a host's helper")
}

/// Forks, and runs `f` in the child to make one descriptor, which the child
/// sends back before it exits; returns it. `f` runs between fork and exit
/// of a copy of a multithreaded process: raw system calls only.
pub fn fork_for_descriptor(f: impl FnOnce() -> std::result::Result<OwnedFd, Step>) -> Result<OwnedFd> {
    let (ours, theirs) = channel()?;
    let chan = theirs.as_raw_fd();
    let pid = fork_child(&[chan], move || {
        // SAFETY: raw system calls; the descriptor is sent, then the child exits.
        unsafe {
            match f() {
                Ok(fd) => reply(chan, None, fd.as_raw_fd()),
                Err(step) => reply(chan, Some(step), -1),
            }
        }
    })?;
    drop(theirs);
    let made = receive(&ours);
    let _ = waitpid(pid, None);
    made
}

/// Forks a child that runs `child` with every signal blocked and every
/// descriptor closed but `keep`, and then exits.
fn fork_child(keep: &[RawFd], child: impl FnOnce()) -> Result<Pid> {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    // Blocked across the fork, so the child never runs the lab's handlers
    // (a Ctrl-C reaches the whole process group, this child too).
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::all()), Some(&mut old))?;
    // SAFETY: the child calls only async-signal-safe system calls (see
    // `close_all_but`, `serve` and the closures given here) and exits.
    let forked = unsafe { nix::unistd::fork() };
    match forked {
        Ok(nix::unistd::ForkResult::Child) => {
            // SAFETY: system calls only.
            unsafe { close_all_but(&keep) };
            child();
            // SAFETY: the child's end, without running anything of the lab's.
            unsafe { libc::_exit(0) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
            Ok(child)
        }
        Err(e) => {
            pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
            Err(e).context("forking a host's helper")
        }
    }
}

/// Closes every descriptor but `keep` (sorted): the child must hold no copy
/// of the lab's pipes, sockets and channels, or their other ends would
/// never see them close.
///
/// # Safety
/// System calls only; for the child of a fork.
unsafe fn close_all_but(keep: &[RawFd]) {
    let mut from: libc::c_uint = 0;
    for fd in keep {
        let fd = *fd as libc::c_uint;
        if fd > from {
            libc::syscall(libc::SYS_close_range, from, fd - 1, 0);
        }
        from = fd + 1;
    }
    libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0);
}

/// The helper: joins the space, makes its namespace, sends it, then
/// answers each request with a socket made inside, until the channel closes.
///
/// # Safety
/// System calls only; for the child of a fork.
unsafe fn serve(chan: RawFd, user: Option<RawFd>) -> ! {
    if let Some(user) = user {
        if libc::setns(user, libc::CLONE_NEWUSER) != 0 {
            reply(chan, Some(Step::JoinSpace), -1);
            libc::_exit(1);
        }
        libc::close(user);
    }
    if libc::unshare(libc::CLONE_NEWNET) != 0 {
        reply(chan, Some(Step::UnshareNet), -1);
        libc::_exit(1);
    }
    match open_proc(c"/proc/thread-self/ns/net") {
        Ok(ns) => reply(chan, None, ns.as_raw_fd()),
        Err(()) => {
            reply(chan, Some(Step::OpenNamespace), -1);
            libc::_exit(1);
        }
    }
    loop {
        let mut request = 0u8;
        let got = libc::recv(chan, (&raw mut request).cast(), 1, 0);
        if got <= 0 {
            // The lab closed the channel, or is gone.
            libc::_exit(0);
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            reply(chan, Some(Step::Socket), -1);
        } else {
            reply(chan, None, fd);
            libc::close(fd);
        }
    }
}

/// Sends one answer: a failed step with errno, or success with `fd`.
///
/// # Safety
/// System calls only, on a stack buffer; callable in the child of a fork.
unsafe fn reply(chan: RawFd, failed: Option<Step>, fd: RawFd) {
    let errno = *libc::__errno_location();
    let body: [u32; 2] = match failed {
        Some(step) => [step as u32, errno as u32],
        None => [0, 0],
    };
    let mut iov = libc::iovec { iov_base: body.as_ptr() as *mut libc::c_void, iov_len: std::mem::size_of_val(&body) };
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    if fd >= 0 {
        let size = std::mem::size_of::<RawFd>() as libc::c_uint;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size) as usize;
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
    }
    libc::sendmsg(chan, &raw const msg, libc::MSG_NOSIGNAL);
}

/// Reads one answer from a helper: the descriptor it sent, or what failed.
fn receive(chan: &OwnedFd) -> Result<OwnedFd> {
    let mut body = [0u8; 8];
    let mut control = nix::cmsg_space!(RawFd);
    let (bytes, mut fds) = {
        let mut iov = [IoSliceMut::new(&mut body)];
        let msg = recvmsg::<()>(chan.as_raw_fd(), &mut iov, Some(&mut control), MsgFlags::MSG_CMSG_CLOEXEC).context("reading a host's helper")?;
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs().context("reading a host's helper")? {
            if let ControlMessageOwned::ScmRights(sent) = cmsg {
                // SAFETY: descriptors the kernel just gave this process.
                fds.extend(sent.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        (msg.bytes, fds)
    };
    if bytes != body.len() {
        return Err("a host's helper ended without answering".into());
    }
    let step = u32::from_ne_bytes(body[..4].try_into().expect("4 bytes"));
    let errno = u32::from_ne_bytes(body[4..].try_into().expect("4 bytes")) as i32;
    if step != 0 {
        let step = Step::from_raw(step).ok_or_else(|| format!("a host's helper answered an unknown step {step}"))?;
        return Err(Box::new(Failed { step, errno }));
    }
    match (fds.pop(), fds.is_empty()) {
        (Some(fd), true) => Ok(fd),
        _ => Err("a host's helper answered without exactly one descriptor".into()),
    }
}
