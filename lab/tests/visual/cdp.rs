//! Headless Chromium, driven over the DevTools protocol through a pipe.
//!
//! Why the protocol, when `book.rs` gets by with `--dump-dom`: the visual
//! checks need a page after its scripts ran, in a theme chosen before they
//! ran, measured by a script of ours, at two window widths, and full-page
//! screenshots; and one browser that visits every page is several times
//! quicker than a browser started per page and per theme. Why a pipe:
//! `--remote-debugging-pipe` speaks the protocol on file descriptors 3
//! (commands in) and 4 (replies and events out), each message JSON ended by
//! a NUL byte. No port, no websocket, no crate beyond `serde_json`.
//!
//! One owner: a [`Browser`] kills and reaps its Chromium when dropped, and
//! its profile lives in a `tempfile` folder that goes with it. A reader
//! thread turns the pipe into a channel, so that every wait has a deadline:
//! a browser that hangs fails the test with what it printed, never hangs it.

use serde_json::{json, Value};
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// How long one protocol call may take (a page's load included).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One headless Chromium with one page (a tab), attached.
pub struct Browser {
    /// The browser process; killed and reaped on drop.
    child: Child,
    /// Where commands go (Chromium's fd 3).
    commands: fs::File,
    /// Replies and events, one JSON message each, from the reader thread.
    messages: Receiver<Value>,
    /// Events that arrived while a reply was awaited, for a later wait.
    events: Vec<Value>,
    /// The last command's id.
    id: u64,
    /// The page's session (flattened attach).
    session: String,
    /// Chromium's stderr, kept for failure messages.
    log: PathBuf,
    /// Its profile and log; removed with the browser.
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` headless with a blank page of `width`×`height`
    /// CSS pixels, with `env` added to its environment (a fontconfig file,
    /// say), and attaches to its page.
    pub fn launch(chromium: &Path, width: u32, height: u32, env: &[(&str, &Path)]) -> Browser {
        Browser::launch_with(chromium, width, height, env, &[])
    }

    /// As [`Browser::launch`], with `args` added to Chromium's command line
    /// (the history pages' test adds a proxy that refuses everything).
    #[allow(dead_code)] // visual.rs needs no extra flag; history.rs does
    pub fn launch_with(chromium: &Path, width: u32, height: u32, env: &[(&str, &Path)], args: &[&str]) -> Browser {
        let dir = super::common::temp_dir("lab-visual-chromium-");
        let log = dir.path().join("chromium.log");
        let (cmd_read, cmd_write) = pipe();
        let (msg_read, msg_write) = pipe();
        let (child_in, child_out) = (cmd_read.as_raw_fd(), msg_write.as_raw_fd());
        let mut command = Command::new(chromium);
        command
            .args(super::common::HEADLESS_CHROMIUM)
            .args(["--force-device-scale-factor=1", "--remote-debugging-pipe"])
            .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
            // Its own scratch folders (org.chromium.Chromium.*) go with `dir`.
            .env("TMPDIR", dir.path())
            .arg(format!("--window-size={width},{height}"))
            .args(args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        for (key, value) in env {
            command.env(key, value);
        }
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe calls are allowed: dup2 is. It places the
        // pipe's ends (numbered 10 or above, see `pipe`) at the descriptors
        // the protocol uses, 3 and 4; dup2 leaves the copies without
        // close-on-exec, so they survive the exec while every other end
        // (opened close-on-exec) does not.
        unsafe {
            command.pre_exec(move || {
                for (fd, target) in [(child_in, 3), (child_out, 4)] {
                    if nix::libc::dup2(fd, target) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
        // The child's ends are the child's now: closing ours lets a reader see
        // the end of the pipe when the browser exits.
        drop((cmd_read, msg_write));
        let (send, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut pipe = fs::File::from(msg_read);
            let mut pending = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                let n = match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&chunk[..n]);
                while let Some(end) = pending.iter().position(|b| *b == 0) {
                    let message: Vec<u8> = pending.drain(..=end).collect();
                    let Ok(value) = serde_json::from_slice::<Value>(&message[..end]) else { continue };
                    if send.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        let mut browser = Browser { child, commands: fs::File::from(cmd_write), messages, events: Vec::new(), id: 0, session: String::new(), log, _dir: dir };
        let targets = browser.call_browser("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|all| all.iter().find(|t| t["type"] == "page"))
            .unwrap_or_else(|| panic!("Chromium opened no page: {targets}"))["targetId"]
            .clone();
        let attached = browser.call_browser("Target.attachToTarget", json!({ "targetId": page, "flatten": true }));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser
    }

    /// A protocol call on the browser itself (no session).
    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A protocol call on the page; panics, with Chromium's log, on an error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(method, params, Some(session))
    }

    fn send(&mut self, method: &str, params: Value, session: Option<String>) -> Value {
        self.id += 1;
        let mut message = json!({ "id": self.id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        if let Err(e) = self.commands.write_all(&bytes) {
            panic!("writing {method} to Chromium: {e}\n{}", self.log_text());
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let reply = self.next_message(deadline, method);
            if reply["id"] == self.id {
                if let Some(error) = reply.get("error") {
                    panic!("Chromium refused {method}: {error}");
                }
                return reply["result"].clone();
            }
            if reply.get("method").is_some() {
                self.events.push(reply);
            }
        }
    }

    fn next_message(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(left) {
            Ok(message) => message,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("Chromium did not answer {waiting_for} within {CALL_TIMEOUT:?}\n{}", self.log_text()),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("Chromium exited while {waiting_for} was awaited\n{}", self.log_text()),
        }
    }

    /// Waits for the page's event `method`, one that arrived already
    /// included; the other events that arrive meanwhile are kept (see
    /// [`Browser::take_events`]).
    fn wait_event(&mut self, method: &str) -> Value {
        if let Some(at) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(at);
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let message = self.next_message(deadline, method);
            if message["method"] == method {
                return message;
            }
            if message.get("method").is_some() {
                self.events.push(message);
            }
        }
    }

    /// The page's events named `method` that arrived since the last
    /// [`Browser::open`] began, taken out of the kept ones.
    #[allow(dead_code)] // used by history.rs (the requests a page made)
    pub fn take_events(&mut self, method: &str) -> Vec<Value> {
        let (taken, kept) = std::mem::take(&mut self.events).into_iter().partition(|e| e["method"] == method);
        self.events = kept;
        taken
    }

    /// Opens `url` and waits for its load event (its scripts ran; mermaid
    /// may still be drawing: the page script waits for that).
    pub fn open(&mut self, url: &str) {
        self.events.clear();
        let reply = self.call("Page.navigate", json!({ "url": url }));
        if let Some(error) = reply.get("errorText") {
            panic!("Chromium could not open {url}: {error}");
        }
        self.wait_event("Page.loadEventFired");
    }

    /// Runs `source` (a script run before the page's own, on every page
    /// opened from now on); returns its id for [`Browser::forget_script`].
    pub fn before_every_page(&mut self, source: &str) -> String {
        let reply = self.call("Page.addScriptToEvaluateOnNewDocument", json!({ "source": source }));
        reply["identifier"].as_str().expect("a script id").to_owned()
    }

    /// Stops running a script of [`Browser::before_every_page`].
    pub fn forget_script(&mut self, id: &str) {
        self.call("Page.removeScriptToEvaluateOnNewDocument", json!({ "identifier": id }));
    }

    /// Evaluates `expression` in the page, awaiting a promise, and returns
    /// its value; a thrown exception fails the test with its text.
    pub fn eval(&mut self, expression: &str) -> Value {
        let reply = self.call("Runtime.evaluate", json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }));
        if let Some(exception) = reply.get("exceptionDetails") {
            panic!("the page script threw: {}", exception["exception"]["description"].as_str().unwrap_or(&exception.to_string()));
        }
        reply["result"]["value"].clone()
    }

    /// The page's DOM as it stands now, serialised (`outerHTML` of the
    /// document element): what `--dump-dom` prints.
    #[allow(dead_code)] // used by book.rs and history.rs
    pub fn html(&mut self) -> String {
        let dom = self.eval("document.documentElement.outerHTML");
        dom.as_str().unwrap_or_else(|| panic!("the page's DOM is not text: {dom}")).to_owned()
    }

    /// Lays the page out as a window `width`×`height` CSS pixels wide.
    pub fn resize(&mut self, width: u32, height: u32) {
        self.call("Emulation.setDeviceMetricsOverride", json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }));
    }

    /// The fonts Chromium drew the text of the first element matching
    /// `selector` with: (family, glyphs) pairs.
    pub fn fonts_of(&mut self, selector: &str) -> Vec<(String, u64)> {
        self.call("DOM.enable", json!({}));
        self.call("CSS.enable", json!({}));
        let document = self.call("DOM.getDocument", json!({ "depth": 0 }));
        let node = self.call("DOM.querySelector", json!({ "nodeId": document["root"]["nodeId"], "selector": selector }));
        let fonts = self.call("CSS.getPlatformFontsForNode", json!({ "nodeId": node["nodeId"] }));
        let found = fonts["fonts"].as_array().cloned().unwrap_or_default();
        self.call("CSS.disable", json!({}));
        self.call("DOM.disable", json!({}));
        found.iter().map(|f| (f["familyName"].as_str().unwrap_or("?").to_owned(), f["glyphCount"].as_u64().unwrap_or(0))).collect()
    }

    /// Writes a PNG of the page from its top, `height` CSS pixels tall at
    /// most (the whole page when it is shorter, or with None), to `path`.
    pub fn screenshot(&mut self, path: &Path, height: Option<f64>) {
        let size = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight, innerWidth, innerHeight]");
        let number = |i: usize| size[i].as_f64().unwrap_or(900.0);
        let (width, whole, window) = (number(0), number(1), (number(2) as u32, number(3) as u32));
        let height = height.map_or(whole, |h| h.min(whole));
        // A window as tall as the picture (up to what a texture holds), so
        // that the fixed sidebar is drawn all the way down, not one window's
        // height and then nothing.
        self.resize(window.0, height.min(16000.0) as u32);
        self.capture((0.0, 0.0, width, height), path);
        self.resize(window.0, window.1);
    }

    /// Writes a PNG of one element, `element` (a JavaScript expression
    /// that finds it), with `margin` CSS pixels of the page around it.
    #[allow(dead_code)] // used by the notebook's test, not the visual check
    pub fn screenshot_of(&mut self, element: &str, margin: f64, path: &Path) {
        // From the page's top: a bar that sticks to the top of the window
        // (mdBook's menu) then lies above the element, not over it.
        self.eval("(() => { scrollTo(0, 0); return true; })()");
        let rect = self.eval(&format!("(() => {{ const r = ({element}).getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }})()"));
        let n = |i: usize| rect[i].as_f64().unwrap_or_else(|| panic!("no box for {element}: {rect}"));
        let (x, y) = ((n(0) - margin).max(0.0), (n(1) - margin).max(0.0));
        self.capture((x, y, n(2) + 2.0 * margin, n(3) + 2.0 * margin), path);
    }

    /// Writes a PNG of the page's rectangle `(x, y, width, height)`, in CSS
    /// pixels from the page's top left, drawn beyond the window if need be.
    fn capture(&mut self, (x, y, width, height): (f64, f64, f64, f64), path: &Path) {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true, "clip": { "x": x, "y": y, "width": width, "height": height, "scale": 1 } }),
        );
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().expect("screenshot data")).unwrap();
        fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    fn log_text(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        format!("--- Chromium's stderr (last lines)\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }
}

impl Drop for Browser {
    /// Chromium is a tree of processes (zygotes, renderers, the GPU
    /// process), and its helpers end a moment after the browser does. A
    /// browser is gone only when all of them are: the suite fails a group
    /// whose processes outlive it, and once found a helper still exiting
    /// (`process 21016 ()`) after every test of the group had passed.
    fn drop(&mut self) {
        let helpers = descendants(self.child.id());
        // SIGKILL: the page's work is done, nothing of it is kept.
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A helper is its pid and its start time: a pid freed and given to
        // another process in between is never signalled.
        let same = |&(pid, start): &(u32, u64)| lab::sysinfo::proc_stat(pid).filter(|s| s.start_time == start);
        for helper in helpers.iter().filter(|h| same(h).is_some()) {
            // The same signal to each helper, so none outlives the browser
            // by waiting for it to notice.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(helper.0 as i32), nix::sys::signal::Signal::SIGKILL);
        }
        let deadline = Instant::now() + HELPERS_GONE_BOUND;
        let alive = || helpers.iter().filter(|h| same(h).is_some_and(|s| s.state != 'Z')).map(|h| h.0).collect::<Vec<u32>>();
        while !alive().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = alive();
        if !left.is_empty() && !std::thread::panicking() {
            panic!("Chromium's helper processes {left:?} were still running {HELPERS_GONE_BOUND:?} after SIGKILL");
        }
    }
}

/// How long killed helpers may take to be gone (a zombie, waiting for
/// whoever reaps it, counts as gone).
const HELPERS_GONE_BOUND: Duration = Duration::from_secs(10);

/// Every process below `pid` (children, their children, …), read from
/// /proc, each as its pid and start time.
fn descendants(pid: u32) -> Vec<(u32, u64)> {
    let all: Vec<(u32, lab::sysinfo::ProcStat)> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, lab::sysinfo::proc_stat(p)?)))
        .collect();
    let mut found: Vec<(u32, u64)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, stat) in all.iter().filter(|(_, s)| s.ppid == parent) {
            found.push((*p, stat.start_time));
            parents.push(*p);
        }
    }
    found
}

/// A pipe whose two ends are closed on exec (the child gets its copies by
/// dup2, which clears the flag on the copy only), numbered 10 or above: no
/// end can sit at 3 or 4, where the child's dup2 of the other end would
/// overwrite it.
fn pipe() -> (OwnedFd, OwnedFd) {
    use std::os::fd::FromRawFd;
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe");
    let high = |fd: OwnedFd| {
        let moved = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10)).expect("a copy of a pipe's end");
        // SAFETY: fcntl just returned this new descriptor, owned by nobody else.
        unsafe { OwnedFd::from_raw_fd(moved) }
    };
    (high(read), high(write))
}
