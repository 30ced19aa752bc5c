//! etcd's answers, typed: one struct per reply the lab reads, so that a
//! missing or malformed field is an error naming the request and the
//! field, never a plausible value.
//!
//! Protobuf's JSON has two habits that a reader must know:
//! - 64-bit integers are written as decimal *strings* (`"ID": "7587…"`);
//!   [`int`] accepts a string or a number.
//! - A field that holds its type's default is *left out*: `succeeded` when
//!   the txn's compare failed, `TTL` when a keep-alive found no lease,
//!   `lease` when a key has none, `kvs` when a range found nothing. Only
//!   where that default is a real answer does a field here have one, and
//!   its comment says what the absence means; everywhere else (a grant's
//!   `ID`, a key's `create_revision`: the token) absence is an error. A
//!   grant without `ID` would otherwise attach the lock key to lease 0, a
//!   key that never expires, and report a success.

use serde::de::{self, Deserializer};
use serde::Deserialize;

/// An int64 or uint64 as protobuf's JSON writes it: a decimal string, or
/// (from some writers) a number.
fn int<'de, D: Deserializer<'de>, T: std::str::FromStr + TryFrom<u64> + TryFrom<i64>>(d: D) -> Result<T, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Text(String),
        Unsigned(u64),
        Signed(i64),
    }
    match Wire::deserialize(d)? {
        Wire::Text(s) => s.parse().map_err(|_| de::Error::custom(format!("{s:?} is not an integer"))),
        Wire::Unsigned(n) => T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is out of range"))),
        Wire::Signed(n) => T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is out of range"))),
    }
}

/// An optional integer field: `None` when protobuf left it out (it held 0).
fn opt_int<'de, D: Deserializer<'de>, T: std::str::FromStr + TryFrom<u64> + TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
    int(d).map(Some)
}

/// Every reply's header.
#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    /// The store's revision when the request was served (1 in an empty store).
    #[serde(deserialize_with = "int")]
    pub revision: i64,
    /// The member that answered.
    #[serde(deserialize_with = "int")]
    pub member_id: u64,
    /// The raft term of the last entry that member applied.
    #[serde(deserialize_with = "int")]
    pub raft_term: u64,
}

/// `/v3/lease/grant`.
#[derive(Clone, Debug, Deserialize)]
pub struct Granted {
    /// The new lease's id: never 0, so required.
    #[serde(rename = "ID", deserialize_with = "int")]
    pub id: i64,
    /// The TTL granted, in seconds (etcd may raise the one asked for).
    #[serde(rename = "TTL", deserialize_with = "int")]
    pub ttl: i64,
}

/// `/v3/lease/keepalive` (a stream: the gateway's first message).
#[derive(Clone, Debug, Deserialize)]
pub struct KeptAlive {
    /// The lease kept alive.
    #[serde(rename = "ID", deserialize_with = "int")]
    pub id: i64,
    /// Its new TTL; left out (0) when the lease was not found: revoked, or
    /// expired even if its revocation is not applied yet.
    #[serde(rename = "TTL", default, deserialize_with = "opt_int")]
    pub ttl: Option<i64>,
}

/// `/v3/lease/timetolive`.
#[derive(Clone, Debug, Deserialize)]
pub struct TimeToLive {
    /// Seconds left, truncated: -1 once the lease is gone; left out when 0.
    #[serde(rename = "TTL", default, deserialize_with = "opt_int")]
    pub ttl: Option<i64>,
}

/// A key as etcd stores it.
#[derive(Clone, Debug, Deserialize)]
pub struct KeyValue {
    /// The key, base64.
    pub key: String,
    /// The value, base64 (the lab's values are holder names, never empty).
    pub value: String,
    /// The revision that created the key: the fencing token. Never 0 for
    /// a key that exists, so required.
    #[serde(deserialize_with = "int")]
    pub create_revision: i64,
    /// The lease the key is attached to; left out when it has none.
    #[serde(default, deserialize_with = "opt_int")]
    pub lease: Option<i64>,
}

/// `/v3/kv/range`.
#[derive(Clone, Debug, Deserialize)]
pub struct Range {
    /// The header: the store's current revision.
    pub header: Header,
    /// The keys found; left out when none was.
    #[serde(default)]
    pub kvs: Vec<KeyValue>,
}

/// One response inside a txn's answer (the lab's txns read only).
#[derive(Clone, Debug, Deserialize)]
pub struct TxnResponse {
    /// A read's answer; absent for a put.
    pub response_range: Option<TxnRange>,
}

/// A read inside a txn (no header of its own).
#[derive(Clone, Debug, Deserialize)]
pub struct TxnRange {
    /// The keys found; left out when none was.
    #[serde(default)]
    pub kvs: Vec<KeyValue>,
}

/// `/v3/kv/txn`.
#[derive(Clone, Debug, Deserialize)]
pub struct Txn {
    /// Whether the compare held (the success branch ran); left out when false.
    #[serde(default)]
    pub succeeded: bool,
    /// The branch's responses, in order.
    pub responses: Vec<TxnResponse>,
}

/// `/v3/maintenance/status`.
#[derive(Clone, Debug, Deserialize)]
pub struct Status {
    /// Who answered, and its term and revision.
    pub header: Header,
    /// The leader it follows; left out when it knows none.
    #[serde(default, deserialize_with = "opt_int")]
    pub leader: Option<u64>,
    /// The server's version, e.g. `3.4.23`.
    pub version: String,
}

/// One member in `/v3/cluster/member/list`.
#[derive(Clone, Debug, Deserialize)]
pub struct MemberEntry {
    /// Its id.
    #[serde(rename = "ID", deserialize_with = "int")]
    pub id: u64,
    /// Its `--name`; left out for a member that never started.
    #[serde(default)]
    pub name: Option<String>,
}

/// `/v3/cluster/member/list`.
#[derive(Clone, Debug, Deserialize)]
pub struct MemberList {
    /// The members.
    pub members: Vec<MemberEntry>,
}

/// `/v3/auth/authenticate`.
#[derive(Clone, Debug, Deserialize)]
pub struct Authenticated {
    /// The token every later request carries in its `Authorization` header.
    pub token: String,
}

/// `/v3/auth/user/list`.
#[derive(Clone, Debug, Deserialize)]
pub struct Users {
    /// The users' names; left out when there is none.
    #[serde(default)]
    pub users: Vec<String>,
}

/// `/v3/auth/role/list`.
#[derive(Clone, Debug, Deserialize)]
pub struct Roles {
    /// The roles' names; left out when there is none.
    #[serde(default)]
    pub roles: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grant without its lease id is an error that names the field, not lease 0.
    #[test]
    fn a_grant_without_its_id_is_an_error() {
        let err = serde_json::from_str::<Granted>(r#"{"header":{},"TTL":"2"}"#).unwrap_err().to_string();
        assert!(err.contains("missing field `ID`"), "{err}");
        let granted: Granted = serde_json::from_str(r#"{"ID":"7587876","TTL":"2"}"#).unwrap();
        assert_eq!((granted.id, granted.ttl), (7587876, 2));
        let err = serde_json::from_str::<Granted>(r#"{"ID":"seven","TTL":"2"}"#).unwrap_err().to_string();
        assert!(err.contains("\"seven\" is not an integer"), "{err}");
    }

    /// A key without its create revision (the token) is an error, not token 0.
    #[test]
    fn a_key_without_its_token_is_an_error() {
        let err = serde_json::from_str::<KeyValue>(r#"{"key":"aw==","value":"dg==","lease":"7"}"#).unwrap_err().to_string();
        assert!(err.contains("missing field `create_revision`"), "{err}");
        let kv: KeyValue = serde_json::from_str(r#"{"key":"aw==","value":"dg==","create_revision":"3"}"#).unwrap();
        assert_eq!((kv.create_revision, kv.lease), (3, None));
    }

    /// The defaults protobuf leaves out read as what they mean.
    #[test]
    fn left_out_defaults_mean_what_protobuf_says() {
        let txn: Txn = serde_json::from_str(r#"{"header":{"revision":"4"},"responses":[{"response_range":{"header":{}}}]}"#).unwrap();
        assert!(!txn.succeeded);
        assert!(txn.responses[0].response_range.as_ref().unwrap().kvs.is_empty());
        let kept: KeptAlive = serde_json::from_str(r#"{"header":{},"ID":"9"}"#).unwrap();
        assert_eq!(kept.ttl, None);
        let status: Status = serde_json::from_str(r#"{"header":{"revision":"1","member_id":"12","raft_term":"2"},"version":"3.4.23"}"#).unwrap();
        assert_eq!(status.leader, None);
        let err = serde_json::from_str::<Status>(r#"{"header":{"revision":"1","raft_term":"2"},"version":"3.4.23"}"#).unwrap_err().to_string();
        assert!(err.contains("member_id"), "{err}");
    }
}
