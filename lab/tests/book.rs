//! The book cannot drift from the code.
//!
//! Table of contents:
//! - every `{{#include}}` in `book/` names a file that exists and an anchor
//!   (or line range) that exists and is not empty — mdBook itself includes a
//!   missing anchor as empty text, silently;
//! - every rust/sql/text listing is nothing but includes (no pasted code);
//! - every case's locked transcript appears in the book;
//! - the generated facts the prose includes (`evidence/26/facts/`) are up
//!   to date with the code and the evidence;
//! - every exercise's answer states the FAIL lines of its locked broken run;
//! - every long transcript is preceded by a "看什么" (what to look at);
//! - one paragraph per line, and one vocabulary (the glossary's);
//! - `mdbook build` succeeds with no error or warning line, and the built
//!   book carries the history pages the chapters link to;
//! - in headless Chromium (one browser visiting every page), every diagram
//!   renders as SVG and no page shows a raw `{{#include`.
//!
//! The build test needs the pinned mdbook and mdbook-mermaid in `.tools/bin`
//! (`./run.sh book` or `./run.sh test` installs them).
//!
//! Why this file stays whole: every check of the book's text, sharing one
//! reader of its chapters and includes.

mod common;
// The visual check's DevTools client: one browser visits every page (a
// browser started per page cost about two seconds of processor each, the
// suite's largest single use of Chromium). Only `open` and `eval` are used here.
#[allow(dead_code)]
#[path = "visual/cdp.rs"]
mod cdp;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The book's chapters, as (file name, text).
fn chapters() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fs::read_dir(root().join("book"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), fs::read_to_string(e.path()).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() > 10, "book/ holds only {} chapters", out.len());
    out
}

/// One `{{#include path[:anchor | :from:to]}}`.
struct Include {
    /// The chapter and line it is written on, for messages.
    at: String,
    /// The folder `path` is relative to: `book/`, or the folder of an
    /// included Markdown file whose own includes mdBook expands in turn.
    base: PathBuf,
    /// The file, relative to `base`.
    path: String,
    /// After the first colon, if anything.
    selector: Option<String>,
}

fn includes(chapter: &str, text: &str) -> Vec<Include> {
    includes_in(&format!("book/{chapter}"), &root().join("book"), text)
}

/// The includes of `text`, a file shown as `name` whose includes are relative to `base`.
fn includes_in(name: &str, base: &Path, text: &str) -> Vec<Include> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("{{#include ") {
            let after = &rest[start + "{{#include ".len()..];
            let end = after.find("}}").unwrap_or_else(|| panic!("{name}:{}: unterminated include", n + 1));
            let spec = after[..end].trim();
            let (path, selector) = match spec.split_once(':') {
                Some((p, s)) => (p.to_owned(), Some(s.to_owned())),
                None => (spec.to_owned(), None),
            };
            out.push(Include { at: format!("{name}:{}", n + 1), base: base.to_path_buf(), path, selector });
            rest = &after[end..];
        }
    }
    out
}

/// What an include pulls in, or why it cannot.
fn resolve(inc: &Include) -> Result<String, String> {
    let file = inc.base.join(&inc.path);
    let text = fs::read_to_string(&file).map_err(|e| format!("{}: cannot read {}: {e}", inc.at, inc.path))?;
    let lines: Vec<&str> = text.lines().collect();
    let selected: String = match inc.selector.as_deref() {
        None => text.clone(),
        Some(sel) if sel.chars().next().is_some_and(|c| c.is_ascii_digit()) || sel.starts_with(':') => {
            let mut parts = sel.splitn(2, ':');
            let from: usize = parts.next().unwrap().parse().unwrap_or(1);
            let to: usize = parts.next().filter(|s| !s.is_empty()).map_or(lines.len(), |s| s.parse().unwrap());
            if from == 0 || from > lines.len() || to < from {
                return Err(format!("{}: line range {sel} is outside {} ({} lines)", inc.at, inc.path, lines.len()));
            }
            lines[from - 1..to.min(lines.len())].join("\n")
        }
        Some(anchor) => {
            // As mdBook reads an anchor: `ANCHOR: name` anywhere in a line
            // (after `//`, `--`, inside `<!-- … -->`), the name being the
            // word characters and dashes that follow.
            let is = |l: &str, tag: &str| {
                l.find(tag).is_some_and(|at| {
                    let rest = l[at + tag.len()..].trim_start();
                    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-').collect();
                    name == anchor
                })
            };
            let start = lines.iter().position(|l| is(l, "ANCHOR:"));
            let end = lines.iter().position(|l| is(l, "ANCHOR_END:"));
            match (start, end) {
                (Some(s), Some(e)) if s < e => lines[s + 1..e].join("\n"),
                (None, _) => return Err(format!("{}: anchor `{anchor}` does not exist in {}", inc.at, inc.path)),
                _ => return Err(format!("{}: anchor `{anchor}` in {} has no matching ANCHOR_END after it", inc.at, inc.path)),
            }
        }
    };
    if selected.trim().is_empty() {
        return Err(format!("{}: {}:{} includes nothing", inc.at, inc.path, inc.selector.as_deref().unwrap_or("")));
    }
    Ok(selected)
}

/// Every include names an existing file and a non-empty anchor or range.
#[test]
fn includes_resolve_to_text() {
    let mut problems = Vec::new();
    let mut count = 0;
    for (name, text) in chapters() {
        let mut pending = includes(&name, &text);
        while let Some(inc) = pending.pop() {
            count += 1;
            // An included Markdown file's own includes are expanded too, relative to it.
            if inc.path.ends_with(".md") {
                let file = inc.base.join(&inc.path);
                if let Ok(body) = resolve(&inc) {
                    pending.extend(includes_in(&inc.path, file.parent().unwrap(), &body));
                }
            }
            match resolve(&inc) {
                // A transcript include must start at the case header, not inside insta's metadata.
                Ok(body) if inc.path.ends_with(".snap") && !body.starts_with("CASE ") => {
                    problems.push(format!("{}: {} does not start at the CASE line (insta header not skipped?)", inc.at, inc.path))
                }
                Ok(_) => {}
                Err(e) => problems.push(e),
            }
        }
    }
    assert!(problems.is_empty(), "broken includes:\n{}", problems.join("\n"));
    assert!(count >= 30, "only {count} includes in the whole book");
}

/// rust, sql, text and diff listings hold nothing but include lines.
#[test]
fn listings_are_only_includes() {
    let mut problems = Vec::new();
    for (name, text) in chapters() {
        let mut fence: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                // A fence line opens a block when none is open, and closes it otherwise.
                if fence.take().is_none() {
                    fence = Some((n + 1, info.trim().to_owned()));
                }
                continue;
            }
            if let Some((start, info)) = &fence {
                // An exercise's answer block (```text answer=NAME) holds the
                // FAIL lines it states, compared with the locked run by
                // `answers_match_their_locked_runs`.
                let lang = info.split_whitespace().next().unwrap_or("");
                let listing = matches!(lang, "rust" | "sql" | "text" | "diff" | "" | "console") && answer_name(info).is_none();
                if listing && !line.trim().is_empty() && !line.trim().starts_with("{{#include ") {
                    problems.push(format!("book/{name}:{}: ```{info} block opened at line {start} holds pasted text: {line}", n + 1));
                }
            }
        }
        assert!(fence.is_none(), "book/{name}: a code block is never closed");
    }
    assert!(problems.is_empty(), "listings must come only by include:\n{}", problems.join("\n"));
}

/// Each case's locked transcript, each variant's and each mutant's, is shown somewhere in the book.
#[test]
fn every_case_transcript_is_in_the_book() {
    let all: String = chapters().into_iter().map(|(_, t)| t).collect();
    for id in lab::cases::ALL.iter().map(|c| c.id) {
        assert!(all.contains(&format!("../evidence/26/{id}.snap:4:")), "no chapter includes evidence/26/{id}.snap");
        assert!(all.contains(&format!("./run.sh diff {id}")), "no chapter says how to diff {id}");
    }
    // Every variant the book asks for, and every broken run of the exercises, is shown too.
    for folder in ["variants", "try"] {
        for entry in fs::read_dir(root().join("evidence/26").join(folder)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(all.contains(&format!("../evidence/26/{folder}/{name}:4:")), "no chapter includes evidence/26/{folder}/{name}");
        }
    }
}

/// Line breaks between two CJK characters inside a paragraph, as
/// `book/<file>:<line>`: a browser shows each one as a stray space, so the
/// book keeps one line per paragraph. Code fences, tables, lists, headings,
/// quotes, HTML and includes are not paragraphs.
fn cjk_breaks(name: &str, text: &str) -> Vec<String> {
    let cjk = |c: char| matches!(c, '\u{3000}'..='\u{303f}' | '\u{3400}'..='\u{9fff}' | '\u{ff00}'..='\u{ffef}');
    let plain = |line: &str| {
        let s = line.trim();
        !s.is_empty()
            && !["#", "|", "- ", "* ", "+ ", ">", "<", "{{", "```", "~~~", "!["].iter().any(|p| s.starts_with(p))
            && !s.split_once(". ").is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut fence = false;
    let mut found = Vec::new();
    for i in 0..lines.len().saturating_sub(1) {
        if lines[i].trim_start().starts_with("```") || lines[i].trim_start().starts_with("~~~") {
            fence = !fence;
            continue;
        }
        let (a, b) = (lines[i].trim_end(), lines[i + 1].trim());
        if !fence && plain(a) && plain(b) && a.chars().last().is_some_and(cjk) && b.chars().next().is_some_and(cjk) {
            found.push(format!("{name}:{}", i + 1));
        }
    }
    found
}

/// One line per paragraph: no line break between CJK characters inside a
/// paragraph, in any chapter or in LIMITS.md.
#[test]
fn no_line_break_between_cjk_characters() {
    let mut found = Vec::new();
    for (name, text) in chapters() {
        found.extend(cjk_breaks(&format!("book/{name}"), &text));
    }
    let limits = fs::read_to_string(root().join("evidence/26/LIMITS.md")).unwrap();
    found.extend(cjk_breaks("evidence/26/LIMITS.md", &limits));
    assert!(found.is_empty(), "line breaks between CJK characters inside a paragraph (a browser shows a stray space):\n{}", found.join("\n"));
}

/// The check finds a planted break, and ignores code, lists and a paragraph's end.
#[test]
fn a_planted_cjk_break_is_found() {
    let text = "第一段的前半句，\n后半句。\n\n```text\n代码\n代码\n```\n- 列表\n- 列表\n\n段落。\n";
    assert_eq!(cjk_breaks("x.md", text), vec!["x.md:1".to_owned()]);
}

/// The book's one vocabulary (defined in `book/glossary.md`): a variant
/// the glossary rejects, and the term to use instead.
const VOCABULARY: &[(&str, &str)] = &[
    ("持有进程", "持有者进程"),
    ("transcript", "运行记录"),
    ("令牌", "token"),
    ("围栏", "栅栏"),
    ("篱笆", "栅栏"),
    ("负面对照", "负向对照"),
    ("反向对照", "负向对照"),
    ("阴性对照", "负向对照"),
    ("授予对象", "授予（Grant）"),
    ("授权对象", "授予（Grant）"),
    ("本地期限", "本地截止时间"),
    ("本地过期时间", "本地截止时间"),
    ("安全边际", "安全余量"),
    ("安全裕量", "安全余量"),
    ("续约", "续租"),
    ("作用范围", "作用域"),
    ("分块", "分片"),
    ("地板值", "floor"),
    // The second half's words.
    ("故障注入器", "nemesis"),
    ("捣乱者", "nemesis"),
    ("检验器", "检查器"),
    ("校验器", "检查器"),
    ("判定器", "检查器"),
    ("插槽", "槽位"),
    ("延时代理", "延迟代理"),
    ("世代", "代（incarnation）"),
    ("化身", "代（incarnation）"),
    ("修订号", "revision"),
    ("修订版本", "revision"),
    ("日志序列号", "WAL 位置（LSN）"),
    ("WAL 发送进程", "walsender"),
    ("单语句写法", "一条语句写法"),
    ("共享写法", "共享锁写法"),
    ("劝告锁", "咨询锁"),
    ("建议锁", "咨询锁"),
    ("陈旧快照", "旧快照"),
    ("过期快照", "旧快照"),
    ("一条语句的写法", "一条语句写法"),
    ("事务空闲超时", "空闲事务超时"),
    ("日志字节", "WAL 字节"),
    ("百分位", "中位数（p50）、p90、p99"),
    ("50 分位", "中位数（p50）"),
    ("网络隔离", "网络分区"),
    ("模型验证器", "模型检查器"),
    ("操作日志", "历史"),
    ("执行轨迹", "历史"),
    ("审计记录", "审计行"),
    ("审计表", "`write_attempt` 表"),
    ("审计语句", "写审计行的语句"),
    ("账本", "`write_attempt` 表"),
    ("协议输出", "协议行"),
    ("观察者连接", "观察者会话"),
    ("服务器进程号", "后端进程的 pid"),
    ("客户端检查", "本地截止时间检查"),
    ("任期", "term（持有者的一段叫持有期）"),
    ("长跑", "混沌运行"),
    ("行锁栅栏", "floor 行锁写法"),
    ("换代", "换 token（代是槽位的一个持有者进程）"),
    ("重放 WAL", "经 WAL 恢复"),
    ("墙钟", "墙上时钟"),
    ("栅栏行", "floor 行"),
    ("领导者", "leader"),
    ("前提行", "前提检查"),
];

/// Uses of rejected variants in the prose of `text` (code fences and inline
/// code are not prose), as `<name>:<line>: <variant> → <term>`.
fn vocabulary_slips(name: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        // A line that is one include pulls code or a transcript in; a
        // paragraph that merely starts with one is prose all the same.
        let whole_include = line.trim().starts_with("{{#include") && line.trim().ends_with("}}") && line.trim().matches("{{").count() == 1;
        if fence || whole_include {
            continue;
        }
        // Inline code spans are odd-numbered pieces between backticks.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for (variant, term) in VOCABULARY {
            if prose.to_lowercase().contains(&variant.to_lowercase()) {
                found.push(format!("{name}:{}: {variant} → {term}", n + 1));
            }
        }
    }
    found
}

/// One vocabulary: no chapter (the glossary aside, which names the rejected
/// variants), no LIMITS.md and no transcript label uses a rejected variant.
#[test]
fn one_vocabulary() {
    let mut found = Vec::new();
    for (name, text) in chapters().into_iter().filter(|(name, _)| name != "glossary.md") {
        found.extend(vocabulary_slips(&format!("book/{name}"), &text));
    }
    let limits = fs::read_to_string(root().join("evidence/26/LIMITS.md")).unwrap();
    found.extend(vocabulary_slips("evidence/26/LIMITS.md", &limits));
    let snap = fs::read_to_string(root().join("evidence/26/output.txt")).unwrap();
    found.extend(vocabulary_slips("evidence/26/output.txt", &snap));
    assert!(found.is_empty(), "words the glossary rejects (variant → term to use):\n{}", found.join("\n"));
}

/// A planted variant is found in prose, and not inside code.
#[test]
fn a_planted_vocabulary_slip_is_found() {
    let text = "持有进程会续约。\n`持有进程` 在代码里。\n```text\n续约\n```\n故障注入器的故障由检验器数出。\n";
    assert_eq!(
        vocabulary_slips("x.md", text),
        vec![
            "x.md:1: 持有进程 → 持有者进程".to_owned(),
            "x.md:1: 续约 → 续租".to_owned(),
            "x.md:6: 故障注入器 → nemesis".to_owned(),
            "x.md:6: 检验器 → 检查器".to_owned(),
        ]
    );
}

// The generated facts -------------------------------------------------------

/// Every generated facts file (`evidence/26/facts/`, from which the book
/// includes its counts, case titles and measured figures) is what the code
/// and the evidence give now.
#[test]
fn facts_are_up_to_date() {
    let stale = lab::facts::stale().unwrap();
    assert!(stale.is_empty(), "stale facts: the book would show numbers the code and evidence no longer give (run ./run.sh facts):\n{}", stale.join("\n"));
}

/// A committed facts file holding a planted stale value is named, with the value.
#[test]
fn a_planted_stale_fact_is_named() {
    let files = lab::facts::compute(&lab::facts::Inputs::read().unwrap()).unwrap();
    // A fresh folder of a random name (never one computed from the pid,
    // which another account could have placed first).
    let folder = tempfile::Builder::new().prefix("lab-book-facts-").tempdir().unwrap();
    let dir = folder.path();
    for file in &files {
        fs::write(dir.join(file.name), file.render()).unwrap();
    }
    assert!(lab::facts::differences(&files, dir).is_empty());
    let code = files.iter().find(|f| f.name == "code.md").unwrap();
    let real = &code.facts.iter().find(|f| f.anchor == "mutations").unwrap().text;
    let planted = code.render().replace(&format!("mutations -->\n{real}\n"), "mutations -->\n35\n");
    assert_ne!(planted, code.render());
    fs::write(dir.join("code.md"), planted).unwrap();
    let stale = lab::facts::differences(&files, dir);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(stale[0].contains("facts/code.md is stale") && stale[0].contains("`35`") && stale[0].contains(&format!("`{real}`")), "{}", stale[0]);
}

/// The cost chapter's figures (`evidence/26/bench-scopes-*.svg`) are what
/// `lab/src/bench/chart.rs` draws from the committed `bench.csv`, and no
/// other chart of the bench lies beside them: a figure typed or edited by
/// hand, or left over from an older drawing, is named.
#[test]
fn bench_figures_are_drawn_from_the_csv() {
    let evidence = root().join("evidence/26");
    let table = evidence.join("bench.md");
    let rows = lab::bench::report::rows_from_csv(&fs::read_to_string(table.with_extension("csv")).unwrap()).unwrap();
    let figures = lab::report_files::charts_placed(&table, lab::bench::chart::figures(&rows)).unwrap();
    assert!(figures.len() >= 3, "only {} figures drawn", figures.len());
    let mut problems = Vec::new();
    for (path, drawn) in &figures {
        if fs::read_to_string(path).ok().as_ref() != Some(drawn) {
            problems.push(format!("{} is not what bench.csv draws (run ./run.sh bench --redraw)", path.display()));
        }
    }
    for entry in fs::read_dir(&evidence).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let chart = name.starts_with("bench-") && (name.ends_with(".svg") || name.ends_with(".mmd"));
        if chart && !figures.iter().any(|(p, _)| p == &entry.path()) {
            problems.push(format!("evidence/26/{name} is no figure the bench draws now: remove it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// Exercise answers ----------------------------------------------------------

/// The mutation an answer block answers: its info string is `text answer=NAME`.
fn answer_name(info: &str) -> Option<&str> {
    let mut words = info.split_whitespace();
    if words.next() != Some("text") {
        return None;
    }
    words.find_map(|w| w.strip_prefix("answer="))
}

/// An exercise's stated answer: the FAIL lines it says the broken run prints.
struct Answer {
    /// `book/<page>:<line>` of the block's opening fence.
    at: String,
    /// The mutation, `mutants/<name>.patch`.
    name: String,
    /// The block's lines, trimmed.
    lines: Vec<String>,
}

/// The answer blocks of a page.
fn answers(page: &str, text: &str) -> Vec<Answer> {
    let lines: Vec<&str> = text.lines().collect();
    blocks(text)
        .into_iter()
        .filter_map(|(start, end, info)| {
            let name = answer_name(&info)?.to_owned();
            let body = lines[start + 1..end].iter().map(|l| l.trim()).filter(|l| !l.is_empty()).map(str::to_owned).collect();
            Some(Answer { at: format!("{page}:{}", start + 1), name, lines: body })
        })
        .collect()
}

/// The FAIL lines of a transcript (a check that failed, or an abort), as the
/// transcript's one reader tells them, trimmed.
fn fail_lines(transcript: &str) -> Vec<&str> {
    use lab::transcript::Line;
    transcript.lines().filter(|l| matches!(Line::read(l), Line::Check { held: false, .. } | Line::Aborted(_))).map(str::trim).collect()
}

/// A FAIL line without its ` (expected=…)` or ` (saw …)` tail.
fn label(line: &str) -> &str {
    [" (expected=", " (saw "].iter().filter_map(|tail| line.find(tail)).min().map_or(line, |at| &line[..at])
}

/// Where an answer disagrees with its locked broken run. The rule: the
/// answer lists the run's FAIL lines, all of them and in their order, each
/// either whole or cut anywhere after its label (the text before ` (expected=`
/// or ` (saw `), so that an answer may leave out values it does not discuss
/// but never states a line the run did not print.
fn answer_problems(answer: &Answer, transcript: &str) -> Vec<String> {
    let fails = fail_lines(transcript);
    let mut problems = Vec::new();
    for (i, line) in answer.lines.iter().enumerate() {
        match fails.get(i) {
            Some(fail) if fail.starts_with(line.as_str()) && line.len() >= label(fail).len() => {}
            Some(fail) => problems.push(format!("{}: answer line {} is `{line}`, but FAIL line {} of the locked run is `{fail}`", answer.at, i + 1, i + 1)),
            None => problems.push(format!("{}: answer line {} `{line}` is not a FAIL line of the locked run (it has {} FAIL lines)", answer.at, i + 1, fails.len())),
        }
    }
    for fail in fails.iter().skip(answer.lines.len()) {
        problems.push(format!("{}: the answer leaves out the locked run's `{fail}`", answer.at));
    }
    problems
}

/// Every exercise's answer states the FAIL lines of its locked broken run
/// (`evidence/26/try/<name>.snap`), by the rule of `answer_problems`; every
/// mutation has one answer, and every 答案 on a page holds one.
#[test]
fn answers_match_their_locked_runs() {
    let mut problems = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (page, text) in chapters().into_iter().filter(|(p, _)| p.starts_with("try-")) {
        let found = answers(&format!("book/{page}"), &text);
        let summaries = text.matches("<summary>答案</summary>").count();
        if summaries != found.len() {
            problems.push(format!("book/{page}: {summaries} answers (<summary>答案</summary>), but {} answer blocks (```text answer=NAME)", found.len()));
        }
        for answer in found {
            let Some(mutation) = lab::mutants::find(&answer.name) else {
                problems.push(format!("{}: answer=`{}` names no mutation", answer.at, answer.name));
                continue;
            };
            let snap = fs::read_to_string(root().join("evidence/26/try").join(format!("{}.snap", mutation.name))).unwrap();
            problems.extend(answer_problems(&answer, lab::evidence::snapshot_body(&snap).unwrap()));
            if !text.contains(&format!("../evidence/26/try/{}.snap:4:", mutation.name)) {
                problems.push(format!("{}: the page does not show the locked run of {}", answer.at, mutation.name));
            }
            seen.push(answer.name);
        }
    }
    for m in lab::mutants::MUTATIONS {
        match seen.iter().filter(|n| *n == m.name).count() {
            1 => {}
            0 => problems.push(format!("no exercise page answers {} with a ```text answer={} block", m.name, m.name)),
            n => problems.push(format!("{} is answered {n} times", m.name)),
        }
    }
    assert!(problems.is_empty(), "exercise answers that disagree with their locked broken runs:\n{}", problems.join("\n"));
}

/// A planted answer that contradicts its locked run is caught: a line the
/// run did not print, a value it did not read, a FAIL line left out.
#[test]
fn a_planted_wrong_answer_is_caught() {
    let run = "CASE F6 :: x\n  ok   a\n  FAIL B 等锁：wait_event_type = Lock (expected=Lock, actual=Client)\n  FAIL 顺序 B→A：被拒 (saw none)\nSUMMARY passed=1 failed=2\n";
    let page = |body: &str| format!("<summary>答案</summary>\n\n```text answer=fence-commits-before-write\n{body}\n```\n");
    let check = |body: &str| answers("x.md", &page(body)).iter().flat_map(|a| answer_problems(a, run)).collect::<Vec<_>>();
    // Right: whole lines, or cut after the label.
    assert!(check("FAIL B 等锁：wait_event_type = Lock (expected=Lock, actual=Client)\nFAIL 顺序 B→A：被拒").is_empty());
    // A value the run did not read.
    assert_eq!(check("FAIL B 等锁：wait_event_type = Lock (expected=Lock, actual=Lock)\nFAIL 顺序 B→A：被拒").len(), 1);
    // A line the run did not print (an ok line stated as failing).
    assert_eq!(check("FAIL a\nFAIL B 等锁：wait_event_type = Lock\nFAIL 顺序 B→A：被拒").len(), 3);
    // A FAIL line left out, or cut inside its label.
    assert_eq!(check("FAIL B 等锁：wait_event_type = Lock"), vec!["x.md:3: the answer leaves out the locked run's `FAIL 顺序 B→A：被拒 (saw none)`".to_owned()]);
    assert_eq!(check("FAIL B 等锁\nFAIL 顺序 B→A：被拒").len(), 1);
}

// What to look at -----------------------------------------------------------

/// A transcript longer than this many lines needs a "看什么" before it.
const LONG_TRANSCRIPT: usize = 15;

/// The fenced blocks of a page: (opening line, closing line, info), 0-based.
fn blocks(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match open.take() {
                None => open = Some((n, info.trim().to_owned())),
                Some((start, info)) => out.push((start, n, info)),
            }
        }
    }
    out
}

/// Transcript blocks (```text) longer than `LONG_TRANSCRIPT` lines that
/// nothing tells the reader how to read: walking back from the block, a
/// line holding "看什么" or an answer block must come before a heading,
/// another kind of block or the top of the page. A run of transcripts
/// shares the guide before its first one. `lines_of` counts what a line of
/// the block shows (an include, all its lines).
fn unguided_transcripts(page: &str, text: &str, lines_of: impl Fn(&str) -> usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let all = blocks(text);
    let mut found = Vec::new();
    for (i, (start, end, info)) in all.iter().enumerate() {
        if info != "text" {
            continue;
        }
        let shown: usize = lines[start + 1..*end].iter().filter(|l| !l.trim().is_empty()).map(|l| lines_of(l)).sum();
        if shown <= LONG_TRANSCRIPT {
            continue;
        }
        let mut at = *start;
        let mut earlier = all[..i].iter().rev().peekable();
        let guided = loop {
            if at == 0 {
                break false;
            }
            at -= 1;
            if let Some((b_start, b_end, b_info)) = earlier.peek() {
                if *b_end == at {
                    if answer_name(b_info).is_some() {
                        break true;
                    }
                    if b_info != "text" {
                        break false;
                    }
                    at = *b_start;
                    earlier.next();
                    continue;
                }
            }
            if lines[at].contains("看什么") {
                break true;
            }
            if lines[at].starts_with('#') {
                break false;
            }
        };
        if !guided {
            found.push(format!("{page}:{}: a {shown}-line transcript with no 看什么 before it", start + 1));
        }
    }
    found
}

/// Every transcript longer than `LONG_TRANSCRIPT` lines is preceded by a
/// short "看什么" (what to look at), so the reader knows which lines matter
/// before reading forty of them.
#[test]
fn long_transcripts_say_what_to_look_at() {
    let mut found = Vec::new();
    for (name, text) in chapters() {
        let lines_of = |line: &str| match includes(&name, line).first() {
            Some(inc) => resolve(inc).map_or(1, |body| body.lines().count()),
            None => 1,
        };
        found.extend(unguided_transcripts(&format!("book/{name}"), &text, lines_of));
    }
    assert!(found.is_empty(), "long transcripts without a 看什么 before them:\n{}", found.join("\n"));
}

/// The check finds a long transcript with no guide, and accepts one after a
/// 看什么, after an answer block, or second in a run of transcripts.
#[test]
fn a_planted_unguided_transcript_is_found() {
    let lines_of = |line: &str| if line.contains("long") { 40 } else { 1 };
    let text = "# 章\n\n先预测。\n\n```text\nlong\n```\n\n**看什么**：第三行。\n\n```text\nlong\n```\n\n`F4 --mode x`：\n\n```text\nlong\n```\n\n```sh\n./run.sh F4\n```\n\n```text\nlong\n```\n\n```text answer=x\nFAIL y\n```\n\n```text\nlong\n```\n\n```text\nshort\n```\n";
    assert_eq!(unguided_transcripts("x.md", text, lines_of), vec!["x.md:5: a 40-line transcript with no 看什么 before it".to_owned(), "x.md:25: a 40-line transcript with no 看什么 before it".to_owned()]);
}

/// Writes straight to the process's stderr, which the test harness does not
/// capture: a check that did not run must be seen.
fn loudly(text: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** {text}\n");
}

/// mdbook builds the book without an error or warning; then headless
/// Chromium shows both diagrams as SVG.
#[test]
fn book_builds_and_renders() {
    let root = root();
    let tools = root.join(".tools/bin");
    let mdbook = tools.join("mdbook");
    assert!(mdbook.is_file() && tools.join("mdbook-mermaid").is_file(), "mdbook is not installed in .tools/bin: run ./run.sh book (it installs the pinned versions)");
    assert!(root.join("target/mermaid/mermaid.min.js").is_file(), "target/mermaid/ is missing: run ./run.sh book");
    let out_dir = root.join("target/book-test");
    let _ = fs::remove_dir_all(&out_dir);
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&mdbook).arg("build").arg("-d").arg(&out_dir).current_dir(&root).env("PATH", path).output().unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mdbook build failed:\n{log}");
    // The one known harmless notice: mdbook-mermaid 0.17.1 was built against mdbook 0.5.0.
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            (l.contains("warn") || l.contains("error")) && !l.contains("mdbook-mermaid preprocessor was built against version")
        })
        .collect();
    assert!(bad.is_empty(), "mdbook build printed warnings or errors:\n{}", bad.join("\n"));

    // The history pages the chapters link to come with the book: `book/history`
    // leads to evidence/26/history/, and mdBook copies what it finds there.
    let histories: Vec<_> = fs::read_dir(root.join("evidence/26/history")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!histories.is_empty(), "evidence/26/history/ is empty");
    for name in &histories {
        assert!(out_dir.join("history").join(name).is_file(), "the built book has no history/{}", name.to_string_lossy());
    }
    for page in fs::read_dir(&out_dir).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "html")) {
        let html = fs::read_to_string(page.path()).unwrap();
        assert!(!html.contains("{{#include"), "{} shows a raw {{{{#include", page.path().display());
    }

    let Some(chromium) = common::chromium_for("the rendered-diagram check (c)") else { return };
    // Every page, as a reader's browser shows it after its scripts ran.
    let mut browser = cdp::Browser::launch(&chromium, 1280, 900, &[]);
    let mut problems = Vec::new();
    let mut diagrams = 0;
    for (name, text) in chapters() {
        let Some(stem) = name.strip_suffix(".md").filter(|s| *s != "SUMMARY") else { continue };
        let page = if stem == "preface" { "index.html".to_owned() } else { format!("{stem}.html") };
        let dom = drawn_dom(&mut browser, &out_dir.join(&page));
        let expected = text.lines().filter(|l| l.trim_start().starts_with("```mermaid")).count();
        let drawn = dom.matches("aria-roledescription=\"").count() - dom.matches("aria-roledescription=\"error\"").count();
        diagrams += drawn;
        if drawn != expected {
            problems.push(format!("{page}: {expected} mermaid diagram(s) in book/{name}, {drawn} drawn as SVG"));
        }
        if dom.contains("aria-roledescription=\"error\"") || dom.contains("Syntax error in text") {
            problems.push(format!("{page}: mermaid rendered a syntax error"));
        }
        if dom.contains("{{#include") {
            problems.push(format!("{page}: a raw {{{{#include}}}} is shown"));
        }
        for gap in stray_cjk_spaces(&dom) {
            problems.push(format!("{page}: a paragraph shows a space between CJK characters: …{gap}…"));
        }
    }
    assert!(problems.is_empty(), "rendered pages:\n{}", problems.join("\n"));
    for (page, kind) in [("05-state-machine.html", "stateDiagram"), ("07-lease-not-enough.html", "sequence")] {
        let dom = drawn_dom(&mut browser, &out_dir.join(page));
        assert!(dom.contains(&format!("aria-roledescription=\"{kind}\"")), "{page}: no rendered {kind} diagram");
    }
    loudly(&format!("RAN: headless Chromium ({}) rendered every page: {diagrams} diagrams drawn, no raw include, no stray CJK space", chromium.display()));
}

/// Text of the rendered paragraphs (`<p>…</p>`, tags removed) where a space
/// stands between two CJK characters: a line break in the Markdown that the
/// browser turned into a space.
fn stray_cjk_spaces(dom: &str) -> Vec<String> {
    let cjk = |c: char| matches!(c, '\u{3400}'..='\u{9fff}' | '\u{3000}'..='\u{303f}' | '\u{ff00}'..='\u{ffef}');
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(start) = rest.find("<p>") {
        let Some(len) = rest[start..].find("</p>") else { break };
        let inner = &rest[start + 3..start + len];
        rest = &rest[start + len..];
        let mut text = String::new();
        let mut in_tag = false;
        for c in inner.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        let chars: Vec<char> = text.chars().collect();
        for i in 1..chars.len().saturating_sub(1) {
            if chars[i].is_whitespace() && cjk(chars[i - 1]) && cjk(chars[i + 1]) {
                found.push(chars[i.saturating_sub(8)..(i + 8).min(chars.len())].iter().collect());
            }
        }
    }
    found
}

/// The rendered-page check finds a planted stray space, and only between CJK characters.
#[test]
fn a_planted_stray_space_is_found() {
    assert_eq!(stray_cjk_spaces("<p>租约<code>x</code>过期 之后</p><p>an English sentence</p>").len(), 1);
    assert!(stray_cjk_spaces("<p>用 <code>psql</code> 查看</p>").is_empty());
}

/// Waits until mermaid has drawn each diagram (it marks every source block
/// it replaced `data-processed`), or 20 s: an undrawn diagram is then
/// counted as such, never waited for. (visual/page.js waits the same way
/// before it judges a page.)
const DRAWN_DOM: &str = r#"(async () => {
  const deadline = Date.now() + 20000;
  while (document.querySelector("pre.mermaid:not([data-processed])") && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
})()"#;

/// The page's DOM after its scripts ran, as the browser holds it (see DRAWN_DOM).
fn drawn_dom(browser: &mut cdp::Browser, page: &Path) -> String {
    browser.open(&format!("file://{}", page.display()));
    browser.eval(DRAWN_DOM);
    browser.html()
}

/// A fact's text, by anchor, among the facts the code computes now (never
/// read back from the Markdown they are written to).
fn fact(files: &[lab::facts::FactFile], anchor: &str) -> String {
    files.iter().flat_map(|f| &f.facts).find(|f| f.anchor == anchor).unwrap_or_else(|| panic!("no fact {anchor}")).text.clone()
}

/// A list of cases as the README writes it: `F15、F17、F18、F19` as
/// `F15, F17–F19` (consecutive cases as a range).
fn english_case_list(listed: &str) -> String {
    let numbers: Vec<u32> = listed.split('、').map(|id| id.trim_start_matches('F').parse().unwrap()).collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        parts.push(if j >= i + 2 { format!("F{}–F{}", numbers[i], numbers[j]) } else { (i..=j).map(|k| format!("F{}", numbers[k])).collect::<Vec<_>>().join(", ") });
        i = j + 1;
    }
    parts.join(", ")
}

/// The README's lists of cases (which need etcd, the network hosts,
/// libfaketime; the whole range) that no include can keep in step: where
/// each is stated, in the words a test can find.
fn readme_case_lists() -> Vec<String> {
    let files = lab::facts::compute(&lab::facts::Inputs::read().unwrap()).unwrap();
    let fact = |anchor: &str| fact(&files, anchor);
    vec![
        format!("For {}:", english_case_list(&fact("faketime-cases"))),
        format!("For {} and the etcd backend", english_case_list(&fact("etcd-cases"))),
        format!("For {} and `./run.sh chaos`", english_case_list(&fact("hosts-cases"))),
        format!("run {},", fact("case-range")),
    ]
}

/// The README names the cases the case table says, where it lists them.
#[test]
fn readme_case_lists_follow_the_case_table() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let missing: Vec<String> = readme_case_lists().into_iter().filter(|phrase| !readme.contains(phrase.as_str())).collect();
    assert!(missing.is_empty(), "README.md does not say what the case table says (facts/code.md): missing {missing:?}");
}

/// A case added to the table shows in the check: the lists are computed.
#[test]
fn a_case_list_is_written_as_the_readme_writes_it() {
    assert_eq!(english_case_list("F15、F17、F18、F19"), "F15, F17–F19");
    assert_eq!(english_case_list("F16、F19"), "F16, F19");
    assert_eq!(english_case_list("F13"), "F13");
    assert_eq!(english_case_list("F1、F2、F3、F5"), "F1–F3, F5");
}

/// A command that runs a case in every mode (`for m in …; do ./run.sh F4
/// --mode "$m"; done`) names exactly the modes the code has: a new mode
/// would otherwise be left out of the loop while the count beside it,
/// a fact, moves on.
#[test]
fn a_loop_over_the_modes_names_every_mode() {
    let every: std::collections::BTreeSet<String> = lab::vocabulary::FenceMode::ALL.iter().map(|m| m.cli_name().to_string()).collect();
    let mut loops = 0;
    for (name, text) in chapters() {
        for line in text.lines().filter(|l| l.trim_start().starts_with("for m in ") && l.contains("--mode")) {
            loops += 1;
            let listed: std::collections::BTreeSet<String> = line.trim_start()["for m in ".len()..].split(';').next().unwrap().split_whitespace().map(str::to_owned).collect();
            assert_eq!(listed, every, "book/{name}: the loop `{line}` does not name every mode");
        }
    }
    assert!(loops > 0, "no loop over the modes found: nothing was checked");
}
