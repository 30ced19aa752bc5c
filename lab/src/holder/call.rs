//! The holder's calls: each call it makes to a lease store or to the
//! resource, printed as a line when it starts (`CALL`) and another when it
//! returns (`RETURN`), paired by a number of the process's own. They are
//! the operations of a run's history (`lab history`): the parent stamps
//! each line with its own clock as it arrives, so a holder with a wrong
//! clock (F13) or a stopped one (F4) still gets true times, and the guard
//! keeps them apart from the [`Step`](super::Step)s, which the cases read.
//!
//! ```text
//! CALL id=1 acquire                  RETURN id=1 ok token=5 tries=4
//! CALL id=2 write token=5 part=summary   RETURN id=2 fail
//! CALL id=3 renew token=5            RETURN id=3 info code=57P01
//! ```
//!
//! An outcome is Jepsen's: `ok` (granted, accepted, renewed, released),
//! `fail` (refused: it did not happen), `info` (an error: it may or may not
//! have happened, `code` says what the server or the connection said).
//! An acquire that waits its turn is one call from its first try to the
//! grant; `tries` counts the statements it took.
//!
//! Printed with `Display` and read back with `FromStr`, here and nowhere
//! else.

use crate::vocabulary::{Operation, Outcome};
use std::fmt;
use std::str::FromStr;

// ANCHOR: call
/// What a call does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invoke {
    /// Acquire the lease (trying again while someone else holds it).
    Acquire,
    /// Renew the holding of `token`.
    Renew { token: i64 },
    /// Write `part` with `token`.
    Write { token: i64, part: String },
    /// Release the holding of `token`.
    Release { token: i64 },
}

/// A call's return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Return {
    /// `ok`, `fail` or `info`.
    pub outcome: Outcome,
    /// The token a granted acquire returned.
    pub token: Option<i64>,
    /// How many statements an acquire took (one per try).
    pub tries: Option<u32>,
    /// An `info`'s error: the server's SQLSTATE, `connection-closed`, or `error`.
    pub code: Option<String>,
}

/// One line of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// The call starts.
    Invoke { id: u32, invoke: Invoke },
    /// The call with the same id returned.
    Return { id: u32, ret: Return },
}
// ANCHOR_END: call

impl Invoke {
    /// What the call does, without its arguments: the history's `f`.
    pub fn operation(&self) -> Operation {
        match self {
            Invoke::Acquire => Operation::Acquire,
            Invoke::Renew { .. } => Operation::Renew,
            Invoke::Write { .. } => Operation::Write,
            Invoke::Release { .. } => Operation::Release,
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Invoke { id, invoke } => {
                write!(f, "CALL id={id} {}", invoke.operation())?;
                match invoke {
                    Invoke::Acquire => Ok(()),
                    Invoke::Renew { token } | Invoke::Release { token } => write!(f, " token={token}"),
                    Invoke::Write { token, part } => write!(f, " token={token} part={part}"),
                }
            }
            Call::Return { id, ret } => {
                write!(f, "RETURN id={id} {}", ret.outcome.name())?;
                if let Some(token) = ret.token {
                    write!(f, " token={token}")?;
                }
                if let Some(tries) = ret.tries {
                    write!(f, " tries={tries}")?;
                }
                if let Some(code) = &ret.code {
                    write!(f, " code={code}")?;
                }
                Ok(())
            }
        }
    }
}

/// Reads a line as `Display` writes it, exactly; anything else is refused
/// with the line quoted.
impl FromStr for Call {
    type Err = String;

    fn from_str(line: &str) -> Result<Call, String> {
        let refused = |why: &str| format!("not a holder call line ({why}): {line:?}");
        let mut words = line.split(' ');
        let head = words.next().unwrap_or_default();
        let id: u32 = field(words.next(), "id").map_err(|w| refused(&w))?;
        let word = words.next().ok_or_else(|| refused("no name or outcome"))?;
        // The optional fields, each at most once and in the printed order.
        let mut rest: Vec<(&str, &str)> = Vec::new();
        for w in words {
            let (name, value) = w.split_once('=').filter(|(_, v)| !v.is_empty()).ok_or_else(|| refused(&format!("unexpected {w:?}")))?;
            rest.push((name, value));
        }
        let names: Vec<&str> = rest.iter().map(|(n, _)| *n).collect();
        let mut take = |name: &str| rest.iter().position(|(n, _)| *n == name).map(|at| rest.remove(at).1);
        let call = match head {
            "CALL" => {
                let want: &[&str] = match word {
                    "acquire" => &[],
                    "renew" | "release" => &["token"],
                    "write" => &["token", "part"],
                    _ => return Err(refused("unknown call")),
                };
                if names != want {
                    return Err(refused(&format!("expected the fields {want:?}")));
                }
                let token = take("token").map(|t| t.parse().map_err(|_| refused("unreadable token"))).transpose()?;
                let invoke = match (word, token) {
                    ("acquire", _) => Invoke::Acquire,
                    ("renew", Some(token)) => Invoke::Renew { token },
                    ("release", Some(token)) => Invoke::Release { token },
                    ("write", Some(token)) => Invoke::Write { token, part: take("part").unwrap_or_default().to_owned() },
                    _ => unreachable!("the fields were checked above"),
                };
                Call::Invoke { id, invoke }
            }
            "RETURN" => {
                let outcome: Outcome = word.parse().map_err(|e: String| refused(&e))?;
                let order = ["token", "tries", "code"];
                if names.iter().any(|n| !order.contains(n)) || !names.windows(2).all(|w| order.iter().position(|o| *o == w[0]) < order.iter().position(|o| *o == w[1])) {
                    return Err(refused("fields out of order, or unknown"));
                }
                let ret = Return {
                    outcome,
                    token: take("token").map(|t| t.parse().map_err(|_| refused("unreadable token"))).transpose()?,
                    tries: take("tries").map(|t| t.parse().map_err(|_| refused("unreadable tries"))).transpose()?,
                    code: take("code").map(str::to_owned),
                };
                Call::Return { id, ret }
            }
            _ => return Err(refused("not CALL or RETURN")),
        };
        Ok(call)
    }
}

/// `name=value` as a number.
fn field<T: FromStr>(word: Option<&str>, name: &str) -> Result<T, String> {
    let value = word.and_then(|w| w.strip_prefix(name)).and_then(|w| w.strip_prefix('=')).ok_or_else(|| format!("expected {name}="))?;
    value.parse().map_err(|_| format!("unreadable {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ret(outcome: Outcome) -> Return {
        Return { outcome, token: None, tries: None, code: None }
    }

    /// Every kind of call and return prints a line that parses back to it.
    #[test]
    fn calls_round_trip() {
        let calls = [
            Call::Invoke { id: 1, invoke: Invoke::Acquire },
            Call::Invoke { id: 2, invoke: Invoke::Renew { token: 5 } },
            Call::Invoke { id: 3, invoke: Invoke::Write { token: 5, part: "summary".into() } },
            Call::Invoke { id: 4, invoke: Invoke::Release { token: 5 } },
            Call::Return { id: 1, ret: Return { token: Some(5), tries: Some(4), ..ret(Outcome::Ok) } },
            Call::Return { id: 1, ret: Return { tries: Some(1), ..ret(Outcome::Fail) } },
            Call::Return { id: 2, ret: ret(Outcome::Ok) },
            Call::Return { id: 3, ret: Return { code: Some("25P03".into()), ..ret(Outcome::Info) } },
        ];
        for call in calls {
            let line = call.to_string();
            assert_eq!(line.parse::<Call>(), Ok(call), "{line}");
        }
        assert_eq!(Call::Invoke { id: 3, invoke: Invoke::Write { token: 5, part: "summary".into() } }.to_string(), "CALL id=3 write token=5 part=summary");
    }

    /// Lines that are not calls are refused, each with the line quoted.
    #[test]
    fn other_lines_are_refused() {
        for line in [
            "CALL",
            "CALL id=1",
            "CALL id=x acquire",
            "CALL id=1 acquire token=2",
            "CALL id=1 write token=2",
            "CALL id=1 write part=summary token=2",
            "CALL id=1 renew token=",
            "CALL id=1 sleep",
            "RETURN id=1 maybe",
            "RETURN id=1 ok tries=2 token=3",
            "RETURN id=1 ok colour=blue",
            "RETURN id=1 ok token=3 extra",
            "ACQUIRED token=2",
        ] {
            let err = line.parse::<Call>().expect_err(line);
            assert!(err.contains(&format!("{line:?}")), "{err}");
        }
    }
}
