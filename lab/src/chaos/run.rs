//! One chaos run of one resource mode: fresh tables, the workload and the
//! nemesis for the run's duration, every fault healed and every holder
//! reaped, the server quiet, and then — only then — the history read and
//! judged: the holders' calls, the resource's rows and the nemesis's
//! faults gathered into one record (`crate::history`), and the checker's
//! verdict taken from that record alone.
//!
//! The run owns everything it starts: the [`Workload`] (its slots, their
//! holders and links) and the nemesis's thread, scoped to the run. Every
//! exit path, an error or Ctrl-C included, ends them: the nemesis heals
//! its links and joins its restart, the workload's drop ends every slot.

use super::checker::{self, CheckerInput};
use crate::vocabulary::Verdict;
use super::nemesis;
use super::schedule::Schedule;
use crate::vocabulary::FaultKind;
use super::workload::{holder_name, Fate, FaultLog, SlotPlan, Tally, Workload, SERVER_HOST};
use crate::cluster::{self, Cluster};
use crate::hosts::Network;
use crate::error::{panic_message, Result, ResultExt};
use crate::history::{self, hundredths, FaultSpan, Record, RunInfo};
use crate::vocabulary::FenceMode;
use crate::stats::ms;
use crate::{call_log, db, events, interrupt, poll};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a chaos run is asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed of the fault schedule and of the holders' work times.
    pub seed: u64,
    /// How many holder slots.
    pub holders: usize,
    /// How long each mode runs.
    pub duration: Duration,
    /// The `holder` binary.
    pub holder_bin: PathBuf,
    /// Print every holder's protocol lines and every fault on stderr.
    pub trace: bool,
    /// The case that runs it (F15), or `None` for `lab chaos`: it names
    /// the run's history (`F15-unfenced`, `chaos-fenced-row`).
    pub case: Option<&'static str>,
}

impl Config {
    /// The name of `mode`'s history, which names its files.
    pub fn history_name(&self, mode: FenceMode) -> String {
        format!("{}-{}", self.case.unwrap_or("chaos"), mode.cli_name())
    }

    /// How a reader runs `mode`'s run again.
    pub fn command(&self, mode: FenceMode) -> String {
        match self.case {
            Some(case) => format!("lab run {case}"),
            None => format!(
                "lab chaos --seed {} --holders {} --duration {}s --mode {}",
                self.seed,
                self.holders,
                self.duration.as_secs_f64(),
                mode.cli_name()
            ),
        }
    }
}

/// What one mode's run found, and what it took to find it.
#[derive(Clone, Debug)]
pub struct ModeRun {
    /// The resource mode.
    pub mode: FenceMode,
    /// The checker's verdict on the whole history.
    pub verdict: Verdict,
    /// Each fault of the schedule, in its order: its kind and what became
    /// of it. Those injected are the history's faults; the others found no
    /// target, were partitions that did not cut (see `nemesis.rs`), or
    /// came after the run had ended.
    pub fates: Vec<(FaultKind, Fate)>,
    /// Holder processes started.
    pub started: usize,
    /// Holder processes that failed on their own (mostly during restarts).
    pub failed: usize,
    /// The first of those failures, in full, for a reader who wonders.
    pub first_failure: Option<String>,
    /// How long the run took, the history's reading included.
    pub took: Duration,
    /// The token of every accepted write, in `write_attempt.id` order: the
    /// run's chart (a fence's staircase, a broken mode's dips).
    pub accepted_tokens: Vec<i64>,
    /// The whole history the verdict was taken from.
    pub record: Record,
}

impl ModeRun {
    /// How many of the schedule's faults met `fate`.
    pub fn fated(&self, fate: Fate) -> usize {
        self.fates.iter().filter(|(_, f)| *f == fate).count()
    }
}

#[cfg(test)]
impl ModeRun {
    /// A run of `mode` that found `verdict` and accepted `accepted_tokens`,
    /// with nothing else measured: what the report's unit tests draw.
    pub fn judged(mode: FenceMode, verdict: Verdict, accepted_tokens: Vec<i64>) -> ModeRun {
        ModeRun {
            mode,
            verdict,
            fates: Vec::new(),
            started: 0,
            failed: 0,
            first_failure: None,
            took: Duration::ZERO,
            accepted_tokens,
            record: Record::empty(&format!("chaos-{}", mode.cli_name()), mode),
        }
    }
}

/// How often a run reports its progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

// ANCHOR: holder_sessions_sql
/// The holders' sessions still on the server (`holder-a`, `holder-a
/// renewer`, …): a history is read only once there are none, so no write
/// can still land after it was read.
const HOLDER_SESSIONS: &str = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'holder-%'";
// ANCHOR_END: holder_sessions_sql

/// The network a run's modes share: each slot on a host of its own, and
/// the server's address on `db`, all on the switch the nemesis's
/// partitions cut. One for every mode of a run: making it costs a
/// namespace and an `ip` process a host, and a mode leaves every host
/// reaching every other (the nemesis heals on its way out) and no holder
/// on it (every one is reaped before the mode returns).
pub fn network(config: &Config) -> Result<Network> {
    let mut names = vec![SERVER_HOST.to_owned()];
    names.extend((0..config.holders).map(holder_name));
    Network::create(&names.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Runs `schedule` against `mode` on `net` (made by [`network`] for this
/// `config`) and judges the history; `progress` gets a line every
/// [`PROGRESS_EVERY`].
pub fn run_mode(cluster: &Cluster, config: &Config, schedule: &Schedule, mode: FenceMode, net: &Network, progress: &mut dyn FnMut(String)) -> Result<ModeRun> {
    let began = Instant::now();
    // Fresh tables for every mode: token 1 first, an empty history.
    db::setup::reset_database(db::LEASE_DB, db::LEASE_SCHEMA)?;
    db::setup::reset_database(db::RES_DB, db::RES_SCHEMA)?;

    let log = Arc::new(FaultLog::new(config.trace));
    let tally = Arc::new(Tally::default());
    let plan = SlotPlan {
        holder_bin: config.holder_bin.clone(),
        mode,
        seed: config.seed,
        server: cluster.socket_path(),
        trace: config.trace,
    };
    // The calls of whatever ran before are not this run's.
    call_log::take();
    let (start, t0_unix_ms) = (Instant::now(), events::now_ms());
    let workload = Workload::start(config.holders, &plan, net, &log, &tally, start)?;
    let stop_nemesis = AtomicBool::new(false);
    let injected = std::thread::scope(|scope| {
        let nemesis = std::thread::Builder::new()
            .name("nemesis".into())
            .spawn_scoped(scope, || nemesis::run(schedule, workload.slots(), cluster, net, &log, &stop_nemesis, start))
            .context("starting the nemesis")?;
        let end = start + config.duration;
        let mut report_at = start + PROGRESS_EVERY;
        // The run's length is the experiment's own: time waited by design.
        poll::designed(|| {
            while Instant::now() < end && !nemesis.is_finished() && !interrupt::requested() && tally.broken.lock().is_none() {
                if Instant::now() >= report_at {
                    report_at += PROGRESS_EVERY;
                    progress(progress_line(mode, start, config.duration, &log, &tally));
                }
                std::thread::sleep(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())));
            }
        });
        stop_nemesis.store(true, Ordering::SeqCst);
        nemesis.join().map_err(|panic| crate::Error::from(format!("the nemesis panicked: {}", panic_message(&*panic))))?
    });
    // Every holder resumed, killed and reaped; the links closed.
    workload.finish();
    let end_ms = ms(start.elapsed());
    if interrupt::requested() {
        return Err("interrupted".into());
    }
    injected?;
    if let Some(why) = tally.broken.lock().take() {
        return Err(format!("a slot of the workload broke down: {why}").into());
    }

    let mut observer = db::connect(db::RES_DB, "lab chaos checker")?;
    let mut left: i64 = 0;
    let quiet = poll::poll_until(poll::BOUND, poll::EVERY, || {
        left = observer.query_one(HOLDER_SESSIONS, &[])?.get(0);
        Ok::<_, crate::Error>(left == 0)
    })?;
    if !quiet {
        return Err(format!("{left} holder sessions still on the server {:?} after every holder was reaped; see {}", poll::BOUND, cluster::log_path(cluster.dir()).display()).into());
    }
    let heard = call_log::take();
    let resource = history::read_resource(&mut observer, Some(mode), t0_unix_ms)?;
    let ops = history::ops_from_calls(&heard, resource.attempts, t0_unix_ms)?;
    // What became of every fault of the schedule: each has one fate, and
    // the injected ones are exactly the history's faults.
    let fates: Vec<(FaultKind, Fate)> = schedule.events.iter().map(|e| e.kind).zip(log.fates(schedule.events.len())?).collect();
    let injected_faults = log.all_injected();
    let settled = fates.iter().filter(|(_, f)| *f == Fate::Injected).count();
    if settled != injected_faults.len() {
        return Err(format!("{settled} of the schedule's faults were injected, but the log holds {} injected faults", injected_faults.len()).into());
    }
    let faults = injected_faults
        .into_iter()
        .enumerate()
        .map(|(i, f)| FaultSpan {
            id: i as u64 + 1,
            kind: f.kind,
            // A fault that hits several holders names them joined by '+'.
            targets: f.target.iter().flat_map(|t| t.split('+')).map(str::to_owned).collect(),
            start_ms: hundredths(ms(f.at)),
            end_ms: f.until.map(|u| hundredths(ms(u))),
        })
        .collect();
    let run = RunInfo {
        schema: history::SCHEMA,
        name: config.history_name(mode),
        command: config.command(mode),
        mode: Some(mode),
        t0_unix_ms,
        end_ms: hundredths(end_ms),
        fault_kinds: FaultKind::ALL.to_vec(),
        holders: (0..config.holders).map(holder_name).collect(),
    };
    let record = Record { run, ops, faults, finals: resource.finals };
    let history = CheckerInput::from_record(&record)?;
    let first_failure = tally.first_failure.lock().clone();
    let mut accepted: Vec<&crate::vocabulary::WriteAttempt> = history.attempts.iter().filter(|a| a.accepted).collect();
    accepted.sort_by_key(|a| a.id);
    let accepted_tokens = accepted.iter().map(|a| a.token).collect();
    Ok(ModeRun {
        mode,
        verdict: checker::check(&history),
        fates,
        started: tally.started.load(Ordering::SeqCst),
        failed: tally.failed.load(Ordering::SeqCst),
        first_failure,
        took: began.elapsed(),
        accepted_tokens,
        record,
    })
}

/// Parses a run's duration: `120s`, `2m`, `500ms`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a duration like 120s, 2m or 500ms"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n * 60),
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; use ms, s or m")),
    };
    if d.is_zero() {
        return Err("a chaos run needs a duration above zero".into());
    }
    Ok(d)
}

/// `chaos FENCED_SCOPE 30s/120s: 310 faults injected (12 missed), 95 holdings, 140 holders started (8 failed)`.
fn progress_line(mode: FenceMode, start: Instant, duration: Duration, log: &FaultLog, tally: &Tally) -> String {
    format!(
        "chaos {mode} {:.0}s/{:.0}s: {} faults injected ({} missed), {} holdings, {} holders started ({} failed)",
        start.elapsed().as_secs_f64(),
        duration.as_secs_f64(),
        log.all_injected().len(),
        log.missed_so_far(),
        tally.grants.lock().len(),
        tally.started.load(Ordering::SeqCst),
        tally.failed.load(Ordering::SeqCst),
    )
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    /// Durations as a reader types them.
    #[test]
    fn durations_parse_as_typed() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("s").is_err());
    }
}
