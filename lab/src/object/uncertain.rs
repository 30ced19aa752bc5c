//! F33: a conditional write whose outcome the holder never learns. The
//! store applied it, and the answer was lost on the way back (a timeout, a
//! connection reset, a 5xx from a proxy after the write was made). What
//! the holder does next decides the harm: read again and write again, and
//! a one-time change is made twice; send the same conditional write again,
//! and the store refuses it (its own write moved the version on), so the
//! holder believes it failed. The fix gives each write a mark the object
//! keeps (the holder's token and the write's sequence number) and, on an
//! unknown outcome, reads back to see whether it is there; only if it is
//! not does it send the same conditional write again.
//!
//! The lost answer is the lab's: the store commits the write, and the
//! holder's code drops the answer and reports the outcome as unknown, as a
//! client whose connection broke after sending would.

use super::writer::{claimed_body, payload_of};
use super::{Condition, ObjectStore, Seen};
use crate::error::Result;

/// The object of F33: how many times the report job ran.
pub const COUNTER: &str = "report-runs";

/// What a holder learns of one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The store answered: written.
    Accepted,
    /// The store answered: refused (412).
    Refused,
    /// No answer arrived: written or not, the holder cannot tell.
    Unknown,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Accepted => "accepted",
            Outcome::Refused => "refused",
            Outcome::Unknown => "unknown",
        })
    }
}

/// The count in a body: `runs=N`, after a claim's `token=…; seq=…; `.
pub fn count_of(body: &str) -> Result<i64> {
    let field = payload_of(body).split("; ").find_map(|f| f.strip_prefix("runs=")).ok_or_else(|| format!("no runs= in {body:?}"))?;
    Ok(field.parse().map_err(|_| format!("not a runs= count: {body:?}"))?)
}

/// A holder that adds one to the counter, conditional on the version it read.
pub struct Counter {
    store: ObjectStore,
    token: i64,
    /// The counter as this holder last read or wrote it.
    seen: Seen,
    /// The sequence number of this holder's latest write.
    seq: i64,
    /// Whether its writes carry their mark (token and sequence number).
    with_id: bool,
}

impl Counter {
    /// Holder `name`, with lease token `token`, reads the counter.
    pub fn start(name: &str, token: i64, with_id: bool) -> Result<Counter> {
        let mut store = ObjectStore::connect(name, token)?;
        let seen = store.get(COUNTER)?;
        Ok(Counter { store, token, seen, seq: 0, with_id })
    }

    /// The counter as the store has it now.
    pub fn read(&mut self) -> Result<Seen> {
        self.store.get(COUNTER)
    }

    /// The body of the write that sets the count to `count`.
    fn body(&self, count: i64) -> String {
        let payload = format!("seq={}; runs={count}", self.seq);
        if self.with_id {
            claimed_body(self.token, &payload)
        } else {
            format!("runs={count}")
        }
    }

    /// Adds one to the count it last saw, conditional on that version.
    /// With `lose_answer`, the store applies the write and the answer never
    /// arrives.
    pub fn add_one(&mut self, lose_answer: bool) -> Result<Outcome> {
        self.seq += 1;
        let body = self.body(count_of(&self.seen.body)? + 1);
        let written = self.store.put(COUNTER, &body, &Condition::IfVersion(self.seen.version))?;
        if lose_answer {
            return Ok(Outcome::Unknown);
        }
        Ok(match written {
            Some(now) => {
                self.seen = now;
                Outcome::Accepted
            }
            None => Outcome::Refused,
        })
    }

    /// Sends the same conditional write again, unchanged.
    pub fn resend(&mut self) -> Result<Outcome> {
        let body = self.body(count_of(&self.seen.body)? + 1);
        Ok(match self.store.put(COUNTER, &body, &Condition::IfVersion(self.seen.version))? {
            Some(now) => {
                self.seen = now;
                Outcome::Accepted
            }
            None => Outcome::Refused,
        })
    }

    /// Reads again and adds one again, as a retry loop does.
    pub fn reread_and_retry(&mut self) -> Result<Outcome> {
        self.seen = self.store.get(COUNTER)?;
        self.add_one(false)
    }

    // ANCHOR: landed
    /// After an unknown outcome: reads the counter back and says whether
    /// this holder's latest write is in it (its token and sequence number
    /// at the head of the body). Only a write that carries its mark can be
    /// found this way, and only while nobody has written after it.
    pub fn landed(&mut self) -> Result<bool> {
        let now = self.store.get(COUNTER)?;
        let mine = claimed_body(self.token, &format!("seq={}; ", self.seq));
        Ok(self.with_id && now.body.starts_with(&mine))
    }
    // ANCHOR_END: landed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_read_with_or_without_an_identity() {
        assert_eq!(count_of("runs=2").unwrap(), 2);
        assert_eq!(count_of("token=1; seq=1; runs=1").unwrap(), 1);
        assert!(count_of("rows=1").is_err());
    }
}
