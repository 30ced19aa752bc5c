//! How the resource decides whether to accept a write.

use serde::{Deserialize, Serialize};

/// How the resource decides whether to accept a write.
///
/// Two spellings, one parser each: the name transcripts, `write_attempt.mode`
/// and the JSON use (`FENCED_SCOPE`: [`Self::name`], [`Self::from_name`]),
/// and the command line's (`fenced-scope`: [`Self::cli_name`], `FromStr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FenceMode {
    /// One conditional UPDATE of the scope's `fence_floor` and the data write,
    /// in one transaction: the design this book argues for.
    FencedScope,
    /// The same compare, advance and data write as `FencedScope`, in one
    /// autocommit statement (a data-modifying CTE): one round trip.
    FencedScopeCte,
    /// The same guarantee with writes under the floor's own token in
    /// parallel: they share the scope's advisory lock, and a raise of the
    /// floor takes it exclusively, waiting for them to commit.
    FencedScopeShared,
    /// Compares the token only with the row being overwritten (F7: a new row
    /// has nothing to compare with).
    FencedRow,
    /// A plain upsert that ignores the token (F5).
    Unfenced,
    /// Reads the floor, decides, then writes, each step on its own (F6a).
    CheckThenWrite,
    /// The scope's report is one object of a store that compares only its
    /// own version: each write reads the version afresh and writes if it is
    /// unchanged (optimistic concurrency, S3's If-Match). The token is
    /// stored, never compared: the compare-and-swap protects the object
    /// from a write in between, not the report from a stale holder (F34).
    VersionCas,
    /// The same store, and a holder that claims first: before its first
    /// write it reads the object and, unless a larger token has claimed it,
    /// writes its own token into it, conditional on the version it read;
    /// every later write is conditional on the version its own last write
    /// made, not on one read afresh. A put that lost claims again, so a
    /// newer claim refuses it (F34).
    ClaimFirst,
}

impl FenceMode {
    /// Every mode, the real ones first.
    pub const ALL: [FenceMode; 8] = [
        FenceMode::FencedScope,
        FenceMode::FencedScopeCte,
        FenceMode::FencedScopeShared,
        FenceMode::FencedRow,
        FenceMode::Unfenced,
        FenceMode::CheckThenWrite,
        FenceMode::VersionCas,
        FenceMode::ClaimFirst,
    ];

    /// The modes that fence the whole scope: the three forms of the real design.
    pub const SCOPE_FENCES: [FenceMode; 3] = [FenceMode::FencedScope, FenceMode::FencedScopeCte, FenceMode::FencedScopeShared];

    /// The modes of a store that compares only its own version (F34).
    pub const VERSION_STORES: [FenceMode; 2] = [FenceMode::VersionCas, FenceMode::ClaimFirst];

    /// Whether every stale write is refused: the three forms of the scope
    /// fence, and claiming first on a version store.
    pub fn refuses_stale(self) -> bool {
        FenceMode::SCOPE_FENCES.contains(&self) || self == FenceMode::ClaimFirst
    }

    /// The name transcripts, `write_attempt.mode` and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            FenceMode::FencedScope => "FENCED_SCOPE",
            FenceMode::FencedScopeCte => "FENCED_SCOPE_CTE",
            FenceMode::FencedScopeShared => "FENCED_SCOPE_SHARED",
            FenceMode::FencedRow => "FENCED_ROW",
            FenceMode::Unfenced => "UNFENCED",
            FenceMode::CheckThenWrite => "CHECK_THEN_WRITE",
            FenceMode::VersionCas => "VERSION_CAS",
            FenceMode::ClaimFirst => "CLAIM_FIRST",
        }
    }

    /// The spelling on command lines and in file names (`fenced-scope`).
    pub fn cli_name(self) -> &'static str {
        match self {
            FenceMode::FencedScope => "fenced-scope",
            FenceMode::FencedScopeCte => "fenced-scope-cte",
            FenceMode::FencedScopeShared => "fenced-scope-shared",
            FenceMode::FencedRow => "fenced-row",
            FenceMode::Unfenced => "unfenced",
            FenceMode::CheckThenWrite => "check-then-write",
            FenceMode::VersionCas => "version-cas",
            FenceMode::ClaimFirst => "claim-first",
        }
    }

    /// The mode [`Self::name`] spells `name` (a `write_attempt.mode`).
    pub fn from_name(name: &str) -> Result<FenceMode, String> {
        super::parse(&FenceMode::ALL, FenceMode::name, name, "resource mode")
    }
}

// Shown as its name (`FENCED_SCOPE`); read as the command line spells it
// (`fenced-scope`): `from_name` reads the name.
spelled!(FenceMode, shown by FenceMode::name, read by FenceMode::cli_name, as "resource mode");

#[cfg(test)]
mod tests {
    use super::*;

    /// Each spelling reads back to its mode, and the JSON is the name.
    #[test]
    fn spellings_round_trip() {
        for mode in FenceMode::ALL {
            assert_eq!(FenceMode::from_name(mode.name()), Ok(mode));
            assert_eq!(mode.cli_name().parse::<FenceMode>(), Ok(mode));
            assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{}\"", mode.name()));
        }
        assert!("FENCED_SCOPE".parse::<FenceMode>().unwrap_err().contains("fenced-scope"));
    }
}
