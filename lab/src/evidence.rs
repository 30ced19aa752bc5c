//! The locked evidence and the reader's comparison with it (`lab diff`).
//!
//! `evidence/26/F4.snap` is the insta snapshot of F4's transcript, after
//! [`redact`]. `./run.sh F4` saves the reader's own transcript under
//! `target/lab/transcripts/F4.txt`; `lab diff F4` redacts it with the same
//! rules and compares.

use crate::error::{Result, ResultExt};
use crate::paths;
use crate::safe_dir::SafeDir;
use regex::Regex;
use similar::{ChangeTag, TextDiff};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// A PostgreSQL `timestamptz` as text, e.g. `2026-10-19 13:06:49.33416+08`.
pub const TIMESTAMP: &str = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}(:\d{2})?";

// ANCHOR: redactions
/// What changes from run to run, and what it is replaced with. Cases print
/// measured values only in these forms, so that everything else in a
/// transcript is deterministic and can be locked as evidence. A rule is
/// added with the first case that prints such a value, never before.
pub const REDACTIONS: &[(&str, &str)] = &[
    // Database timestamps (F2 prints now() twice).
    (TIMESTAMP, "<TS>"),
    // Measured durations: how soon the server rolled back a killed
    // holder's transaction (F10), how long a session waited (F11).
    (r"\btook=\d+ms", "took=<DUR>"),
    // Measured milliseconds, printed with a decimal (a deadline's lead in a
    // FAIL line; F14's base backup, promotion and acquire latencies);
    // parameters are whole numbers (TTL=1500ms) and stay.
    (r"-?\d+\.\dms", "<MS>ms"),
    // WAL positions, which F14 prints as `lsn=0/3000148`: where the WAL
    // stands depends on everything the server wrote before.
    (r"lsn=[0-9A-F]{1,8}/[0-9A-F]{1,8}\b", "lsn=<LSN>"),
    // Counts of a chaos run (F15) that depend on the machine's timing, not
    // on the seed: attempts, holdings, faults injected, stale writes of the
    // negative control. Printed as `count=N` and nowhere else; the zeros
    // the real fence must keep are printed plainly and stay locked.
    (r"\bcount=\d+\b", "count=<N>"),
    // Which etcd member wins an election, its member id and its raft term
    // (F16 prints `leader=m2 id=6e3bd23ae5f1eaae term=3`): the election's
    // randomised timeouts decide the first, the cluster's start the others.
    (r"\bleader=m[1-3]\b", "leader=<MEMBER>"),
    (r"\bid=[0-9a-f]{16}\b", "id=<ID>"),
    (r"\bterm=\d+\b", "term=<TERM>"),
    // A lease's remaining TTL, in etcd's whole seconds (F16 reads one
    // before and after a leader change): how far it has run down depends on
    // when the reading lands.
    (r"\bremaining=\d+s\b", "remaining=<S>s"),
    // An etcd lease id where a token should be (the mutant
    // etcd-token-is-lease-id): ids are 63-bit numbers made from the member
    // that granted the lease and its clock. No real token of the lab has
    // ten digits.
    (r"\btoken=\d{10,}\b", "token=<LEASE-ID>"),
];
// ANCHOR_END: redactions

static COMPILED: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    REDACTIONS.iter().map(|(rx, with)| (Regex::new(rx).expect("redaction pattern"), *with)).collect()
});

/// Masks the values that change from run to run (see [`REDACTIONS`]).
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for (rx, with) in COMPILED.iter() {
        out = rx.replace_all(&out, *with).into_owned();
    }
    out
}

/// The locked snapshot of a run: `F4.snap` for a case as the article runs
/// it, `variants/F4-unfenced.snap` for a variant the book asks for.
pub fn snapshot_path(name: &str) -> PathBuf {
    if name.contains('-') {
        paths::evidence_dir().join("variants").join(format!("{name}.snap"))
    } else {
        paths::evidence_dir().join(format!("{name}.snap"))
    }
}

/// Where `lab run` saves a case's last transcript.
pub fn saved_transcript_path(id: &str) -> PathBuf {
    paths::transcripts_dir().join(format!("{id}.txt"))
}

/// Saves a case's transcript for a later `lab diff`, whole, in a folder of
/// the lab's own (see [`crate::safe_dir`]).
pub fn save_transcript(id: &str, text: &str) -> Result<()> {
    SafeDir::own_folder(&paths::transcripts_dir())?
        .write_whole(&format!("{id}.txt"), text, 0o644)
        .with_context(|| format!("saving {}", saved_transcript_path(id).display()))
}

/// The transcript locked in a snapshot file: the text after insta's
/// `---` … `---` metadata header.
pub fn snapshot_body(snapshot: &str) -> Option<&str> {
    let rest = snapshot.strip_prefix("---\n")?;
    let end = rest.find("\n---\n")?;
    Some(&rest[end + "\n---\n".len()..])
}

/// The result of comparing a transcript with the evidence.
pub struct Comparison {
    /// The snapshot compared against.
    pub evidence: PathBuf,
    /// The transcript compared.
    pub transcript: PathBuf,
    /// A unified diff, empty when they match.
    pub diff: String,
}

/// Compares `transcript` (by default the case's saved one) with the evidence.
pub fn compare(id: &str, transcript: Option<&Path>, color: bool) -> Result<Comparison> {
    let evidence = snapshot_path(id);
    let transcript = transcript.map(Path::to_path_buf).unwrap_or_else(|| saved_transcript_path(id));
    if !transcript.exists() {
        let run = id.split_once('-').map_or(id.to_owned(), |(case, _)| format!("{case} …"));
        return Err(format!("no transcript of {id} yet ({}): run it first with `./run.sh {run}`", transcript.display()).into());
    }
    let locked = fs::read_to_string(&evidence).with_context(|| format!("reading the evidence {}", evidence.display()))?;
    let locked = snapshot_body(&locked).ok_or_else(|| format!("{} is not an insta snapshot", evidence.display()))?;
    let mine = fs::read_to_string(&transcript).with_context(|| format!("reading {}", transcript.display()))?;
    let label = |p: &Path| p.strip_prefix(paths::root()).unwrap_or(p).display().to_string();
    let diff = unified_diff(locked, &redact(&mine), &label(&evidence), &format!("{} (redacted)", label(&transcript)), color);
    Ok(Comparison { evidence, transcript, diff })
}

/// A unified diff of two transcripts (ends of lines normalised), empty when
/// they are equal; coloured for a terminal when `color`.
pub fn unified_diff(old: &str, new: &str, old_label: &str, new_label: &str, color: bool) -> String {
    let (old, new) = (format!("{}\n", old.trim_end()), format!("{}\n", new.trim_end()));
    let mut diff = String::new();
    if old == new {
        return diff;
    }
    let text = TextDiff::from_lines(&old, &new);
    diff.push_str(&paint(&format!("--- {old_label}\n+++ {new_label}\n"), "1", color));
    for group in text.grouped_ops(3) {
        let (first, last) = (group.first().expect("non-empty"), group.last().expect("non-empty"));
        let (o, n) = (first.old_range().start..last.old_range().end, first.new_range().start..last.new_range().end);
        diff.push_str(&paint(&format!("@@ -{},{} +{},{} @@\n", o.start + 1, o.len(), n.start + 1, n.len()), "36", color));
        for op in &group {
            for change in text.iter_changes(op) {
                let (sign, code) = match change.tag() {
                    ChangeTag::Delete => ("-", "31"),
                    ChangeTag::Insert => ("+", "32"),
                    ChangeTag::Equal => (" ", ""),
                };
                diff.push_str(&paint(&format!("{sign}{}", change.value()), code, color));
            }
        }
    }
    diff
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color && !code.is_empty() {
        let body = text.strip_suffix('\n').unwrap_or(text);
        format!("\x1b[{code}m{body}\x1b[0m\n")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps are masked; parameters and everything else are not.
    #[test]
    fn redaction_masks_only_what_varies() {
        let line = "now() (expected=2026-10-19 13:06:49.33416+08, actual=2026-12-02 01:02:03+00) TTL=1500ms 等待 3000ms";
        assert_eq!(redact(line), "now() (expected=<TS>, actual=<TS>) TTL=1500ms 等待 3000ms");
        let line = "备库收到 lsn=0/3000148，主库 lsn=1A/FF000028；用时 412.3ms；token=1/2 holder-a/2";
        assert_eq!(redact(line), "备库收到 lsn=<LSN>，主库 lsn=<LSN>；用时 <MS>ms；token=1/2 holder-a/2");
        let line = "写入尝试 count=312，拒绝 count=0；被接受的过期写入 0；recount=3 count=7x";
        assert_eq!(redact(line), "写入尝试 count=<N>，拒绝 count=<N>；被接受的过期写入 0；recount=3 count=7x");
        let line = "leader=m2 id=00c3bd23ae5f1eaa term=3；remaining=2s → remaining=4s；m1, m2, m3；TTL=4s token=7";
        assert_eq!(redact(line), "leader=<MEMBER> id=<ID> term=<TERM>；remaining=<S>s → remaining=<S>s；m1, m2, m3；TTL=4s token=7");
        assert_eq!(redact("ACQUIRED token=7587862396212523012, token=123456789"), "ACQUIRED token=<LEASE-ID>, token=123456789");
    }

    /// The transcript is what follows insta's metadata header.
    #[test]
    fn snapshot_body_skips_the_header() {
        let snap = "---\nsource: lab/tests/cases.rs\n---\nCASE F1 :: x\n  ok   y\n";
        assert_eq!(snapshot_body(snap), Some("CASE F1 :: x\n  ok   y\n"));
        assert_eq!(snapshot_body("CASE F1 :: x\n"), None);
    }
}
