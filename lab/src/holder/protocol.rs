//! The holder's protocol: one [`Step`] per line on its stdout. The holder
//! prints a step with `Display`; the parent reads it back with `FromStr`,
//! here and nowhere else, so a line is parsed once and every reader (the
//! holder guard, the cases, the chaos slots) matches on the enum, never on
//! text. A line that is not a step is an error naming it, not a guess.

use std::fmt;
use std::str::FromStr;

// ANCHOR: step
/// One protocol line of the holder, as printed on its stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The acquire returned a token.
    Acquired { token: i64 },
    /// Someone else holds the lease.
    NotAcquired,
    /// The local deadline was still ahead.
    DeadlineOk,
    /// The local deadline had passed: the holder gives up without writing.
    DeadlinePassed,
    /// Waiting for one line on stdin.
    Waiting,
    /// Inside the fenced write, before the commit, waiting for one line.
    InFence,
    /// The resource's answer to the write.
    Write { accepted: bool, token: i64 },
    /// The write ended in an error from the server (its SQLSTATE), or in a
    /// closed connection (`connection-closed`).
    WriteFailed { code: String },
    /// The renewal right after the write.
    RenewAfterWrite { ok: bool },
    /// Released at the end of a normal run.
    Released,
    /// The release matched no row: someone else's holding by then.
    ReleaseRefused,
    /// The renewal failed: the holding is over; nothing to release.
    LeaseLost,
}
// ANCHOR_END: step

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Acquired { token } => write!(f, "ACQUIRED token={token}"),
            Step::NotAcquired => f.write_str("NOT_ACQUIRED"),
            Step::DeadlineOk => f.write_str("DEADLINE_OK"),
            Step::DeadlinePassed => f.write_str("DEADLINE_PASSED"),
            Step::Waiting => f.write_str("WAITING"),
            Step::InFence => f.write_str("IN_FENCE"),
            Step::Write { accepted, token } => write!(f, "WRITE accepted={accepted} token={token}"),
            Step::WriteFailed { code } => write!(f, "WRITE failed code={code}"),
            Step::RenewAfterWrite { ok } => write!(f, "RENEW_AFTER_WRITE ok={ok}"),
            Step::Released => f.write_str("RELEASED"),
            Step::ReleaseRefused => f.write_str("RELEASE_REFUSED"),
            Step::LeaseLost => f.write_str("LEASE_LOST"),
        }
    }
}

/// Reads a line as [`Display`](fmt::Display) writes it, exactly: the word,
/// then each field as `name=value` in its order. Anything else, a missing,
/// extra or unparsable field included, is refused with the line quoted.
impl FromStr for Step {
    type Err = String;

    fn from_str(line: &str) -> Result<Step, String> {
        let refused = |why: &str| format!("not a holder protocol line ({why}): {line:?}");
        let mut fields = Fields { words: line.split(' ').peekable(), refused: &refused };
        let step = match fields.words.next().unwrap_or_default() {
            "ACQUIRED" => Step::Acquired { token: fields.value("token")? },
            "NOT_ACQUIRED" => Step::NotAcquired,
            "DEADLINE_OK" => Step::DeadlineOk,
            "DEADLINE_PASSED" => Step::DeadlinePassed,
            "WAITING" => Step::Waiting,
            "IN_FENCE" => Step::InFence,
            // `WRITE failed code=…`, or `WRITE accepted=… token=…`.
            "WRITE" if fields.words.next_if_eq(&"failed").is_some() => Step::WriteFailed { code: fields.value("code")? },
            "WRITE" => Step::Write { accepted: fields.value("accepted")?, token: fields.value("token")? },
            "RENEW_AFTER_WRITE" => Step::RenewAfterWrite { ok: fields.value("ok")? },
            "RELEASED" => Step::Released,
            "RELEASE_REFUSED" => Step::ReleaseRefused,
            "LEASE_LOST" => Step::LeaseLost,
            _ => return Err(refused("unknown step")),
        };
        match fields.words.next() {
            None => Ok(step),
            Some(extra) => Err(refused(&format!("unexpected {extra:?}"))),
        }
    }
}

/// The `name=value` fields after a step's word, read in order.
struct Fields<'a> {
    /// The words still to read.
    words: std::iter::Peekable<std::str::Split<'a, char>>,
    /// Builds the error for this line.
    refused: &'a dyn Fn(&str) -> String,
}

impl Fields<'_> {
    /// The next field, which must be `name=value` with a value that parses.
    fn value<T: FromStr>(&mut self, name: &str) -> Result<T, String> {
        let word = self.words.next().ok_or_else(|| (self.refused)(&format!("no {name}=")))?;
        let value = word.strip_prefix(name).and_then(|v| v.strip_prefix('=')).ok_or_else(|| (self.refused)(&format!("expected {name}=")))?;
        if value.is_empty() {
            return Err((self.refused)(&format!("empty {name}")));
        }
        value.parse().map_err(|_| (self.refused)(&format!("unreadable {name}")))
    }
}

/// Protocol lines in order, as one value a check can compare and a
/// transcript can show: `ACQUIRED token=1, DEADLINE_OK, WAITING`, or
/// `(nothing)` when the holder printed none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Steps(pub Vec<Step>);

impl Steps {
    /// The step at `index` alone, or none when the holder printed fewer.
    pub fn at(&self, index: usize) -> Steps {
        Steps(self.0.get(index).cloned().into_iter().collect())
    }

    /// The steps from `index` on.
    pub fn from_index(&self, index: usize) -> Steps {
        Steps(self.0.get(index..).unwrap_or_default().to_vec())
    }

    /// The first step, if any.
    pub fn first(&self) -> Option<&Step> {
        self.0.first()
    }

    /// Each step, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Step> {
        self.0.iter()
    }

    /// Whether the holder printed none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<const N: usize> From<[Step; N]> for Steps {
    fn from(steps: [Step; N]) -> Steps {
        Steps(steps.into())
    }
}

impl fmt::Display for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(nothing)");
        }
        let lines: Vec<String> = self.0.iter().map(Step::to_string).collect();
        f.write_str(&lines.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of every variant. The match makes the compiler name a
    /// variant added later and not listed here.
    fn one_of_each() -> Vec<Step> {
        let all = vec![
            Step::Acquired { token: 2 },
            Step::NotAcquired,
            Step::DeadlineOk,
            Step::DeadlinePassed,
            Step::Waiting,
            Step::InFence,
            Step::Write { accepted: true, token: 2 },
            Step::Write { accepted: false, token: 1 },
            Step::WriteFailed { code: "25P03".into() },
            Step::WriteFailed { code: "connection-closed".into() },
            Step::RenewAfterWrite { ok: true },
            Step::RenewAfterWrite { ok: false },
            Step::Released,
            Step::ReleaseRefused,
            Step::LeaseLost,
        ];
        let mut seen = [false; 12];
        for step in &all {
            let index = match step {
                Step::Acquired { .. } => 0,
                Step::NotAcquired => 1,
                Step::DeadlineOk => 2,
                Step::DeadlinePassed => 3,
                Step::Waiting => 4,
                Step::InFence => 5,
                Step::Write { .. } => 6,
                Step::WriteFailed { .. } => 7,
                Step::RenewAfterWrite { .. } => 8,
                Step::Released => 9,
                Step::ReleaseRefused => 10,
                Step::LeaseLost => 11,
            };
            seen[index] = true;
        }
        assert!(seen.iter().all(|s| *s), "a variant has no example: {seen:?}");
        all
    }

    /// Every variant prints a line that parses back to it.
    #[test]
    fn every_step_round_trips() {
        for step in one_of_each() {
            let line = step.to_string();
            assert_eq!(line.parse::<Step>(), Ok(step), "{line}");
        }
    }

    /// The protocol lines are the ones the article quotes.
    #[test]
    fn steps_print_as_the_article_quotes() {
        assert_eq!(Step::Acquired { token: 2 }.to_string(), "ACQUIRED token=2");
        assert_eq!(Step::Write { accepted: true, token: 2 }.to_string(), "WRITE accepted=true token=2");
        assert_eq!(Step::RenewAfterWrite { ok: false }.to_string(), "RENEW_AFTER_WRITE ok=false");
    }

    /// Lines that are not steps are refused, each with the line quoted:
    /// no field is guessed and nothing after a step is ignored.
    #[test]
    fn other_lines_are_refused() {
        for line in [
            "",
            "ACQUIRED",
            "ACQUIRED token=",
            "ACQUIRED token=two",
            "ACQUIRED id=2",
            "ACQUIRED token=2 extra",
            "RELEASED now",
            "WRITE accepted=yes token=1",
            "WRITE token=1 accepted=true",
            "WRITE failed",
            "WRITE failed code=",
            "acquired token=2",
            "holder-a: connection refused",
        ] {
            let err = line.parse::<Step>().expect_err(line);
            assert!(err.contains(&format!("{line:?}")), "{err}");
        }
    }

    /// Steps show as the lines joined, and say when there are none.
    #[test]
    fn steps_show_as_joined_lines() {
        let steps = Steps::from([Step::Acquired { token: 1 }, Step::DeadlineOk, Step::Waiting]);
        assert_eq!(steps.to_string(), "ACQUIRED token=1, DEADLINE_OK, WAITING");
        assert_eq!(steps.at(1), Steps::from([Step::DeadlineOk]));
        assert_eq!(steps.at(3).to_string(), "(nothing)");
        assert_eq!(steps.from_index(2), Steps::from([Step::Waiting]));
        assert!(steps.from_index(4).is_empty());
    }
}
