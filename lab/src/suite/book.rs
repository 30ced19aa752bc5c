//! The commands the book tells the reader to type: every line of every
//! ```sh block of every chapter, in reading order, with the exit status the
//! book promises, and the time it promises when it promises one. One parser, used by the book-commands test (which runs
//! them) and by the suite (which gives each chapter a group of its own).

use std::path::Path;
use std::time::Duration;

/// The promise that a command is done within a minute, as a trailing
/// comment: the incident table's commands make it (`# 一分钟内`).
pub const WITHIN_A_MINUTE: &str = "# 一分钟内";

/// One command line of a ```sh block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookCommand {
    /// `book/<chapter>:<line>`, for messages.
    pub at: String,
    /// The line as the reader types it (the promise comment is kept: bash ignores it).
    pub line: String,
    /// The exit status the book promises (`# 退出码 2`: "exit status 2"; 0 unless said).
    pub exit: i32,
    /// How long the book promises it takes at most ([`WITHIN_A_MINUTE`]), if it promises.
    pub within: Option<Duration>,
}

/// The commands of one chapter, in order.
pub fn commands(chapter: &str, text: &str) -> Vec<BookCommand> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            in_sh = !in_sh && matches!(info.trim(), "sh" | "bash" | "console");
            continue;
        }
        if !in_sh || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let exit = trimmed
            .rsplit_once("# 退出码 ")
            .and_then(|(_, promise)| promise.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .unwrap_or(0);
        let within = trimmed.contains(WITHIN_A_MINUTE).then_some(Duration::from_secs(60));
        out.push(BookCommand { at: format!("book/{chapter}:{}", n + 1), line: trimmed.to_owned(), exit, within });
    }
    out
}

/// The chapters in reading order (the order of `book/SUMMARY.md`).
pub fn chapters(book: &Path) -> std::io::Result<Vec<String>> {
    let summary = std::fs::read_to_string(book.join("SUMMARY.md"))?;
    Ok(summary.split(['(', ')']).filter(|s| s.ends_with(".md")).map(str::to_owned).collect())
}

/// Whether a chapter's commands break guards in a scratch copy (`./run.sh
/// try NAME`, `./run.sh mutants`): they need a scratch copy to themselves.
pub fn needs_scratch(commands: &[BookCommand]) -> bool {
    commands.iter().any(|c| {
        let words: Vec<&str> = c.line.split_whitespace().collect();
        matches!(words.as_slice(), ["./run.sh", "mutants", ..]) || matches!(words.as_slice(), ["./run.sh", "try", _, ..])
    })
}

/// Whether every command of a chapter is an exercise run on its own
/// (`./run.sh try NAME`): none depends on another, so the chapter may be
/// cut into slices that run side by side.
pub fn only_exercises(commands: &[BookCommand]) -> bool {
    !commands.is_empty() && commands.iter().all(|c| matches!(c.line.split_whitespace().collect::<Vec<_>>().as_slice(), ["./run.sh", "try", _]))
}

/// Whether a chapter's commands change the project's files (`git apply`):
/// no other chapter may run in the same checkout copy meanwhile.
pub fn edits_files(commands: &[BookCommand]) -> bool {
    commands.iter().any(|c| c.line.starts_with("git apply"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parser takes sh lines only, skips comments, and reads the promised exit status.
    #[test]
    fn commands_and_promises_are_parsed() {
        let text = "x\n```sh\n# a comment\n./run.sh F4\n./run.sh diff F4   # 退出码 1：与证据不同\n./run.sh F5   # 一分钟内\n```\n```rust\nnot a command\n```\n";
        let list = commands("ch.md", text);
        assert_eq!(
            list,
            vec![
                BookCommand { at: "book/ch.md:4".into(), line: "./run.sh F4".into(), exit: 0, within: None },
                BookCommand { at: "book/ch.md:5".into(), line: "./run.sh diff F4   # 退出码 1：与证据不同".into(), exit: 1, within: None },
                BookCommand { at: "book/ch.md:6".into(), line: "./run.sh F5   # 一分钟内".into(), exit: 0, within: Some(Duration::from_secs(60)) },
            ]
        );
    }

    /// A chapter that breaks guards needs a scratch copy; listing them does not.
    #[test]
    fn scratch_and_file_edits_are_recognised() {
        let list = |lines: &str| commands("c.md", &format!("```sh\n{lines}\n```\n"));
        assert!(needs_scratch(&list("./run.sh try fence-accepts-any-token")));
        assert!(needs_scratch(&list("./run.sh mutants renew-ignores-token")));
        assert!(!needs_scratch(&list("./run.sh try\n./run.sh F4")));
        assert!(only_exercises(&list("./run.sh try a\n./run.sh try b")));
        assert!(!only_exercises(&list("./run.sh try a\n./run.sh F4")));
        assert!(!only_exercises(&list("./run.sh try")));
        assert!(edits_files(&list("git apply mutants/x.patch")));
        assert!(!edits_files(&list("git diff evidence/26/output.txt")));
    }
}
