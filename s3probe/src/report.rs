//! What the rounds add up to (pure: counted from records, tested on
//! hand-made ones), and the JSON and markdown that report it.

use crate::Error;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// An object as a client saw it: its body and its ETag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub body: Vec<u8>,
    pub e_tag: String,
}

/// One race as recorded: what was stored before it, each successful
/// writer's body with the ETag its PUT returned, and what was stored
/// after it (`None`: no object).
#[derive(Clone, Debug)]
pub struct Round {
    pub before: Option<Object>,
    pub winners: Vec<Object>,
    pub after: Option<Object>,
}

impl Round {
    /// The stored state is one no single successful PUT produced: the
    /// stored body and ETag are not those of one winner (the body of one
    /// writer under another's ETag, say), or, with no winner, the object
    /// changed. Writers' bodies are distinct, so a winner is known by its
    /// body.
    pub fn is_torn(&self) -> bool {
        match &self.after {
            _ if self.winners.is_empty() => self.after.as_ref().map(|o| &o.body) != self.before.as_ref().map(|o| &o.body),
            None => true,
            Some(after) => !self.winners.iter().any(|w| w == after),
        }
    }
}

/// One variant × probe, counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tally {
    pub writers: usize,
    pub rounds: usize,
    /// Successes in a round → how many rounds had that many; every count
    /// from 0 to `writers` is present.
    pub histogram: BTreeMap<usize, usize>,
    pub rounds_with_double_success: usize,
    pub max_successes_in_a_round: usize,
    pub torn_rounds: usize,
}

impl Tally {
    /// Counts `rounds` of `writers` writers. Zero rounds, zero successes in
    /// all, or more successes than writers is no result but an error.
    pub fn count(writers: usize, rounds: &[Round]) -> Result<Tally, Error> {
        if rounds.is_empty() {
            return Err("no round ran".into());
        }
        let mut histogram: BTreeMap<usize, usize> = (0..=writers).map(|n| (n, 0)).collect();
        for (i, round) in rounds.iter().enumerate() {
            let n = round.winners.len();
            *histogram.get_mut(&n).ok_or_else(|| format!("round {i}: {n} successes from {writers} writers"))? += 1;
        }
        let max = rounds.iter().map(|r| r.winners.len()).max().unwrap_or(0);
        if max == 0 {
            return Err(format!("no PUT succeeded in {} rounds", rounds.len()).into());
        }
        Ok(Tally {
            writers,
            rounds: rounds.len(),
            histogram,
            rounds_with_double_success: rounds.iter().filter(|r| r.winners.len() > 1).count(),
            max_successes_in_a_round: max,
            torn_rounds: rounds.iter().filter(|r| r.is_torn()).count(),
        })
    }

    /// The atomic reference's promise: one winner in every round, and every
    /// stored state a winner's.
    pub fn exactly_one_winner(&self) -> bool {
        self.histogram.get(&1) == Some(&self.rounds) && self.torn_rounds == 0
    }

    /// `1: 3, 2: 197` (only the counts seen).
    fn histogram_text(&self) -> String {
        let seen: Vec<String> = self.histogram.iter().filter(|(_, r)| **r > 0).map(|(s, r)| format!("{s}: {r}")).collect();
        seen.join(", ")
    }

    pub fn summary(&self) -> String {
        format!(
            "{} rounds × {} writers: {} with >1 success (successes per round {{{}}}), {} torn",
            self.rounds,
            self.writers,
            self.rounds_with_double_success,
            self.histogram_text(),
            self.torn_rounds
        )
    }
}

/// One line of the report: which server, which probe, what it counted.
pub struct Row {
    pub variant: &'static str,
    pub probe: &'static str,
    pub tally: Tally,
}

/// The version of `name` in a Cargo.lock, which must hold it exactly once.
pub fn locked_version(lock: &str, name: &str) -> Result<String, Error> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    let mut found = Vec::new();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next().and_then(|l| l.trim().strip_prefix("version = \"")).and_then(|v| v.strip_suffix('"'));
            found.push(version.ok_or_else(|| format!("Cargo.lock: {name} has no version line"))?.to_string());
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!("Cargo.lock has no package {name}").into()),
        many => Err(format!("Cargo.lock has {name} in {} versions: {}", many.len(), many.join(", ")).into()),
    }
}

/// The crates whose behaviour is the finding, as built.
pub const MEASURED_CRATES: [&str; 3] = ["s3s", "s3s-fs", "object_store"];

pub fn versions(lock: &str) -> Result<BTreeMap<&'static str, String>, Error> {
    MEASURED_CRATES.iter().map(|c| Ok((*c, locked_version(lock, c)?))).collect()
}

/// The `--out` file.
pub fn json(rows: &[Row], versions: &BTreeMap<&str, String>, cpus: usize, command_line: &[String], control_holds: bool) -> Value {
    let results: Vec<Value> = rows
        .iter()
        .map(|r| {
            let histogram: serde_json::Map<String, Value> = r.tally.histogram.iter().map(|(s, n)| (s.to_string(), json!(n))).collect();
            json!({
                "variant": r.variant,
                "probe": r.probe,
                "writers": r.tally.writers,
                "rounds": r.tally.rounds,
                "rounds_with_double_success": r.tally.rounds_with_double_success,
                "max_successes_in_a_round": r.tally.max_successes_in_a_round,
                "successes_histogram": histogram,
                "torn_rounds": r.tally.torn_rounds,
            })
        })
        .collect();
    json!({
        "versions": versions,
        "cpus": cpus,
        "command_line": command_line,
        "serialized_control_holds": control_holds,
        "results": results,
    })
}

/// The markdown table printed on stdout.
pub fn markdown(rows: &[Row], versions: &BTreeMap<&str, String>, cpus: usize, control_holds: bool) -> String {
    let names: Vec<String> = versions.iter().map(|(c, v)| format!("{c} {v}")).collect();
    let mut out = format!(
        "Conditional PUTs raced on s3s-fs over a Unix socket ({}; {cpus} CPUs). \
         `stock` is s3s-fs as published; `serialized` is the same service with one lock around every request.\n\n",
        names.join(", ")
    );
    out.push_str("| variant | probe | writers | rounds | rounds with >1 success | max successes in a round | successes per round (successes: rounds) | torn rounds |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---|---:|\n");
    for r in rows {
        let t = &r.tally;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.variant,
            r.probe,
            t.writers,
            t.rounds,
            t.rounds_with_double_success,
            t.max_successes_in_a_round,
            t.histogram_text(),
            t.torn_rounds
        ));
    }
    out.push_str(if control_holds {
        "\nThe control held: `serialized` had exactly one winner, and a winner's state stored, in every round.\n"
    } else {
        "\nThe control did NOT hold: `serialized` had a round without exactly one winner, or a torn state.\n"
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(body: &str, e_tag: &str) -> Object {
        Object { body: body.into(), e_tag: e_tag.into() }
    }

    fn round(winners: &[(&str, &str)], after: Option<(&str, &str)>) -> Round {
        Round {
            before: Some(obj("init", "e-init")),
            winners: winners.iter().map(|(b, e)| obj(b, e)).collect(),
            after: after.map(|(b, e)| obj(b, e)),
        }
    }

    #[test]
    fn histogram_counts_every_round_and_keeps_zero_counts() {
        let rounds = [
            round(&[("w0", "e0")], Some(("w0", "e0"))),
            round(&[("w0", "e0"), ("w1", "e1")], Some(("w1", "e1"))),
            round(&[("w0", "e0"), ("w1", "e1"), ("w2", "e2")], Some(("w2", "e2"))),
            round(&[("w1", "e1")], Some(("w1", "e1"))),
        ];
        let t = Tally::count(3, &rounds).unwrap();
        assert_eq!(t.histogram, BTreeMap::from([(0, 0), (1, 2), (2, 1), (3, 1)]));
        assert_eq!(t.rounds, 4);
        assert_eq!(t.rounds_with_double_success, 2);
        assert_eq!(t.max_successes_in_a_round, 3);
        assert_eq!(t.torn_rounds, 0);
        assert!(!t.exactly_one_winner());
        assert_eq!(t.histogram_text(), "1: 2, 2: 1, 3: 1");
    }

    #[test]
    fn one_winner_per_round_is_the_control() {
        let rounds = [round(&[("w2", "e2")], Some(("w2", "e2"))), round(&[("w0", "e0")], Some(("w0", "e0")))];
        let t = Tally::count(4, &rounds).unwrap();
        assert_eq!(t.rounds_with_double_success, 0);
        assert!(t.exactly_one_winner());
    }

    #[test]
    fn a_torn_round_spoils_the_control_even_with_one_winner() {
        let rounds = [round(&[("w2", "e2")], Some(("w2", "e-other")))];
        let t = Tally::count(4, &rounds).unwrap();
        assert_eq!(t.torn_rounds, 1);
        assert!(!t.exactly_one_winner());
    }

    #[test]
    fn torn_is_one_writers_body_under_anothers_etag() {
        // The colleague's example: body r2-w2 stored under r2-w3's ETag.
        let r = round(&[("r2-w2", "89d8"), ("r2-w3", "f1ce")], Some(("r2-w2", "f1ce")));
        assert!(r.is_torn());
        assert!(!round(&[("r2-w2", "89d8"), ("r2-w3", "f1ce")], Some(("r2-w3", "f1ce"))).is_torn());
    }

    #[test]
    fn torn_is_a_body_no_winner_wrote_or_a_missing_object() {
        assert!(round(&[("w0", "e0")], Some(("w1", "e1"))).is_torn(), "a refused writer's body");
        assert!(round(&[("w0", "e0")], Some(("init", "e-init"))).is_torn(), "a success that left no trace");
        assert!(round(&[("w0", "e0")], None).is_torn(), "no object after a success");
    }

    #[test]
    fn with_no_winner_the_object_must_not_change() {
        assert!(!round(&[], Some(("init", "e-init"))).is_torn());
        assert!(round(&[], Some(("w1", "e1"))).is_torn());
        let absent = Round { before: None, winners: vec![], after: None };
        assert!(!absent.is_torn());
    }

    #[test]
    fn no_round_or_no_success_is_an_error_not_a_result() {
        assert!(Tally::count(4, &[]).is_err());
        assert!(Tally::count(4, &[round(&[], Some(("init", "e-init")))]).is_err());
    }

    #[test]
    fn more_successes_than_writers_is_an_error() {
        assert!(Tally::count(1, &[round(&[("w0", "e0"), ("w1", "e1")], Some(("w1", "e1")))]).is_err());
    }

    #[test]
    fn versions_come_from_the_lock_file_and_a_missing_one_is_an_error() {
        let lock = "[[package]]\nname = \"s3s\"\nversion = \"0.14.1\"\n\n[[package]]\nname = \"s3s-fs\"\nversion = \"0.14.1\"\n\n[[package]]\nname = \"getrandom\"\nversion = \"0.2.17\"\n\n[[package]]\nname = \"getrandom\"\nversion = \"0.3.4\"\n";
        assert_eq!(locked_version(lock, "s3s").unwrap(), "0.14.1");
        assert!(locked_version(lock, "object_store").is_err());
        assert!(locked_version(lock, "getrandom").is_err(), "two versions: which one is unknown");
        assert!(versions(lock).is_err());
    }

    /// The pins in Cargo.toml are what the lock file (and so the report) says.
    #[test]
    fn the_real_lock_file_names_the_pinned_versions() {
        let v = versions(crate::CARGO_LOCK).unwrap();
        let manifest = include_str!("../Cargo.toml");
        for (name, version) in &v {
            assert!(manifest.contains(&format!("{name} = {{ version = \"={version}\"")) || manifest.contains(&format!("{name} = \"={version}\"")), "{name} {version} is not the pin in Cargo.toml");
        }
    }
}
