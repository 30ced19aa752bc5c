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
//!   Ctrl-C would, and no holder or server of it is left.

mod common;

use common::{leftovers_after_exit, PrivateCluster, LAB};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
        let mut child = Command::new(LAB)
            .args(["notebook", "--book", book.path().to_str().unwrap()])
            .envs(cluster.env())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
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
        (r#"{"case":"F1","seed":"$(id)"}"#, "unknown field"),
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
