//! `lab notebook`: the built book served by the lab itself, so that each
//! chapter's case runs from its page. The page's cell (drawn by the book's
//! `style/notebook.js`) asks this server for the cases and their
//! parameters, starts one run, reads its transcript as it is printed, and
//! shows the diff against the locked snapshot when it ends.
//!
//! The server is `tiny_http` (already in the build through stateright's
//! Explorer) on 127.0.0.1 only, on a listener the lab binds itself before
//! it prints the address. Every request must carry the run's random token
//! as the first part of its path (`/<token>/index.html`), name this server
//! in its `Host` header, and, when it sends an `Origin`, come from this
//! server's own pages; a run or a stop must send one. Anything else is
//! refused with a reason. That keeps out another local account (it cannot
//! read the token) and any web page the reader has open (its requests
//! carry its own origin, and a DNS-rebound name fails the `Host` check).
//!
//! One file per concept: `check` (who may ask), `api` (the cases, a run,
//! a stop), `run` (the one run at a time, and its stream), `files` (the
//! book's pages, the run's history pages).

mod api;
mod check;
mod files;
mod run;

pub use api::{arguments, CHAOS_MAX_S};

use crate::error::{Result, ResultExt};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::io::Write;
use std::sync::Arc;

/// What every request handler shares.
pub struct Notebook {
    /// The built book (`target/book`).
    book: PathBuf,
    /// The listener's port: the only `Host` and `Origin` accepted name it.
    port: u16,
    /// The run's token: the first part of every path.
    token: String,
    /// The one run at a time.
    runs: run::Runs,
}

/// Serves `book` on 127.0.0.1:`port` (0: a free port) until the process
/// is stopped; prints the address once the listener is bound.
pub fn serve(book: PathBuf, port: u16) -> Result<()> {
    if !book.join("index.html").is_file() {
        return Err(format!("{} holds no built book: build it with `./run.sh book` (`./run.sh serve` does)", book.display()).into());
    }
    // Bound first, then printed: the address printed is this listener's.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).with_context(|| format!("listening on 127.0.0.1:{port}"))?;
    let port = listener.local_addr()?.port();
    let token = crate::cluster::credentials::random_password()?;
    let server = tiny_http::Server::from_listener(listener, None).map_err(|e| format!("serving on 127.0.0.1:{port}: {e}"))?;
    let notebook = Arc::new(Notebook { book, port, token, runs: run::Runs::new() });
    println!("notebook: the book at http://127.0.0.1:{port}/{}/index.html (Ctrl-C to stop)", notebook.token);
    std::io::stdout().flush()?;
    for request in server.incoming_requests() {
        let notebook = Arc::clone(&notebook);
        // A thread per request: a run's stream lasts as long as the run.
        std::thread::Builder::new().name("notebook request".into()).spawn(move || notebook.answer(request))?;
    }
    Err("the notebook's server stopped".into())
}

impl Notebook {
    /// Answers one request: refused, an API call, or a file.
    fn answer(&self, request: tiny_http::Request) {
        if let Err((status, why)) = check::admit(&request, self.port, &self.token) {
            return respond_text(request, status, &why);
        }
        let path = request.url().split(['?', '#']).next().unwrap_or("").strip_prefix(&format!("/{}/", self.token)).unwrap_or("").to_owned();
        match path.strip_prefix("api/") {
            Some(call) => api::answer(self, call, request),
            None => files::answer(self, &path, request),
        }
    }
}

/// A plain-text answer with `status`.
fn respond_text(request: tiny_http::Request, status: u16, text: &str) {
    respond(request, status, "text/plain; charset=utf-8", format!("{text}\n").as_bytes());
}

/// Sends `body` as `kind` with `status`, and closes the connection after
/// it. Written by hand on tiny_http's writer because tiny_http 0.12 drops
/// a `Connection` header from a response: a kept-alive connection holds a
/// thread of its small pool, and new connections then queue behind the
/// browser's idle ones (a chapter's page stalled for 20 s, one load in
/// four, measured); one answer per connection frees its thread at once.
fn respond(request: tiny_http::Request, status: u16, kind: &str, body: &[u8]) {
    let head = head(status, kind, &format!("Content-Length: {}", body.len()));
    let mut writer = request.into_writer();
    let _ = writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(body)).and_then(|()| writer.flush());
}

/// An answer's status line and headers, the same for every answer but its
/// status, type and length (`Content-Length: N`, or chunked for a stream).
fn head(status: u16, kind: &str, length: &str) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        421 => "Misdirected Request",
        _ => "Error",
    };
    format!("HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\n{length}\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n")
}
