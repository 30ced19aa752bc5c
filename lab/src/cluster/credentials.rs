//! Who may connect to the cluster: two roles with random passwords, kept in
//! one file that only the reader's account can read.
//!
//! The cluster listens on loopback, and every local account is on loopback:
//! `trust` would hand any of them the superuser, and through `COPY … TO
//! PROGRAM` the `postgres` operating-system account. So every connection,
//! TCP or socket, needs `scram-sha-256`. The superuser `lab_admin` exists
//! for the cluster's own setup (roles, databases, replication); the cases,
//! the holders and `./run.sh psql` connect as `lab`, an ordinary role that
//! owns `lease26` and `res26` and nothing else. F14's primary holds a
//! third, the replication role `lab_replica`, for its standby.
//!
//! The file is in libpq's password-file format, so `psql` reads it through
//! `PGPASSFILE` and the reader never types a password. It is created with
//! the cluster, mode 0600, owned by the account that runs the lab; the
//! server account never reads it (initdb gets the superuser's password from
//! a copy that lives only while initdb runs).

use crate::error::{Result, ResultExt};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The superuser, created by `initdb -U`; used only by the cluster's setup.
pub const ADMIN: &str = "lab_admin";

/// The role every client of the experiments connects as.
pub const ROLE: &str = "lab";

/// F14's replication role on its primary: LOGIN REPLICATION and nothing
/// else. The base backup and the standby's WAL receiver connect as it, so
/// that neither needs the superuser.
pub const REPLICATOR: &str = "lab_replica";

/// The credentials file of the cluster in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join("credentials")
}

/// Writes fresh random passwords for both roles into `dir`'s file, readable
/// by this account only; returns the superuser's password for initdb.
pub fn create(dir: &Path) -> Result<String> {
    let admin = random_password()?;
    let role = random_password()?;
    let file = path(dir);
    let _ = fs::remove_file(&file);
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .with_context(|| format!("creating {}", file.display()))?;
    // host:port:database:user:password, with wildcards: the file belongs to
    // one cluster, whatever port it is started on.
    write!(out, "*:*:*:{ADMIN}:{admin}\n*:*:*:{ROLE}:{role}\n")?;
    Ok(admin)
}

/// The password of `role` from `dir`'s credentials file, adding a fresh
/// random one for it when the file has none yet (F14's replication role,
/// on the primary made by an earlier run).
pub fn ensure(dir: &Path, role: &str) -> Result<String> {
    if let Ok(password) = password(dir, role) {
        return Ok(password);
    }
    let password = random_password()?;
    let file = path(dir);
    let mut out = fs::OpenOptions::new().append(true).open(&file).with_context(|| format!("opening {}", file.display()))?;
    writeln!(out, "*:*:*:{role}:{password}")?;
    Ok(password)
}

/// The password of `role` from `dir`'s credentials file.
pub fn password(dir: &Path, role: &str) -> Result<String> {
    let file = path(dir);
    let text = fs::read_to_string(&file).with_context(|| {
        format!("reading the cluster's credentials {} (the cluster has not been created yet? `./run.sh cluster start` creates it)", file.display())
    })?;
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
fn random_password() -> Result<String> {
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
        let dir = std::env::temp_dir().join(format!("lab-credentials-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let admin = create(&dir).unwrap();
        assert_eq!(password(&dir, ADMIN).unwrap(), admin);
        let role = password(&dir, ROLE).unwrap();
        assert_eq!((admin.len(), role.len()), (32, 32));
        assert_ne!(admin, role);
        assert_eq!(fs::metadata(path(&dir)).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(password(&dir, "nobody").is_err());
        let replicator = ensure(&dir, REPLICATOR).unwrap();
        assert_eq!(ensure(&dir, REPLICATOR).unwrap(), replicator, "a second ensure keeps the first password");
        assert_eq!(password(&dir, ROLE).unwrap(), role);
        fs::remove_dir_all(&dir).unwrap();
    }
}
