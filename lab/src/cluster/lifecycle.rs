//! initdb, start, stop and immediate stop of the cluster's server.

use super::{credentials, diagnose, Cluster, HOST, LOG_NAME, NAME, SERVER_FOLDER};
use crate::owner;
use crate::error::{Result, ResultExt};
use crate::safe_dir::{Account, SafeDir};
use crate::{interrupt, paths, poll};
use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use std::io::Write;
use crate::hosts::Host;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Serialises each server's start and stop, so that a stop (Ctrl-C's among
/// them) arriving during a start of the same server waits for it and then
/// stops the server, instead of racing it (a tied server being waited for
/// is out of Ctrl-C's reach meanwhile: see `tied.rs`, `await_tied`). One lock per server (by its
/// folder): different servers start and stop at once (a partition case's
/// servers at its end).
static LIFECYCLE: Mutex<Vec<(PathBuf, Arc<Mutex<()>>)>> = Mutex::new(Vec::new());

/// How a server that starts after a crash (F8's restart, the queue crates'
/// restart, a standby's first start from its base backup) makes its folder
/// durable before recovery: one syncfs() of the filesystem, not an fsync of
/// each of its thousands of files. Timed in the lab's cluster's log
/// ("database system was interrupted" to "redo starts"): about 0.1 s file
/// by file on an idle machine, 6 s with ten busy loops and a writer that
/// syncs beside it, time in which no client gets in; with syncfs, 0.26 s
/// beside the same load. Nothing is less
/// durable (Linux 5.8 and later report syncfs's write errors); syncfs also
/// writes out whatever else on that filesystem waits.
const SYNC_AT_RECOVERY: &str = "recovery_init_sync_method=syncfs";

/// How long a start may take, as `pg_ctl start -t 60` allows.
const START_BOUND: Duration = Duration::from_secs(60);

/// How long the postmaster may still run after `pg_ctl stop` returned: it
/// has only to finish exiting.
const STOP_BOUND: Duration = Duration::from_secs(10);

impl Cluster {
    /// Whether the server of this data directory is running: `pg_ctl
    /// status`, asked only when there is a `postmaster.pid` (without one,
    /// pg_ctl says "no server running" too, and the lab spares a process:
    /// each start and stop asks).
    pub fn is_running(&self) -> Result<bool> {
        // Only a plain "no such file" decides here; anything else (the
        // postmaster removing the file between the open and the check of
        // its links, say) is pg_ctl's to answer.
        if matches!(self.read_server_file("data/postmaster.pid"), Ok(None)) {
            return Ok(false);
        }
        self.pg_ctl_status()
    }

    /// What `pg_ctl status` says of this data directory, always asked of
    /// it (F14's check line names it).
    pub fn pg_ctl_status(&self) -> Result<bool> {
        if self.read_server_file("data/PG_VERSION")?.is_none() {
            return Ok(false);
        }
        // Exit 0: running; 3: not running. Anything else is a real problem.
        let out = self.server_command("pg_ctl").arg("status").arg("-D").arg(self.data_dir()).output()?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(3) => Ok(false),
            _ => Err(diagnose::command_error("pg_ctl status", &out, None).into()),
        }
    }

    /// This server's lifecycle lock (see [`LIFECYCLE`]).
    fn lifecycle(&self) -> Arc<Mutex<()>> {
        let mut all = LIFECYCLE.lock();
        if let Some((_, lock)) = all.iter().find(|(dir, _)| *dir == self.dir) {
            return Arc::clone(lock);
        }
        let lock = Arc::new(Mutex::new(()));
        all.push((self.dir.clone(), Arc::clone(&lock)));
        lock
    }

    /// Starts the server, initialising the cluster first if needed. On this
    /// machine the server has only its Unix socket, in a folder of its own
    /// that no other account can enter, so no port can be in its way; a
    /// server on a host of the lab's network refuses to start when its port
    /// there is held by anything else. The lab never touches a cluster that
    /// is not its own.
    ///
    /// It runs as `pg_ctl`'s daemon, which outlives the lab (`b3-26`, which
    /// the reader may keep running; a killed run's server is taken over by
    /// the next run, see [`crate::owner`]). The servers a run starts for
    /// itself beside `b3-26` are its own children instead, which the kernel
    /// stops when the lab dies: [`Cluster::launch`], see `tied.rs`.
    pub fn start(&self) -> Result<()> {
        let lifecycle = self.lifecycle();
        let _lifecycle = lifecycle.lock();
        self.start_locked(&[])
    }

    /// The first half of a tied start (the servers a run starts beside
    /// `b3-26` for itself: F14's pair, the partition cases' servers, `lab
    /// lease-stores`'s): the postmaster launched as this process's child,
    /// not yet waited for (see [`Cluster::await_launched`]);
    /// `None` when the server was running already. Between the halves
    /// the caller may do other work, a second server's start among it,
    /// while this one boots. Each half holds the lifecycle lock (the
    /// caller registers the child where Ctrl-C finds it: `tied.rs`).
    pub(super) fn launch(&self) -> Result<Option<Child>> {
        let lifecycle = self.lifecycle();
        let _lifecycle = lifecycle.lock();
        if !self.prepare_start()? {
            return Ok(None);
        }
        self.spawn_tied().map(Some)
    }

    /// The second half: waits until the launched postmaster takes
    /// connections, then gives the roles new passwords; on failure the
    /// postmaster is ended and reaped.
    pub(super) fn await_launched(&self, child: Child) -> Result<Child> {
        let lifecycle = self.lifecycle();
        let _lifecycle = lifecycle.lock();
        let child = self.await_ready(child)?;
        self.ready_tied(child)
    }

    /// Restarts the server (a clean stop, then a start) with extra variables
    /// in the server processes' environment — F13 preloads a fake clock this
    /// way, and restarts again with none. The run's ownership of the server
    /// is unchanged.
    pub fn restart_with(&self, env: &[(String, String)]) -> Result<()> {
        let lifecycle = self.lifecycle();
        let _lifecycle = lifecycle.lock();
        self.stop_locked("fast", false)?;
        self.start_locked(env)
    }

    /// The daemon's start itself, under the lifecycle lock; `env` goes into
    /// the server processes' environment.
    fn start_locked(&self, env: &[(String, String)]) -> Result<()> {
        if !self.prepare_start()? {
            return Ok(());
        }
        let out = self
            .host_command("pg_ctl")?
            .args(["start", "-w", "-t", "60", "-s", "-D"])
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path())
            .arg("-o")
            // The Unix socket only (pg_ctl runs this line through
            // the shell, which makes '' an empty value).
            .arg(format!("-p {} -c listen_addresses='' -c {SYNC_AT_RECOVERY}", self.port))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()?;
        if !out.status.success() {
            return Err(diagnose::command_error("pg_ctl start", &out, Some(self)).into());
        }
        self.rotate_unless_standby()
    }

    /// What every start does before it launches anything, under the
    /// lifecycle lock; `false` when the server runs already (nothing to
    /// start).
    fn prepare_start(&self) -> Result<bool> {
        // Checked under the lifecycle lock: after Ctrl-C nothing starts again.
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        if self.is_running()? {
            return Ok(false);
        }
        // A server on a host: its port there first, so that a port held by
        // something else ends the start before anything is written to disk.
        // (On this machine a server has only its socket, in its own folder.)
        if let Some(host) = &self.host {
            self.check_port_free(host)?;
        }
        if let Some(moved) = &paths::cluster_place().moved {
            // Once per process: F8's crash-restart is not news.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("lab: {moved}"));
        }
        self.replace_unknown_server()?;
        self.ensure_initialized()?;
        self.write_access_rules()?;
        // Checked at every start, not only the first: the server's account
        // may have put something else in the socket folder's place since.
        self.server_folder()?.sub_dir("socket", self.server_owner(), 0o700)?;
        Ok(true)
    }

    /// A tied postmaster that is ready: its roles get new passwords. The
    /// child is this process's: on an error here it is ended and reaped.
    fn ready_tied(&self, mut child: Child) -> Result<Child> {
        if let Err(e) = self.rotate_unless_standby() {
            end_postmaster(&mut child);
            return Err(e);
        }
        Ok(child)
    }

    /// New passwords (see `access.rs`), except on a standby, which takes
    /// no writes and gets its primary's roles by replication.
    fn rotate_unless_standby(&self) -> Result<()> {
        if self.read_server_file("data/standby.signal")?.is_some() {
            return Ok(());
        }
        self.rotate_passwords().with_context(|| format!("giving the roles of {} new passwords", self.name))
    }

    // ANCHOR: spawn_tied
    /// Runs the postmaster as this process's own child, as pg_ctl would
    /// (same data, port and log), with one difference: the kernel sends it
    /// SIGQUIT, PostgreSQL's immediate shutdown, when the thread that
    /// started it ends. A run killed with SIGKILL cannot clean up, so its
    /// servers end with it instead of waiting for the next run.
    fn spawn_tied(&self) -> Result<Child> {
        // Mode 0600, like the log pg_ctl makes; opened through the server
        // folder's descriptor (a link there is refused), the server
        // account's file.
        let log = self.server_folder()?.open_file(LOG_NAME, OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT, self.server_owner())?;
        // Born inside its host, when it has one.
        let mut cmd = self.host_command("postgres")?;
        cmd.arg("-D").arg(self.data_dir()).arg("-p").arg(self.port.to_string());
        // On a host of the lab's network: its address too, so the other
        // hosts reach it, inside namespaces no other account can enter (the
        // lab itself reads it through its Unix socket). On this machine's
        // loopback, nothing: every client here uses the Unix socket, so no
        // loopback port carries a password, and none is left for another
        // account to take while the server restarts.
        let listen = self.host.as_ref().map_or_else(String::new, |host| host.addr().to_string());
        cmd.arg("-c").arg(format!("listen_addresses={listen}"));
        cmd.arg("-c").arg(SYNC_AT_RECOVERY);
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // SIGQUIT is the postmaster's immediate shutdown: a run killed
        // without its cleanup takes its servers with it.
        interrupt::tie_to_lab(&mut cmd, Signal::SIGQUIT);
        cmd.spawn().with_context(|| format!("starting the postmaster of {}", self.name))
    }

    /// Waits for the postmaster `child` that [`Cluster::spawn_tied`]
    /// started; on failure it is ended and reaped.
    fn await_ready(&self, mut child: Child) -> Result<Child> {
        // Ready when the postmaster's pid file says so, as `pg_ctl start -w`
        // waits: `ready` once it takes connections (read-only ones on a hot
        // standby), `standby` for a standby that takes none.
        let mut exited = None;
        let ready = poll::poll_until(START_BOUND, poll::EVERY, || -> Result<bool> {
            if let Some(status) = child.try_wait()? {
                exited = Some(status);
                return Ok(true);
            }
            Ok(self.pid_file_status(child.id()).is_some_and(|s| s == "ready" || s == "standby"))
        });
        let ready = match ready {
            Ok(ready) => ready,
            Err(e) => {
                end_postmaster(&mut child);
                return Err(e);
            }
        };
        if let Some(status) = exited {
            return Err(format!("the postmaster of {} exited while starting ({status}); its log {}:{}", self.name, self.log_path().display(), self.log_tail(8)).into());
        }
        if !ready {
            end_postmaster(&mut child);
            return Err(format!("{} did not become ready within {START_BOUND:?}; its log {}:{}", self.name, self.log_path().display(), self.log_tail(8)).into());
        }
        Ok(child)
    }
    // ANCHOR_END: spawn_tied

    /// The running postmaster, from the first line of `postmaster.pid`:
    /// its pid and start time (with the pid, one process, never a later
    /// one given the same pid). `None` when there is no such process.
    fn postmaster(&self) -> Option<(u32, u64)> {
        let pid: u32 = self.pid_file_lines()?.first()?.parse().ok()?;
        crate::sysinfo::proc_stat(pid).map(|stat| (pid, stat.start_time))
    }

    /// The status line of `postmaster.pid` (`starting`, `ready`, `standby`,
    /// `stopping`) when the file belongs to the postmaster `pid`.
    fn pid_file_status(&self, pid: u32) -> Option<String> {
        let lines = self.pid_file_lines()?;
        // Line 1: the pid; line 8: the status (pidfile.h, LOCK_FILE_LINE_PM_STATUS).
        (*lines.first()? == pid.to_string()).then(|| lines.get(7).cloned())?
    }

    /// The lines of `postmaster.pid`, trimmed; `None` when there is none.
    fn pid_file_lines(&self) -> Option<Vec<String>> {
        let text = self.read_server_file("data/postmaster.pid").ok()??;
        Some(text.lines().map(|l| l.trim().to_owned()).collect())
    }

    /// Stops the server cleanly (`-m fast`: a checkpoint, then exit); does
    /// nothing when it is not running.
    pub fn stop(&self) -> Result<()> {
        self.stop_with("fast")
    }

    /// Stops the server without a checkpoint (`-m immediate`), as a crash
    /// would; the next start must recover from the WAL.
    pub fn stop_immediate(&self) -> Result<()> {
        self.stop_with("immediate")
    }

    /// Crash-restart: an immediate stop, then a start, which replays the WAL.
    pub fn restart_immediate(&self) -> Result<()> {
        self.stop_immediate()?;
        self.start()
    }

    pub(super) fn stop_with(&self, mode: &str) -> Result<()> {
        let lifecycle = self.lifecycle();
        let _lifecycle = lifecycle.lock();
        // A crash-stop (F8) is followed by a start within the same run: the
        // owner stays. A clean stop ends the server's life: nobody owns it.
        self.stop_locked(mode, mode == "fast")
    }

    /// The stop itself, under the lifecycle lock.
    fn stop_locked(&self, mode: &str, clear_owner: bool) -> Result<()> {
        if !self.is_running()? {
            return Ok(());
        }
        // pg_ctl only sends the signal (-W: no wait), as the server account:
        // it checks its own waiting only every 100 ms, so `-w` made every
        // stop last at least that long. The lab waits itself, every few
        // ms, and for more than pg_ctl would: not for postmaster.pid to go,
        // which the postmaster removes a moment before it exits (on a busy
        // machine it is still seen running after that), but for that very
        // process (its pid and start time, read first) to end.
        let postmaster = self.postmaster();
        let out = self
            .server_command("pg_ctl")
            .args(["stop", "-W", "-s", "-m", mode, "-D"])
            .arg(self.data_dir())
            .output()?;
        if !out.status.success() {
            return Err(diagnose::command_error(&format!("pg_ctl stop -m {mode}"), &out, Some(self)).into());
        }
        let ended = || -> Result<bool> {
            Ok(match postmaster {
                Some((pid, started)) => crate::sysinfo::proc_stat(pid).is_none_or(|now| now.state == 'Z' || now.start_time != started),
                // No process behind the pid file: its going is the end.
                None => self.read_server_file("data/postmaster.pid")?.is_none(),
            })
        };
        if !poll::poll_until(STOP_BOUND, poll::EVERY, ended)? {
            return Err(format!("{}: pg_ctl stop -m {mode} sent its signal, but the postmaster ({postmaster:?}) still runs after {STOP_BOUND:?}", self.name).into());
        }
        if clear_owner {
            owner::clear(&self.dir)?;
        }
        Ok(())
    }

    /// Stops the server if it runs and deletes the whole place, F14's pair
    /// (`primary/`, `standby/`) and the mutants' cluster with it: their
    /// servers are tied to the runs that started them, and the run lock,
    /// which the caller holds, keeps every run out. Only a place that
    /// carries the lab's marker is deleted; anything else is refused.
    pub fn reset(&self) -> Result<()> {
        let Some(place) = self.existing_place()? else { return Ok(()) };
        self.stop()?;
        place.remove()
    }

    /// [`Self::reset`], and with `everything` (`lab cluster forget`, for a
    /// clone about to be deleted) also the root-only folder that holds the
    /// places of closed checkouts, if this was the last place in it.
    /// Returns the folders removed.
    pub fn forget(&self, everything: bool) -> Result<Vec<std::path::PathBuf>> {
        let mut removed = Vec::new();
        if self.existing_place()?.is_some() {
            self.reset()?;
            removed.push(self.dir.clone());
        }
        let shared = std::path::Path::new(paths::SHARED_PLACES);
        if everything && self.dir.parent() == Some(shared) {
            // rmdir, which removes only an empty folder: other checkouts' places stay.
            match std::fs::remove_dir(shared) {
                Ok(()) => removed.push(shared.to_path_buf()),
                Err(e) if matches!(e.raw_os_error(), Some(nix::libc::ENOTEMPTY) | Some(nix::libc::ENOENT)) => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", shared.display())),
            }
        }
        Ok(removed)
    }

    /// A place whose server has data but no credentials beside it was
    /// left half-made (initdb ran, the credentials were lost) or made by
    /// hand: whoever holds its superuser is unknown. It holds nothing worth
    /// keeping (every run recreates the databases): stop it and remove its
    /// server folder, so that it is made again with fresh passwords.
    fn replace_unknown_server(&self) -> Result<()> {
        let place = self.place()?;
        if self.read_server_file("data/PG_VERSION")?.is_none() || place.read_file(credentials::FILE, Account::me())?.is_some() {
            return Ok(());
        }
        eprintln!("lab: {} has a server but no credentials the lab made for it; recreating it with fresh passwords", self.dir.display());
        self.stop_locked("fast", true)?;
        place.remove_tree(SERVER_FOLDER)
    }

    /// Whether the server's data was made with WAL segments of another
    /// size than it asks for ([`Cluster::with_wal_segment_mb`]); if so its
    /// server folder is removed (it is not running: the start checked),
    /// to be made again. It holds nothing worth keeping: every run makes
    /// its databases again, and its standby is copied from it.
    fn made_with_another_wal_segment(&self) -> Result<bool> {
        let Some(mb) = self.wal_segment_mb else { return Ok(false) };
        let bytes: u64 = self.control_field("Bytes per WAL segment")?.parse().context("reading pg_controldata's WAL segment size")?;
        if bytes == u64::from(mb) << 20 {
            return Ok(false);
        }
        eprintln!("lab: {} was made with WAL segments of {} MB; making it again with {mb} MB ones", self.name, bytes >> 20);
        self.place()?.remove_tree(SERVER_FOLDER)?;
        Ok(true)
    }

    fn ensure_initialized(&self) -> Result<()> {
        if let Some(version) = self.read_server_file("data/PG_VERSION")? {
            let made_by: u32 = version.trim().parse().with_context(|| format!("{}/PG_VERSION says {version:?}", self.data_dir().display()))?;
            if made_by != self.major {
                return Err(format!(
                    "{} was made by PostgreSQL {made_by}, but the server binaries found are version {} ({}); \
                     remove the old cluster with `./run.sh cluster reset`",
                    self.data_dir().display(),
                    self.major,
                    self.bin.display()
                )
                .into());
            }
            if !self.made_with_another_wal_segment()? {
                return Ok(());
            }
        }
        let socket = self.socket_dir().join(format!(".s.PGSQL.{}", self.port));
        // sun_path holds 108 bytes, terminator included.
        if socket.as_os_str().len() > 107 {
            return Err(format!(
                "the socket path {} is longer than a Unix socket allows; set LAB_CLUSTER_DIR to a shorter folder",
                socket.display()
            )
            .into());
        }
        let place = self.make_folder()?;
        let admin_password = credentials::create(&place)?;
        // initdb reads the superuser's password from a file, as the server
        // account: a copy in the place (the lab's folder: no other account
        // can put anything there), created new and given to that account
        // through its descriptor, removed as soon as initdb is done.
        let pwfile = "initdb-password";
        place.remove_file(pwfile)?;
        let mut file = place.create_file(pwfile, 0o600)?;
        writeln!(file, "{admin_password}")?;
        let server = self.server_owner();
        std::os::unix::fs::fchown(&file, Some(server.uid.as_raw()), Some(server.gid.as_raw()))?;
        drop(file);
        let out = self
            .server_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .arg(format!("--pwfile={}", self.dir.join(pwfile).display()))
            // The pg_hba.conf initdb writes never serves: the lab writes
            // its own before every start (access.rs). scram-sha-256 rather
            // than initdb's default `trust`, so that not even that file
            // lets anyone in without a password.
            .args(["-U", credentials::ADMIN, "-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"])
            .args(self.wal_segment_mb.map(|mb| format!("--wal-segsize={mb}")))
            .output();
        place.remove_file(pwfile)?;
        let out = out?;
        if !out.status.success() {
            return Err(diagnose::command_error("initdb", &out, None).into());
        }
        // Appended through descriptors: data/ is the server account's.
        let mut conf = self.server_folder()?.open_file("data/postgresql.conf", OFlag::O_WRONLY | OFlag::O_APPEND, server)?;
        writeln!(
            conf,
            "\n# {}: the lease + fencing lab's throw-away cluster\n\
             # The Unix socket only; a start on a host of the lab's network adds its address.\n\
             listen_addresses = ''\n\
             unix_socket_directories = '{}'\n\
             # F3's racers and the bench's writers (up to 64 each) hold a connection each at once.\n\
             max_connections = 250\n",
            self.name,
            self.socket_dir().display()
        )?;
        Ok(())
    }

    /// Makes the place and, in it, the server account's folder and its
    /// socket folder, that account's alone: no other account may enter
    /// them. Returns the place.
    pub(super) fn make_folder(&self) -> Result<SafeDir> {
        let place = self.place()?;
        let server = self.server_folder()?;
        server.sub_dir("socket", self.server_owner(), 0o700)?;
        if self.run_as.is_some() {
            self.check_server_user_can_write()?;
        }
        Ok(place)
    }

    fn check_server_user_can_write(&self) -> Result<()> {
        let user = self.run_as.as_ref().expect("only when running as root");
        // `test -w` as that account: false when any parent folder is closed to it.
        let ok = Command::new("test")
            .arg("-w")
            .arg(self.dir.join(SERVER_FOLDER))
            .uid(user.uid.as_raw())
            .gid(user.gid.as_raw())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err(format!(
                "the {} account cannot reach {}: a parent folder is closed to it. \
                 Make the parents searchable (chmod o+x), or set LAB_CLUSTER_DIR to a path that does not exist yet inside a folder \
                 it can reach (e.g. d=$(mktemp -d) && chmod 711 $d && LAB_CLUSTER_DIR=$d/{NAME}): the lab creates it",
                user.name,
                self.dir.display()
            )
            .into());
        }
        Ok(())
    }

    /// Before a server on a host of the lab's network starts: its port there
    /// is free (on this machine a server has only its socket, and no port
    /// to check). Only the lab's own processes are inside a host.
    fn check_port_free(&self, host: &Host) -> Result<()> {
        let at = std::net::SocketAddr::new(HOST.parse().expect("an address"), self.port);
        match host.listen(at) {
            Ok(_probe) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(format!(
                "port {} inside host {} of the lab's network is already in use, so {} ({}) cannot listen there; \
                 only the lab's own processes run inside a host: a server of this run may still be up",
                self.port,
                host.name(),
                self.name,
                self.data_dir().display()
            )
            .into()),
            Err(e) => Err(e).context(format!("probing port {} inside host {}", self.port, host.name())),
        }
    }

    /// A server command, run as the server account when the lab is root.
    pub(super) fn server_command(&self, program: &str) -> Command {
        let mut cmd = self.bare_command(program);
        if let Some(user) = &self.run_as {
            // std drops supplementary groups when it switches from root.
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        cmd
    }

    /// A server command that must run where the server lives: inside its
    /// host, when it has one (the postmaster, `pg_ctl start`, a standby's
    /// base backup), else [`Self::server_command`]. On a host, the switch
    /// to the server account comes after the entry (only root may enter).
    pub(super) fn host_command(&self, program: &str) -> Result<Command> {
        let Some(host) = &self.host else { return Ok(self.server_command(program)) };
        let mut cmd = self.bare_command(program);
        host.enter(&mut cmd, self.run_as.clone(), vec![])?;
        Ok(cmd)
    }

    /// `program` from the server's binaries, as the lab's account.
    fn bare_command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        // A folder the server account can enter (root's cwd may be closed to it).
        if self.dir.exists() {
            cmd.current_dir(&self.dir);
        }
        // Its own process group: Ctrl-C at the terminal reaches the lab, which
        // then stops the server itself, instead of killing pg_ctl halfway.
        cmd.process_group(0);
        // Untranslated messages, so pg_controldata's labels parse.
        cmd.env("LC_ALL", "C");
        cmd
    }
}

/// Ends a postmaster that is this process's child, in whatever state (still
/// booting, with no pid file for `pg_ctl stop` to act on, or running), and
/// reaps it: SIGQUIT, PostgreSQL's immediate shutdown, which also ends the
/// postmaster's own processes and leaves its pid file whole, sent again
/// every few milliseconds in case it came before the postmaster installed
/// its handler; SIGKILL only if it has not ended within [`STOP_BOUND`].
pub(super) fn end_postmaster(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // The child is not reaped until it has ended, so its pid is still its own.
    let ended = poll::poll_until(STOP_BOUND, poll::EVERY, || -> std::io::Result<bool> {
        if child.try_wait()?.is_some() {
            return Ok(true);
        }
        let _ = nix::sys::signal::kill(pid, Signal::SIGQUIT);
        Ok(false)
    });
    if !matches!(ended, Ok(true)) {
        let _ = child.kill();
    }
    let _ = child.wait();
}
