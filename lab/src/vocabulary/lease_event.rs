//! A change of the lease row, as the store's `lease_event` table records it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

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

impl fmt::Display for LeaseEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LeaseEventKind {
    type Err = String;
    fn from_str(text: &str) -> Result<LeaseEventKind, String> {
        super::parse(&LeaseEventKind::ALL, LeaseEventKind::name, text, "lease event")
    }
}
