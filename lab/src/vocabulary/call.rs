//! A holder's call to a server, and how it returned: Jepsen's invoke and
//! complete, as the holder prints them and a history records them.

use serde::{Deserialize, Serialize};

/// What a call does (the history's `f`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Acquire the lease (trying again while someone else holds it).
    Acquire,
    /// Renew a holding.
    Renew,
    /// Write a part.
    Write,
    /// Release a holding.
    Release,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Operation; 4] = [Operation::Acquire, Operation::Renew, Operation::Write, Operation::Release];

    /// `acquire`, `renew`, `write`, `release`.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Acquire => "acquire",
            Operation::Renew => "renew",
            Operation::Write => "write",
            Operation::Release => "release",
        }
    }
}

/// How a call returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It did what it asked for (granted, accepted, renewed, released).
    Ok,
    /// It was refused: nothing happened.
    Fail,
    /// It ended in an error: whether it happened is unknown.
    Info,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::Fail, Outcome::Info];

    /// `ok`, `fail` or `info`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

spelled!(Operation, shown by Operation::name, read by Operation::name, as "operation");
spelled!(Outcome, shown by Outcome::name, read by Outcome::name, as "outcome");
