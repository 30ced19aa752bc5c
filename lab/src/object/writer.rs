//! A lease holder writing to the object store: it reads the object when it
//! has acquired the lease, and makes each write conditional on what it saw
//! last. Naively, that is all. Claiming first (the idea of Morling's S3
//! leader election and of Delta Lake's commits, where the next entry is the
//! fence, applied to the protected object itself), its first write, right
//! after the acquire, puts its lease token into the object's body,
//! conditional on what it read: from then on the object has changed under
//! every holder that read it before, version and ETag both, so their
//! conditional writes are refused, though the store never compares a token.

use super::{Condition, ObjectStore, Seen};
use crate::error::Result;

/// Which condition the store offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// The store's version (GCS's generation, etcd's mod_revision).
    Version,
    /// The ETag, the MD5 of the body (S3's `If-Match`).
    Etag,
}

/// One holding's writer: the holder, its token, what it saw last.
pub struct Writer {
    /// The holder, e.g. `holder-a`.
    pub name: String,
    /// Its lease token.
    pub token: i64,
    store: ObjectStore,
    guard: Guard,
    key: String,
    /// The object as this holder last read or wrote it.
    seen: Seen,
}

// ANCHOR: claim_body
/// The body of a claim-first holder's writes: its token, then the payload.
/// Two holders never write the same body, so neither the version nor the
/// ETag a holder saw can come back after another holder's claim.
pub fn claimed_body(token: i64, payload: &str) -> String {
    format!("token={token}; {payload}")
}
// ANCHOR_END: claim_body

/// The payload of a body, without a claim's token.
pub fn payload_of(body: &str) -> &str {
    match body.split_once("; ") {
        Some((head, rest)) if head.starts_with("token=") => rest,
        _ => body,
    }
}

impl Writer {
    /// Holder `name`, with lease token `token`, reads `key` (right after its
    /// acquire); its writes will be conditional by `guard`.
    pub fn start(name: &str, token: i64, key: &str, guard: Guard) -> Result<Writer> {
        let mut store = ObjectStore::connect(name, token)?;
        let seen = store.get(key)?;
        Ok(Writer { name: name.to_owned(), token, store, guard, key: key.to_owned(), seen })
    }

    /// What this holder saw last.
    pub fn seen(&self) -> &Seen {
        &self.seen
    }

    /// The condition on what it saw last.
    fn condition(&self) -> Condition {
        match self.guard {
            Guard::Version => Condition::IfVersion(self.seen.version),
            Guard::Etag => Condition::IfMatch(self.seen.etag.clone()),
        }
    }

    // ANCHOR: claim
    /// Claims the object: writes this holder's token into it, keeping the
    /// payload, conditional on what it read at its acquire. `false` when
    /// the object changed since (someone else claimed or wrote): the
    /// holder must not write.
    pub fn claim(&mut self) -> Result<bool> {
        let body = claimed_body(self.token, payload_of(&self.seen.body));
        self.put(&body, self.condition())
    }
    // ANCHOR_END: claim

    /// Writes `payload`, conditional on what this holder saw last; a
    /// claim-first holder (`claimed`) keeps its token in the body.
    pub fn write(&mut self, payload: &str, claimed: bool) -> Result<bool> {
        let body = if claimed { claimed_body(self.token, payload) } else { payload.to_owned() };
        self.put(&body, self.condition())
    }

    /// Writes `payload` with no condition (the lock-delay's store).
    pub fn write_blind(&mut self, payload: &str) -> Result<bool> {
        self.put(payload, Condition::None)
    }

    fn put(&mut self, body: &str, condition: Condition) -> Result<bool> {
        match self.store.put(&self.key, body, &condition)? {
            Some(written) => {
                self.seen = written;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Reads the object again, as an observer.
    pub fn read(&mut self) -> Result<Seen> {
        self.store.get(&self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_body_carries_its_token_and_its_payload_comes_back() {
        assert_eq!(claimed_body(2, "rows=0"), "token=2; rows=0");
        assert_eq!(payload_of("token=2; rows=0"), "rows=0");
        assert_eq!(payload_of("rows=0"), "rows=0");
    }
}
