//! What the reader sees, checked by looking: every page of the built book,
//! opened in headless Chromium as a reader's browser shows it.
//!
//! Table of contents:
//! - `every_page_as_the_reader_sees_it`: every page, in a light theme
//!   (`light`) and a dark one (`coal`), and the pages with diagrams in the
//!   other three of mdBook's themes too (`rust`, `navy`, `ayu`):
//!   1. the theme switch happened (the page's class and background, mermaid's theme);
//!   2. nothing in the text column is wider than the column unless it
//!      scrolls in a box of its own, on a desktop window and on a phone's;
//!   3. every Chinese character is drawn with a font that has it, not as
//!      the empty box a browser draws when no font does;
//!   4. every diagram's text is readable against what is behind it (WCAG
//!      contrast: 4.5 for body text, 3 for large), and a chart's bars and
//!      lines stand out (3) in colours told apart;
//!
//!   and it writes screenshots of four key pages to `target/screenshots/`
//!   (`<page>-<theme>.png`, the top three windows of it, and `-full.png`).
//! - one planted example of each failure, drawn by the same checks from a
//!   small book built with this book's `book.toml`: a too-wide table, a
//!   machine without a font for Chinese, an unreadable diagram and a pale chart.
//!
//! The checks run inside the page (`visual/page.js`); Chromium is driven
//! over the DevTools protocol (`visual/cdp.rs`, which says why). Without
//! Chromium the test says NOT RUN loudly, and under `CI=true` it fails.

mod common;
#[path = "visual/cdp.rs"]
mod cdp;

use cdp::Browser;
use serde_json::{json, Value};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The checks, run in the page: `(function)(options)`.
const PAGE_CHECKS: &str = include_str!("visual/page.js");

/// A desktop window (the sidebar open beside the text) and a phone's.
const DESKTOP: (u32, u32) = (1280, 900);
const PHONE: (u32, u32) = (390, 844);

/// mdBook's themes: (name, dark).
const THEMES: [(&str, bool); 5] = [("light", false), ("coal", true), ("rust", false), ("navy", true), ("ayu", true)];

/// The two themes every page is checked in; the other three check the pages that have diagrams.
const EVERY_PAGE_THEMES: [&str; 2] = ["light", "coal"];

/// The pages a reviewer looks at (F4's chapter, the cost chapter, the
/// chaos chapter, one exercise), photographed in light and coal.
const SCREENSHOTS: [&str; 4] = ["07-lease-not-enough.html", "22-cost.html", "25-chaos.html", "try-03-fence.html"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Writes straight to the process's stderr, which the harness does not
/// capture: a check that did not run, or what one saw, must be seen.
fn loudly(text: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** {text}\n");
}

/// Headless Chromium, or None after saying NOT RUN (a failure under CI).
fn chromium(what: &str) -> Option<PathBuf> {
    common::chromium_for(&format!("the visual check ({what})"))
}

/// Builds the book whose `book.toml` is in `dir` into `out` with the pinned mdbook.
fn build_book(dir: &Path, out: &Path) {
    let tools = root().join(".tools/bin");
    assert!(tools.join("mdbook").is_file() && root().join("target/mermaid/mermaid.min.js").is_file(), "the pinned mdbook or mermaid.js is missing: run ./run.sh book");
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    let built = Command::new(tools.join("mdbook")).arg("build").arg("-d").arg(out).current_dir(dir).env("PATH", path).output().unwrap();
    assert!(built.status.success(), "mdbook build in {} failed:\n{}", dir.display(), String::from_utf8_lossy(&built.stderr));
}

/// What the page script found on one page in one theme.
struct Seen {
    /// `<page> (<theme>[, phone])`.
    at: String,
    /// Its problems.
    problems: Vec<String>,
    /// Its counts: glyphs, diagrams, texts, marks.
    counts: Value,
    /// The diagram text with the lowest contrast: {ratio, text, page}.
    lowest: Value,
}

/// Opens `page` in `theme` (set before the page's scripts run, as mdBook
/// keeps a reader's choice) and runs `checks` on it.
fn look(browser: &mut Browser, page: &Path, theme: (&str, bool), checks: &[&str], tag: &str) -> Seen {
    let script = browser.before_every_page(&format!("localStorage.setItem('mdbook-theme', '{}')", theme.0));
    browser.open(&format!("file://{}", page.display()));
    browser.forget_script(&script);
    run_checks(browser, page, theme, checks, tag)
}

/// Runs `checks` on the page open in `browser`.
fn run_checks(browser: &mut Browser, page: &Path, theme: (&str, bool), checks: &[&str], tag: &str) -> Seen {
    let options = json!({ "theme": theme.0, "dark": theme.1, "checks": checks });
    let found = browser.eval(&format!("({PAGE_CHECKS})({options})"));
    let name = page.file_name().unwrap().to_string_lossy();
    // A script that returned nothing checked nothing: that is no pass.
    assert!(found["counts"].is_object() && found["problems"].is_array(), "{name}: the page script returned no result: {found}");
    let strings = |v: &Value| v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default();
    Seen { at: format!("{name} ({}{tag})", theme.0), problems: strings(&found["problems"]), counts: found["counts"].clone(), lowest: found["lowest"].clone() }
}

/// Files of the built book that are not pages to look at here: the
/// chapters again on one page (`print.html`), the sidebar for a browser
/// without scripts (`toc.html`), and the page a server shows for a missing
/// address (`404.html`), whose links start at the site's root (`<base
/// href="/">`): opened from a folder, it finds no style at all.
const NOT_PAGES: [&str; 3] = ["print.html", "toc.html", "404.html"];

/// Every page of the built book: its HTML files but [`NOT_PAGES`].
fn pages(out: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "html") && !NOT_PAGES.contains(&p.file_name().unwrap().to_str().unwrap()))
        .collect();
    found.sort();
    found
}

fn count(seen: &[Seen], key: &str) -> u64 {
    seen.iter().map(|s| s.counts[key].as_u64().unwrap_or(0)).sum()
}

/// Every page, as a reader sees it, in a light and a dark theme (and the
/// diagrams in all five): see the table of contents. Writes the screenshots.
#[test]
fn every_page_as_the_reader_sees_it() {
    let Some(chromium) = chromium("every page") else { return };
    let started = Instant::now();
    let out = common::temp_dir("lab-visual-book-");
    build_book(&root(), out.path());
    let pages = pages(out.path());
    assert!(pages.len() > 10, "the built book has only {} pages", pages.len());
    let shots = root().join("target/screenshots");
    let _ = fs::remove_dir_all(&shots);
    fs::create_dir_all(&shots).unwrap();

    let mut browser = Browser::launch(&chromium, DESKTOP.0, DESKTOP.1, &[]);
    let mut seen: Vec<Seen> = Vec::new();
    let mut with_diagrams: Vec<PathBuf> = Vec::new();
    for theme in THEMES.iter().copied().filter(|(name, _)| EVERY_PAGE_THEMES.contains(name)) {
        for page in &pages {
            let name = page.file_name().unwrap().to_string_lossy().into_owned();
            if SCREENSHOTS.contains(&name.as_str()) {
                // As the reader first sees it: drawn, answers still closed.
                let script = browser.before_every_page(&format!("localStorage.setItem('mdbook-theme', '{}')", theme.0));
                browser.open(&format!("file://{}", page.display()));
                browser.forget_script(&script);
                let drawn = json!({ "theme": theme.0, "dark": theme.1, "checks": [], "open": false });
                browser.eval(&format!("({PAGE_CHECKS})({drawn})"));
                // The first three windows' worth, for a quick look, and the whole page.
                let stem = format!("{}-{}", name.trim_end_matches(".html"), theme.0);
                browser.screenshot(&shots.join(format!("{stem}.png")), Some(3.0 * DESKTOP.1 as f64));
                browser.screenshot(&shots.join(format!("{stem}-full.png")), None);
            }
            let one = look(&mut browser, page, theme, &["theme", "width", "glyphs", "contrast"], "");
            if one.counts["diagrams"].as_u64().unwrap_or(0) > 0 && !with_diagrams.contains(page) {
                with_diagrams.push(page.clone());
            }
            seen.push(one);
            // The same page opened on a phone (mdBook hides the sidebar
            // there), once: colours do not change a width.
            if theme.0 == EVERY_PAGE_THEMES[0] {
                browser.resize(PHONE.0, PHONE.1);
                seen.push(look(&mut browser, page, theme, &["width"], ", phone"));
                browser.resize(DESKTOP.0, DESKTOP.1);
            }
        }
    }
    for theme in THEMES.iter().copied().filter(|(name, _)| !EVERY_PAGE_THEMES.contains(name)) {
        for page in &with_diagrams {
            seen.push(look(&mut browser, page, theme, &["theme", "contrast"], ""));
        }
    }
    // Which font drew the Chinese: the first heading of the first page.
    browser.open(&format!("file://{}", pages[0].display()));
    let fonts = browser.fonts_of("main h1");
    drop(browser);

    let problems: Vec<String> = seen.iter().flat_map(|s| s.problems.iter().map(move |p| format!("{}: {p}", s.at))).collect();
    let lowest = seen.iter().filter(|s| s.lowest.is_object()).min_by(|a, b| a.lowest["ratio"].as_f64().unwrap().total_cmp(&b.lowest["ratio"].as_f64().unwrap())).map(|s| s.lowest.clone());
    let advice = if problems.iter().any(|p| p.contains("drawn as empty boxes")) {
        "\nChinese drawn as empty boxes: this machine has no font that covers Chinese (fc-list :lang=zh). Install one: apt-get install fonts-wqy-microhei (./run.sh book and ./run.sh test do, as root)."
    } else {
        ""
    };
    assert!(problems.is_empty(), "what the reader sees ({} problems):\n{}{advice}", problems.len(), problems.join("\n"));
    // Nothing passes on nothing: characters, diagrams and their text were found.
    assert!(count(&seen, "glyphs") > 0 && count(&seen, "diagrams") > 0 && count(&seen, "texts") > 0 && count(&seen, "marks") > 0, "the checks looked at nothing: {:?}", seen.iter().map(|s| &s.counts).collect::<Vec<_>>());
    for shot in SCREENSHOTS {
        let png = shots.join(format!("{}-light.png", shot.trim_end_matches(".html")));
        assert!(png.is_file(), "no screenshot of {shot}: is it still a page of the book?");
    }
    loudly(&format!(
        "RAN: headless Chromium ({}) looked at {} pages in light and coal (and {} pages with diagrams in rust, navy and ayu), at {}×{} and {}×{}: {} Chinese characters checked (drawn with {}), {} diagrams with {} texts and {} chart marks, lowest diagram text contrast {}; screenshots in {}; {:.0} s",
        chromium.display(),
        pages.len(),
        with_diagrams.len(),
        DESKTOP.0,
        DESKTOP.1,
        PHONE.0,
        PHONE.1,
        count(&seen, "glyphs"),
        fonts.iter().map(|(f, n)| format!("{f}: {n} glyphs")).collect::<Vec<_>>().join(", "),
        count(&seen, "diagrams"),
        count(&seen, "texts"),
        count(&seen, "marks"),
        lowest.map_or("none".into(), |l| format!("{:.2} («{}», {})", l["ratio"].as_f64().unwrap(), l["text"].as_str().unwrap_or(""), l["page"].as_str().unwrap_or(""))),
        shots.display(),
        started.elapsed().as_secs_f64()
    ));
}

// Planted examples -----------------------------------------------------------

/// A one-page book built with this book's `book.toml` (its CSS, its
/// scripts, mermaid), whose page is `markdown`: the planted page, in the
/// book's own dress. Returns the folder and the page.
fn planted_book(markdown: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = common::temp_dir("lab-visual-planted-");
    let book_toml = fs::read_to_string(root().join("book.toml")).unwrap();
    fs::write(dir.path().join("book.toml"), &book_toml).unwrap();
    // What book.toml names beside itself: the extra CSS and mermaid.js.
    for line in book_toml.lines().filter(|l| l.starts_with("additional-")) {
        for file in line.split('"').skip(1).step_by(2) {
            let to = dir.path().join(file);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(root().join(file), &to).unwrap_or_else(|e| panic!("copying {file}, which book.toml names: {e}"));
        }
    }
    let src = dir.path().join("book");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("SUMMARY.md"), "# Summary\n\n[种下的页](planted.md)\n").unwrap();
    fs::write(src.join("planted.md"), markdown).unwrap();
    let out = dir.path().join("out");
    build_book(dir.path(), &out);
    (dir, out.join("planted.html"))
}

/// A word too long to break: what makes a table wider than any column.
fn long_word() -> String {
    "FENCED_SCOPE_CTE".repeat(12)
}

/// A table mdBook does not wrap (raw HTML) and wider than the column is
/// found; the same width in a Markdown table (mdBook wraps it in a box that
/// scrolls) and in a code block (which scrolls) is not.
#[test]
fn a_planted_wide_table_is_found() {
    let Some(chromium) = chromium("a planted wide table") else { return };
    let word = long_word();
    let (_dir, page) = planted_book(&format!(
        "# 太宽的表\n\n<table><tr><td>种下的</td><td>{word}</td></tr></table>\n\n| 模式 | 说明 |\n|---|---|\n| 包在盒子里 | {word} |\n\n```text\n{word}\n```\n"
    ));
    let mut browser = Browser::launch(&chromium, DESKTOP.0, DESKTOP.1, &[]);
    let seen = look(&mut browser, &page, ("light", false), &["width"], "");
    assert_eq!(seen.problems.len(), 1, "exactly the raw table is too wide: {:#?}", seen.problems);
    assert!(seen.problems[0].starts_with("table «种下的") && seen.problems[0].contains("scrolls in no box of its own"), "{}", seen.problems[0]);
}

/// Fonts that cover Chinese on this machine, as fontconfig lists them.
fn cjk_font_files() -> Vec<String> {
    let listed = Command::new("fc-list").args([":lang=zh", "--format=%{file}\\n"]).output().expect("fc-list (package fontconfig) is needed to plant a machine without a Chinese font");
    String::from_utf8_lossy(&listed.stdout).lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
}

/// A machine without a font for Chinese, planted: Chromium runs with a
/// fontconfig that is this machine's minus every font covering Chinese.
/// Each Chinese character of the page is then found drawn as an empty box.
#[test]
fn a_planted_missing_font_is_found() {
    let Some(chromium) = chromium("a planted missing font") else { return };
    let (dir, page) = planted_book("# 没有中文字体的机器\n\n每一个汉字都画成一个空的方框，而页面照样打开。\n");
    let system = Path::new("/etc/fonts/fonts.conf");
    assert!(system.is_file(), "no {}: where is this machine's fontconfig?", system.display());
    let rejected: String = cjk_font_files().iter().map(|f| format!("<glob>{f}</glob>")).collect();
    let conf = dir.path().join("fonts.conf");
    fs::write(
        &conf,
        format!(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n<fontconfig>\n<include ignore_missing=\"no\">{}</include>\n<selectfont><rejectfont>{rejected}</rejectfont></selectfont>\n<cachedir>{}</cachedir>\n</fontconfig>\n",
            system.display(),
            dir.path().join("fc-cache").display()
        ),
    )
    .unwrap();
    // The plant took: under it, fontconfig names no font for Chinese.
    let listed = Command::new("fc-list").arg(":lang=zh").env("FONTCONFIG_FILE", &conf).output().unwrap();
    assert!(listed.stdout.is_empty(), "the planted fontconfig still has fonts for Chinese:\n{}", String::from_utf8_lossy(&listed.stdout));
    let mut browser = Browser::launch(&chromium, DESKTOP.0, DESKTOP.1, &[("FONTCONFIG_FILE", &conf)]);
    let seen = look(&mut browser, &page, ("light", false), &["glyphs"], "");
    let glyphs = seen.counts["glyphs"].as_u64().unwrap();
    assert!(glyphs >= 20, "the planted page's Chinese was not found: {:?}", seen.counts);
    assert_eq!(seen.counts["tofu"].as_u64().unwrap(), glyphs, "without a font for Chinese, every Chinese character is an empty box: {:?}", seen.problems);
    assert!(seen.problems.len() == 1 && seen.problems[0].contains("drawn as empty boxes"), "{:#?}", seen.problems);
}

/// A diagram whose text is pale on a pale box, and a chart in the pale
/// colour mermaid's light theme gives its first series (#ececff, which the
/// book's style/mermaid.js replaces: the chart asks for it back), are
/// found; the ordinary text beside them is not.
#[test]
fn a_planted_unreadable_diagram_is_found() {
    let Some(chromium) = chromium("a planted unreadable diagram") else { return };
    let (_dir, page) = planted_book(
        "# 看不清的图\n\n```mermaid\nflowchart LR\n    A[看得清的字] --> B[看不清的字]\n    classDef pale fill:#ffffff,color:#d0d0d0\n    class B pale\n```\n\n```mermaid\n---\nconfig:\n  themeVariables:\n    xyChart:\n      plotColorPalette: \"#ececff\"\n---\nxychart-beta\n    title \"淡色的柱\"\n    x-axis [a, b]\n    y-axis 0 --> 2\n    bar [1, 2]\n```\n",
    );
    let mut browser = Browser::launch(&chromium, DESKTOP.0, DESKTOP.1, &[]);
    let seen = look(&mut browser, &page, ("light", false), &["contrast"], "");
    assert_eq!(seen.counts["diagrams"], 2, "{:?}", seen.counts);
    let pale_text: Vec<&String> = seen.problems.iter().filter(|p| p.contains("the text «看不清的字»")).collect();
    let pale_bars: Vec<&String> = seen.problems.iter().filter(|p| p.contains("a mark of series bar-plot-0")).collect();
    assert!(pale_text.len() == 1 && pale_text[0].contains("below 4.5"), "{:#?}", seen.problems);
    assert_eq!(pale_bars.len(), 2, "both pale bars: {:#?}", seen.problems);
    assert_eq!(seen.problems.len(), 3, "only the planted text and bars: {:#?}", seen.problems);
}
