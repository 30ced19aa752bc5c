//! The transcript: what a case prints, line by line, as it happens.
//!
//! ```text
//! CASE F1 :: 正常路径：获取 → 写入 → 续租 → 释放 → 下一持有者获取更大 token 并写入
//!   ok   holder-a 获取租约，token=1
//!   ok   资源端 fence_floor=2 (expected=2, actual=2)
//!   note A 恢复后：WRITE accepted=false token=1；RENEW_AFTER_WRITE ok=false
//!   FAIL … (expected=…, actual=…)
//! SUMMARY passed=N failed=0
//! ```
//!
//! Two spaces, the tag padded to four, one space, the text. `ok` and `FAIL`
//! lines are checks and are counted; `note` lines report what happened
//! without judging it. The methods take the *actual* value from the caller,
//! which reads it from the database or a process; the transcript only
//! compares and formats, so no `actual=` can be a literal.
//!
//! Two ways to check a value: [`Transcript::check_eq_shown`] always prints
//! `(expected=…, actual=…)` (the article prints some lines that way);
//! [`Transcript::check_eq`] reads as a plain sentence while it holds and
//! shows both values only when it fails. Either way a FAIL says what was seen.
//!
//! The same transcript is kept as data ([`CaseData`]: each case's lines,
//! its counts, and the *figures* it measured, each named): what a run
//! writes as JSON beside its text (`cases::command`), and what the book's
//! facts read. A number the book quotes from a run is a figure, recorded
//! from the same value the line prints ([`Transcript::figure`]); nothing
//! reads a number back out of the text.
//!
//! The text's one reader is [`Line::read`] (the mutation harness judges a
//! mutant's run by it).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::Write;

/// The tag of a transcript line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tag {
    /// A check that held.
    #[serde(rename = "ok")]
    Ok,
    /// A fact reported without a verdict.
    #[serde(rename = "note")]
    Note,
    /// A check that did not hold, or a case that could not finish.
    #[serde(rename = "FAIL")]
    Fail,
}

impl Tag {
    /// The tag as printed, padded to four columns.
    pub fn text(self) -> &'static str {
        match self {
            Tag::Ok => "ok  ",
            Tag::Note => "note",
            Tag::Fail => "FAIL",
        }
    }
}

/// One line of a case, as data: its tag and its text (a failure's extra
/// lines after a newline each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Said {
    /// `ok`, `note` or `FAIL`.
    pub tag: Tag,
    /// What the line says.
    pub text: String,
}

/// One case of a transcript, as data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseData {
    /// `F4`.
    pub id: String,
    /// Its title, as the `CASE` line prints it.
    pub title: String,
    /// Its lines, in order.
    pub lines: Vec<Said>,
    /// Checks that held.
    pub passed: u32,
    /// Checks that failed.
    pub failed: u32,
    /// What it measured, by name (`election_ms`), each the value a
    /// line of it prints.
    pub figures: BTreeMap<String, f64>,
}

impl CaseData {
    /// The case's block as [`Transcript`] printed it, up to its last line
    /// (its own `SUMMARY` line not included).
    pub fn text(&self) -> String {
        let mut out = format!("CASE {} :: {}\n", self.id, self.title);
        for said in &self.lines {
            out.push_str(&line_text(said.tag, &said.text));
        }
        out
    }

    /// The figure `name`, or an error naming the case and the figure.
    pub fn figure(&self, name: &str) -> Result<f64, String> {
        self.figures.get(name).copied().ok_or_else(|| format!("case {} recorded no figure `{name}`", self.id))
    }
}

/// A run's transcript: streamed to a sink as it grows, and kept as text.
pub struct Transcript {
    /// Where lines go as they happen (stdout for `lab run`); `None` in tests.
    sink: Option<Box<dyn Write + Send>>,
    /// Everything printed so far.
    text: String,
    /// Where the current case's block starts in `text`.
    case_start: usize,
    /// Checks that held, over the run.
    passed: u32,
    /// Checks that failed, over the run.
    failed: u32,
    /// Checks that held in the current case.
    case_passed: u32,
    /// Checks that failed in the current case.
    case_failed: u32,
    /// The cases so far, as data; the last is the current one.
    cases: Vec<CaseData>,
}

impl Transcript {
    /// A transcript that streams every line to `sink` as well.
    pub fn streaming(sink: impl Write + Send + 'static) -> Transcript {
        Transcript { sink: Some(Box::new(sink)), ..Transcript::quiet() }
    }

    /// A transcript that only keeps its text.
    pub fn quiet() -> Transcript {
        Transcript { sink: None, text: String::new(), case_start: 0, passed: 0, failed: 0, case_passed: 0, case_failed: 0, cases: Vec::new() }
    }

    /// Starts a case block: `CASE F1 :: title`.
    pub fn case(&mut self, id: &str, title: &str) {
        self.case_start = self.text.len();
        self.case_passed = 0;
        self.case_failed = 0;
        self.cases.push(CaseData { id: id.into(), title: title.into(), lines: Vec::new(), passed: 0, failed: 0, figures: BTreeMap::new() });
        self.emit(format!("CASE {id} :: {title}\n"));
    }

    /// Records what the current case measured as the figure `name`: the
    /// value one of its lines prints, which the book may quote. A figure
    /// outside a case, or named twice, is a bug in the case.
    pub fn figure(&mut self, name: &str, value: f64) {
        let case = self.cases.last_mut().expect("a figure belongs to a case");
        let before = case.figures.insert(name.to_owned(), value);
        assert!(before.is_none(), "case {} records the figure {name} twice", case.id);
    }

    /// Every case so far, as data.
    pub fn cases(&self) -> &[CaseData] {
        &self.cases
    }

    /// A check: `ok   text` when `held`; otherwise `FAIL text (saw …)`, so a
    /// failure says what was seen. `seen` is built only on failure.
    pub fn check<S: Display>(&mut self, held: bool, text: impl Display, seen: impl FnOnce() -> S) -> bool {
        if held {
            self.verdict(true, text.to_string())
        } else {
            self.verdict(false, format!("{text} (saw {})", seen()))
        }
    }

    /// A check that always shows both values: `text (expected=…, actual=…)`.
    pub fn check_eq_shown<T: PartialEq + Display>(&mut self, text: impl Display, expected: T, actual: T) -> bool {
        let held = expected == actual;
        self.verdict(held, format!("{text} (expected={expected}, actual={actual})"))
    }

    /// A check whose values are shown only when it fails: the passing line
    /// reads as a sentence, the failing one says what was seen instead.
    pub fn check_eq<T: PartialEq + Display>(&mut self, text: impl Display, expected: T, actual: T) -> bool {
        if expected == actual {
            self.verdict(true, text.to_string())
        } else {
            self.verdict(false, format!("{text} (expected={expected}, actual={actual})"))
        }
    }

    /// A negative control: `broke` must be true, meaning the broken design
    /// really produced the failure it is kept to show; otherwise the FAIL
    /// line says what happened instead.
    pub fn exposes<S: Display>(&mut self, broke: bool, what: impl Display, seen: impl FnOnce() -> S) -> bool {
        if broke {
            self.verdict(true, format!("negative control exposes: {what}"))
        } else {
            self.verdict(false, format!("negative control did not expose: {what} (saw {})", seen()))
        }
    }

    /// A fact, reported without a verdict.
    pub fn note(&mut self, text: impl Display) {
        self.line(Tag::Note, &text.to_string());
    }

    /// The case could not go on; counts as a failed check. Extra lines of
    /// `detail` (a holder's argv and stderr, the PostgreSQL log) are indented
    /// under the FAIL line.
    pub fn abort(&mut self, detail: impl Display) {
        self.verdict(false, format!("{ABORTED}{detail}"));
    }

    /// Ends the run: `SUMMARY passed=N failed=M`.
    pub fn summary(&mut self) {
        let line = summary_line(self.passed, self.failed);
        self.emit(line);
    }

    /// The current case's block, closed by its own summary line: exactly what
    /// `./run.sh F4` prints for that case, and what its evidence locks.
    pub fn case_text(&self) -> String {
        format!("{}{}", &self.text[self.case_start..], summary_line(self.case_passed, self.case_failed))
    }

    /// Failed checks in the current case.
    pub fn case_failed(&self) -> u32 {
        self.case_failed
    }

    /// Failed checks over the run.
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Checks that held over the run.
    pub fn passed(&self) -> u32 {
        self.passed
    }

    /// Everything printed so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn verdict(&mut self, held: bool, text: String) -> bool {
        if held {
            self.passed += 1;
            self.case_passed += 1;
        } else {
            self.failed += 1;
            self.case_failed += 1;
        }
        if let Some(case) = self.cases.last_mut() {
            (case.passed, case.failed) = (self.case_passed, self.case_failed);
        }
        self.line(if held { Tag::Ok } else { Tag::Fail }, &text);
        held
    }

    fn line(&mut self, tag: Tag, text: &str) {
        if let Some(case) = self.cases.last_mut() {
            case.lines.push(Said { tag, text: text.to_owned() });
        }
        self.emit(line_text(tag, text));
    }

    fn emit(&mut self, text: String) {
        if let Some(sink) = self.sink.as_mut() {
            // A transcript that cannot be shown is not worth stopping a case
            // for (a closed pipe into `head`, say); the text is kept anyway.
            let _ = sink.write_all(text.as_bytes()).and_then(|_| sink.flush());
        }
        self.text.push_str(&text);
    }
}

/// One line as printed: two spaces, the tag, the text; a multi-line text's
/// further lines indented under it.
fn line_text(tag: Tag, text: &str) -> String {
    let mut lines = text.lines();
    let mut out = format!("  {} {}\n", tag.text(), lines.next().unwrap_or(""));
    for more in lines {
        out.push_str(&format!("       | {more}\n"));
    }
    out
}

/// `SUMMARY passed=N failed=M`, with its newline.
pub fn summary_line(passed: u32, failed: u32) -> String {
    format!("SUMMARY passed={passed} failed={failed}\n")
}

/// How an abort's FAIL text begins: the case stopped, no check judged it.
pub const ABORTED: &str = "case aborted: ";

/// A transcript read back, line by line, by whoever judges one (the
/// mutation harness): the written format's one reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `CASE F1 :: title`: the case's id.
    Case(&'a str),
    /// A check, with its text: held (`ok`) or not (`FAIL`).
    Check { held: bool, text: &'a str },
    /// `FAIL case aborted: …`: the case stopped; what stopped it.
    Aborted(&'a str),
    /// `note …`.
    Note(&'a str),
    /// `SUMMARY passed=N failed=M`: the run (or the case) ended whole.
    Summary,
    /// A failure's extra line (`       | …`), or anything else.
    Other(&'a str),
}

impl<'a> Line<'a> {
    /// Reads one line as [`Transcript`] writes it.
    pub fn read(line: &'a str) -> Line<'a> {
        let tagged = |tag: Tag| line.strip_prefix("  ")?.strip_prefix(tag.text())?.strip_prefix(' ');
        if let Some(case) = line.strip_prefix("CASE ") {
            Line::Case(case.split(" :: ").next().unwrap_or(case))
        } else if line.starts_with("SUMMARY passed=") {
            Line::Summary
        } else if let Some(text) = tagged(Tag::Ok) {
            Line::Check { held: true, text }
        } else if let Some(text) = tagged(Tag::Fail) {
            text.strip_prefix(ABORTED).map_or(Line::Check { held: false, text }, Line::Aborted)
        } else if let Some(text) = tagged(Tag::Note) {
            Line::Note(text)
        } else {
            Line::Other(line)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tags are padded to four columns after two spaces, as the article prints them.
    #[test]
    fn lines_have_the_article_layout() {
        let mut t = Transcript::quiet();
        t.case("F1", "正常路径");
        t.check(true, "holder-a 获取租约，token=1", || "");
        t.check_eq_shown("资源端 fence_floor=2", 2, 2);
        t.note("A 恢复后：WRITE accepted=false token=1");
        t.check(false, "broken", || "token=2");
        t.summary();
        assert_eq!(
            t.text(),
            "CASE F1 :: 正常路径\n\
             \x20 ok   holder-a 获取租约，token=1\n\
             \x20 ok   资源端 fence_floor=2 (expected=2, actual=2)\n\
             \x20 note A 恢复后：WRITE accepted=false token=1\n\
             \x20 FAIL broken (saw token=2)\n\
             SUMMARY passed=2 failed=1\n"
        );
    }

    /// `check_eq` stays a plain sentence when it holds and shows both values when it fails.
    #[test]
    fn check_eq_shows_values_only_on_failure() {
        let mut t = Transcript::quiet();
        assert!(t.check_eq("token=1", 1, 1));
        assert!(!t.check_eq("token=1", 1, 2));
        assert!(t.text().ends_with("  ok   token=1\n  FAIL token=1 (expected=1, actual=2)\n"));
    }

    /// A negative control that does not break is a failure, worded as such.
    #[test]
    fn negative_control_must_break() {
        let mut t = Transcript::quiet();
        t.exposes(true, "old wins", || "");
        t.exposes(false, "old wins", || "new wins");
        assert_eq!(t.passed(), 1);
        assert_eq!(t.failed(), 1);
        assert!(t.text().contains("  ok   negative control exposes: old wins\n"));
        assert!(t.text().contains("  FAIL negative control did not expose: old wins (saw new wins)\n"));
    }

    /// A case's own text ends with its own summary, whatever ran before it.
    #[test]
    fn case_text_has_its_own_summary() {
        let mut t = Transcript::quiet();
        t.case("F1", "one");
        t.check(false, "x", || "z");
        t.case("F2", "two");
        t.check(true, "y", || "");
        assert_eq!(t.case_text(), "CASE F2 :: two\n  ok   y\nSUMMARY passed=1 failed=0\n");
        assert_eq!(t.failed(), 1);
    }

    /// Every kind of line a transcript writes reads back as what it is.
    #[test]
    fn lines_read_back() {
        let mut t = Transcript::quiet();
        t.case("F4", "暂停");
        t.check(true, "held", || "");
        t.note("n");
        t.check(false, "broke", || "x");
        t.abort("timeout\nargv: holder");
        t.summary();
        let read: Vec<Line> = t.text().lines().map(Line::read).collect();
        assert_eq!(
            read,
            [
                Line::Case("F4"),
                Line::Check { held: true, text: "held" },
                Line::Note("n"),
                Line::Check { held: false, text: "broke (saw x)" },
                Line::Aborted("timeout"),
                Line::Other("       | argv: holder"),
                Line::Summary,
            ]
        );
    }

    /// Multi-line details stay inside the FAIL line's block.
    #[test]
    fn multi_line_failures_are_indented() {
        let mut t = Transcript::quiet();
        t.abort("holder-a did not answer\nargv: holder --holder holder-a");
        assert_eq!(t.text(), "  FAIL case aborted: holder-a did not answer\n       | argv: holder --holder holder-a\n");
    }
}
