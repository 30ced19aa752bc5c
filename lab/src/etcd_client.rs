//! How the lab talks to etcd (the client; the lab's cluster of members,
//! which it starts and stops, is `cluster::etcd`): a small synchronous HTTP/1.1 client for
//! etcd's v3 JSON gateway (`POST /v3/...`, JSON bodies, keys and values in
//! base64, 64-bit integers as decimal strings).
//!
//! Why not the `etcd-client` crate: it speaks gRPC, so it needs tokio and,
//! to build, `protoc`; the lab is synchronous (a holder is a plain process
//! with a renewal thread) and the gateway offers the same RPCs, in JSON, on
//! the same client address. One request is one connection with
//! `Connection: close` (to a member's Unix socket on this machine, over
//! TCP to a member on a host of the lab's network, F19): a few tens of
//! microseconds on one machine, and no pool that could hand a request to a
//! member that died in between.
//!
//! Authentication is on (see `EtcdCluster::ensure_auth`): every request
//! carries the token that `/v3/auth/authenticate` gave for the cluster's
//! `root` user, whose password only the lab's account can read, so another
//! local account can neither read nor change the lease keys. A token that
//! etcd no longer knows (simple tokens live in each member's memory and
//! expire when unused) is renewed once, at once.
//!
//! Every answer the lab reads is decoded into a typed reply
//! ([`reply`]): a missing or malformed field is an error naming the
//! request and the field.
//!
//! Every request is bounded: one member gets at most [`ATTEMPT_TIMEOUT`],
//! and a call that finds a member down, or a member that cannot serve
//! (etcd's `Unavailable`: no leader, leader changed, request timed out),
//! tries the next one, round after round, until [`CALL_BOUND`]. So the
//! acquire that follows a leader kill waits for the election instead of
//! failing. A refusal that is etcd's answer (lease not found, a failed
//! compare) is returned at once: another member would say the same.

pub mod reply;

use crate::hosts::Host;
use crate::error::Result;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use crate::stream::Stream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How long one member may take to answer one request: two election
/// timeouts (1 s). A healthy answer on one machine takes a few ms, an fsync
/// included. A follower that forwarded a write to a leader that just died
/// never answers before etcd's own request timeout (5 s + 2 election
/// timeouts): the proposal is lost with the leader. Waiting on it longer
/// than the election it needs only delays the move to the next member.
/// (`cluster::etcd` checks, when it compiles, that this is two of its
/// members' election timeouts.)
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1000);

/// How long one call may try member after member: enough for several
/// elections (each well under a second with the lab's timing flags).
pub const CALL_BOUND: Duration = Duration::from_secs(10);

/// How long a status probe of one member may take: a member that is
/// starting (or stopped with SIGSTOP) accepts the connection and does not
/// answer yet.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The pause after every member failed once, before the next round.
const ROUND_PAUSE: Duration = Duration::from_millis(50);

/// gRPC status codes the lab branches on.
pub mod code {
    /// `DeadlineExceeded`: the gateway gave up waiting for etcd.
    pub const DEADLINE_EXCEEDED: i64 = 4;
    /// `NotFound`: e.g. "etcdserver: requested lease not found".
    pub const NOT_FOUND: i64 = 5;
    /// `FailedPrecondition`: e.g. "etcdserver: not leader".
    pub const FAILED_PRECONDITION: i64 = 9;
    /// `Unavailable`: no leader, leader changed, request timed out, stopping.
    pub const UNAVAILABLE: i64 = 14;
    /// `Unauthenticated`: "etcdserver: invalid auth token".
    pub const UNAUTHENTICATED: i64 = 16;
}

/// A gRPC status that etcd returned: the request reached etcd, and etcd said no.
#[derive(Clone, Debug, PartialEq)]
pub struct GrpcStatus {
    /// The gRPC code (see [`code`]).
    pub code: i64,
    /// etcd's message, e.g. `etcdserver: requested lease not found`.
    pub message: String,
}

impl fmt::Display for GrpcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "etcd said {} (gRPC code {})", self.message, self.code)
    }
}

impl std::error::Error for GrpcStatus {}

impl GrpcStatus {
    /// Whether the member could not serve the request right now, so that
    /// another member (or the same one after an election) may.
    fn worth_another_member(&self) -> bool {
        matches!(self.code, code::UNAVAILABLE | code::DEADLINE_EXCEEDED)
            || (self.code == code::FAILED_PRECONDITION && self.message.contains("not leader"))
    }
}

/// No member answered a call within [`CALL_BOUND`]: the cluster could
/// not be reached, or could not serve (no leader on this side of a
/// partition), which is neither a refusal nor an answer. A renewer tries
/// again at its next period (see `renewer.rs`); everyone else gives up.
#[derive(Debug)]
pub struct Unanswered {
    /// The request, e.g. `/v3/lease/keepalive`.
    pub path: String,
    /// How long it was tried.
    pub bound: Duration,
    /// What each member said last.
    pub said: String,
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no etcd member answered {} within {:?}: {}", self.path, self.bound, self.said)
    }
}

impl std::error::Error for Unanswered {}

/// Whether `err`, or an error it wraps, is an [`Unanswered`] call.
pub fn is_unanswered(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(err);
    while let Some(e) = at {
        if e.is::<Unanswered>() {
            return true;
        }
        at = e.source();
    }
    false
}

/// Why one attempt on one member failed.
#[derive(Debug)]
enum Failure {
    /// No answer: refused, reset, timed out, or not HTTP/JSON.
    Transport(String),
    /// etcd's own answer.
    Etcd(GrpcStatus),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Transport(what) => f.write_str(what),
            Failure::Etcd(status) => status.fmt(f),
        }
    }
}

/// What one member says about itself (`/v3/maintenance/status`).
#[derive(Clone, Debug, PartialEq)]
pub struct MemberStatus {
    /// The member's id.
    pub id: u64,
    /// The leader this member follows, if it knows one.
    pub leader: Option<u64>,
    /// The raft term it is in.
    pub raft_term: u64,
    /// The key-value store's revision as this member has applied it.
    pub revision: i64,
    /// The server's version, e.g. `3.4.23`.
    pub version: String,
}

/// The cluster's leader, as etcd names it.
#[derive(Clone, Debug, PartialEq)]
pub struct Leader {
    /// Its position in the gateway's member list (0 for `m1`).
    pub index: usize,
    /// Its member id.
    pub id: u64,
    /// Its name (`--name`), from etcd's member list.
    pub name: String,
    /// The raft term of the last entry it applied (etcd's `raft_term`):
    /// the term it leads once it has applied its first entry as leader.
    pub term: u64,
}

/// Who the gateway proves it is: the user and the password. The token
/// etcd gives for them is kept by the [`Gateway`], not here.
#[derive(Clone, Debug)]
pub struct Login {
    /// The etcd user (`root`).
    pub user: String,
    /// Its password.
    pub password: String,
}

/// Where one member takes clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberAddr {
    /// A member on this machine: its Unix socket, in the cluster's own
    /// folder (0700, the lab's account's), which no other account can
    /// enter, take over while the member restarts, or pose as: the login's
    /// token crosses nothing another account could read.
    Unix(PathBuf),
    /// A member on a host of the lab's network (F19): its address there,
    /// inside namespaces no other account can enter.
    Tcp(SocketAddr),
}

impl fmt::Display for MemberAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberAddr::Unix(socket) => write!(f, "{}", socket.display()),
            MemberAddr::Tcp(at) => write!(f, "{at}"),
        }
    }
}

/// The client side of the cluster: one address per member's client port.
#[derive(Debug)]
pub struct Gateway {
    /// Each member's client address, in member order.
    members: Vec<MemberAddr>,
    /// For each member, the host of the lab's network a connection to it
    /// is opened from (the lab reads members on hosts over each host's own
    /// loopback, so no partition blinds it); `None`: from where the calling
    /// thread is.
    routes: Vec<Option<Host>>,
    /// The member that answered last: the next call starts there.
    preferred: AtomicUsize,
    /// The login, once the cluster has authentication on; `None` before.
    login: Mutex<Option<Login>>,
    /// The token of the login, once authenticated.
    token: Mutex<Option<String>>,
}

impl Gateway {
    /// A gateway over these members' client addresses, with no login yet.
    pub fn new(members: Vec<MemberAddr>) -> Gateway {
        let routes = vec![None; members.len()];
        Gateway::routed(members, routes)
    }

    /// A gateway that reaches member `i` at `members[i]` from inside
    /// `routes[i]`, when that is a host.
    pub fn routed(members: Vec<MemberAddr>, routes: Vec<Option<Host>>) -> Gateway {
        assert!(!members.is_empty(), "a gateway needs at least one member");
        assert_eq!(members.len(), routes.len(), "one route per member");
        Gateway { members, routes, preferred: AtomicUsize::new(0), login: Mutex::new(None), token: Mutex::new(None) }
    }

    /// Another gateway over the same members with the same login (a
    /// holder's renewer gets its own).
    pub fn another(&self) -> Gateway {
        let gateway = self.unlogged();
        *gateway.login.lock() = self.login.lock().clone();
        gateway
    }

    /// A gateway over member `i` alone, by its route, with this login: a
    /// client that knows one endpoint (F19's cut-off minority).
    pub fn only(&self, i: usize) -> Gateway {
        let gateway = Gateway::routed(vec![self.members[i].clone()], vec![self.routes[i].clone()]);
        *gateway.login.lock() = self.login.lock().clone();
        gateway
    }

    /// A gateway over the same members, by the same routes, with no login.
    pub fn unlogged(&self) -> Gateway {
        Gateway::routed(self.members.clone(), self.routes.clone())
    }

    /// Logs in with `login` from now on.
    pub fn set_login(&self, login: Login) {
        *self.login.lock() = Some(login);
        *self.token.lock() = None;
    }

    /// Forgets the login (the cluster it was for has been removed).
    pub fn log_out(&self) {
        *self.login.lock() = None;
        *self.token.lock() = None;
    }

    /// The members' client addresses.
    pub fn members(&self) -> &[MemberAddr] {
        &self.members
    }

    /// Posts `request` to `path`, as [`Self::call`], and decodes the answer
    /// into `T`: a reply that lacks a field `T` needs is an error naming
    /// the request and the field.
    pub fn call_as<T: DeserializeOwned>(&self, path: &str, request: &Value) -> Result<Result<T, GrpcStatus>> {
        Ok(match self.call(path, request)? {
            Ok(answer) => Ok(decode(path, answer)?),
            Err(status) => Err(status),
        })
    }

    /// Posts `request` to `path` on whichever member can serve it, within
    /// [`CALL_BOUND`], logged in when the gateway has a login. The outer
    /// error: no member answered in time. The inner one: etcd's refusal,
    /// for the caller to judge.
    pub fn call(&self, path: &str, request: &Value) -> Result<Result<Value, GrpcStatus>> {
        self.call_within(path, request, CALL_BOUND)
    }

    /// [`Self::call`] with a bound of its own: F19 asks the cut-off
    /// minority for a grant and needs to know only that none comes.
    pub fn call_within(&self, path: &str, request: &Value, bound: Duration) -> Result<Result<Value, GrpcStatus>> {
        let token = self.token()?;
        match self.call_with(path, request, token.as_deref(), bound)? {
            // The token expired or its member forgot it (simple tokens
            // live in memory): log in again once, and retry.
            Err(status) if status.code == code::UNAUTHENTICATED && token.is_some() => {
                *self.token.lock() = None;
                let token = self.token()?;
                self.call_with(path, request, token.as_deref(), bound)
            }
            answer => Ok(answer),
        }
    }

    /// Logs in now, if the gateway has a login and no token yet: before a
    /// call whose time counts (an acquire reads its send time after this).
    pub fn log_in(&self) -> Result<()> {
        self.token().map(drop)
    }

    /// The token to send: `None` without a login; logs in when there is
    /// none yet.
    fn token(&self) -> Result<Option<String>> {
        let Some(login) = self.login.lock().clone() else { return Ok(None) };
        if let Some(token) = self.token.lock().clone() {
            return Ok(Some(token));
        }
        let request = json!({ "name": login.user, "password": login.password });
        let answer = self.call_with("/v3/auth/authenticate", &request, None, CALL_BOUND)?.map_err(|s| format!("logging in to etcd as {}: {s}", login.user))?;
        let token = decode::<reply::Authenticated>("/v3/auth/authenticate", answer)?.token;
        *self.token.lock() = Some(token.clone());
        Ok(Some(token))
    }

    /// [`Self::call`] with this token (or none).
    fn call_with(&self, path: &str, request: &Value, token: Option<&str>, bound: Duration) -> Result<Result<Value, GrpcStatus>> {
        let body = request.to_string();
        let start = Instant::now();
        let n = self.members.len();
        let first = self.preferred.load(Ordering::Relaxed);
        // The last failure of each member, for the error message.
        let mut failures: Vec<Option<String>> = vec![None; n];
        for attempt in 0.. {
            let left = bound.saturating_sub(start.elapsed());
            if left.is_zero() {
                break;
            }
            let i = (first + attempt) % n;
            match self.attempt(i, path, &body, token, left.min(ATTEMPT_TIMEOUT)) {
                Ok(answer) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(Ok(answer));
                }
                Err(Failure::Etcd(status)) if !status.worth_another_member() => return Ok(Err(status)),
                Err(failure) => failures[i] = Some(failure.to_string()),
            }
            if attempt % n == n - 1 {
                std::thread::sleep(ROUND_PAUSE);
            }
        }
        let said: Vec<String> = failures
            .iter()
            .zip(&self.members)
            .filter_map(|(f, addr)| f.as_ref().map(|f| format!("{addr}: {f}")))
            .collect();
        Err(Box::new(Unanswered { path: path.to_owned(), bound, said: said.join("; ") }))
    }

    /// Posts `request` to `path` on member `i` only, within `timeout`, with
    /// no token: for questions about that member itself, which etcd 3.4
    /// answers without a login (`/v3/maintenance/status`). Logging in is a
    /// raft write, which a member without a leader cannot serve: a status
    /// probe must not depend on one.
    pub fn call_member(&self, i: usize, path: &str, request: &Value, timeout: Duration) -> Result<Value> {
        self.attempt(i, path, &request.to_string(), None, timeout)
            .map_err(|f| format!("etcd member {}: {path}: {f}", self.members[i]).into())
    }

    fn attempt(&self, i: usize, path: &str, body: &str, token: Option<&str>, timeout: Duration) -> Result<Value, Failure> {
        let (status, raw) = post(&self.members[i], self.routes[i].as_ref(), path, body, token, timeout).map_err(Failure::Transport)?;
        decode_reply(status, &raw)
    }

    /// Member `i`'s view of itself and of the leader, asked of it alone
    /// (`/v3/maintenance/status` is answered locally, without raft).
    pub fn member_status(&self, i: usize) -> Result<MemberStatus> {
        let path = "/v3/maintenance/status";
        let answer: reply::Status = decode(path, self.call_member(i, path, &json!({}), PROBE_TIMEOUT)?)?;
        Ok(MemberStatus {
            id: answer.header.member_id,
            leader: answer.leader,
            raft_term: answer.header.raft_term,
            revision: answer.header.revision,
            version: answer.version,
        })
    }

    /// Each member's status, `None` for a member that does not answer.
    /// Asked of all members at once, so a silent one costs one
    /// [`PROBE_TIMEOUT`], not one each.
    pub fn statuses(&self) -> Vec<Option<MemberStatus>> {
        std::thread::scope(|scope| {
            let probes: Vec<_> = (0..self.members.len()).map(|i| scope.spawn(move || self.member_status(i).ok())).collect();
            // A probe that panicked is a bug, not a silent member.
            probes.into_iter().map(|p| p.join().expect("a status probe panicked")).collect()
        })
    }

    /// The members etcd knows, as (id, name; `None` for one never started).
    pub fn member_list(&self) -> Result<Vec<(u64, Option<String>)>> {
        let list: reply::MemberList = self.call_as("/v3/cluster/member/list", &json!({}))??;
        Ok(list.members.into_iter().map(|m| (m.id, m.name)).collect())
    }

    /// The leader, if etcd has one now (see [`agreed_leader`]).
    pub fn leader(&self) -> Result<Option<Leader>> {
        let statuses = self.statuses();
        let Some((index, id, term)) = agreed_leader(&statuses) else { return Ok(None) };
        let name = self
            .member_list()?
            .into_iter()
            .find(|(m, _)| *m == id)
            .and_then(|(_, name)| name)
            .ok_or_else(|| format!("etcd's member list has no name for its leader {id:x}"))?;
        Ok(Some(Leader { index, id, name, term }))
    }
}

/// The leader that etcd itself agrees on: a member that answers and calls
/// itself the leader, and that a majority of all members (itself included)
/// name as their leader. Right after a leader is killed, the followers
/// still name it until their election timeout; it no longer answers, so it
/// is not taken for the leader.
pub fn agreed_leader(statuses: &[Option<MemberStatus>]) -> Option<(usize, u64, u64)> {
    statuses.iter().enumerate().find_map(|(i, s)| {
        let s = s.as_ref()?;
        let votes = statuses.iter().flatten().filter(|o| o.leader == Some(s.id)).count();
        (s.leader == Some(s.id) && votes * 2 > statuses.len()).then_some((i, s.id, s.raft_term))
    })
}

/// One HTTP/1.1 POST, bounded by `timeout` as a whole: connect, send, and
/// read until the response is complete. Returns the status and the body.
fn post(addr: &MemberAddr, route: Option<&Host>, path: &str, body: &str, token: Option<&str>, timeout: Duration) -> std::result::Result<(u16, Vec<u8>), String> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or("timed out");
    let mut stream = match addr {
        // A Unix socket's connect does not wait: it succeeds or is refused.
        MemberAddr::Unix(socket) => Stream::Unix(UnixStream::connect(socket).map_err(|e| format!("connect: {e}"))?),
        MemberAddr::Tcp(at) => {
            // The socket belongs to the namespace it is made in: inside the
            // route's host when there is one.
            let connected = match route {
                Some(host) => host.connect(*at, timeout),
                None => TcpStream::connect_timeout(at, timeout),
            };
            let stream = connected.map_err(|e| format!("connect: {e}"))?;
            let _ = stream.set_nodelay(true);
            Stream::Tcp(stream)
        }
    };
    // The token goes in the Authorization header: the gateway hands it to
    // etcd as the gRPC call's `authorization` metadata.
    let authorization = token.map(|t| format!("Authorization: {t}\r\n")).unwrap_or_default();
    let host = match addr {
        MemberAddr::Unix(_) => "localhost".to_owned(),
        MemberAddr::Tcp(at) => at.to_string(),
    };
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.set_write_timeout(Some(left()?)).map_err(|e| e.to_string())?;
    stream.write_all(request.as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(reply) = parse_response(&raw, false)? {
            return Ok(reply);
        }
        stream.set_read_timeout(Some(left()?)).map_err(|e| e.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) => return parse_response(&raw, true)?.ok_or_else(|| "connection closed mid-response".into()),
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("no answer within {timeout:?}"))
            }
            Err(e) => return Err(format!("receive: {e}")),
        }
    }
}

/// The status and body of a complete response in `raw`; `None` while more
/// is to come. `at_eof`: the server closed the connection.
fn parse_response(raw: &[u8], at_eof: bool) -> std::result::Result<Option<(u16, Vec<u8>)>, String> {
    let Some(head_end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let body = &raw[head_end + 4..];
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {status_line:?}"))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        return Ok(dechunk(body).map(|b| (status, b)));
    }
    if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(|_| format!("bad Content-Length {length:?}"))?;
        return Ok((body.len() >= length).then(|| (status, body[..length].to_vec())));
    }
    // Neither: the body ends when the connection does.
    Ok(at_eof.then(|| (status, body.to_vec())))
}

/// The body of a chunked response, once its last (empty) chunk has arrived.
/// The keep-alive answer is a stream, so the gateway sends it chunked.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        let data = rest.get(line_end + 2..line_end + 2 + size)?;
        out.extend_from_slice(data);
        rest = rest.get(line_end + 2 + size + 2..)?;
    }
}

/// The answer in a gateway reply, or the gRPC status it carries. Unary
/// RPCs answer with the message itself, or with `{"error": "...", "code": N}`
/// and an HTTP error status; a streamed RPC (keep-alive) answers with
/// `{"result": {...}}` or `{"error": {"grpc_code": N, "message": ...}}`.
fn decode_reply(status: u16, raw: &[u8]) -> Result<Value, Failure> {
    // The first JSON value only: a stream may carry trailer text after it.
    let value = serde_json::Deserializer::from_slice(raw).into_iter::<Value>().next();
    let value = match value {
        Some(Ok(v)) => v,
        _ => return Err(Failure::Transport(format!("HTTP {status}, not JSON: {}", String::from_utf8_lossy(raw).trim()))),
    };
    let bad = |what: &str| Failure::Transport(format!("HTTP {status}, an error without {what}: {value}"));
    match &value["error"] {
        Value::Null => {}
        Value::Object(e) => {
            let code = e.get("grpc_code").and_then(Value::as_i64).ok_or_else(|| bad("grpc_code"))?;
            let message = e.get("message").and_then(Value::as_str).ok_or_else(|| bad("message"))?.to_owned();
            return Err(Failure::Etcd(GrpcStatus { code, message }));
        }
        _ => {
            let code = value["code"].as_i64().ok_or_else(|| bad("code"))?;
            let message = value["message"].as_str().ok_or_else(|| bad("message"))?.to_owned();
            return Err(Failure::Etcd(GrpcStatus { code, message }));
        }
    }
    if status != 200 {
        return Err(Failure::Transport(format!("HTTP {status}: {value}")));
    }
    match value.get("result") {
        Some(result) => Ok(result.clone()),
        None => Ok(value),
    }
}

/// The key or value as the gateway wants it: base64.
pub fn b64(text: &str) -> String {
    BASE64.encode(text)
}

/// A base64 key or value from the gateway, as text.
pub fn unb64(text: &str) -> Result<String> {
    Ok(String::from_utf8(BASE64.decode(text)?)?)
}

/// `answer`, the reply to `path`, as a `T`.
pub fn decode<T: DeserializeOwned>(path: &str, answer: Value) -> Result<T> {
    serde_json::from_value(answer.clone()).map_err(|e| format!("etcd's answer to {path} is not what the lab reads: {e}; the answer: {answer}").into())
}


#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: u64, leader: u64) -> Option<MemberStatus> {
        Some(MemberStatus { id, leader: (leader != 0).then_some(leader), raft_term: 2, revision: 1, version: "3.4.23".into() })
    }

    /// A response is complete by its Content-Length, or by its last chunk.
    #[test]
    fn responses_end_where_http_says() {
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(whole, false), Ok(Some((200, b"{}".to_vec()))));
        assert_eq!(parse_response(&whole[..whole.len() - 1], false), Ok(None));
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n3\r\n\":1\r\n1\r\n}\r\n0\r\nTrailer: x\r\n\r\n";
        assert_eq!(parse_response(chunked, false), Ok(Some((404, b"{\"a\":1}".to_vec()))));
        assert_eq!(parse_response(&chunked[..60], false), Ok(None));
        assert!(parse_response(b"SSH-2.0\r\n\r\n", false).is_err());
    }

    /// Both error shapes of the gateway become a gRPC status; a stream's result is unwrapped.
    #[test]
    fn replies_decode_to_answers_or_statuses() {
        let unary = br#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        let Err(Failure::Etcd(s)) = decode_reply(404, unary) else { panic!() };
        assert_eq!((s.code, s.message.as_str()), (code::NOT_FOUND, "etcdserver: requested lease not found"));
        let streamed = br#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}}"#;
        let Err(Failure::Etcd(s)) = decode_reply(200, streamed) else { panic!() };
        assert!(s.worth_another_member());
        let result = br#"{"result":{"ID":"7","TTL":"5"}}trailer"#;
        let v: reply::KeptAlive = decode("/v3/lease/keepalive", decode_reply(200, result).ok().unwrap()).unwrap();
        assert_eq!((v.id, v.ttl), (7, Some(5)));
        assert!(matches!(decode_reply(502, b"Bad Gateway"), Err(Failure::Transport(_))));
        // An error that says neither its code nor its message is not taken for a refusal.
        assert!(matches!(decode_reply(500, br#"{"error":"x"}"#), Err(Failure::Transport(_))));
    }

    /// Lease not found is an answer, not a reason to ask another member.
    #[test]
    fn only_unavailability_moves_to_another_member() {
        let s = |code, message: &str| GrpcStatus { code, message: message.into() };
        assert!(!s(code::NOT_FOUND, "etcdserver: requested lease not found").worth_another_member());
        assert!(s(code::UNAVAILABLE, "etcdserver: leader changed").worth_another_member());
        assert!(s(code::FAILED_PRECONDITION, "etcdserver: not leader").worth_another_member());
    }

    /// The leader must answer, call itself leader, and be named by a majority.
    #[test]
    fn the_leader_is_the_one_a_majority_follows() {
        assert_eq!(agreed_leader(&[status(1, 2), status(2, 2), status(3, 2)]), Some((1, 2, 2)));
        // The killed leader (2) no longer answers; its followers still name it.
        assert_eq!(agreed_leader(&[status(1, 2), None, status(3, 2)]), None);
        // A new leader (3) named by itself only is not yet agreed on.
        assert_eq!(agreed_leader(&[status(1, 2), None, status(3, 3)]), None);
        assert_eq!(agreed_leader(&[status(1, 3), None, status(3, 3)]), Some((2, 3, 2)));
        assert_eq!(agreed_leader(&[status(1, 0), status(2, 0), status(3, 0)]), None);
    }

    /// Keys and values travel as base64.
    #[test]
    fn base64_round_trips() {
        assert_eq!(b64("holder-a"), "aG9sZGVyLWE=");
        assert_eq!(unb64("aG9sZGVyLWE=").unwrap(), "holder-a");
    }
}
