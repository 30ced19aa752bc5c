//! What a failed server command or a held port tells the reader: the
//! command's own output, the tail of the server log, and which process
//! holds the port (read from `/proc`).

use std::fs;
use std::path::Path;
use std::process::Output;

/// Which process listens on `port` (best effort, from /proc), e.g.
/// `pid 4242 (python3 -m http.server 26426)`.
pub fn who_listens(port: u16) -> Option<String> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            // State 0A is LISTEN.
            (local_port == port && *fields.get(3)? == "0A").then(|| fields.get(9).map(|s| s.to_string()))?
        })
    })?;
    let wanted = format!("socket:[{inode}]");
    for proc_entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = fs::read_dir(proc_entry.path().join("fd")) else { continue };
        if fds.flatten().any(|fd| fs::read_link(fd.path()).map(|l| l.as_os_str() == wanted.as_str()).unwrap_or(false)) {
            let cmdline = fs::read(proc_entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            return Some(format!("pid {pid} ({})", cmdline.trim()));
        }
    }
    None
}

/// A failed server command, with what it printed and where to look next.
pub fn command_error(what: &str, out: &Output, log: Option<&Path>) -> String {
    let mut text = format!("{what} failed ({})", out.status);
    for stream in [&out.stdout, &out.stderr] {
        let s = String::from_utf8_lossy(stream);
        if !s.trim().is_empty() {
            text.push_str(&format!("\n{}", s.trim_end()));
        }
    }
    if let Some(log) = log {
        text.push_str(&format!("\nserver log {}:{}", log.display(), log_tail(log, 8)));
    }
    text
}

/// The last `lines` lines of a log, each on a new line, indented.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().map(|line| format!("\n  {line}")).collect()
}
