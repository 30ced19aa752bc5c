//! The one run at a time: `lab run` as a child of the notebook, its
//! transcript streamed to the page line by line as it is printed, and, at
//! its end, the verdict and the diff against the locked snapshot.
//!
//! The stream is chunked HTTP, one chunk per line, each flushed at once.
//! Its last line is `@@result ` and a JSON object: the exit status, the
//! diff against the snapshot of the run's name (empty when they match,
//! `null` when nothing is locked under that name) and links to the history
//! pages it wrote. What the run says on stderr streams in between, each
//! line marked `@@stderr `.

use crate::{evidence, history, interrupt};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// The run under way, if any: its `lab run` process.
pub struct Runs {
    current: Mutex<Option<u32>>,
    /// The lab binary each run starts: the path this notebook was started
    /// from, read once. A rebuild replaces the file at that path (the
    /// next run uses the new build), while the running notebook's own
    /// `/proc/self/exe` then names a deleted file.
    lab: std::io::Result<std::path::PathBuf>,
}

impl Runs {
    /// No run under way; runs start the lab binary this process came from.
    pub fn new() -> Runs {
        Runs { current: Mutex::new(None), lab: std::env::current_exe() }
    }

    /// Starts `lab <args>` and streams it into `request`'s answer; a second
    /// run while one is under way is answered "busy".
    pub fn start(&self, args: Vec<String>, run_name: String, request: tiny_http::Request) {
        let since = SystemTime::now();
        let mut child = {
            let mut current = self.current.lock();
            if let Some(pid) = *current {
                return super::respond_text(request, 409, &format!("busy: a run is under way (lab pid {pid}); wait for it, or stop it"));
            }
            let mut cmd = match &self.lab {
                Ok(lab) => Command::new(lab),
                Err(e) => return super::respond_text(request, 500, &format!("cannot find the lab's own binary: {e}")),
            };
            cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            // If the notebook dies, the run gets what Ctrl-C would give it:
            // its own cleanup (holders, servers, proxies).
            interrupt::tie_to_lab(&mut cmd, Signal::SIGINT);
            match cmd.spawn() {
                Ok(child) => {
                    *current = Some(child.id());
                    child
                }
                Err(e) => return super::respond_text(request, 500, &format!("cannot start lab run: {e}")),
            }
        };
        // Both of the run's streams, line by line as they come: stdout is the
        // transcript; stderr is its progress and errors (`try: applying it…`,
        // a build that takes minutes), sent marked `@@stderr ` for the page
        // to show apart.
        let (lines, arriving) = std::sync::mpsc::channel::<String>();
        let readers: Vec<_> = [
            child.stdout.take().map(|s| (Box::new(s) as Box<dyn Read + Send>, "")),
            child.stderr.take().map(|s| (Box::new(s) as Box<dyn Read + Send>, "@@stderr ")),
        ]
        .into_iter()
        .flatten()
        .map(|(stream, mark)| {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(std::result::Result::ok) {
                    if lines.send(format!("{mark}{line}")).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
        drop(lines);
        let mut out = Stream::open(request);
        // The command as a reader types it: `./run.sh F4 --mode unfenced`
        // for `lab run F4 …`, `./run.sh try NAME` for `lab try NAME`.
        let typed = if args.first().is_some_and(|a| a == "run") { &args[1..] } else { &args[..] };
        out.line(&format!("$ ./run.sh {}", typed.join(" ")));
        // Ends when both streams have closed (the run and anything it left
        // holding them have exited).
        for line in arriving {
            out.line(&line);
        }
        for reader in readers {
            let _ = reader.join();
        }
        let status = child.wait().map(|s| s.code());
        *self.current.lock() = None;
        let diff = compare(&run_name, since);
        let result = json!({
            "status": status.ok().flatten(),
            "run": run_name,
            "snapshot": evidence::snapshot_path(&run_name).strip_prefix(crate::paths::root()).map(|p| p.display().to_string()).ok(),
            "diff": diff,
            "histories": histories(&run_name, since),
        });
        out.line(&format!("@@result {result}"));
        out.close();
    }

    /// Stops the run under way as Ctrl-C would: SIGINT, and its own
    /// cleanup ends its holders, servers and proxies.
    pub fn stop(&self) -> std::result::Result<String, String> {
        match *self.current.lock() {
            Some(pid) => {
                kill(Pid::from_raw(pid as i32), Signal::SIGINT).map_err(|e| format!("cannot stop lab pid {pid}: {e}"))?;
                Ok(format!("stopping lab pid {pid}"))
            }
            None => Err("no run is under way".into()),
        }
    }
}

/// The diff of the run's transcript against its locked snapshot: `""`
/// when they match, `null` when nothing is locked under that name or the
/// run saved no transcript (it ended before its case ran).
fn compare(run_name: &str, since: SystemTime) -> Option<String> {
    let fresh = std::fs::metadata(evidence::saved_transcript_path(run_name)).and_then(|m| m.modified()).is_ok_and(|t| t >= since);
    if !fresh || !evidence::snapshot_path(run_name).is_file() {
        return None;
    }
    Some(match evidence::compare(run_name, None, false) {
        Ok(comparison) => comparison.diff,
        Err(e) => format!("(cannot compare: {e})"),
    })
}

/// The history pages this run wrote: `F4.html`, `F12-unfenced.html` …
fn histories(run_name: &str, since: SystemTime) -> Vec<String> {
    let case = run_name.split('-').next().unwrap_or(run_name);
    let Ok(entries) = std::fs::read_dir(history::dir()) else { return Vec::new() };
    let mut pages: Vec<String> = entries
        .flatten()
        .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= since))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".html") && (name == &format!("{case}.html") || name.starts_with(&format!("{case}-"))))
        .collect();
    pages.sort();
    pages
}

/// A chunked answer written line by line. A page that went away ends the
/// writing, not the run: the rest is read and dropped.
struct Stream {
    writer: Option<Box<dyn Write + Send>>,
}

impl Stream {
    fn open(request: tiny_http::Request) -> Stream {
        let mut writer = request.into_writer();
        let head = super::head(200, "text/plain; charset=utf-8", "Transfer-Encoding: chunked");
        let ok = writer.write_all(head.as_bytes()).and_then(|()| writer.flush()).is_ok();
        Stream { writer: ok.then_some(writer) }
    }

    /// One line, as one chunk, sent at once.
    fn line(&mut self, line: &str) {
        let Some(writer) = self.writer.as_mut() else { return };
        let chunk = format!("{line}\n");
        let sent = write!(writer, "{:x}\r\n{chunk}\r\n", chunk.len()).and_then(|()| writer.flush());
        if sent.is_err() {
            self.writer = None;
        }
    }

    /// The last chunk.
    fn close(mut self) {
        if let Some(mut writer) = self.writer.take() {
            let _ = writer.write_all(b"0\r\n\r\n").and_then(|()| writer.flush());
        }
    }
}

