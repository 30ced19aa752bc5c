//! `lab run` and `lab stress`: the cases run through the one [`Runner`],
//! their transcripts saved for `lab diff`, the evidence run's pictures
//! kept beside its output, and where the time went.

use super::runner::{CaseTime, Runner};
use super::{Case, CaseOptions};
use crate::error::{Result, ResultExt};
use crate::interrupt::QuietAfterStop;
use crate::vocabulary::FenceMode;
use crate::transcript::Transcript;
use crate::{evidence, history, paths, timeline};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `lab run` was asked for.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The case ids as typed (`F4`, `all`).
    pub cases: Vec<String>,
    /// The reader's knobs.
    pub options: CaseOptions,
    /// Where to write the whole transcript too (the evidence run).
    pub out: Option<PathBuf>,
    /// The `holder` binary.
    pub holder_bin: PathBuf,
}

/// Why `--mode picked` is refused for the cases named, if it is: a case
/// named on the command line that cannot run the picked mode is refused,
/// not silently run in its own (cases run only because of `all` are).
pub fn refusal(cases: &[String], picked: Option<FenceMode>) -> Option<String> {
    let picked = picked?;
    let named = |c: &Case| cases.iter().any(|id| id.eq_ignore_ascii_case(c.id));
    let case = super::select(cases).into_iter().find(|c| named(c) && !c.modes.is_empty() && !c.takes_mode(picked))?;
    let mut takes: Vec<String> = case.modes.iter().map(|m| m.cli_name().to_owned()).collect();
    let last = takes.pop()?;
    let takes = if takes.is_empty() { last } else { format!("{} or {last}", takes.join(", ")) };
    Some(format!("{} takes --mode {takes} only", case.id))
}

/// Why `--pause-before-check` is refused for the cases named, if it is:
/// like `--mode`, a case named on the command line that has no deadline
/// check to pause before is refused rather than run as if it had.
pub fn pause_refusal(cases: &[String], pause_before_check: bool) -> Option<String> {
    if !pause_before_check {
        return None;
    }
    let named = |c: &Case| cases.iter().any(|id| id.eq_ignore_ascii_case(c.id));
    let case = super::select(cases).into_iter().find(|c| named(c) && !c.takes_pause_before_check())?;
    Some(format!("{} takes no --pause-before-check (only {} do)", case.id, super::PAUSES_BEFORE_CHECK.join(" and ")))
}

/// `lab run`: the cases streamed to stdout, each saved for `lab diff`;
/// `true` when no check failed.
pub fn run(request: &RunRequest) -> Result<bool> {
    let started = Instant::now();
    let since = std::time::SystemTime::now();
    let selected = super::select(&request.cases);
    let runner = Runner::begin(request.holder_bin.clone(), request.options.clone())?;
    let mut t = Transcript::streaming(QuietAfterStop(std::io::stdout()));
    let mut times = Vec::new();
    runner.run_each(&selected, &mut t, |case, t, time| {
        times.push((case.id, time));
        // Saved under the case's id for `diff F4`, and, for a variant
        // (--mode, --pause-before-check, --threads), under its own name too.
        evidence::save_transcript(case.id, &t.case_text())?;
        let name = case.run_name(runner.options());
        if name != case.id {
            evidence::save_transcript(&name, &t.case_text())?;
        }
        Ok(())
    })?;
    t.summary();
    if let Some(out) = &request.out {
        // The evidence run keeps its pictures and its histories too, for the book.
        keep_timelines(&selected, out)?;
        keep_histories(&selected, out, since)?;
        // Written whole and renamed into place: a reader never finds half a
        // run. Its data beside it: what the book's facts read.
        paths::write_whole(out, t.text()).map_err(|e| format!("writing {}: {e}", out.display()))?;
        crate::result_data::ResultData::write(&super::run_data::RunData::of(&t, &times), &out.with_extension("json"))?;
    }
    drop(runner);
    print_times(&times, started.elapsed());
    Ok(t.failed() == 0)
}

/// Copies the pictures of the cases just run next to `out` (the evidence
/// run: evidence/26/timelines/F4.mmd …). The runner removed each case's
/// old picture before it ran, so only this run's are found.
fn keep_timelines(selected: &[&Case], out: &Path) -> Result<()> {
    let kept = out.with_file_name("timelines");
    // A reader's run (`target/lab/output.txt`) keeps them where they are:
    // copying a file onto itself would empty it.
    if same_dir(&kept, &timeline::dir()) {
        return Ok(());
    }
    for case in selected {
        let chart = timeline::dir().join(format!("{}.mmd", case.id));
        if chart.is_file() {
            std::fs::create_dir_all(&kept)?;
            // Read and written whole: never through a link at the copy's name.
            paths::write_whole(&kept.join(format!("{}.mmd", case.id)), &std::fs::read_to_string(&chart)?)?;
        }
    }
    Ok(())
}

/// Copies the histories this run wrote of the cases just run next to `out`
/// (evidence/26/history/F4.jsonl, F4.html, F12-unfenced.html …): each
/// named after its case, alone or followed by `-`, and written since the
/// run began.
fn keep_histories(selected: &[&Case], out: &Path, since: std::time::SystemTime) -> Result<()> {
    let kept = out.with_file_name("history");
    if same_dir(&kept, &history::dir()) {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(history::dir()) else { return Ok(()) };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".html").or_else(|| file.strip_suffix(".jsonl")) else { continue };
        let ours = selected.iter().any(|c| stem == c.id || stem.strip_prefix(c.id).is_some_and(|rest| rest.starts_with('-')));
        let fresh = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= since);
        if ours && fresh {
            std::fs::create_dir_all(&kept)?;
            paths::write_whole(&kept.join(&file), &std::fs::read_to_string(entry.path())?)?;
        }
    }
    Ok(())
}

/// Whether two paths name one folder (either may not exist yet).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a))
}

/// Where the run's time went: per case, elapsed and waited by design (the
/// rest is overhead), and the whole run including the cluster's start and
/// stop. Printed on stderr, after the transcript and never into it: stdout
/// is the transcript alone (the mutation harness and `try` compare it), and
/// these numbers vary.
fn print_times(times: &[(&str, CaseTime)], run: Duration) {
    let secs = |d: Duration| d.as_secs_f64();
    eprintln!("\n{:<6} {:>8} {:>9} {:>9}", "case", "elapsed", "designed", "overhead");
    let (mut elapsed, mut designed) = (Duration::ZERO, Duration::ZERO);
    for (id, time) in times {
        eprintln!("{id:<6} {:>7.2}s {:>8.2}s {:>8.2}s", secs(time.elapsed), secs(time.designed), secs(time.overhead()));
        elapsed += time.elapsed;
        designed += time.designed;
    }
    eprintln!("{:<6} {:>7.2}s {:>8.2}s {:>8.2}s", "cases", secs(elapsed), secs(designed), secs(elapsed.saturating_sub(designed)));
    eprintln!("run    {:>7.2}s {:>8.2}s {:>8.2}s   (cases plus starting, resetting and stopping the cluster)", secs(run), secs(designed), secs(run.saturating_sub(designed)));
    eprintln!("designed: waits for a clock or a state an experiment watches, the timed acquires of a median, and the server events an experiment performs as steps (a crash, a restart, a failover's standby and promotion, etcd's election); overhead: the rest");
}

/// `lab stress`: one case `runs` times on one cluster, in `mode` when given
/// (a variant). A run passes when it has no FAIL line and its redacted
/// transcript is the locked one (the variant's); `true` when every run
/// passed.
pub fn stress(id: &str, runs: u32, mode: Option<FenceMode>, holder_bin: PathBuf) -> Result<bool> {
    let case = super::find(id).ok_or_else(|| format!("unknown case {id}"))?;
    if let Some(why) = refusal(&[case.id.to_owned()], mode) {
        return Err(why.into());
    }
    let options = CaseOptions { mode, ..CaseOptions::default() };
    let name = case.run_name(&options);
    let runner = Runner::begin(holder_bin, options)?;
    let locked = std::fs::read_to_string(evidence::snapshot_path(&name)).with_context(|| format!("reading the locked transcript of {name}"))?;
    let locked = evidence::snapshot_body(&locked).ok_or("the evidence is not a snapshot")?.trim_end().to_owned();
    let (mut failed, mut slowest) = (Vec::new(), Duration::ZERO);
    for run in 1..=runs {
        let mut t = Transcript::quiet();
        runner.run_each(&[case], &mut t, |_, t, time| {
            let elapsed = time.elapsed;
            slowest = slowest.max(elapsed);
            let text = t.case_text();
            let differs = evidence::redact(&text).trim_end() != locked;
            let verdict = if t.case_failed() > 0 || differs { "FAILED" } else { "ok" };
            eprintln!("stress {name}: run {run}/{runs} {verdict} ({:.1}s)", elapsed.as_secs_f64());
            if verdict != "ok" {
                let diff = evidence::unified_diff(&locked, &evidence::redact(&text), "evidence", &format!("run {run}"), false);
                failed.push(format!("run {run}:\n{diff}"));
            }
            Ok(())
        })?;
    }
    println!("stress {name}: {} of {runs} runs passed, {} failed; slowest run {:.1}s", runs as usize - failed.len(), failed.len(), slowest.as_secs_f64());
    for f in &failed {
        println!("\n{f}");
    }
    Ok(failed.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case named with a mode it cannot run is refused with the modes it
    /// takes; `all`, or a case that takes the mode, is not.
    #[test]
    fn a_named_case_refuses_a_mode_it_cannot_run() {
        let named = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(refusal(&named(&["F6"]), Some(FenceMode::Unfenced)).as_deref(), Some("F6 takes --mode fenced-scope, fenced-scope-cte or fenced-scope-shared only"));
        assert_eq!(refusal(&named(&["all"]), Some(FenceMode::Unfenced)), None);
        assert_eq!(refusal(&named(&["F4"]), Some(FenceMode::Unfenced)), None);
        assert_eq!(refusal(&named(&["F6"]), None), None);
    }

    /// `--pause-before-check` on a named case without a deadline check to
    /// pause before is refused; on F4, F5 or `all` it is not.
    #[test]
    fn a_named_case_refuses_a_pause_it_cannot_make() {
        let named = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(pause_refusal(&named(&["F4", "F6"]), true).as_deref(), Some("F6 takes no --pause-before-check (only F4 and F5 do)"));
        assert_eq!(pause_refusal(&named(&["F5"]), true), None);
        assert_eq!(pause_refusal(&named(&["all"]), true), None);
        assert_eq!(pause_refusal(&named(&["F6"]), false), None);
    }
}
