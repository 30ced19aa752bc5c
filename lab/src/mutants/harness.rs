//! Runs the mutation table (`lab mutants`) and one exercise (`lab try`).
//!
//! For each mutation: apply its patch in the scratch tree, build, run the
//! case the table names; if no line of it fails, run every other case. The
//! first failed check is what killed it, but only when it comes before any
//! abort: a case that aborted (a timeout, a server that would not start)
//! could not judge the guard, so a mutant whose run only aborts is
//! *aborted*, never killed, and `lab mutants` fails. The transcript of the
//! case that killed it, redacted like every transcript, is compared with
//! its lock, `evidence/26/try/<name>.snap` (the book includes it). Then the
//! patch is taken back out, whatever happened.

use super::scratch::Scratch;
use super::{find, Mutation, MUTATIONS};
use crate::error::{Result, ResultExt};
use crate::transcript::Line;
use crate::{cases, evidence, paths};
use std::path::PathBuf;
use std::time::Instant;

/// The patch of a mutation.
pub fn patch_path(m: &Mutation) -> PathBuf {
    paths::root().join("mutants").join(format!("{}.patch", m.name))
}

/// Where a mutant's broken transcript is locked.
pub fn lock_path(m: &Mutation) -> PathBuf {
    paths::evidence_dir().join("try").join(format!("{}.snap", m.name))
}

/// What the cases made of one mutation.
pub enum MutantFate {
    /// A case line failed.
    Killed {
        /// The `lab run` arguments of the case whose line failed.
        by: String,
        /// The first FAIL line, without its tag.
        line: String,
        /// That case's whole transcript, redacted and normalised.
        transcript: String,
    },
    /// A case aborted before any check failed: the run could not judge
    /// the guard, so this proves nothing either way.
    Aborted {
        /// The `lab run` arguments of the case that aborted.
        by: String,
        /// Why, as its FAIL line says after `case aborted:`.
        why: String,
    },
    /// Every case passed with the guard broken: nothing checks it.
    Survived,
    /// The patch did not apply or the mutant did not build.
    Broken(String),
}

/// Applies `m`, builds, runs the cases, and takes the patch back out.
pub fn judge(scratch: &Scratch, m: &Mutation, progress: &mut dyn FnMut(&str)) -> Result<MutantFate> {
    let patch = patch_path(m);
    if let Err(e) = scratch.apply(&patch) {
        return Ok(MutantFate::Broken(e.to_string()));
    }
    let verdict = run_cases(scratch, m, progress);
    scratch.revert(&patch)?;
    verdict
}

/// `progress` hears each step as it begins (the build, each run).
fn run_cases(scratch: &Scratch, m: &Mutation, progress: &mut dyn FnMut(&str)) -> Result<MutantFate> {
    progress("building the patched copy (an incremental build; the first in a checkout takes minutes)");
    if let Err(stderr) = scratch.build()? {
        return Ok(MutantFate::Broken(format!("the mutant does not build:\n{stderr}")));
    }
    // The table's case first; then, if it missed, every other case. A
    // guard of the model is judged by `lab model` alone: no case runs it.
    let mut tries: Vec<Vec<&str>> = vec![m.killer.to_vec()];
    if m.killer[0] != MODEL {
        tries.extend(cases::ALL.iter().filter(|c| c.id != m.killer[0]).map(|c| vec![c.id]));
    }
    for args in tries {
        progress(&format!("running lab {} in the copy", command(&args).join(" ")));
        let out = scratch.lab(&command(&args))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match read_run(&stdout) {
            // Cut short (a signal, an error of the lab itself): it proves
            // nothing and is never locked.
            Reading::CutShort => {
                return Ok(MutantFate::Broken(format!(
                    "lab {} ended early ({}) without a SUMMARY line:\n{}",
                    command(&args).join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim_end()
                )))
            }
            Reading::Failed(line) => {
                let transcript = evidence::redact(&scratch.normalise(&stdout));
                return Ok(MutantFate::Killed { by: args.join(" "), line: scratch.normalise(&line), transcript });
            }
            Reading::Aborted(why) => return Ok(MutantFate::Aborted { by: args.join(" "), why: scratch.normalise(&why) }),
            Reading::Held => {}
        }
        if !out.status.success() {
            return Ok(MutantFate::Broken(format!(
                "lab {} exited {} without a FAIL line:\n{}",
                command(&args).join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            )));
        }
    }
    Ok(MutantFate::Survived)
}

/// The killer of a guard of the model: `lab model`, whose stdout is a
/// transcript like a case's (`evidence/26/model.snap`).
pub const MODEL: &str = "model";

/// The `lab` arguments that run `killer`: `lab model …` for the model,
/// `lab run …` for a case.
fn command<'a>(killer: &[&'a str]) -> Vec<&'a str> {
    if killer.first() == Some(&MODEL) {
        killer.to_vec()
    } else {
        std::iter::once("run").chain(killer.iter().copied()).collect()
    }
}

/// What one `lab run` of a mutant showed, read from its transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// A check failed before any case aborted: the first such line's text.
    Failed(String),
    /// A case aborted before any check failed: why.
    Aborted(String),
    /// The run ended whole, and every check held.
    Held,
    /// No SUMMARY line: the run was cut short.
    CutShort,
}

/// Reads a run's stdout: whichever comes first, a failed check or an
/// abort, decides; a run that did not end whole decides nothing.
pub fn read_run(stdout: &str) -> Reading {
    if !stdout.lines().any(|l| Line::read(l) == Line::Summary) {
        return Reading::CutShort;
    }
    for line in stdout.lines() {
        match Line::read(line) {
            Line::Check { held: false, text } => return Reading::Failed(text.to_owned()),
            Line::Aborted(why) => return Reading::Aborted(why.to_owned()),
            _ => {}
        }
    }
    Reading::Held
}

/// How a mutant's transcript compares with its lock.
enum Lock {
    /// Equal.
    Matches,
    /// Written now (`--accept`).
    Written,
    /// Different, or missing: a unified diff or a note.
    Differs(String),
}

fn check_lock(m: &Mutation, transcript: &str, accept: bool) -> Result<Lock> {
    let path = lock_path(m);
    let locked = std::fs::read_to_string(&path).ok();
    let body = locked.as_deref().and_then(evidence::snapshot_body).map(str::to_owned);
    if body.as_deref().map(str::trim_end) == Some(transcript.trim_end()) {
        return Ok(Lock::Matches);
    }
    if accept {
        std::fs::create_dir_all(path.parent().expect("evidence/26/try"))?;
        std::fs::write(&path, format!("---\nsource: lab mutants (mutants/{}.patch)\n---\n{}\n", m.name, transcript.trim_end()))?;
        return Ok(Lock::Written);
    }
    Ok(Lock::Differs(match body {
        None => format!("{} is missing: lock it with `./run.sh mutants --accept`", path.display()),
        Some(body) => evidence::unified_diff(&body, transcript, &path.display().to_string(), "this run", false),
    }))
}

/// `lab mutants`: every mutation (or those named), one line each; `true`
/// when every one was killed by its own case and matches its lock.
pub fn run_all(names: &[String], accept: bool) -> Result<bool> {
    let chosen: Vec<&Mutation> = if names.is_empty() {
        MUTATIONS.iter().collect()
    } else {
        names.iter().map(|n| find(n).ok_or_else(|| format!("no mutation named {n}; `./run.sh try` lists them"))).collect::<Result<_, String>>()?
    };
    let (start, count) = (Instant::now(), chosen.len());
    eprintln!("mutants: preparing the scratch copy and its cluster…");
    let scratch = Scratch::prepare()?;
    println!("{:<30} {:<28} first failing line", "mutation", "killed by");
    let mut problems = Vec::new();
    for m in chosen {
        let verdict = judge(&scratch, m, &mut |_| {})?;
        match verdict {
            MutantFate::Killed { by, line, transcript } => {
                println!("{:<30} {:<28} {line}", m.name, by);
                if by != m.killer.join(" ") {
                    problems.push(format!("{}: killed by {by}, but the table (and the book) says {}", m.name, m.killer.join(" ")));
                }
                match check_lock(m, &transcript, accept)? {
                    Lock::Matches => {}
                    Lock::Written => eprintln!("mutants: locked {}", lock_path(m).display()),
                    Lock::Differs(diff) => problems.push(format!("{}: the broken transcript differs from its lock\n{diff}", m.name)),
                }
            }
            MutantFate::Aborted { by, why } => {
                println!("{:<30} {:<28} -", m.name, "ABORTED");
                let why = why.lines().next().unwrap_or_default();
                problems.push(format!("{}: ABORTED: lab run {by} stopped before any check failed ({why}); an abort kills nothing", m.name));
            }
            MutantFate::Survived => {
                println!("{:<30} {:<28} -", m.name, "SURVIVED");
                problems.push(format!("{}: SURVIVED: no case line fails with the guard broken ({})", m.name, m.guards));
            }
            MutantFate::Broken(why) => {
                println!("{:<30} {:<28} -", m.name, "ERROR");
                problems.push(format!("{}: {why}", m.name));
            }
        }
    }
    drop(scratch);
    println!("\nmutants: {count} mutations in {:.0}s", start.elapsed().as_secs_f64());
    for p in &problems {
        println!("\n{p}");
    }
    if problems.is_empty() {
        println!("mutants: every mutation killed by its own case; every broken transcript matches its lock");
    }
    Ok(problems.is_empty())
}

/// `lab try`: the exercises, by chapter.
pub fn list() {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed pipe (`./run.sh try | head`) ends the list quietly.
    for m in MUTATIONS {
        if writeln!(out, "{:<30} ./run.sh {:<26} {}", m.name, m.killer.join(" "), m.question).is_err() {
            return;
        }
    }
    let _ = writeln!(out, "\nRun one with ./run.sh try NAME: it shows the patch, applies it in a scratch copy, runs the case and shows what broke.");
}

/// `lab try NAME`: the question, the patch, the broken run, its FAIL lines
/// and its difference from the locked good transcript; `true` when the
/// broken run is the locked one.
pub fn try_one(name: &str, color: bool) -> Result<bool> {
    let m = find(name).ok_or_else(|| format!("no exercise named {name}; `./run.sh try` lists them"))?;
    println!("问题：{}\n（先想好你的答案，再往下看。）\n", m.question);
    println!("补丁 mutants/{}.patch：\n{}", m.name, std::fs::read_to_string(patch_path(m))?);
    eprintln!("try: applying it in a scratch copy, building and running ./run.sh {}…", m.killer.join(" "));
    let scratch = Scratch::prepare()?;
    let verdict = judge(&scratch, m, &mut |step| eprintln!("try: {step}…"))?;
    drop(scratch);
    let (by, transcript) = match verdict {
        MutantFate::Killed { by, transcript, .. } => (by, transcript),
        MutantFate::Survived => {
            println!("这次没有任何一行失败：这个防线此刻没有被检查到。");
            return Ok(false);
        }
        // The run itself broke (the mutant does not build, or the lab ended
        // without its SUMMARY line), or a case aborted before any check
        // failed: say why, never as a surviving or a caught guard.
        MutantFate::Broken(why) => return Err(format!("the exercise's run broke, so it proves nothing: {why}").into()),
        MutantFate::Aborted { by, why } => return Err(format!("lab run {by} aborted before any check failed, so it proves nothing: {why}").into()),
    };
    println!("失败的行（{by}）：");
    for line in transcript.lines().filter(|l| matches!(Line::read(l), Line::Check { held: false, .. } | Line::Aborted(_))) {
        println!("{line}");
    }
    // The good run to compare with is the one with the killer's flags: a
    // variant's own snapshot (`variants/F6-fenced-scope-shared.snap`), so
    // that the diff shows the patch and not the mode.
    let (case, flags) = (m.killer[0], &m.killer[1..]);
    let good_name = cases::variants().into_iter().find(|v| v.case.id == case && v.flags == flags).map_or_else(|| case.to_owned(), |v| v.name());
    let good = evidence::snapshot_path(&good_name);
    let locked_good = std::fs::read_to_string(&good).with_context(|| format!("reading {}", good.display()))?;
    let locked_good = evidence::snapshot_body(&locked_good).ok_or("the good transcript is not a snapshot")?;
    let shown = good.strip_prefix(paths::root()).unwrap_or(&good).display().to_string();
    println!("\n与锁定的正常运行记录 {shown} 相比：");
    print!("{}", evidence::unified_diff(locked_good, &transcript, &shown, "这次（补丁之后）", color));
    let same = matches!(check_lock(m, &transcript, false)?, Lock::Matches);
    println!(
        "\n{}",
        if same {
            format!("这次的运行记录与锁定的坏运行记录 evidence/26/try/{}.snap 一致。", m.name)
        } else {
            format!("这次的运行记录与锁定的坏运行记录 evidence/26/try/{}.snap 不同（见 ./run.sh mutants {}）。", m.name, m.name)
        }
    );
    Ok(same)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transcript as `lab run` prints it: a case's lines, then the summary.
    fn run_of(lines: &[&str]) -> String {
        let mut text = String::from("CASE F4 :: 暂停的持有者\n");
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        text + "SUMMARY passed=1 failed=1\n"
    }

    /// A run whose only failure is an abort (an environmental timeout) is
    /// aborted, not a kill.
    #[test]
    fn an_abort_alone_kills_nothing() {
        let stdout = run_of(&["  ok   A 获取租约，token=1", "  FAIL case aborted: holder-a printed nothing for 20s", "       | argv: holder --holder holder-a"]);
        assert_eq!(read_run(&stdout), Reading::Aborted("holder-a printed nothing for 20s".into()));
    }

    /// A check that fails before the abort is the kill; one after it is not.
    #[test]
    fn a_failed_check_kills_only_before_any_abort() {
        let killed = run_of(&["  FAIL 资源端拒绝 A 的旧 token (expected=1, actual=2)", "  FAIL case aborted: holder-b is not ready"]);
        assert_eq!(read_run(&killed), Reading::Failed("资源端拒绝 A 的旧 token (expected=1, actual=2)".into()));
        let aborted = run_of(&["  FAIL case aborted: the server did not start", "CASE F5 :: x", "  FAIL later check"]);
        assert_eq!(read_run(&aborted), Reading::Aborted("the server did not start".into()));
    }

    /// Every check held: a survivor; no SUMMARY: cut short, whatever it showed.
    #[test]
    fn held_and_cut_short() {
        assert_eq!(read_run(&run_of(&["  ok   held", "  note a note"])), Reading::Held);
        assert_eq!(read_run("CASE F4 :: x\n  FAIL broke\n"), Reading::CutShort);
    }
}
