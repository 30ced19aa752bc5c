//! Pictures of what happened in a run: each holder's holding, its pauses,
//! its writes and the lease's expiry, on one time axis, as a mermaid gantt
//! chart (`./run.sh timeline F4`).
//!
//! Every time comes from where it happened: acquires, renewals and releases
//! from `lease26.lease_event` (a trigger stamps each change of the lease row
//! with the server's clock), writes from `res26.write_attempt.attempted_at`,
//! the lease's expiry from the last `expires_at` of a holding, and the
//! parent's signals from [`crate::events`]. The server and the parent read
//! one machine's wall clock, so the axis is one.
//!
//! A case that resets the schemas halfway (F12; F7 too, though F7 runs no
//! holder process and gets no picture) would lose the first half's rows:
//! [`stash`] keeps them, and [`Lab::reset`](crate::cases::Lab::reset)
//! calls it before every reset.

use crate::cluster::{credentials, Endpoint};
use crate::db;
use crate::error::{Result, ResultExt};
use crate::events::{self, ParentEvent};
use crate::paths;
use crate::resource;
use crate::vocabulary::{Act, LeaseEventKind, WriteAttempt};
use crate::safe_dir::SafeDir;
use std::fmt::Write;
use std::path::PathBuf;
use parking_lot::Mutex;

/// One change of the lease row, as `lease_event` recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseEvent {
    /// When, in ms since the epoch, by the server's clock.
    at_ms: f64,
    /// The holder named in the row.
    holder: String,
    /// The row's token.
    token: i64,
    /// What changed the row.
    kind: LeaseEventKind,
    /// The row's `expires_at` after the change, in ms since the epoch.
    expires_ms: f64,
}

/// Everything recorded during one case.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The lease row's changes.
    lease: Vec<LeaseEvent>,
    /// The resource's write attempts, their times in ms since the epoch.
    writes: Vec<WriteAttempt>,
    /// What the parent did.
    parent: Vec<ParentEvent>,
}

impl LeaseEvent {
    /// A change of the lease row at `at_ms`; `expires_ms` the row's
    /// `expires_at` after it.
    pub fn new(at_ms: f64, holder: &str, token: i64, kind: LeaseEventKind, expires_ms: f64) -> LeaseEvent {
        LeaseEvent { at_ms, holder: holder.to_owned(), token, kind, expires_ms }
    }
}

impl Timeline {
    /// A timeline of events from elsewhere than a run's tables: the model's
    /// counterexamples are drawn with the same chart as the cases' runs.
    pub fn from_events(lease: Vec<LeaseEvent>, writes: Vec<WriteAttempt>, parent: Vec<ParentEvent>) -> Timeline {
        Timeline { lease, writes, parent }
    }
}

/// Rows of a case saved before a reset dropped them.
static STASH: Mutex<Option<Timeline>> = Mutex::new(None);

/// Forgets everything recorded so far: a case starts.
pub fn clear() {
    *STASH.lock() = None;
    events::take();
}

/// Keeps rows read before a reset drops them (see [`lease_events_on`],
/// [`write_events_on`]).
pub fn stash(lease: Vec<LeaseEvent>, writes: Vec<WriteAttempt>) {
    keep(Timeline { lease, writes, ..Timeline::default() });
}

/// Keeps the rows of a case's own servers (the partition cases': lease
/// stores and resources on hosts of the lab's network, which end with the
/// case, before the runner draws): the lease events of every server in
/// `leases` (none where the lease is not in PostgreSQL: F19's etcd; two
/// after F18's failover), the write attempts of every server in `resources`.
/// A server that cannot be read leaves a picture without its rows, as a
/// reset's table that cannot be read does.
pub fn stash_from(leases: &[Endpoint], resources: &[Endpoint]) {
    for lease in leases {
        if let Ok(rows) = lease_events(lease) {
            keep(Timeline { lease: rows, ..Timeline::default() });
        }
    }
    for res in resources {
        if let Ok(rows) = write_events(res) {
            keep(Timeline { writes: rows, ..Timeline::default() });
        }
    }
}

fn keep(now: Timeline) {
    let mut stash = STASH.lock();
    let kept = stash.get_or_insert_with(Timeline::default);
    // A promoted standby's `lease_event` begins with the rows it replayed
    // from its primary (F18): the same change, kept once.
    for event in now.lease {
        if !kept.lease.contains(&event) {
            kept.lease.push(event);
        }
    }
    kept.writes.extend(now.writes);
}

/// Everything recorded since [`clear`]: the stash, the rows now (read
/// with [`lease_events_on`] and [`write_events_on`]), and the parent's
/// signals.
pub fn collect(lease: Vec<LeaseEvent>, writes: Vec<WriteAttempt>) -> Timeline {
    let mut timeline = STASH.lock().take().unwrap_or_default();
    timeline.lease.extend(lease);
    timeline.writes.extend(writes);
    timeline.parent = events::take();
    timeline
}

/// Every change of the lease row on `server`.
fn lease_events(server: &Endpoint) -> Result<Vec<LeaseEvent>> {
    lease_events_on(&mut *db::session(server, credentials::ROLE, db::LEASE_DB, "lab timeline", None)?)
}

/// Every change of the lease row, read on a session to a `lease26`.
pub fn lease_events_on(lease: &mut postgres::Client) -> Result<Vec<LeaseEvent>> {
    // Epoch milliseconds on both sides: one axis with the parent's clock
    // (every host of the lab's network shares the machine's).
    let rows = lease
        .query(
            "SELECT extract(epoch FROM at)::float8 * 1000, holder, token, kind, extract(epoch FROM expires_at)::float8 * 1000
               FROM lease_event ORDER BY id",
            &[],
        )
        .context("reading lease_event")?;
    rows.iter()
        .map(|r| {
            let kind: String = r.get(3);
            let kind = kind.parse::<LeaseEventKind>().map_err(|e| format!("lease_event: {e}"))?;
            Ok(LeaseEvent { at_ms: r.get(0), holder: r.get(1), token: r.get(2), kind, expires_ms: r.get(4) })
        })
        .collect()
}

/// Every write attempt on `server`'s resource, in ms since the epoch.
fn write_events(server: &Endpoint) -> Result<Vec<WriteAttempt>> {
    write_events_on(&mut *db::session(server, credentials::ROLE, db::RES_DB, "lab timeline", None)?)
}

/// Every write attempt, read on a session to a `res26`.
pub fn write_events_on(res: &mut postgres::Client) -> Result<Vec<WriteAttempt>> {
    res.query(resource::ATTEMPTS, &[]).context("reading write_attempt")?.iter().map(|r| resource::attempt_from(r, 0.0)).collect()
}

impl Timeline {
    /// Whether the case ran holder processes (a case of component steps
    /// writes in its own name, with none, and gets no picture).
    pub fn has_holders(&self) -> bool {
        self.parent.iter().any(|e| e.act == Act::Spawn)
    }

    // ANCHOR: gantt
    /// The run as a mermaid gantt chart, times in milliseconds from `start`.
    /// One section per holder: each holding from its acquire to its release
    /// or its expiry (the last `expires_at` the database gave it), the
    /// pauses between SIGSTOP and SIGCONT, SIGKILL, and every write attempt,
    /// accepted or refused.
    pub fn gantt(&self, title: &str, start_ms: f64) -> String {
        let at = |ms: f64| (ms - start_ms).max(0.0).round() as i64;
        let mut holders: Vec<&str> = Vec::new();
        let named = self.lease.iter().map(|e| e.holder.as_str());
        let named = named.chain(self.parent.iter().map(|e| e.holder.as_str())).chain(self.writes.iter().map(|e| e.writer.as_str()));
        for holder in named {
            if !holders.contains(&holder) {
                holders.push(holder);
            }
        }
        let mut out = format!("gantt\n    title {title}\n    dateFormat x\n    axisFormat %S.%L\n");
        let mut id = 0;
        let mut next = || {
            id += 1;
            format!("t{id}")
        };
        for holder in holders {
            let _ = writeln!(out, "    section {holder}");
            for (i, acquire) in self.lease.iter().enumerate().filter(|(_, e)| e.holder == holder && e.kind == LeaseEventKind::Acquire) {
                // This holding's own events: those of its holder and token
                // after its acquire, up to the next acquire of the same
                // pair (a case that resets between two runs of a timeline,
                // as F12 does, issues token 1 again).
                let same = |e: &&LeaseEvent| e.holder == holder && e.token == acquire.token;
                let own: Vec<&LeaseEvent> = self.lease[i + 1..].iter().filter(same).take_while(|e| e.kind != LeaseEventKind::Acquire).collect();
                let released = own.iter().find(|e| e.kind == LeaseEventKind::Release).map(|e| e.at_ms);
                let expiry = own.iter().filter(|e| e.kind != LeaseEventKind::Release).map(|e| e.expires_ms).fold(acquire.expires_ms, f64::max);
                let (end, how) = match released {
                    Some(r) if r < expiry => (r, "释放"),
                    _ => (expiry, "到期"),
                };
                let _ = writeln!(out, "    持有 token={} :{}, {}, {}", acquire.token, next(), at(acquire.at_ms), at(end).max(at(acquire.at_ms) + 1));
                let _ = writeln!(out, "    token={} {how} :milestone, {}, {}, {}", acquire.token, next(), at(end), at(end));
            }
            let (mut stopped, mut held, mut cut): (Option<f64>, Option<f64>, Option<f64>) = (None, None, None);
            for e in self.parent.iter().filter(|e| e.holder == holder) {
                match e.act {
                    Act::Spawn => {}
                    Act::Stop => stopped = Some(e.at_ms),
                    Act::Cont => {
                        if let Some(from) = stopped.take() {
                            let _ = writeln!(out, "    SIGSTOP 暂停 :crit, {}, {}, {}", next(), at(from), at(e.at_ms));
                        }
                    }
                    Act::Hold => held = Some(e.at_ms),
                    // A partition in the switch (hosts): from the cut to the heal.
                    Act::Cut => cut = Some(e.at_ms),
                    Act::Heal => {
                        if let Some(from) = cut.take() {
                            let _ = writeln!(out, "    网络分区 :crit, {}, {}, {}", next(), at(from), at(e.at_ms));
                        }
                    }
                    Act::Release => {
                        if let Some(from) = held.take() {
                            let _ = writeln!(out, "    请求扣在代理里 :crit, {}, {}, {}", next(), at(from), at(e.at_ms));
                        }
                    }
                    _ => {
                        let _ = writeln!(out, "    {} :milestone, crit, {}, {}, {}", e.act, next(), at(e.at_ms), at(e.at_ms));
                    }
                }
            }
            if let Some(from) = cut {
                // Never healed before the picture was taken.
                let _ = writeln!(out, "    网络分区 :crit, {}, {}, {}", next(), at(from), at(from) + 1);
            }
            if let Some(from) = stopped {
                // Never resumed before it ended (killed while stopped).
                let _ = writeln!(out, "    SIGSTOP 暂停 :crit, {}, {}, {}", next(), at(from), at(from) + 1);
            }
            for w in self.writes.iter().filter(|w| w.writer == holder) {
                let (verdict, tag) = if w.accepted { ("接受", "") } else { ("拒绝", "crit, ") };
                let _ = writeln!(out, "    写入 token={} {verdict} :milestone, {tag}{}, {}, {}", w.token, next(), at(w.at_ms), at(w.at_ms));
            }
        }
        out
    }
    // ANCHOR_END: gantt
}

/// Where a run's pictures are saved: beside its transcripts.
pub fn dir() -> PathBuf {
    paths::timelines_dir()
}

/// Removes a run's chart, if there is one: a run that draws none must not
/// leave the last run's in its place.
pub fn discard(name: &str) -> Result<()> {
    let path = dir().join(format!("{name}.mmd"));
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

/// Saves a case's chart as `<dir>/<name>.mmd`.
pub fn save(name: &str, gantt: &str) -> Result<PathBuf> {
    // A folder of the lab's own (in a private cluster's place, or target/lab).
    let folder = SafeDir::own_folder(&dir())?;
    let file = format!("{name}.mmd");
    folder.write_whole(&file, gantt, 0o644).with_context(|| format!("writing {}", dir().join(&file).display()))?;
    Ok(dir().join(file))
}

/// A page that draws a saved chart with the book's mermaid.js (written by
/// `./run.sh book`), for a browser.
pub fn page(name: &str) -> Result<PathBuf> {
    if !crate::history::is_run_name(name) {
        return Err(format!("{name:?} is not a case or run name (./run.sh timeline F4)").into());
    }
    let chart = std::fs::read_to_string(dir().join(format!("{name}.mmd")))
        .with_context(|| format!("no timeline of {name} yet: run the case first (./run.sh {name})"))?;
    let script = paths::root().join("target/mermaid/mermaid.min.js");
    let path = dir().join(format!("{name}.html"));
    let html = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>{name}</title>\n<pre class=\"mermaid\">\n{}</pre>\n<script src=\"file://{}\"></script>\n<script>mermaid.initialize({{startOnLoad: true}});</script>\n",
        // Text, never markup: mermaid reads the element's text, which the
        // browser unescapes; a holder's or a content's `<` stays a `<`.
        crate::history::page::esc(&chart),
        script.display()
    );
    SafeDir::own_folder(&dir())?.write_whole(&format!("{name}.html"), &html, 0o644)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of `lines` is a whole line of `chart`.
    fn assert_draws(chart: &str, lines: &[&str]) {
        for line in lines {
            assert!(chart.contains(&format!("{line}\n")), "missing {line:?} in:\n{chart}");
        }
    }

    /// A paused holder whose lease expires, a second holder that writes, a
    /// refused late write: every piece drawn where it happened.
    #[test]
    fn a_pause_a_takeover_and_a_refusal_are_drawn() {
        let lease = |at_ms, holder: &str, token, kind: &str, expires_ms| LeaseEvent::new(at_ms, holder, token, kind.parse().unwrap(), expires_ms);
        let write = |at_ms, writer: &str, token, accepted| WriteAttempt {
            id: 0,
            scope: "daily-report".into(),
            part: "summary".into(),
            writer: writer.into(),
            token,
            mode: crate::vocabulary::FenceMode::FencedScope,
            accepted,
            floor_after: None,
            at_ms,
        };
        let timeline = Timeline {
            lease: vec![
                lease(1000.0, "holder-a", 1, "acquire", 2500.0),
                lease(1400.0, "holder-a", 1, "renew", 2900.0),
                lease(3000.0, "holder-b", 2, "acquire", 4500.0),
                lease(3050.0, "holder-b", 2, "release", f64::NEG_INFINITY),
            ],
            writes: vec![
                write(3020.0, "holder-b", 2, true),
                write(4000.0, "holder-a", 1, false),
            ],
            parent: vec![
                ParentEvent { at_ms: 1500.0, holder: "holder-a".into(), act: Act::Stop },
                ParentEvent { at_ms: 3990.0, holder: "holder-a".into(), act: Act::Cont },
            ],
        };
        assert_draws(&timeline.gantt("F4", 1000.0), &[
            "    section holder-a",
            "    持有 token=1 :t1, 0, 1900",
            "    token=1 到期 :milestone, t2, 1900, 1900",
            "    SIGSTOP 暂停 :crit, t3, 500, 2990",
            "    写入 token=1 拒绝 :milestone, crit, t4, 3000, 3000",
            "    section holder-b",
            "    持有 token=2 :t5, 2000, 2050",
            "    token=2 释放 :milestone, t6, 2050, 2050",
            "    写入 token=2 接受 :milestone, t7, 2020, 2020",
        ]);
    }

    /// A timeline run twice with a reset between (F12): token 1 is issued
    /// twice, and each holding ends with its own release or expiry.
    #[test]
    fn a_token_issued_again_after_a_reset_is_a_holding_of_its_own() {
        let lease = |at_ms, token, kind: &str, expires_ms| LeaseEvent::new(at_ms, "holder-a", token, kind.parse().unwrap(), expires_ms);
        let timeline = Timeline {
            lease: vec![
                lease(1000.0, 1, "acquire", 2500.0),
                lease(1200.0, 1, "release", f64::NEG_INFINITY),
                lease(5000.0, 1, "acquire", 6500.0),
                lease(5400.0, 1, "renew", 6900.0),
            ],
            writes: Vec::new(),
            parent: Vec::new(),
        };
        assert_draws(&timeline.gantt("F12", 1000.0), &[
            "    持有 token=1 :t1, 0, 200",
            "    token=1 释放 :milestone, t2, 200, 200",
            "    持有 token=1 :t3, 4000, 5900",
            "    token=1 到期 :milestone, t4, 5900, 5900",
        ]);
    }
}
