//! The evidence runs' histories (`evidence/26/history/`): their JSON lines
//! reproduce the verdicts the book shows, and their pages, as headless
//! Chromium draws them, show what the lines hold and nothing else.
//!
//! Table of contents:
//! - the JSON lines alone reproduce `evidence/26/chaos.json`'s counts, mode
//!   by mode (the checker run on the parsed lines), and `chaos.md` is what
//!   that data draws;
//! - every page the book links to exists, beside its lines, and the book
//!   reaches them (`book/history` is the evidence's folder);
//! - in Chromium, each page draws every operation and every fault of its
//!   lines; each filter of a finding (`#only=stale`, …) shows exactly the
//!   operations the checker found; nothing leaves the page (a proxy that
//!   refuses everything, and the requests the page made as the DevTools
//!   protocol reports them); each page is under 2 MB;
//! - each of those checks fails on a page planted to break it: an
//!   operation or a fault not drawn, a filter that shows everything, an
//!   image or a fetch from the network, a page too big, a page with nothing
//!   in it.

mod common;
// The visual check's DevTools client: one browser per test opens every
// page (a browser started per page and per filter cost about two seconds
// of processor each, most of this test's time).
#[allow(dead_code)]
#[path = "visual/cdp.rs"]
mod cdp;

use lab::chaos::checker::{check, findings, CheckerInput};
use lab::chaos::results::ChaosData;
use lab::result_data::ResultData;
use lab::history::{Record, Target};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use lab::history::page::MAX_BYTES;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn history_dir() -> PathBuf {
    root().join("evidence/26/history")
}

/// Every evidence page, with its lines.
fn evidence_pages() -> Vec<(PathBuf, Record)> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(history_dir())
        .expect("evidence/26/history/ is missing")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 5, "evidence/26/history/ holds only {} pages", pages.len());
    pages.into_iter().map(|p| (p.clone(), record(&p.with_extension("jsonl")))).collect()
}

fn record(jsonl: &Path) -> Record {
    let text = std::fs::read_to_string(jsonl).unwrap_or_else(|e| panic!("{}: {e}", jsonl.display()));
    Record::from_jsonl(&text).unwrap_or_else(|e| panic!("{}: {e}", jsonl.display()))
}

/// The chaos run's data, which its table is drawn from.
fn chaos_data() -> ChaosData {
    ChaosData::read(&root().join("evidence/26/chaos.json")).unwrap_or_else(|e| panic!("{}", lab::error::chain(e.as_ref())))
}

/// The checker, run on each mode's JSON lines alone, finds what the run's
/// data says, count for count: the verdict is reproducible from the file.
#[test]
fn json_lines_reproduce_the_chaos_run() {
    let data = chaos_data();
    assert!(data.modes.len() >= 5, "{:?}", data.modes.iter().map(|m| m.mode).collect::<Vec<_>>());
    for mode in &data.modes {
        let v = check(&CheckerInput::from_record(&record(&history_dir().join(format!("{}.jsonl", mode.history)))).unwrap());
        assert_eq!(v, mode.verdict, "{}.jsonl: the checker finds other counts than evidence/26/chaos.json", mode.history);
        assert_eq!(v.faults.values().sum::<usize>(), mode.fates.injected, "{}: faults injected", mode.history);
    }
}

/// The book's chaos table is what its data draws, line for line.
#[test]
fn the_chaos_table_is_drawn_from_its_data() {
    let table = std::fs::read_to_string(root().join("evidence/26/chaos.md")).unwrap();
    assert_eq!(table, lab::chaos::report::markdown(&chaos_data()), "evidence/26/chaos.md is not what evidence/26/chaos.json draws");
}

/// A changed line changes the count: the reproduction above is not a
/// comparison that cannot fail.
#[test]
fn a_planted_line_changes_the_verdict() {
    let data = chaos_data();
    let name = &data.modes.iter().find(|m| m.mode == lab::vocabulary::FenceMode::Unfenced).expect("an unfenced run").history;
    let text = std::fs::read_to_string(history_dir().join(format!("{name}.jsonl"))).unwrap();
    let before = check(&CheckerInput::from_record(&Record::from_jsonl(&text).unwrap()).unwrap());
    assert!(before.stale_accepted > 0);
    // Every write refused: nothing is stale any more.
    let planted = text.replace("\"accepted\":true", "\"accepted\":false");
    let after = check(&CheckerInput::from_record(&Record::from_jsonl(&planted).unwrap()).unwrap());
    assert_eq!(after.stale_accepted, 0);
}

/// Every page a chapter or the chaos table links to is in the evidence
/// with its lines, and the book's `history/` is the evidence's folder, so
/// mdBook copies them into the built book (the book test checks it there).
#[test]
fn the_books_links_lead_to_evidence_pages() {
    let link = std::fs::canonicalize(root().join("book/history")).expect("book/history is missing");
    assert_eq!(link, std::fs::canonicalize(history_dir()).unwrap(), "book/history must lead to evidence/26/history");
    let mut linked = BTreeSet::new();
    let sources = std::fs::read_dir(root().join("book")).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md"));
    let facts = std::fs::read_dir(root().join("evidence/26/facts")).unwrap().flatten().map(|e| e.path());
    for file in sources.chain(facts).chain([root().join("evidence/26/chaos.md")]) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("](history/") {
            let target = text[at + 2..].split([')', '#']).next().unwrap().to_owned();
            linked.insert((file.file_name().unwrap().to_string_lossy().into_owned(), target));
        }
    }
    assert!(linked.len() >= 5, "only {} links to history pages", linked.len());
    for (file, target) in &linked {
        let page = root().join("book").join(target);
        assert!(page.is_file(), "{file} links to {target}, which is not in evidence/26/history/");
        assert!(page.with_extension("jsonl").is_file(), "{target} has no JSON lines beside it");
    }
}

// ---------------------------------------------------------------- Chromium

/// Headless Chromium, or `None` (loudly; a failure under CI).
fn chromium(what: &str) -> Option<PathBuf> {
    common::chromium_for(&format!("the history pages' check ({what})"))
}

/// What Chromium made of a page: its DOM after the script ran, and the
/// network requests the page itself asked for.
struct Seen {
    dom: String,
    requests: Vec<String>,
}

/// Chromium's flags for the history pages: a proxy on port 9 (discard) on
/// loopback, where nothing listens, so every connection through it is
/// refused, loopback included: nothing can leave even if a page asks.
const NO_NETWORK: [&str; 2] = ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"];

/// One headless Chromium for a test's pages, reporting their requests.
fn browser(chromium: &Path) -> cdp::Browser {
    let mut browser = cdp::Browser::launch_with(chromium, 1280, 900, &[], &NO_NETWORK);
    browser.call("Network.enable", serde_json::json!({}));
    browser
}

/// Opens `page` (with `fragment`) in `browser` as a fresh document: the
/// page reads its fragment when it loads (a change of fragment alone would
/// load nothing), and its script runs to its end before the load event.
fn open(browser: &mut cdp::Browser, page: &Path, fragment: &str) -> Seen {
    browser.open("about:blank");
    browser.open(&format!("file://{}{fragment}", page.display()));
    let dom = browser.html();
    Seen { dom, requests: page_requests(&browser.take_events("Network.requestWillBeSent")) }
}

/// The URLs of the requests a page made, from the protocol's
/// `Network.requestWillBeSent` events (the page's own: the browser's
/// requests are not the page's session's). A file, `data:`, `blob:` or
/// `about:` address never leaves the machine.
fn page_requests(events: &[serde_json::Value]) -> Vec<String> {
    let mut urls = BTreeSet::new();
    for event in events {
        let url = event["params"]["request"]["url"].as_str().unwrap_or_else(|| panic!("a request event with no URL: {event}"));
        let local = ["file:", "data:", "blob:", "about:"].iter().any(|s| url.starts_with(s));
        if !local {
            urls.insert(url.to_owned());
        }
    }
    urls.into_iter().collect()
}

/// The values of `data-<attr>` on the elements the DOM shows: neither the
/// element nor one of its ancestors has `display="none"`.
fn shown(dom: &str, attr: &str) -> Vec<String> {
    const VOID: [&str; 8] = ["meta", "input", "br", "img", "link", "hr", "source", "wbr"];
    let key = format!(" data-{attr}=\"");
    let mut hidden_depths: Vec<bool> = Vec::new();
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(lt) = rest.find('<') {
        rest = &rest[lt + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        if tag.starts_with('/') {
            hidden_depths.pop();
        } else if !tag.starts_with('!') {
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            let hidden = tag.contains(" display=\"none\"") || hidden_depths.last().copied().unwrap_or(false);
            if let Some(at) = tag.find(&key) {
                if !hidden {
                    found.push(tag[at + key.len()..].split('"').next().unwrap().to_owned());
                }
            }
            if name == "script" || name == "style" {
                // Their text is not markup: skip to their end.
                let close = format!("</{name}>");
                rest = rest.find(&close).map_or("", |at| &rest[at + close.len()..]);
                continue;
            }
            if !VOID.contains(&name.as_str()) && !tag.ends_with('/') {
                hidden_depths.push(hidden);
            }
        }
        rest = &rest[end.min(rest.len())..];
    }
    found
}

/// The addresses a page's markup points at that are not the page's own: a
/// `src`, `href` or `action` that names a scheme or another host, or a
/// CSS `url(`/`@import` that does.
fn foreign_addresses(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attr in ["src=\"", "href=\"", "action=\"", "url(", "@import"] {
        for (at, _) in html.match_indices(attr) {
            let value: String = html[at + attr.len()..].chars().take_while(|c| !matches!(c, '"' | ')' | ';' | ' ')).collect();
            let value = value.trim_matches(|c| c == '\'' || c == '"');
            if value.contains("://") || value.starts_with("//") {
                found.push(format!("{attr}{value}"));
            }
        }
    }
    found
}

/// The operations each finding kind marks, from the lines alone: the
/// writes whose attempt a finding is about, the granted acquires of a
/// token reused.
fn expected_marks(record: &Record) -> Vec<(&'static str, BTreeSet<String>)> {
    let found = findings(&CheckerInput::from_record(record).unwrap());
    lab::history::FindingKind::ALL
        .iter()
        .map(|&kind| {
            let ids = record
                .ops
                .iter()
                .filter(|op| {
                    found.iter().filter(|f| f.kind == kind).any(|f| match f.on {
                        Target::Attempt(id) => op.attempt.as_ref().is_some_and(|a| a.id == id),
                        Target::Token(t) => op.f == lab::vocabulary::Operation::Acquire && op.outcome == lab::vocabulary::Outcome::Ok && op.token == Some(t),
                    })
                })
                .map(|op| op.id.to_string())
                .collect();
            (kind.name(), ids)
        })
        .collect()
}

/// What is wrong with `page` as Chromium shows it, against `record`.
fn problems(browser: &mut cdp::Browser, page: &Path, record: &Record) -> Vec<String> {
    let name = page.file_name().unwrap().to_string_lossy().into_owned();
    let mut problems = Vec::new();
    let size = std::fs::metadata(page).unwrap().len();
    if size >= MAX_BYTES {
        problems.push(format!("{name}: {size} bytes, over 2 MB"));
    }
    let html = std::fs::read_to_string(page).unwrap();
    for address in foreign_addresses(&html) {
        problems.push(format!("{name}: its markup points off the page: {address}"));
    }
    if record.ops.is_empty() {
        problems.push(format!("{name}: its lines hold no operation: a page of nothing proves nothing"));
    }
    // The whole run (`#from=0`): a page opened with no window opens on its
    // story, where lanes without an operation there are hidden.
    let seen = open(browser, page, "#from=0");
    for url in &seen.requests {
        problems.push(format!("{name}: the page asked the network for {url}"));
    }
    let ops: Vec<String> = shown(&seen.dom, "op");
    let want_ops: BTreeSet<String> = record.ops.iter().map(|o| o.id.to_string()).collect();
    if ops.len() != want_ops.len() || ops.iter().cloned().collect::<BTreeSet<_>>() != want_ops {
        problems.push(format!("{name}: {} operations in the lines, {} drawn and shown", want_ops.len(), ops.len()));
    }
    let faults: BTreeSet<String> = shown(&seen.dom, "fault").into_iter().collect();
    let want_faults: BTreeSet<String> = record.faults.iter().map(|f| f.id.to_string()).collect();
    if faults != want_faults {
        problems.push(format!("{name}: {} faults in the lines, {} drawn and shown", want_faults.len(), faults.len()));
    }
    for (kind, want) in expected_marks(record) {
        if want.is_empty() {
            continue;
        }
        let filtered: BTreeSet<String> = shown(&open(browser, page, &format!("#only={kind}&from=0")).dom, "op").into_iter().collect();
        if filtered != want {
            problems.push(format!("{name}#only={kind}: shows {} operations, the checker found {}", filtered.len(), want.len()));
        }
        // Opened with no window, the page shows its story: every finding.
        let first: BTreeSet<String> = shown(&open(browser, page, "").dom, "op").into_iter().collect();
        if !want.is_subset(&first) {
            problems.push(format!("{name}: opened with no window, it hides {} of the {} operations the checker found ({kind})", want.difference(&first).count(), want.len()));
        }
    }
    problems
}

/// Every evidence page as headless Chromium draws it: every operation and
/// fault of its lines, each finding's filter showing exactly those,
/// nothing fetched, under 2 MB. At least one page has stale writes to find.
#[test]
fn evidence_pages_draw_their_lines_and_nothing_else() {
    let pages = evidence_pages();
    let stale: usize = pages.iter().map(|(_, r)| expected_marks(r)[0].1.len()).sum();
    assert!(stale > 0, "no evidence page has a stale write to find");
    let Some(chromium) = chromium("evidence pages") else { return };
    let mut browser = browser(&chromium);
    let mut all = Vec::new();
    for (page, record) in &pages {
        all.extend(problems(&mut browser, page, record));
    }
    assert!(all.is_empty(), "the history pages:\n{}", all.join("\n"));
    let _ = writeln!(std::io::stderr(), "\n*** RAN: headless Chromium drew {} history pages; {stale} stale writes found by their filter\n", pages.len());
}

/// A page with stale writes, copied into a scratch folder with one change.
fn planted(edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf, Record) {
    let (page, record) = evidence_pages().into_iter().find(|(_, r)| !expected_marks(r)[0].1.is_empty()).expect("a page with stale writes");
    let dir = tempfile::Builder::new().prefix("lab-history-planted-").tempdir().unwrap();
    let copy = dir.path().join(page.file_name().unwrap());
    std::fs::write(&copy, edit(&std::fs::read_to_string(&page).unwrap())).unwrap();
    (dir, copy, record)
}

/// Each check fails on a page planted to break it, and names what broke.
#[test]
fn planted_pages_are_caught() {
    let Some(chromium) = chromium("planted pages") else { return };
    let mut browser = browser(&chromium);
    // The page without the `<rect …>…</rect>` around the first `mark`, as often as it appears.
    fn without(html: &str, mark: &str, times: usize) -> String {
        let mut out = html.to_owned();
        for _ in 0..times {
            let Some(at) = out.find(mark) else { break };
            let start = out[..at].rfind("<rect").unwrap();
            let end = at + out[at..].find("</rect>").unwrap() + "</rect>".len();
            out.replace_range(start..end, "");
        }
        out
    }
    let cases: Vec<(&str, Box<dyn Fn(&str) -> String>)> = vec![
        ("operations in the lines", Box::new(|h: &str| without(h, "data-op=\"", 1))),
        ("faults in the lines", Box::new(|h: &str| {
            let id = h.split("data-fault=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
            without(h, &format!("data-fault=\"{id}\""), usize::MAX)
        })),
        ("#only=stale: shows", Box::new(|h: &str| h.replace("hide(r, cls !== '' && !r.classList.contains(cls))", "hide(r, false)"))),
        ("asked the network for http://192.0.2.1/", Box::new(|h: &str| h.replace("</body>", "<script>fetch('http://192.0.2.1/x').catch(function () {});</script></body>"))),
        ("points off the page: src=\"https://192.0.2.1/i.png", Box::new(|h: &str| h.replace("</body>", "<img src=\"https://192.0.2.1/i.png\"></body>"))),
        ("over 2 MB", Box::new(|h: &str| h.replace("</body>", &format!("<!--{}--></body>", "x".repeat(MAX_BYTES as usize))))),
    ];
    for (want, edit) in cases {
        let (_dir, page, record) = planted(edit);
        let found = problems(&mut browser, &page, &record);
        assert!(found.iter().any(|p| p.contains(want)), "a page planted to show {want:?} was not caught: {found:?}");
    }
    // A page of nothing: its lines hold no operation.
    let (_dir, page, mut record) = planted(|h| h.to_owned());
    record.ops.clear();
    let found = problems(&mut browser, &page, &record);
    assert!(found.iter().any(|p| p.contains("hold no operation")), "{found:?}");
}

/// The DOM reader sees an element hidden by its own attribute or by an
/// ancestor's, and skips scripts.
#[test]
fn shown_elements_are_read_through_their_ancestors() {
    let dom = "<svg><g class=\"lane\" display=\"none\"><rect data-op=\"1\"></rect></g><g><rect data-op=\"2\"></rect><rect data-op=\"3\" display=\"none\"></rect></g>\
               <script>if (a < b) { x = '<rect data-op=\"9\">'; }</script><rect data-op=\"4\"><title>a &lt; b</title></rect></svg>";
    assert_eq!(shown(dom, "op"), ["2", "4"]);
    assert_eq!(foreign_addresses("<a href=\"x.jsonl\"></a><a href=\"#only=stale\"></a><img src=\"//cdn.example/x\">"), ["src=\"//cdn.example/x"]);
}

/// A history file is hostile input: every string it carries (the run's
/// command, the holders, each operation's holder, part and code, each
/// fault's targets, the final contents and writers) is set to markup that
/// would run a script, break out of an attribute, or link to
/// `javascript:`. The page drawn from it, in headless Chromium, runs none
/// of it: no element gets the attribute the scripts would set, no link is
/// a script, and the page asks the network for nothing (the `<img src=x>`
/// would). The file's strings are shown as text.
#[test]
fn a_hostile_history_runs_no_script() {
    let Some(chromium) = chromium("a hostile history") else { return };
    let mut browser = browser(&chromium);
    let (_, mut record) = evidence_pages().into_iter().find(|(_, r)| !expected_marks(r)[0].1.is_empty()).expect("a page with stale writes");
    let hostile = r#""'><script>document.documentElement.setAttribute('data-pwned','script')</script><img src=x onerror="document.documentElement.setAttribute('data-pwned','img')"><a href="javascript:document.documentElement.setAttribute('data-pwned','link')">"#;
    record.run.command = hostile.into();
    record.run.holders = vec![hostile.into()];
    for op in &mut record.ops {
        op.holder = hostile.into();
        op.part = op.part.as_ref().map(|_| hostile.into());
        op.code = op.code.as_ref().map(|_| hostile.into());
    }
    for fault in &mut record.faults {
        fault.targets = vec![hostile.into()];
    }
    for last in &mut record.finals {
        last.content = hostile.into();
        last.writer = hostile.into();
    }
    let read = Record::from_jsonl(&record.to_jsonl()).expect("the hostile strings are still a history");
    let html = lab::history::page::render(&read, &[]);
    let dir = tempfile::Builder::new().prefix("lab-history-hostile-").tempdir().unwrap();
    let page = dir.path().join("hostile.html");
    std::fs::write(&page, &html).unwrap();
    let seen = open(&mut browser, &page, "");
    assert!(!seen.dom.contains("data-pwned=\""), "a script from the file ran: {}", &seen.dom[..seen.dom.len().min(2000)]);
    // An element's attribute, not the text (where `<` is `&lt;`).
    let script_link = regex::Regex::new(r#"(?i)<[a-z][^<>]*\s(href|src)="\s*javascript:"#).unwrap();
    assert!(!script_link.is_match(&seen.dom), "a link of the file is a script");
    assert!(seen.requests.is_empty(), "the page asked the network for {:?}", seen.requests);
    assert!(seen.dom.contains("&lt;script&gt;document.documentElement"), "the file's strings are not shown as text");
    // The check can fail: the same page with the strings unescaped runs them.
    let unescaped = html.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'");
    std::fs::write(&page, unescaped).unwrap();
    assert!(open(&mut browser, &page, "").dom.contains("data-pwned=\""), "the check saw no script run on a page that runs one");
}
