//! The notebook (`lab notebook`, `./run.sh serve`): who it answers, what it
//! runs, how a run streams, and that a stopped run leaves nothing behind.
//!
//! Table of contents:
//! - refused: a path without the token, a foreign `Host`, a foreign
//!   `Origin`, a run asked without an `Origin`, an unknown case, mode or
//!   field; each with its reason;
//! - a run of F1 streams its transcript (several chunks before the end),
//!   ends with the verdict and an empty diff against evidence/26/F1.snap;
//! - a second run while one is under way is "busy"; Stop ends the first as
//!   Ctrl-C would, and no holder or server of it is left;
//! - in headless Chromium, F4's chapter served by the notebook: its cell
//!   runs `unfenced` (the transcript arrives in several updates before the
//!   end, with the stale write accepted), then `fenced-scope`, whose diff
//!   against its snapshot is empty; then the exercise
//!   `try fence-accepts-any-token` from its page shows its failing lines;
//!   screenshots of the cells in target/screenshots/ (or `LAB_SCREENSHOTS`);
//! - every case of `lab list` has a cell on some page of the book.

mod common;
#[path = "visual/cdp.rs"]
#[allow(dead_code)] // the visual check's client; this file uses part of it
mod cdp;

use common::{leftovers_after_exit, PrivateCluster, LAB};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `lab notebook` serving `book` against `cluster`; it dies with the test
/// thread that started it (a killed test leaves no server behind).
fn spawn_notebook(book: &std::path::Path, cluster: &PrivateCluster) -> Child {
    let mut cmd = Command::new(LAB);
    cmd.args(["notebook", "--book", book.to_str().unwrap()]).envs(cluster.env()).stdout(Stdio::piped());
    lab::interrupt::tie_to_lab(&mut cmd, nix::sys::signal::Signal::SIGKILL);
    cmd.spawn().unwrap()
}

/// A notebook serving a one-page book, against a private cluster.
struct Notebook {
    child: Child,
    port: u16,
    token: String,
    _book: tempfile::TempDir,
}

impl Notebook {
    fn start(cluster: &PrivateCluster) -> Notebook {
        let book = common::temp_dir("lab-notebook-book-");
        std::fs::write(book.path().join("index.html"), "<p>the book</p>").unwrap();
        let mut child = spawn_notebook(book.path(), cluster);
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        // notebook: the book at http://127.0.0.1:PORT/TOKEN/index.html (Ctrl-C to stop)
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap_or_else(|| panic!("no address in {line:?}"));
        let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
        let (port, rest) = rest.split_once('/').unwrap();
        let token = rest.strip_suffix("/index.html").unwrap().to_owned();
        Notebook { child, port: port.parse().unwrap(), token, _book: book }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends one request (with `headers`), returns the stream to read from.
    fn send(&self, method: &str, path: &str, headers: &[(&str, String)], body: &str) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        stream
    }

    /// The status and body of one request.
    fn ask(&self, method: &str, path: &str, headers: &[(&str, String)], body: &str) -> (u16, String) {
        let mut text = String::new();
        self.send(method, path, headers, body).read_to_string(&mut text).unwrap();
        let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_owned()))
    }

    /// The usual headers of the notebook's own page.
    fn own(&self) -> Vec<(&'static str, String)> {
        vec![("Host", format!("127.0.0.1:{}", self.port)), ("Origin", self.origin()), ("Content-Type", "application/json".into())]
    }

    fn api(&self, call: &str) -> String {
        format!("/{}/api/{call}", self.token)
    }
}

impl Drop for Notebook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a chunked stream: the chunks, each as it arrived.
fn chunks(stream: TcpStream) -> Vec<String> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    // The head, up to the empty line.
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
    }
    let mut chunks = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let size = usize::from_str_radix(line.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let mut chunk = vec![0u8; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        chunks.push(String::from_utf8(chunk[..size].to_vec()).unwrap());
    }
    chunks
}

/// Every request that is not the notebook's own page's is refused, and says why.
#[test]
fn requests_not_from_its_pages_are_refused() {
    let cluster = PrivateCluster::new("notebook-refused");
    let nb = Notebook::start(&cluster);
    let host = ("Host", format!("127.0.0.1:{}", nb.port));
    let (status, body) = nb.ask("GET", "/index.html", &[host.clone()], "");
    assert_eq!((status, body.contains("lacks the notebook's token")), (403, true), "{body}");
    let (status, body) = nb.ask("GET", &format!("/{}/index.html", nb.token), &[host.clone()], "");
    assert_eq!((status, body.as_str()), (200, "<p>the book</p>"));
    let (status, body) = nb.ask("GET", &format!("/{}/index.html", nb.token), &[("Host", "evil.example".into())], "");
    assert_eq!((status, body.contains("not evil.example")), (421, true), "{body}");
    let run = r#"{"case":"F1"}"#;
    let (status, body) = nb.ask("POST", &nb.api("run"), &[host.clone(), ("Origin", "http://evil.example".into())], run);
    assert_eq!((status, body.contains("from http://evil.example")), (403, true), "{body}");
    let (status, body) = nb.ask("POST", &nb.api("run"), &[host.clone()], run);
    assert_eq!((status, body.contains("no Origin header")), (403, true), "{body}");
    for (asked, why) in [
        (r#"{"case":"F99"}"#, "no case \"F99\""),
        (r#"{"case":"F4","mode":"everything"}"#, "F4 takes --mode"),
        (r#"{"case":"F1","pause_before_check":true}"#, "F1 takes no --pause-before-check"),
        (r#"{"case":"F4","threads":4}"#, "F4 takes no --threads"),
        (r#"{"case":"F1","shell":"$(id)"}"#, "unknown field"),
        (r#"{"case":"F1","seed":1}"#, "case takes no seed"),
        (r#"{"command":"chaos","duration_s":600}"#, "1 to 30 s"),
        (r#"{"command":"try","name":"../../etc"}"#, "no exercise"),
    ] {
        let (status, body) = nb.ask("POST", &nb.api("run"), &nb.own(), asked);
        assert_eq!((status, body.contains(why)), (400, true), "{asked}: {body}");
    }
    let (status, body) = nb.ask("GET", &format!("/{}/../../etc/passwd", nb.token), &[host.clone()], "");
    assert_eq!(status, 404, "{body}");
    let (status, body) = nb.ask("GET", &nb.api("history/..%2f..%2fetc%2fpasswd"), &[host], "");
    assert_eq!(status, 404, "{body}");
}

/// A run streams its lines as they are printed and ends with its verdict
/// and the diff against its snapshot; a second run meanwhile is refused as
/// busy; Stop ends a run as Ctrl-C would, leaving nothing behind.
#[test]
fn a_run_streams_and_a_stop_leaves_nothing() {
    let cluster = PrivateCluster::new("notebook-run");
    let nb = Notebook::start(&cluster);
    let got = chunks(nb.send("POST", &nb.api("run"), &nb.own(), r#"{"case":"F1"}"#));
    let last = got.last().expect("a stream");
    let result: serde_json::Value = serde_json::from_str(last.trim().strip_prefix("@@result ").unwrap_or_else(|| panic!("no result: {last}"))).unwrap();
    assert_eq!(result["status"], 0, "{result}");
    assert_eq!(result["diff"], "", "F1's transcript differs from its snapshot: {result}");
    assert!(got.len() > 5, "the transcript came in {} chunks", got.len());
    assert!(got.iter().any(|c| c.starts_with("CASE F1")), "{got:?}");

    // F4 holds a holder paused for seconds: time to ask again, and to stop it.
    let first = nb.send("POST", &nb.api("run"), &nb.own(), r#"{"case":"F4","mode":"unfenced"}"#);
    let mut reader = BufReader::new(first);
    let mut line = String::new();
    while !line.contains("CASE F4") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended before the case began");
    }
    let (status, body) = nb.ask("POST", &nb.api("run"), &nb.own(), r#"{"case":"F1"}"#);
    assert_eq!((status, body.contains("busy")), (409, true), "{body}");
    let (status, body) = nb.ask("POST", &nb.api("stop"), &nb.own(), "");
    assert_eq!((status, body.contains("stopping")), (200, true), "{body}");
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let result = rest.lines().find_map(|l| l.strip_prefix("@@result ")).unwrap_or_else(|| panic!("no result after the stop: {rest}"));
    let result: serde_json::Value = serde_json::from_str(result).unwrap();
    assert_ne!(result["status"], 0, "a stopped run passed: {result}");
    assert_eq!(leftovers_after_exit(cluster.place().to_str().unwrap()), Vec::<String>::new(), "the stopped run left these");
}

/// Builds the book into `out` with the pinned mdbook (as `./run.sh book`).
fn build_book(out: &std::path::Path) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let tools = root.join(".tools/bin");
    assert!(tools.join("mdbook").is_file(), "the pinned mdbook is missing: run ./run.sh book");
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    let built = Command::new(tools.join("mdbook")).arg("build").arg("-d").arg(out).current_dir(&root).env("PATH", path).output().unwrap();
    assert!(built.status.success(), "mdbook build failed:\n{}", String::from_utf8_lossy(&built.stderr));
}

/// Every case the lab lists has a cell: some shell block of the book has a
/// line `./run.sh <case> …` (a cell per case a block runs).
#[test]
fn every_case_has_a_cell() {
    let out = common::temp_dir("lab-notebook-cells-");
    build_book(out.path());
    let mut with_cell = std::collections::BTreeSet::new();
    let shell_block = regex::Regex::new(r#"(?s)<code class="language-(?:sh|bash)">(.*?)</code>"#).unwrap();
    for page in std::fs::read_dir(out.path()).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "html")) {
        let html = std::fs::read_to_string(&page).unwrap();
        for block in shell_block.captures_iter(&html) {
            for line in block[1].lines().map(str::trim).filter(|l| l.starts_with("./run.sh F")) {
                with_cell.extend(line.split_whitespace().nth(1).map(str::to_owned));
            }
        }
    }
    let listed = common::run(LAB, &["list"], &[]);
    let cases: Vec<String> = common::stdout(&listed).lines().filter_map(|l| l.split_whitespace().next()).filter(|id| id.starts_with('F')).map(str::to_owned).collect();
    assert!(cases.len() >= 19, "lab list named {cases:?}");
    let missing: Vec<&String> = cases.iter().filter(|c| !with_cell.contains(*c)).collect();
    assert!(missing.is_empty(), "cases without a cell in the book: {missing:?}");
}

/// Where the notebook's screenshots go: `target/screenshots/`, or the
/// folder `LAB_SCREENSHOTS` names (relative to the checkout), e.g.
/// `LAB_SCREENSHOTS=evidence/26/screenshots ./run.sh test notebook` re-takes
/// the ones the preface shows.
fn screenshots() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let dir = root.join(std::env::var("LAB_SCREENSHOTS").unwrap_or_else(|_| "target/screenshots".into()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a cell showed by the end of one run.
struct CellRun {
    /// How many transcript lines it showed, each time that changed.
    counts: Vec<u64>,
    /// Its transcript as shown.
    out: String,
    /// Its verdict as shown.
    verdict: String,
}

/// Waits for the cell `cell` (a JavaScript expression) to be drawn, runs
/// `setup` on it (`c` is the cell), presses Run and watches it until its
/// verdict shows, at most `limit`.
fn run_cell(browser: &mut cdp::Browser, cell: &str, setup: &str, limit: Duration) -> CellRun {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !browser.eval(&format!("!!({cell})")).as_bool().unwrap() {
        assert!(std::time::Instant::now() < deadline, "no cell {cell}");
        std::thread::sleep(Duration::from_millis(100));
    }
    browser.eval(&format!("(() => {{ const c = {cell}; {setup}; c.scrollIntoView(); c.querySelector('.lab-run').click(); return true; }})()"));
    let mut counts = Vec::new();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let seen = browser.eval(&format!("(() => {{ const c = {cell}; return [c.querySelector('.lab-out').children.length, c.querySelector('.lab-verdict').textContent]; }})()"));
        let (lines, verdict) = (seen[0].as_u64().unwrap(), seen[1].as_str().unwrap().to_owned());
        if counts.last() != Some(&lines) {
            counts.push(lines);
        }
        if !verdict.is_empty() {
            let out = browser.eval(&format!("({cell}).querySelector('.lab-out').textContent")).as_str().unwrap().to_owned();
            return CellRun { counts, out, verdict };
        }
        assert!(std::time::Instant::now() < deadline, "{cell}: no verdict after {limit:?}; lines seen {counts:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// F4's chapter, served by the notebook, in headless Chromium: the cell
/// runs `unfenced` and then `fenced-scope`, as a reader would press Run;
/// then an exercise's cell breaks the fence and shows the failing lines.
#[test]
fn the_f4_cell_and_an_exercise_run_in_chromium() {
    let Some(chromium) = common::chromium_for("the notebook's cell in Chromium") else { return };
    let cluster = PrivateCluster::new("notebook-chromium");
    let book = common::temp_dir("lab-notebook-chromium-book-");
    build_book(book.path());
    // Killed with the guard on every way out, a failed check included.
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Killed(spawn_notebook(book.path(), &cluster));
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let index = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap().to_owned();
    let mut browser = cdp::Browser::launch(&chromium, 1280, 900, &[]);
    browser.open(&index.replace("index.html", "07-lease-not-enough.html"));
    let shots = screenshots();
    // The cell under the chapter's `./run.sh F4` block, once the page asked the notebook for the cases.
    let cell = "[...document.querySelectorAll('.lab-cell')].find(c => c.querySelector('.lab-cell-title').textContent.endsWith(' F4') && c.querySelector('select'))";
    for (mode, expect) in [("unfenced", "资源端不检查 token 时，A 的旧结果覆盖了 B 的结果"), ("fenced-scope", "资源端拒绝 A 的旧 token")] {
        let setup = format!("const s = c.querySelector('select'); s.value = '{mode}'; s.dispatchEvent(new Event('change'))");
        let seen = run_cell(&mut browser, cell, &setup, Duration::from_secs(120));
        assert!(seen.out.contains(expect), "{mode}: the transcript lacks {expect:?}:\n{}", seen.out);
        assert!(seen.verdict.contains("结果：通过") && seen.verdict.contains("与锁定的证据") && seen.verdict.contains("一致"), "{mode}: the verdict says {:?}\n{}", seen.verdict, seen.out);
        let before_end: Vec<&u64> = seen.counts.iter().filter(|&&n| n > 0).collect();
        assert!(before_end.len() > 1, "{mode}: the transcript came in one piece ({:?}), not as it was printed", seen.counts);
        browser.screenshot_of(cell, 8.0, &shots.join(format!("notebook-F4-{mode}.png")));
    }

    // An exercise: the fence's comparison made always true. Its first run
    // in a checkout builds the scratch copy's lab (minutes); what `lab try`
    // says of each step (copy, build, run) streams in meanwhile.
    browser.open(&index.replace("index.html", "try-03-fence.html"));
    let exercise = "[...document.querySelectorAll('.lab-cell')].find(c => c.querySelector('.lab-cell-title').textContent.endsWith('try fence-accepts-any-token'))";
    let seen = run_cell(&mut browser, exercise, "", Duration::from_secs(1800));
    for expect in ["$ ./run.sh try fence-accepts-any-token", "问题：", "try: building the patched copy", "try: running lab run F4 in the copy", "失败的行（F4）", "FAIL 资源端拒绝 A 的旧 token (expected=WRITE accepted=false token=1, actual=WRITE accepted=true token=1)", "与锁定的坏运行记录"] {
        assert!(seen.out.contains(expect), "the exercise's transcript lacks {expect:?}:\n{}", seen.out);
    }
    assert!(seen.verdict.contains("补丁被用例抓住"), "the exercise's verdict says {:?}\n{}", seen.verdict, seen.out);
    let failing = browser.eval(&format!("[...({exercise}).querySelectorAll('.lab-out .lab-fail')].length")).as_u64().unwrap();
    assert!(failing >= 3, "the exercise's cell marks {failing} lines as failing:\n{}", seen.out);
    // Scrolled to the failing lines, as a reader would look for them.
    browser.eval(&format!("(() => {{ const o = ({exercise}).querySelector('.lab-out'); const f = o.querySelector('.lab-fail'); o.scrollTop += f.getBoundingClientRect().top - o.getBoundingClientRect().top - 60; return true; }})()"));
    browser.screenshot_of(exercise, 8.0, &shots.join("notebook-try-fence-accepts-any-token.png"));
    drop(child);
    assert_eq!(leftovers_after_exit(cluster.place().to_str().unwrap()), Vec::<String>::new());
}
