//! A change of the lease row, as the store's `lease_event` table records it.

use serde::{Deserialize, Serialize};

/// What changed the lease row (`lease_event.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseEventKind {
    /// A holder acquired the lease, with a new token.
    Acquire,
    /// The holder renewed it: a later `expires_at`.
    Renew,
    /// The holder released it: `expires_at` = -infinity.
    Release,
}

impl LeaseEventKind {
    /// Every kind.
    pub const ALL: [LeaseEventKind; 3] = [LeaseEventKind::Acquire, LeaseEventKind::Renew, LeaseEventKind::Release];

    /// As the table spells it.
    pub fn name(self) -> &'static str {
        match self {
            LeaseEventKind::Acquire => "acquire",
            LeaseEventKind::Renew => "renew",
            LeaseEventKind::Release => "release",
        }
    }
}

spelled!(LeaseEventKind, shown by LeaseEventKind::name, read by LeaseEventKind::name, as "lease event");
