//! Which store keeps the lease.

use serde::{Deserialize, Serialize};

/// Which store keeps the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseStoreKind {
    /// The `lease` table in `lease26`, on the lab's PostgreSQL (the article's).
    Postgres,
    /// A lease and a key on the three-member etcd cluster `etcd-26` (F16);
    /// the token is the key's create revision.
    Etcd,
}

impl LeaseStoreKind {
    /// Both stores.
    pub const ALL: [LeaseStoreKind; 2] = [LeaseStoreKind::Postgres, LeaseStoreKind::Etcd];

    /// The spelling on command lines (`--lease-backend etcd`) and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            LeaseStoreKind::Postgres => "postgres",
            LeaseStoreKind::Etcd => "etcd",
        }
    }
}

spelled!(LeaseStoreKind, shown by LeaseStoreKind::name, read by LeaseStoreKind::name, as "lease store");
