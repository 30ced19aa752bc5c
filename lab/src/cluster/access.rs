//! Who may connect to a server of the lab's, and how: the server's
//! `pg_hba.conf` and `pg_ident.conf`, written whole at every start, and the
//! passwords, new at every start.
//!
//! **On this machine: the kernel says who connects.** A server here listens
//! only on its Unix socket (see [`super`]), and there every connection is
//! `peer`: PostgreSQL asks the kernel which account opened the connection
//! and lets in only the lab's own account (as `lab` or the superuser
//! `lab_admin`) and, for replication, the server account (a standby's WAL
//! receiver, as `lab_replica`). No client proves a password on the socket,
//! so a client here has none to give, even to something that asks for one
//! in clear: the lab's clients connect there without a password at all
//! (F14's standby alone holds its replication password file, and is never
//! asked for it).
//! (The only passwords sent there are the new ones the lab itself sets, as
//! `lab_admin`, below and in `db::setup`.)
//!
//! **Across the lab's network: a password, new at every start.** A server on
//! a host of the lab's network also listens on that host's address, for
//! the holders on the other hosts (F17–F19); they prove `lab`'s password
//! with `scram-sha-256`. The subnet exists only inside the lab's own
//! namespaces, which no other account can enter. At every start the lab
//! gives every role in the credentials file a new random password (as the
//! superuser, over the socket, where it needs none), so a password seen
//! before a start is worthless after it. Only a real start rotates:
//! `b3-26` already running when a run begins (kept by `cluster start`, or
//! left by a killed run) keeps its passwords until it starts again; a
//! run's own servers found running are leftovers, stopped and started
//! afresh (`tied.rs`).

use super::{credentials, Cluster};
use crate::error::{Result, ResultExt};
use crate::safe_dir::Account;
use nix::fcntl::OFlag;
use nix::unistd::{Uid, User};
use std::io::Write;

/// The ident map's name in both files.
const MAP: &str = "lab";

impl Cluster {
    /// Writes `pg_hba.conf` and `pg_ident.conf` whole, before the server
    /// starts (through descriptors: the files are the server account's,
    /// and a link in their place is refused, not followed).
    pub(super) fn write_access_rules(&self) -> Result<()> {
        let me = User::from_uid(Uid::effective())?.ok_or("this process's account has no name in /etc/passwd")?.name;
        let server_account = self.run_as.as_ref().map_or_else(|| me.clone(), |u| u.name.clone());
        let hba = format!(
            "# Written by the lab at every start (lab/src/cluster/access.rs); edits are lost.\n\
             # This machine: the Unix socket only, and only the accounts the ident map names.\n\
             local all all peer map={MAP}\n\
             local replication all peer map={MAP}\n\
             # The lab's network hosts (F17–F19): its private subnet, inside its own namespaces only.\n\
             host all all {cidr} scram-sha-256\n\
             host replication all {cidr} scram-sha-256\n",
            cidr = crate::hosts::SUBNET_CIDR
        );
        let ident = format!(
            "# Written by the lab at every start (lab/src/cluster/access.rs); edits are lost.\n\
             # MAPNAME SYSTEM-USERNAME PG-USERNAME\n\
             {MAP} {me} {role}\n\
             {MAP} {me} {admin}\n\
             {MAP} {server_account} {replica}\n",
            role = credentials::ROLE,
            admin = credentials::ADMIN,
            replica = credentials::REPLICATOR,
        );
        let (server, owner) = (self.server_folder()?, self.server_owner());
        for (name, text) in [("data/pg_hba.conf", hba), ("data/pg_ident.conf", ident)] {
            let mut file = server.open_file(name, OFlag::O_WRONLY | OFlag::O_TRUNC, owner).with_context(|| format!("opening {name} of {}", self.name))?;
            file.write_all(text.as_bytes())?;
        }
        Ok(())
    }

    /// Gives every role in the credentials file that the server has a new
    /// random password, and writes the file anew. Done as the superuser
    /// over the socket, where it needs no password: a run killed between
    /// the two steps leaves a file that no longer matches, which only the
    /// network hosts' clients would notice, and the next start rotates
    /// again. A standby is skipped (it cannot write; it gets its primary's
    /// roles by replication and a copy of its file when it is built).
    pub(super) fn rotate_passwords(&self) -> Result<()> {
        // Straight to the server's socket with the driver, not through
        // `db` (a layer above this one): the one session the cluster opens
        // itself, because every start, whoever starts, must end with new
        // passwords. Peer: no password to give.
        let mut admin = postgres::Client::configure()
            .host_path(self.socket_dir())
            .port(self.port)
            .user(credentials::ADMIN)
            .dbname("postgres")
            .application_name("lab rotate")
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect(postgres::NoTls)
            .with_context(|| format!("connecting to {} as {} to rotate its passwords", self.name, credentials::ADMIN))?;
        let in_recovery: bool = admin.query_one("SELECT pg_is_in_recovery()", &[])?.get(0);
        if in_recovery {
            return Ok(());
        }
        let place = self.place()?;
        let Some(text) = place.read_file(credentials::FILE, Account::me())? else {
            return Err(format!("{} has no credentials file", self.dir.display()).into());
        };
        let mut rotated = String::new();
        let mut tx = admin.transaction()?;
        // Committed here alone: a primary that F14 left with synchronous
        // replication on would otherwise wait for a standby not built yet.
        tx.batch_execute("SET LOCAL synchronous_commit = local")?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let role = line.rsplit_once(':').and_then(|(head, _)| head.rsplit(':').next()).ok_or_else(|| format!("a line of {} is not host:port:db:user:password", credentials::FILE))?;
            // Whether the role exists: the file may name F14's replication
            // role before the primary has made it.
            let exists = tx.query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&role])?.is_some();
            if !exists {
                rotated.push_str(line);
                rotated.push('\n');
                continue;
            }
            let password = credentials::random_password()?;
            // A random hex password in a literal (ALTER ROLE takes no
            // parameters); the server stores only its SCRAM verifier.
            assert!(password.chars().all(|c| c.is_ascii_hexdigit()), "a generated password is hex");
            assert!(role.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "the lab's role names are plain");
            tx.batch_execute(&format!("ALTER ROLE {role} PASSWORD '{password}'"))?;
            rotated.push_str(&format!("*:*:*:{role}:{password}\n"));
        }
        // The file first, then the commit: a crash in between leaves the
        // old passwords on the server and new ones in the file, and the
        // next start, which needs neither, rotates again.
        credentials::write_file(&place, &rotated)?;
        tx.commit()?;
        Ok(())
    }
}
