//! The lab's throw-away PostgreSQL cluster, `b3-26`, and its lifecycle.
//!
//! One piece of code owns the cluster: it initialises it under the build
//! directory, starts it on 127.0.0.1:55426 and a Unix socket in its own folder,
//! stops it, and crash-stops it (`pg_ctl stop -m immediate`: no checkpoint, so
//! the next start replays the WAL; F8). PostgreSQL refuses to run as root, so
//! when the lab runs as root every server command runs as the unprivileged
//! `postgres` account that Debian's packages create.
//!
//! A run of cases holds a [`Session`]: it starts the cluster if it was not
//! running, and stops it again at the end, on an error, on a panic, and (via
//! [`crate::interrupt`]) on Ctrl-C. A cluster the reader started by hand with
//! `lab cluster start` is left running, so the tables can be inspected.

use crate::db;
use crate::error::{Result, ResultExt};
use crate::interrupt;
use crate::paths;
use nix::fcntl::{Flock, FlockArg};
use nix::unistd::{Uid, User};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// The cluster's name: batch 3, article 26.
pub const NAME: &str = "b3-26";

/// The oldest PostgreSQL major version the lab runs on.
pub const MIN_MAJOR: u32 = 15;

/// Serialises start and stop, so that Ctrl-C arriving during a start waits
/// for it and then stops the server, instead of racing it.
static LIFECYCLE: Mutex<()> = Mutex::new(());

/// The cluster this process started and must stop again, if any.
static OWNED: Mutex<Option<Cluster>> = Mutex::new(None);

/// The lab's cluster: where it lives and how to run its server commands.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Holds `data/`, `socket/` and `postgres.log`.
    dir: PathBuf,
    /// The folder with `initdb`, `pg_ctl`, `postgres`, `pg_controldata`.
    bin: PathBuf,
    /// The server binaries' major version.
    major: u32,
    /// The account server commands run as, when the lab runs as root.
    run_as: Option<User>,
    /// The port the server listens on.
    port: u16,
}

impl Cluster {
    /// Finds the server binaries and the account to run them as.
    pub fn locate() -> Result<Cluster> {
        let (bin, major) = find_server_bin()?;
        let run_as = if Uid::effective().is_root() {
            let user = User::from_name("postgres")
                .context("looking up the postgres account")?
                .ok_or("the lab runs as root, and PostgreSQL refuses to: it needs the unprivileged `postgres` \
                        account to run the server (Debian's postgresql package creates it; or `useradd --system postgres`)")?;
            Some(user)
        } else {
            None
        };
        Ok(Cluster { dir: paths::cluster_dir(), bin, major, run_as, port: db::port()? })
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server log; F8 reads its recovery messages from here.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    /// The folder of the server's Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("socket")
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of the server binaries (psql is looked for there first).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

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
            _ => Err(command_error("pg_ctl status", &out, None).into()),
        }
    }

    /// Starts the server, initialising the cluster first if needed. Refuses
    /// when the port is held by anything else: the lab never touches a
    /// cluster that is not its own.
    pub fn start(&self) -> Result<()> {
        let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the lifecycle lock: after Ctrl-C nothing starts again.
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        if self.is_running()? {
            return Ok(());
        }
        // The port first: a port held by something else ends the start before
        // anything is written to disk.
        self.check_port_free()?;
        self.ensure_initialized()?;
        let out = self
            .server_command("pg_ctl")
            .args(["start", "-w", "-t", "60", "-s", "-D"])
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path())
            .arg("-o")
            .arg(format!("-p {}", self.port))
            .output()?;
        if !out.status.success() {
            return Err(command_error("pg_ctl start", &out, Some(&self.log_path())).into());
        }
        Ok(())
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

    fn stop_with(&self, mode: &str) -> Result<()> {
        let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_running()? {
            return Ok(());
        }
        let out = self
            .server_command("pg_ctl")
            .args(["stop", "-w", "-t", "60", "-s", "-m", mode, "-D"])
            .arg(self.data_dir())
            .output()?;
        if !out.status.success() {
            return Err(command_error(&format!("pg_ctl stop -m {mode}"), &out, Some(&self.log_path())).into());
        }
        Ok(())
    }

    /// Stops the server if it runs and deletes the whole cluster folder.
    pub fn reset(&self) -> Result<()> {
        self.stop()?;
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).with_context(|| format!("removing {}", self.dir.display()))?;
        }
        Ok(())
    }

    /// `Database cluster state` from `pg_controldata`: `in production` while
    /// running or after a crash, `shut down` after a clean stop.
    pub fn control_state(&self) -> Result<String> {
        let out = self.server_command("pg_controldata").arg(self.data_dir()).output()?;
        if !out.status.success() {
            return Err(command_error("pg_controldata", &out, None).into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix("Database cluster state:"))
            .map(|s| s.trim().to_owned())
            .ok_or_else(|| "pg_controldata printed no cluster state".into())
    }

    /// The current length of the server log, to read what follows later.
    pub fn log_len(&self) -> u64 {
        fs::metadata(self.log_path()).map(|m| m.len()).unwrap_or(0)
    }

    /// What the server logged from byte `offset` on.
    pub fn log_since(&self, offset: u64) -> Result<String> {
        let mut file = fs::File::open(self.log_path()).context("opening the server log")?;
        file.seek(SeekFrom::Start(offset))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        Ok(text)
    }

    /// Drops and creates `lease26` and `res26`: every run starts from nothing.
    pub fn recreate_databases(&self) -> Result<()> {
        let mut admin = db::connect("postgres", "lab admin")?;
        for name in [db::LEASE_DB, db::RES_DB] {
            // Separate statements: DROP/CREATE DATABASE refuse to run inside
            // the implicit transaction of a multi-statement batch. FORCE ends
            // sessions a reader may have left open in psql.
            admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .with_context(|| format!("dropping database {name}"))?;
            admin.batch_execute(&format!("CREATE DATABASE {name}")).with_context(|| format!("creating database {name}"))?;
        }
        Ok(())
    }

    /// A human summary for `lab cluster status`.
    pub fn describe(&self) -> Result<String> {
        let state = if self.is_running()? { "running" } else { "stopped" };
        Ok(format!(
            "cluster {NAME}: {state}\n  server:  PostgreSQL {} ({})\n  listens: {}:{} and {}\n  data:    {}\n  log:     {}{}",
            self.major,
            self.bin.display(),
            db::HOST,
            self.port,
            self.socket_dir().display(),
            self.data_dir().display(),
            self.log_path().display(),
            match &self.run_as {
                Some(user) => format!("\n  runs as: {} (the lab runs as root)", user.name),
                None => String::new(),
            }
        ))
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
        fs::create_dir_all(self.socket_dir()).with_context(|| format!("creating {}", self.dir.display()))?;
        if let Some(user) = &self.run_as {
            for dir in [&self.dir, &self.socket_dir()] {
                nix::unistd::chown(dir.as_path(), Some(user.uid), Some(user.gid))
                    .with_context(|| format!("giving {} to {}", dir.display(), user.name))?;
            }
            self.check_server_user_can_write()?;
        }
        let out = self
            .server_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            // The clients' user; trust is fine for a throw-away cluster that
            // listens on loopback and a socket in a folder of its own.
            .args(["-U", db::USER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .output()?;
        if !out.status.success() {
            return Err(command_error("initdb", &out, None).into());
        }
        let mut conf = fs::OpenOptions::new().append(true).open(self.data_dir().join("postgresql.conf"))?;
        writeln!(
            conf,
            "\n# {NAME}: the lease + fencing lab's throw-away cluster\n\
             listen_addresses = '{}'\n\
             unix_socket_directories = '{}'\n\
             # F3 holds three rounds of racers' connections at once.\n\
             max_connections = 250\n",
            db::HOST,
            self.socket_dir().display()
        )?;
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
        match TcpListener::bind((db::HOST, self.port)) {
            Ok(_probe) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(format!(
                "port {} on {} is already in use by {}, which is not the lab's cluster ({}). \
                 The lab does not touch it: stop that process or free the port, then run again",
                self.port,
                db::HOST,
                who_listens(self.port).unwrap_or_else(|| "another process".into()),
                self.data_dir().display()
            )
            .into()),
            Err(e) => Err(e).context(format!("probing port {}", self.port)),
        }
    }

    /// A server command, run as the server account when the lab is root.
    fn server_command(&self, program: &str) -> Command {
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

/// Holds the cluster for one run of cases: starts it if needed, stops it at
/// the end if it started it, and keeps other runs out meanwhile.
pub struct Session {
    /// The cluster in use.
    cluster: Cluster,
    /// Whether this session started it (and so must stop it).
    started_here: bool,
    /// An exclusive lock on `<cluster dir>.lock` (`target/lab/b3-26.lock`):
    /// two runs on one cluster would reset each other's tables mid-case.
    _run_lock: Flock<fs::File>,
}

impl Session {
    /// Locks out other runs, starts the cluster if it is not running, and
    /// recreates both databases.
    pub fn begin() -> Result<Session> {
        let cluster = Cluster::locate()?;
        let lock = lock_runs()?.map_err(|holder| {
            format!("another lab run (pid {holder}) is using the cluster; wait for it to finish")
        })?;
        let started_here = !cluster.is_running()?;
        if started_here {
            // Registered before starting, so Ctrl-C during the start stops it too.
            *OWNED.lock().unwrap_or_else(|p| p.into_inner()) = Some(cluster.clone());
            cluster.start()?;
        }
        let session = Session { cluster, started_here, _run_lock: lock };
        session.cluster.recreate_databases()?;
        Ok(session)
    }

    /// The cluster in use.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.started_here {
            stop_owned();
        }
    }
}

/// Takes the cluster's run lock, `<cluster dir>.lock` (`target/lab/b3-26.lock`),
/// without waiting: `Err(pid)` names the process that holds it.
pub fn lock_runs() -> Result<std::result::Result<Flock<fs::File>, String>> {
    let path = paths::cluster_dir().with_extension("lock");
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let file = fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            lock.set_len(0)?;
            write!(*lock, "{}", std::process::id())?;
            Ok(Ok(lock))
        }
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            Ok(Err(pid.trim().to_owned()))
        }
    }
}

/// Stops the cluster this process started, if any. Called when a session
/// ends and by the interrupt handler; safe to call twice.
pub fn stop_owned() {
    let owned = OWNED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(cluster) = owned {
        if let Err(e) = cluster.stop() {
            eprintln!("lab: could not stop cluster {NAME}: {}", crate::error::chain(e.as_ref()));
        }
    }
}

/// Finds a folder with `initdb`, `pg_ctl`, `postgres` and `pg_controldata` of
/// version 15 or newer: `LAB_PG_BIN`, then `PATH`, then Debian's versioned
/// folders (newest first).
fn find_server_bin() -> Result<(PathBuf, u32)> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("LAB_PG_BIN") {
        candidates.push(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    let mut versioned: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .collect();
    versioned.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    candidates.extend(versioned.into_iter().map(|(_, dir)| dir));

    let mut too_old = Vec::new();
    for dir in candidates {
        if !["initdb", "pg_ctl", "postgres", "pg_controldata"].iter().all(|p| dir.join(p).is_file()) {
            continue;
        }
        match server_major(&dir) {
            Some(major) if major >= MIN_MAJOR => return Ok((dir, major)),
            Some(major) => too_old.push(format!("{} (version {major})", dir.display())),
            None => too_old.push(format!("{} (version unreadable)", dir.display())),
        }
    }
    let found = if too_old.is_empty() { String::new() } else { format!(" Found only: {}.", too_old.join(", ")) };
    Err(format!(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres, pg_controldata; version {MIN_MAJOR} or newer) \
         in LAB_PG_BIN, PATH or /usr/lib/postgresql/*/bin.{found} Install the server package `postgresql` \
         ({MIN_MAJOR} or newer; on Debian 12: `apt-get install postgresql-15`; `./run.sh` does this itself when run as root), \
         or point LAB_PG_BIN at its bin folder."
    )
    .into())
}

/// The major version `postgres --version` reports, e.g. 15 for "postgres (PostgreSQL) 15.18".
fn server_major(dir: &Path) -> Option<u32> {
    let out = Command::new(dir.join("postgres")).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().last()?;
    version.split(['.', 'b', 'r']).next()?.parse().ok()
}

/// Which process listens on `port` (best effort, from /proc), e.g.
/// `pid 4242 (python3 -m http.server 55426)`.
fn who_listens(port: u16) -> Option<String> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            // State 0A is LISTEN.
            (local_port == port && *fields.get(3)? == "0A").then(|| fields.get(9).map(|s| s.to_string()))?
        })
    })?;
    let wanted = format!("socket:[{inode}]");
    for proc_entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = fs::read_dir(proc_entry.path().join("fd")) else { continue };
        if fds.flatten().any(|fd| fs::read_link(fd.path()).map(|l| l.as_os_str() == wanted.as_str()).unwrap_or(false)) {
            let cmdline = fs::read(proc_entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            return Some(format!("pid {pid} ({})", cmdline.trim()));
        }
    }
    None
}

/// A failed server command, with what it printed and where to look next.
fn command_error(what: &str, out: &Output, log: Option<&Path>) -> String {
    let mut text = format!("{what} failed ({})", out.status);
    for stream in [&out.stdout, &out.stderr] {
        let s = String::from_utf8_lossy(stream);
        if !s.trim().is_empty() {
            text.push_str(&format!("\n{}", s.trim_end()));
        }
    }
    if let Some(log) = log {
        let tail = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(8).collect();
        text.push_str(&format!("\nserver log {}:", log.display()));
        for line in tail.into_iter().rev() {
            text.push_str(&format!("\n  {line}"));
        }
    }
    text
}
