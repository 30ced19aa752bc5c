//! Authentication on: only the lab's account reads or changes the keys.
//!
//! On this machine the members listen only on Unix sockets in the
//! cluster's 0700 folder, which no other account can enter (for F19, on
//! their hosts of the lab's network, inside namespaces no other account
//! can enter). Authentication stays on all the same, as a second wall: a
//! client that did reach a member without it could put
//! the lock key (holding the lease for ever), delete it (handing it to a
//! second holder) or read who holds it. So the cluster has one user,
//! `root`, with the `root` role and a random password kept in
//! `<cluster folder>/credentials` (mode 0600, a folder of the lab's own),
//! and authentication enabled; every request of the lab carries the token
//! that password buys.
//!
//! etcd cannot start with authentication on: a new cluster is open until
//! the lab turns it on, a few milliseconds after the first leader. What
//! another account might do in that window is checked afterwards, and a
//! cluster that shows any of it is refused: the users and roles must be
//! exactly `root`, and a new cluster must hold no key at all.

use crate::etcd_client::{Gateway, GrpcStatus, Login};
use super::{EtcdCluster, NAME};
use crate::etcd_client::reply;
use crate::error::{Result, ResultExt};
use crate::safe_dir::{Account, SafeDir};
use serde_json::json;
use std::path::Path;

/// The one user.
const USER: &str = "root";

/// The password file's name in the cluster's folder: `root:<password>`.
const FILE: &str = "credentials";

/// The login saved in the cluster folder `dir`, if the lab has made one.
fn saved_login(dir: &Path) -> Result<Option<Login>> {
    let Some(folder) = SafeDir::open_made(dir)? else { return Ok(None) };
    let Some(text) = folder.read_file(FILE, Account::me())? else { return Ok(None) };
    let (user, password) = text
        .trim_end()
        .split_once(':')
        .ok_or_else(|| format!("{} is not `user:password`", dir.join(FILE).display()))?;
    Ok(Some(Login { user: user.to_owned(), password: password.to_owned() }))
}

/// `gateway`, logged in with the login saved in the cluster folder `dir`
/// when the lab has made one (else as it is: the cluster is new, and
/// [`EtcdCluster::ensure_auth`] will make one).
pub(super) fn logged_in(gateway: Gateway, dir: &Path) -> Result<Gateway> {
    if let Some(login) = saved_login(dir)? {
        gateway.set_login(login);
    }
    Ok(gateway)
}

impl EtcdCluster {
    /// Makes sure authentication is on, with this folder's password, and
    /// logs the cluster's gateway in. `fresh`: the members have just been
    /// made from nothing, so the store must be empty.
    pub(super) fn ensure_auth(&self, fresh: bool) -> Result<()> {
        let folder = SafeDir::open_made(&self.dir)?.ok_or_else(|| format!("{} vanished", self.dir.display()))?;
        let login = match saved_login(&self.dir)? {
            Some(login) => login,
            None => {
                let login = Login { user: USER.into(), password: crate::cluster::credentials::random_password()? };
                folder.write_whole(FILE, &format!("{}:{}\n", login.user, login.password), 0o600)?;
                login
            }
        };
        // A gateway without a login: its authenticate says whether
        // authentication is on at all.
        let open = self.gateway.unlogged();
        match open.call("/v3/auth/authenticate", &json!({ "name": login.user, "password": login.password }))? {
            Ok(_) => {}
            Err(status) if status.message.contains("authentication is not enabled") => self.enable_auth(&open, &login)?,
            Err(status) => {
                return Err(format!(
                    "etcd cluster {NAME} ({}) refuses the lab's own password ({status}): someone else set up its users. \
                     The lab will not use it; stop it (`./run.sh etcd stop`) and remove the folder",
                    self.dir.display()
                )
                .into())
            }
        }
        self.gateway.set_login(login);
        self.check_nobody_else(fresh)
    }

    /// Adds the user and its role, and turns authentication on. Steps an
    /// earlier, interrupted attempt already took are taken as done.
    fn enable_auth(&self, open: &Gateway, login: &Login) -> Result<()> {
        let steps = [
            ("/v3/auth/user/add", json!({ "name": login.user, "password": login.password }), "user name already exists"),
            ("/v3/auth/role/add", json!({ "name": USER }), "role name already exists"),
            ("/v3/auth/user/grant", json!({ "user": login.user, "role": USER }), "-"),
            ("/v3/auth/enable", json!({}), "-"),
        ];
        for (path, request, done_before) in steps {
            match open.call(path, &request)? {
                Ok(_) => {}
                Err(GrpcStatus { message, .. }) if message.contains(done_before) => {}
                Err(status) => return Err(status).with_context(|| format!("turning on etcd's authentication: {path}")),
            }
        }
        Ok(())
    }

    /// Refuses a cluster that someone else changed before authentication
    /// was on: another user or role (theirs to log in with), or a key in a
    /// new cluster.
    fn check_nobody_else(&self, fresh: bool) -> Result<()> {
        let users: reply::Users = self.gateway.call_as("/v3/auth/user/list", &json!({}))?.context("listing etcd's users")?;
        let roles: reply::Roles = self.gateway.call_as("/v3/auth/role/list", &json!({}))?.context("listing etcd's roles")?;
        let mut found = Vec::new();
        if users.users != [USER] {
            found.push(format!("users {:?}", users.users));
        }
        if roles.roles != [USER] {
            found.push(format!("roles {:?}", roles.roles));
        }
        if fresh {
            // Every key: from "\0" to the end of the key space ("\0" as range_end).
            let all = json!({ "key": "AA==", "range_end": "AA==", "keys_only": true });
            let keys: reply::Range = self.gateway.call_as("/v3/kv/range", &all)?.context("listing etcd's keys")?;
            if !keys.kvs.is_empty() || keys.header.revision != 1 {
                found.push(format!("{} keys at revision {} in a cluster made a moment ago", keys.kvs.len(), keys.header.revision));
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        Err(format!(
            "etcd cluster {NAME} ({}) was changed by someone other than the lab before its authentication was on: {}. \
             The lab will not use it: stop it (`./run.sh etcd stop`) and remove the folder",
            self.dir.display(),
            found.join("; ")
        )
        .into())
    }
}
