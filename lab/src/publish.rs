//! F9's stand-in for an external side effect that takes no fencing token:
//! publishing "the daily report is ready" to a downstream system.
//!
//! The stand-in is a table in `res26`, but the case treats it as a system the
//! report job does not control: it offers idempotency by business key and
//! nothing else. `PublishRule::NewestVersion` is what the downstream would have
//! to adopt to be safe: keep the content with the highest source version,
//! which rebuilds, at the business layer, the shape of the resource's
//! per-row fence (FENCED_ROW): the compare rides on the conflict branch, so
//! it guards a key once published and not its first publication.

use crate::db;
use crate::error::{Result, ResultExt};

/// How the downstream treats a second publication of the same business key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishRule {
    /// Deduplicate by business key: the first arrival stays, whoever it was.
    FirstWins,
    /// Keep the publication whose source version is not lower than the stored one.
    NewestVersion,
}

// ANCHOR: publish_first_wins
/// Idempotent by business key: a second publication of the same key is a
/// no-op. It cannot tell a stale publisher from a fresh one: it keeps
/// whichever arrived first.
const PUBLISH_FIRST_WINS: &str = "
    INSERT INTO publication (business_key, content, publisher, source_version)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (business_key) DO NOTHING";
// ANCHOR_END: publish_first_wins

// ANCHOR: publish_newest_version
/// The remedy, if the downstream can be changed: the publication carries the
/// version of the data it was made from, and the downstream refuses a
/// version lower than the one it holds. It has FENCED_ROW's shape: the
/// compare rides on the conflict branch, so a key's first publication is
/// stored unchecked, whatever its version.
const PUBLISH_NEWEST_VERSION: &str = "
    INSERT INTO publication AS p (business_key, content, publisher, source_version)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (business_key) DO UPDATE
       SET content = EXCLUDED.content, publisher = EXCLUDED.publisher,
           source_version = EXCLUDED.source_version, published_at = clock_timestamp()
     WHERE p.source_version <= EXCLUDED.source_version";
// ANCHOR_END: publish_newest_version

/// The downstream publisher stand-in.
pub struct Publisher {
    /// Autocommit: each publication is one statement.
    client: crate::db::Session,
    /// Which rule the downstream applies.
    rule: PublishRule,
}

impl Publisher {
    /// Connects to the stand-in.
    pub fn connect(rule: PublishRule) -> Result<Publisher> {
        Ok(Publisher { client: db::connect(db::RES_DB, "publisher")?, rule })
    }

    /// Publishes `content` under `key`; `true` when the downstream stored it.
    pub fn publish(&mut self, key: &str, content: &str, publisher: &str, source_version: i64) -> Result<bool> {
        let sql = match self.rule {
            PublishRule::FirstWins => PUBLISH_FIRST_WINS,
            PublishRule::NewestVersion => PUBLISH_NEWEST_VERSION,
        };
        let stored = self
            .client
            .execute(sql, &[&key, &content, &publisher, &source_version])
            .context("publishing")?;
        Ok(stored == 1)
    }

    /// The content the downstream kept for `key`.
    pub fn kept(&mut self, key: &str) -> Result<Option<String>> {
        let row = self
            .client
            .query_opt("SELECT content FROM publication WHERE business_key = $1", &[&key])
            .context("reading the publication")?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Forgets every publication, so the next order starts from nothing.
    pub fn clear(&mut self) -> Result<()> {
        self.client.execute("DELETE FROM publication", &[]).context("clearing publications")?;
        Ok(())
    }
}
