//! initdb, start, stop and immediate stop of the cluster's server.

use super::{credentials, diagnose, owner, Cluster, HOST, NAME};
use crate::error::{Result, ResultExt};
use crate::{interrupt, paths, poll};
use nix::sys::signal::Signal;
use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// Serialises start and stop, so that Ctrl-C arriving during a start waits
/// for it and then stops the server, instead of racing it.
static LIFECYCLE: Mutex<()> = Mutex::new(());

/// How long a start may take, as `pg_ctl start -t 60` allows.
const START_BOUND: Duration = Duration::from_secs(60);

/// Who runs the postmaster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Launch {
    /// `pg_ctl start`: a daemon that outlives the lab (`b3-26`, which the
    /// reader may keep running; a killed run's server is taken over by the
    /// next run, see [`super::owner`]).
    Daemon,
    /// The lab's own child, which the kernel stops when the lab dies (F14's
    /// servers, which only a run of F14 ever uses).
    Tied,
}

impl Cluster {
    /// Whether the server of this data directory is running (`pg_ctl status`).
    pub fn is_running(&self) -> Result<bool> {
        if !self.data_dir().join("PG_VERSION").exists() {
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

    /// Starts the server, initialising the cluster first if needed. Refuses
    /// when the port is held by anything else: the lab never touches a
    /// cluster that is not its own.
    pub fn start(&self) -> Result<()> {
        self.start_as(Launch::Daemon).map(drop)
    }

    /// Starts the server the way `launch` says; the postmaster's process
    /// when it is this process's child (`Launch::Tied`), `None` when it is
    /// pg_ctl's daemon or was running already.
    pub(super) fn start_as(&self, launch: Launch) -> Result<Option<Child>> {
        let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|p| p.into_inner());
        self.start_locked(launch, &[])
    }

    /// Restarts the server (a clean stop, then a start) with extra variables
    /// in the server processes' environment — F13 preloads a fake clock this
    /// way, and restarts again with none. The run's ownership of the server
    /// is unchanged.
    pub fn restart_with(&self, env: &[(String, String)]) -> Result<()> {
        let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|p| p.into_inner());
        self.stop_locked("fast", false)?;
        self.start_locked(Launch::Daemon, env).map(drop)
    }

    /// The start itself, under the lifecycle lock; `env` goes into the
    /// server processes' environment (pg_ctl's daemon only).
    fn start_locked(&self, launch: Launch, env: &[(String, String)]) -> Result<Option<Child>> {
        // Checked under the lifecycle lock: after Ctrl-C nothing starts again.
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        if self.is_running()? {
            return Ok(None);
        }
        // The port first: a port held by something else ends the start before
        // anything is written to disk.
        self.check_port_free()?;
        if let Some(moved) = &paths::cluster_place().moved {
            // Once per process: F8's crash-restart is not news.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("lab: {moved}"));
        }
        self.replace_trust_cluster()?;
        self.ensure_initialized()?;
        match launch {
            Launch::Daemon => {
                let out = self
                    .server_command("pg_ctl")
                    .args(["start", "-w", "-t", "60", "-s", "-D"])
                    .arg(self.data_dir())
                    .arg("-l")
                    .arg(self.log_path())
                    .arg("-o")
                    .arg(format!("-p {}", self.port))
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .output()?;
                if !out.status.success() {
                    return Err(diagnose::command_error("pg_ctl start", &out, Some(&self.log_path())).into());
                }
                Ok(None)
            }
            Launch::Tied => self.launch_tied().map(Some),
        }
    }

    // ANCHOR: launch_tied
    /// Runs the postmaster as this process's own child, as pg_ctl would
    /// (same data, port and log), with one difference: the kernel sends it
    /// SIGQUIT, PostgreSQL's immediate shutdown, when the thread that
    /// started it ends. A run killed with SIGKILL cannot clean up, so its
    /// servers end with it instead of waiting for the next run.
    fn launch_tied(&self) -> Result<Child> {
        // Mode 0600, like the log pg_ctl makes.
        let log = fs::OpenOptions::new().create(true).append(true).mode(0o600).open(self.log_path())?;
        self.give_to_server_account(&self.log_path())?;
        let mut cmd = self.server_command("postgres");
        cmd.arg("-D").arg(self.data_dir()).arg("-p").arg(self.port.to_string());
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // SIGQUIT is the postmaster's immediate shutdown: a run killed
        // without its cleanup takes its servers with it.
        interrupt::tie_to_lab(&mut cmd, Signal::SIGQUIT);
        let mut child = cmd.spawn().with_context(|| format!("starting the postmaster of {}", self.name))?;
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
        })?;
        if let Some(status) = exited {
            return Err(format!("the postmaster of {} exited while starting ({status}); its log {}:{}", self.name, self.log_path().display(), diagnose::log_tail(&self.log_path(), 8)).into());
        }
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} did not become ready within {START_BOUND:?}; its log {}:{}", self.name, self.log_path().display(), diagnose::log_tail(&self.log_path(), 8)).into());
        }
        Ok(child)
    }
    // ANCHOR_END: launch_tied

    /// The status line of `postmaster.pid` (`starting`, `ready`, `standby`,
    /// `stopping`) when the file belongs to the postmaster `pid`.
    fn pid_file_status(&self, pid: u32) -> Option<String> {
        let text = fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        let lines: Vec<&str> = text.lines().collect();
        // Line 1: the pid; line 8: the status (pidfile.h, LOCK_FILE_LINE_PM_STATUS).
        (lines.first()?.trim() == pid.to_string()).then(|| lines.get(7).map(|s| s.trim().to_owned()))?
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
        let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|p| p.into_inner());
        // A crash-stop (F8) is followed by a start within the same run: the
        // owner stays. A clean stop ends the server's life: nobody owns it.
        self.stop_locked(mode, mode == "fast")
    }

    /// The stop itself, under the lifecycle lock.
    fn stop_locked(&self, mode: &str, clear_owner: bool) -> Result<()> {
        if !self.is_running()? {
            return Ok(());
        }
        let out = self
            .server_command("pg_ctl")
            .args(["stop", "-w", "-t", "60", "-s", "-m", mode, "-D"])
            .arg(self.data_dir())
            .output()?;
        if !out.status.success() {
            return Err(diagnose::command_error(&format!("pg_ctl stop -m {mode}"), &out, Some(&self.log_path())).into());
        }
        if clear_owner {
            owner::clear(&self.dir);
        }
        Ok(())
    }

    /// Stops the server if it runs and deletes the whole cluster folder.
    /// F14's pair (`-primary`, `-standby`) goes with it: their servers are
    /// tied to the run that started them, so none of them runs now.
    pub fn reset(&self) -> Result<()> {
        self.stop()?;
        let folder = self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let pair = ["primary", "standby"].map(|role| self.dir.with_file_name(format!("{folder}-{role}")));
        for dir in [self.dir.clone()].iter().chain(pair.iter()) {
            if dir.exists() {
                fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
            }
        }
        Ok(())
    }

    /// A cluster made by an older lab with `initdb -A trust` let every local
    /// account in as superuser. It holds nothing worth keeping (every run
    /// recreates the databases): stop it and remove it, so that it is made
    /// again with passwords.
    fn replace_trust_cluster(&self) -> Result<()> {
        if !self.data_dir().join("PG_VERSION").exists() || credentials::path(&self.dir).exists() {
            return Ok(());
        }
        eprintln!(
            "lab: {} was made by an older lab that let any local account in without a password; recreating it with passwords",
            self.dir.display()
        );
        self.stop_locked("fast", true)?;
        fs::remove_dir_all(&self.dir).with_context(|| format!("removing {}", self.dir.display()))
    }

    fn ensure_initialized(&self) -> Result<()> {
        let version_file = self.data_dir().join("PG_VERSION");
        if version_file.exists() {
            let made_by: u32 = fs::read_to_string(&version_file)?.trim().parse().unwrap_or(0);
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
            return Ok(());
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
        self.make_folder()?;
        let admin_password = credentials::create(&self.dir)?;
        // initdb reads the superuser's password from a file, as the server
        // account: a copy it can read, removed as soon as initdb is done.
        let pwfile = self.dir.join("initdb-password");
        fs::write(&pwfile, format!("{admin_password}\n"))?;
        fs::set_permissions(&pwfile, fs::Permissions::from_mode(0o600))?;
        self.give_to_server_account(&pwfile)?;
        let out = self
            .server_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .arg(format!("--pwfile={}", pwfile.display()))
            // Every connection, TCP or socket, proves the password (see
            // credentials.rs: loopback is open to every local account).
            .args(["-U", credentials::ADMIN, "-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"])
            .output();
        let _ = fs::remove_file(&pwfile);
        let out = out?;
        if !out.status.success() {
            return Err(diagnose::command_error("initdb", &out, None).into());
        }
        let mut conf = fs::OpenOptions::new().append(true).open(self.data_dir().join("postgresql.conf"))?;
        writeln!(
            conf,
            "\n# {}: the lease + fencing lab's throw-away cluster\n\
             listen_addresses = '{}'\n\
             unix_socket_directories = '{}'\n\
             # F3 holds three rounds of racers' connections at once.\n\
             max_connections = 250\n",
            self.name,
            HOST,
            self.socket_dir().display()
        )?;
        Ok(())
    }

    /// Creates the cluster's folder and its socket folder, the server
    /// account's alone: no other account may enter them.
    pub(super) fn make_folder(&self) -> Result<()> {
        fs::create_dir_all(self.socket_dir()).with_context(|| format!("creating {}", self.dir.display()))?;
        for dir in [&self.dir, &self.socket_dir()] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            self.give_to_server_account(dir)?;
        }
        if self.run_as.is_some() {
            self.check_server_user_can_write()?;
        }
        Ok(())
    }

    /// Makes the server account the owner of `path` when the lab runs as root.
    pub(super) fn give_to_server_account(&self, path: &std::path::Path) -> Result<()> {
        if let Some(user) = &self.run_as {
            nix::unistd::chown(path, Some(user.uid), Some(user.gid)).with_context(|| format!("giving {} to {}", path.display(), user.name))?;
        }
        Ok(())
    }

    fn check_server_user_can_write(&self) -> Result<()> {
        let user = self.run_as.as_ref().expect("only when running as root");
        // `test -w` as that account: false when any parent folder is closed to it.
        let ok = Command::new("test")
            .arg("-w")
            .arg(&self.dir)
            .uid(user.uid.as_raw())
            .gid(user.gid.as_raw())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err(format!(
                "the {} account cannot reach {}: a parent folder is closed to it. \
                 Make the parents searchable (chmod o+x) or set LAB_CLUSTER_DIR to a folder it can reach (e.g. /tmp/{NAME})",
                user.name,
                self.dir.display()
            )
            .into());
        }
        Ok(())
    }

    fn check_port_free(&self) -> Result<()> {
        match TcpListener::bind((HOST, self.port)) {
            Ok(_probe) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(format!(
                "port {} on {} is already in use by {}, which is not the lab's cluster ({}). \
                 The lab does not touch it: stop that process or free the port, then run again",
                self.port,
                HOST,
                diagnose::who_listens(self.port).unwrap_or_else(|| "another process".into()),
                self.data_dir().display()
            )
            .into()),
            Err(e) => Err(e).context(format!("probing port {}", self.port)),
        }
    }

    /// A server command, run as the server account when the lab is root.
    pub(super) fn server_command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some(user) = &self.run_as {
            // std drops supplementary groups when it switches from root.
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
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
