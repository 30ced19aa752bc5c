//! The files the notebook serves: the built book's pages, and the history
//! pages a run wrote. A path is taken apart into plain names (no `..`, no
//! hidden file), and each file is opened without following a link.

use super::{respond_text, Notebook};
use crate::history;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Answers a request for a file of the book.
pub fn answer(notebook: &Notebook, path: &str, request: tiny_http::Request) {
    let path = if path.is_empty() || path.ends_with('/') { format!("{path}index.html") } else { path.to_owned() };
    match plain_path(&notebook.book, &path) {
        Some(file) => send(&file, request),
        None => respond_text(request, 404, &format!("no page {path:?} in the book")),
    }
}

/// Answers a request for a history page the lab wrote (`F4.html`).
pub fn history(name: &str, request: tiny_http::Request) {
    match plain_path(&history::dir(), name).filter(|_| name.ends_with(".html")) {
        Some(file) => send(&file, request),
        None => respond_text(request, 404, &format!("no history page {name:?}")),
    }
}

/// `base` joined with `relative` when every part of it is a plain name.
fn plain_path(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut path = base.to_path_buf();
    for part in relative.split('/') {
        let plain = !part.is_empty() && !part.starts_with('.') && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !plain {
            return None;
        }
        path.push(part);
    }
    Some(path)
}

/// Sends `file` with its type, opened without following a link.
fn send(file: &Path, request: tiny_http::Request) {
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(file).and_then(|f| f.metadata().map(|m| (f, m)));
    match opened {
        Ok((mut handle, meta)) if meta.is_file() => {
            let kind = match file.extension().and_then(|e| e.to_str()).unwrap_or("") {
                "html" => "text/html; charset=utf-8",
                "css" => "text/css; charset=utf-8",
                "js" => "text/javascript; charset=utf-8",
                "json" => "application/json",
                "svg" => "image/svg+xml",
                "png" => "image/png",
                "woff" => "font/woff",
                "woff2" => "font/woff2",
                "ttf" => "font/ttf",
                "txt" | "md" | "mmd" => "text/plain; charset=utf-8",
                _ => "application/octet-stream",
            };
            let mut body = Vec::with_capacity(meta.len() as usize);
            match std::io::Read::read_to_end(&mut handle, &mut body) {
                Ok(_) => super::respond(request, 200, kind, &body),
                Err(e) => respond_text(request, 500, &format!("cannot read {}: {e}", file.display())),
            }
        }
        _ => respond_text(request, 404, &format!("no file {}", file.display())),
    }
}
