//! Who may connect to the cluster: its roles' random passwords, kept in one
//! file that only the reader's account can read.
//!
//! On this machine no client proves them: a server listens only on its Unix
//! socket, where it lets in the lab's own account by `peer` and asks for no
//! password (see `access.rs`). The only passwords sent there are the new
//! ones the lab sets on the server as the superuser:
//! `CREATE ROLE … PASSWORD` when it makes a role (`db::setup`) and, at
//! every start of a server, `ALTER ROLE … PASSWORD` for each role
//! (`access.rs`); so the lab reads this file too. The passwords are for the
//! clients that connect over TCP. The partition cases' holders on the hosts
//! of the lab's network, and F18's standby (its base backup and WAL
//! receiver, through `replication.pgpass`, a copy of the replication role's
//! line), prove them with `scram-sha-256`. The holders that reach the
//! cluster through a delay proxy read theirs but are never asked for it,
//! since the proxy forwards to the socket: the holder that F12 or a model
//! replay delays, through a proxy on 127.0.0.1 (`HolderArgs::via_proxy`),
//! and a chaos run's holders, each through its slot's link, a proxy on the
//! network host `db` that stands in for the server's address (`b3-26`
//! itself stays off the lab's network; `chaos::workload::plan`). A server's
//! roles get new ones each time it actually starts, except on a standby,
//! which keeps its primary's (`access.rs`, `lifecycle.rs`): `b3-26` found
//! running when a run begins keeps its passwords until it starts again,
//! while a run's own servers found running are leftovers, stopped and
//! started afresh (`tied.rs`).
//!
//! The superuser `lab_admin` exists for the cluster's own setup (roles,
//! databases, replication, the new passwords); the cases, the holders and
//! `./run.sh psql` connect as `lab`, an ordinary role that owns `lease26`
//! and `res26` and nothing else (a superuser could run programs as the
//! `postgres` operating-system account through `COPY … TO PROGRAM`). F14's
//! primary holds a third, the replication role `lab_replica`, for its
//! standby.
//!
//! The file is in libpq's password-file format
//! (`host:port:db:user:password`, wildcards for the first three), as
//! `replication.pgpass` is (see `replica.rs`). It is created with the
//! cluster, mode 0600, owned by the account that runs the lab, in the
//! cluster's place (see [`super`]: a folder of that account's, carrying the
//! lab's marker), and read only from a place so checked, never through a
//! link; the server account never reads it (initdb gets the superuser's
//! password from a copy that lives only while initdb runs).

use crate::error::{Result, ResultExt};
use crate::safe_dir::{Account, SafeDir};
use nix::fcntl::OFlag;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The superuser, created by `initdb -U`; used only by the cluster's setup.
pub const ADMIN: &str = "lab_admin";

/// The role every client of the experiments connects as.
pub const ROLE: &str = "lab";

/// F14's replication role on its primary: LOGIN REPLICATION and nothing
/// else. The base backup and the standby's WAL receiver connect as it, so
/// that neither needs the superuser.
pub const REPLICATOR: &str = "lab_replica";

/// The credentials file's name in a cluster's place.
pub const FILE: &str = "credentials";

/// The credentials file of the cluster whose place is `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Writes fresh random passwords for both roles into the place's file,
/// readable by this account only; returns the superuser's password for initdb.
pub fn create(place: &SafeDir) -> Result<String> {
    let admin = random_password()?;
    let role = random_password()?;
    // host:port:database:user:password, with wildcards: the file belongs to
    // one cluster, whatever port it is started on.
    write_file(place, &format!("*:*:*:{ADMIN}:{admin}\n*:*:*:{ROLE}:{role}\n"))?;
    Ok(admin)
}

/// Writes the credentials file whole, mode 0600 (F14's standby gets a copy
/// of its primary's this way: the roles are replicated with the data).
pub fn write_file(place: &SafeDir, text: &str) -> Result<()> {
    place.write_whole(FILE, text, 0o600)
}

/// The credentials file's text, from a place the lab made.
pub fn read_file(place: &SafeDir) -> Result<String> {
    let mut text = String::new();
    place
        .open_file(FILE, OFlag::O_RDONLY, Account::me())
        .with_context(|| format!("reading the cluster's credentials in {}", place.path().display()))?
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The password of `role` from the place's credentials file, adding a fresh
/// random one for it when the file has none yet (F14's replication role,
/// on the primary made by an earlier run).
pub fn ensure(place: &SafeDir, role: &str) -> Result<String> {
    let text = read_file(place)?;
    if let Ok(password) = find(&text, role, place.path()) {
        return Ok(password);
    }
    let password = random_password()?;
    write_file(place, &format!("{text}*:*:*:{role}:{password}\n"))?;
    Ok(password)
}

/// The password of `role` from the credentials file of the cluster whose
/// place is `dir`.
pub fn password(dir: &Path, role: &str) -> Result<String> {
    let place = SafeDir::open_made(dir)?
        .ok_or_else(|| format!("the cluster has not been created yet ({} does not exist): `./run.sh cluster start` creates it", dir.display()))?;
    find(&read_file(&place)?, role, dir)
}

/// `role`'s password in a credentials file's `text`.
fn find(text: &str, role: &str, dir: &Path) -> Result<String> {
    let file = path(dir);
    // host:port:database:user:password; the first three are wildcards here.
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.splitn(5, ':').collect();
            Some((*fields.get(3)?, *fields.get(4)?))
        })
        .find_map(|(user, password)| (user == role).then(|| password.to_owned()))
        .ok_or_else(|| format!("{} holds no password for role {role}", file.display()).into())
}

/// 128 random bits as hex: no character that the password file or a
/// connection string would need to escape.
pub(crate) fn random_password() -> Result<String> {
    let mut bytes = [0u8; 16];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Each role gets its own password, in a file only its owner can read.
    #[test]
    fn passwords_are_random_per_role_and_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("place");
        let place = SafeDir::open_or_make(&dir, 0o700).unwrap();
        let admin = create(&place).unwrap();
        assert_eq!(password(&dir, ADMIN).unwrap(), admin);
        let role = password(&dir, ROLE).unwrap();
        assert_eq!((admin.len(), role.len()), (32, 32));
        assert_ne!(admin, role);
        assert_eq!(fs::metadata(path(&dir)).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(password(&dir, "nobody").is_err());
        let replicator = ensure(&place, REPLICATOR).unwrap();
        assert_eq!(ensure(&place, REPLICATOR).unwrap(), replicator, "a second ensure keeps the first password");
        assert_eq!(password(&dir, ROLE).unwrap(), role);
    }
}
