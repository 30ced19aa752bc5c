//! What a group checked, as its runner says it: the counts behind the
//! suite's `checked:` line, and the judgement that a group which passed
//! without checking anything has failed ("ran nothing"): every group the
//! suite builds is there to check something, so a pass of nothing is a
//! selection or a runner gone wrong, never a success.
//!
//! libtest says it in its summary line (`test result: ok. 3 passed; …`),
//! which is read strictly: a line that starts like one and does not parse
//! is an error naming the log and the line, never a zero. The suite's own
//! runners, the cases' snapshot test (harness = false) and the book's
//! commands (one libtest test that runs many commands), write a
//! [`Checked`] as JSON to the file the suite names in [`VAR`]: data, not a
//! line of text to scrape.

use crate::error::{Result, ResultExt};
use crate::paths;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The variable in which the suite names the file a group's runner writes
/// its [`Checked`] to. Unset outside the suite: the runner writes nothing.
pub const VAR: &str = "LAB_SUITE_CHECKED";

/// What one group (or the whole suite) checked and saw pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checked {
    /// libtest tests that passed.
    pub tests: u64,
    /// Cases whose transcripts matched their snapshots.
    pub cases: u64,
    /// The book's variants whose transcripts matched their snapshots.
    pub variants: u64,
    /// The book's commands that behaved as the book says.
    pub book_commands: u64,
}

impl Checked {
    /// Writes this to the file the suite named in [`VAR`], when the suite
    /// runs the caller; outside the suite, nothing.
    pub fn report_to_suite(&self) -> Result<()> {
        let Some(path) = std::env::var_os(VAR) else { return Ok(()) };
        let path = Path::new(&path);
        let text = serde_json::to_string(self).context("writing what was checked as JSON")?;
        paths::write_whole(path, &format!("{text}\n")).with_context(|| format!("writing what was checked to {} ({VAR})", path.display()))
    }

    /// Adds another group's counts.
    pub fn add(&mut self, other: &Checked) {
        self.tests += other.tests;
        self.cases += other.cases;
        self.variants += other.variants;
        self.book_commands += other.book_commands;
    }
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tests passed, {} cases and {} variants match their snapshots, {} book commands behaved as the book says",
            self.tests, self.cases, self.variants, self.book_commands
        )
    }
}

/// How a group's runner says what it checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reporter {
    /// libtest's summary line, in the group's log.
    Libtest,
    /// A [`Checked`] file (the cases' snapshot test, which is no libtest).
    File,
    /// Both: libtest's summary for the one test, the file for the book's
    /// commands that test ran.
    LibtestAndFile,
}

/// What a group whose process passed checked: read from its log and, for
/// a runner that writes one, its [`Checked`] file. An error says why the
/// pass proves nothing: a count that cannot be read (naming the log or
/// the file, and the line), no count at all, or a count of nothing.
pub fn read(reporter: Reporter, log: &Path, file: &Path) -> Result<Checked, String> {
    let mut checked = Checked::default();
    if matches!(reporter, Reporter::Libtest | Reporter::LibtestAndFile) {
        let text = std::fs::read_to_string(log).map_err(|e| format!("its log {} cannot be read: {e}", log.display()))?;
        checked.tests = match libtest_passed(&text, log)? {
            None => return Err(format!("ran nothing: its log {} has no libtest summary (`test result: …`)", log.display())),
            Some(0) => return Err(format!("ran nothing: libtest's summary in {} says 0 passed", log.display())),
            Some(passed) => passed,
        };
    }
    if matches!(reporter, Reporter::File | Reporter::LibtestAndFile) {
        let text = std::fs::read_to_string(file).map_err(|e| format!("ran nothing: its runner wrote no count to {} ({e})", file.display()))?;
        let written: Checked = serde_json::from_str(&text).map_err(|e| format!("its count in {} cannot be read ({e}): {}", file.display(), text.trim()))?;
        if written == Checked::default() {
            return Err(format!("ran nothing: its runner's count in {} is all zero: {}", file.display(), text.trim()));
        }
        checked.add(&written);
    }
    Ok(checked)
}

/// The tests libtest's summary lines in `text` say passed (their sum;
/// one line per test binary), or `None` when there is no such line. A line
/// that starts as one and does not read is an error naming `log` and the line.
fn libtest_passed(text: &str, log: &Path) -> Result<Option<u64>, String> {
    let summary = Regex::new(r"^test result: (?:ok|FAILED)\. (\d+) passed; \d+ failed; \d+ ignored; \d+ measured; \d+ filtered out; finished in \d+(?:\.\d+)?s$")
        .expect("a valid pattern");
    let mut passed = None;
    for line in text.lines().map(str::trim_end).filter(|l| l.starts_with("test result:")) {
        let n = summary
            .captures(line)
            .and_then(|c| c[1].parse::<u64>().ok())
            .ok_or_else(|| format!("its log {} has a libtest summary that cannot be read: {line:?}", log.display()))?;
        passed = Some(passed.unwrap_or(0) + n);
    }
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log and a count file in a fresh folder, read as `reporter` reads them.
    fn judge(reporter: Reporter, log: &str, file: Option<&str>) -> Result<Checked, String> {
        let dir = tempfile::tempdir().unwrap();
        let (log_path, file_path) = (dir.path().join("g.log"), dir.path().join("g.checked.json"));
        std::fs::write(&log_path, log).unwrap();
        if let Some(file) = file {
            std::fs::write(&file_path, file).unwrap();
        }
        read(reporter, &log_path, &file_path)
    }

    const OK_3: &str = "\nrunning 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n";

    /// libtest's summary and the runners' files are counted, and the
    /// suite's line reads as it always has.
    #[test]
    fn counts_come_from_the_summary_and_the_files() {
        assert_eq!(judge(Reporter::Libtest, OK_3, None), Ok(Checked { tests: 3, ..Checked::default() }));
        let cases = judge(Reporter::File, "case F1 ... ok (1.0s)\n", Some(r#"{"tests":0,"cases":9,"variants":0,"book_commands":0}"#)).unwrap();
        let book = judge(Reporter::LibtestAndFile, &OK_3.replace('3', "1"), Some(r#"{"tests":0,"cases":0,"variants":0,"book_commands":12}"#)).unwrap();
        let mut all = cases;
        all.add(&book);
        assert_eq!(all.to_string(), "1 tests passed, 9 cases and 0 variants match their snapshots, 12 book commands behaved as the book says");
    }

    /// A group that passed on nothing is no pass: libtest's `running 0
    /// tests`, no summary at all, no file, a file of zeros.
    #[test]
    fn a_group_that_ran_nothing_is_named() {
        let zero = "\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 12 filtered out; finished in 0.00s\n";
        let said = judge(Reporter::Libtest, zero, None).unwrap_err();
        assert!(said.starts_with("ran nothing: libtest's summary in ") && said.ends_with("g.log says 0 passed"), "{said}");
        assert!(judge(Reporter::Libtest, "running 3 tests\n", None).unwrap_err().contains("has no libtest summary"));
        assert!(judge(Reporter::File, "\nrunning 0 cases\n", None).unwrap_err().starts_with("ran nothing: its runner wrote no count to "));
        let zeros = judge(Reporter::File, "", Some(r#"{"tests":0,"cases":0,"variants":0,"book_commands":0}"#)).unwrap_err();
        assert!(zeros.contains("is all zero"), "{zeros}");
        // The book's one test passed, but it ran no command.
        assert!(judge(Reporter::LibtestAndFile, OK_3, None).unwrap_err().contains("wrote no count"));
    }

    /// A count that is there and does not read is an error naming the log
    /// (or the file) and the line, never a zero.
    #[test]
    fn an_unreadable_count_is_an_error() {
        let garbled = OK_3.replace("3 passed", "three passed");
        let said = judge(Reporter::Libtest, &garbled, None).unwrap_err();
        assert!(said.contains("g.log has a libtest summary that cannot be read") && said.contains("three passed"), "{said}");
        let said = judge(Reporter::File, "", Some(r#"{"cases":"9"}"#)).unwrap_err();
        assert!(said.contains("g.checked.json cannot be read") && said.contains(r#"{"cases":"9"}"#), "{said}");
        // Unknown fields and missing ones are no zeros either.
        assert!(judge(Reporter::File, "", Some(r#"{"tests":0,"cases":9,"variants":0}"#)).is_err());
        assert!(judge(Reporter::File, "", Some(r#"{"tests":0,"cases":9,"variants":0,"book_commands":0,"extra":1}"#)).is_err());
    }
}
