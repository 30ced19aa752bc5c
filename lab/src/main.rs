//! `lab`: run the cases, manage the cluster, open psql, compare a transcript
//! with the evidence. Thin: parse the command line, call the library.

use clap::{Args, Parser, Subcommand, ValueEnum};
use lab::cases::{self, Options, Runner};
use lab::owner::{self, Owner};
use lab::cluster::{credentials, Cluster};
use lab::error::{chain, Result};
use lab::holder::parse_mode;
use lab::interrupt::QuietAfterStop;
use lab::resource::FenceMode;
use lab::transcript::Transcript;
use lab::{db, evidence, interrupt};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// The lease + fencing lab: cases F1–F9, and F10–F15 beyond the article, against a throw-away PostgreSQL.
#[derive(Parser)]
#[command(name = "lab", version, about, after_help = "Most readers use ./run.sh, which builds first and calls this.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the cases and what each shows.
    List,
    /// Run cases (all by default); starts and stops the cluster unless it was already running.
    Run(RunArgs),
    /// Manage the lab's cluster b3-26 (127.0.0.1:26426).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Manage the lab's etcd cluster etcd-26 (three members on 127.0.0.1; F16's lease store).
    Etcd {
        #[command(subcommand)]
        action: EtcdAction,
    },
    /// Time one acquire on each lease store (one PostgreSQL, with an async and a sync standby, etcd) and write the table.
    LeaseStores {
        /// Where to write the table (default: evidence/26/lease-stores.md).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Open psql on one of the lab's databases (the cluster must be running).
    Psql {
        /// The database.
        #[arg(value_enum, default_value_t = Database::Res26)]
        database: Database,
        /// Extra arguments for psql, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Measure what fencing costs: writes/s and latency per resource mode, contended acquires/s (minutes).
    Bench {
        /// Seconds each cell runs, per run.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=600))]
        seconds: u32,
        /// Runs of every cell; the table shows their median.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=99))]
        runs: u32,
        /// The table's markdown file (a CSV is written beside it) [default: evidence/26/bench.md].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The whole test suite, its groups in parallel (what `./run.sh test` and CI run).
    Suite {
        /// How many groups run at once (their time is mostly designed waiting).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Only the groups whose name contains one of these (e.g. `cases`, `book 07`).
        only: Vec<String>,
    },
    /// Break each guard in a scratch copy and see which case line catches it.
    Mutants {
        /// Only these mutations (default: all).
        names: Vec<String>,
        /// Re-lock the broken transcripts (evidence/26/try/); not under CI.
        #[arg(long)]
        accept: bool,
    },
    /// The "break it" exercises: list them, or run one.
    Try {
        /// The exercise (a mutation's name); without it, the list.
        name: Option<String>,
        /// Colour the diff.
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
    /// The chaos run: holders under a seeded nemesis, judged by the history checker.
    Chaos(ChaosArgs),
    /// Draw what happened in a case's last run (F4, F5, F10-F13): a page that
    /// shows each holder's holdings, pauses and writes on one time axis.
    Timeline {
        /// The case or variant, e.g. F4 or F4-unfenced.
        #[arg(value_parser = run_name)]
        case: String,
    },
    /// Run one case many times; report passes, failures and the slowest run.
    Stress {
        /// The case, e.g. F11.
        #[arg(value_parser = case_id)]
        case: String,
        /// How many runs.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        runs: u32,
    },
    /// Write the book's facts (counts, case titles, measured figures) to evidence/26/facts/.
    Facts {
        /// Write nothing; exit 1 naming each file that is stale.
        #[arg(long)]
        check: bool,
    },
    /// Print the folder of the PostgreSQL server binaries the lab uses; exit 3 if there are none.
    #[command(hide = true)]
    ServerBin,
    /// Compare a case's last transcript (or FILE) with the locked evidence.
    Diff {
        /// The case, e.g. F4, or a variant, e.g. F4-unfenced.
        #[arg(value_parser = run_name)]
        case: String,
        /// A transcript file instead of the one `./run.sh <case>` saved.
        file: Option<PathBuf>,
        /// Colour the diff.
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Cases to run: F1 … F15, or all.
    #[arg(value_parser = case_or_all, default_value = "all")]
    cases: Vec<String>,
    /// F4/F5: judge writes with this resource mode instead of the case's own
    /// (fenced-scope, fenced-scope-cte, fenced-row, unfenced, check-then-write);
    /// F6/F7: the scope fence of (b) and of the scope half (fenced-scope, fenced-scope-cte).
    #[arg(long, value_parser = parse_mode)]
    mode: Option<FenceMode>,
    /// F4/F5: pause holder-a before its local deadline check instead of after it.
    #[arg(long)]
    pause_before_check: bool,
    /// F3: how many threads race for the lease.
    #[arg(long, default_value_t = lab::params::RACERS as u16, value_parser = clap::value_parser!(u16).range(2..=64))]
    threads: u16,
    /// Also write the whole transcript to this file (./run.sh: evidence/26/output.txt).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ChaosArgs {
    /// The seed of the fault schedule (and of the holders' work times): the same seed, the same schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many holder slots compete for the lease.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(2..=lab::chaos::workload::MAX_HOLDERS as i64))]
    holders: u16,
    /// How long each mode runs, e.g. 120s, 2m, 500ms.
    #[arg(long, default_value = "120s", value_parser = lab::chaos::run::parse_duration)]
    duration: std::time::Duration,
    /// The resource mode (fenced-scope, fenced-scope-cte, fenced-row, unfenced, check-then-write), or all five in turn.
    #[arg(long, default_value = "all", value_parser = mode_or_all)]
    mode: ModeChoice,
    /// Also write the table, with the run's parameters and the machine's facts, as Markdown to this file (the book's evidence/26/chaos.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print every holder's protocol lines and every fault on stderr as they happen.
    #[arg(long)]
    trace: bool,
}

/// `--mode`: one mode, or all five.
#[derive(Clone, Copy)]
struct ModeChoice(Option<FenceMode>);

fn mode_or_all(text: &str) -> std::result::Result<ModeChoice, String> {
    if text == "all" {
        return Ok(ModeChoice(None));
    }
    parse_mode(text).map(|m| ModeChoice(Some(m))).map_err(|e| format!("{e}, or all"))
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Initialise (first time) and start the server, create lease26 and res26 if missing; leave it running.
    Start,
    /// Stop the server cleanly.
    Stop {
        /// Only if no run of cases is using it right now (run.sh's safety net).
        #[arg(long)]
        if_idle: bool,
    },
    /// Crash-stop the server (no checkpoint) and start it again: WAL recovery.
    RestartImmediate,
    /// Say whether it runs (exit 0) or not (exit 1), and where its data and log are.
    Status,
    /// Stop the server and delete the cluster's folder (only one the lab made).
    Reset,
    /// Stop the servers and delete every folder of this checkout's cluster, for a clone about to be deleted.
    Forget,
    /// Print the server log (wherever the cluster lives).
    Log,
}

#[derive(Subcommand)]
enum EtcdAction {
    /// Start the three members (from their data, if they have run before) and wait for a leader; leave them running.
    Start,
    /// Stop every member cleanly (SIGTERM, followers first).
    Stop,
    /// Each member's process, ports and answer, and the leader; exit 0 only if all three run.
    Status,
}

#[derive(Clone, Copy, ValueEnum)]
enum Database {
    Lease26,
    Res26,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

/// Accepts F1 … F15 in any case, and says which ids exist otherwise.
fn case_id(text: &str) -> std::result::Result<String, String> {
    match cases::find(text) {
        Some(case) => Ok(case.id.to_owned()),
        None => Err(format!("unknown case; valid cases: {}", valid_ids())),
    }
}

/// Accepts a case id or a locked variant's name (`F4-unfenced`).
fn run_name(text: &str) -> std::result::Result<String, String> {
    if let Some(v) = cases::variants().into_iter().find(|v| v.name().eq_ignore_ascii_case(text)) {
        return Ok(v.name());
    }
    let names: Vec<String> = cases::variants().iter().map(|v| v.name()).collect();
    case_id(text).map_err(|e| format!("{e}; variants: {}", names.join(", ")))
}

fn case_or_all(text: &str) -> std::result::Result<String, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok("all".into());
    }
    case_id(text).map_err(|_| format!("unknown case; valid cases: {}, all", valid_ids()))
}

fn valid_ids() -> String {
    cases::ALL.iter().map(|c| c.id).collect::<Vec<_>>().join(", ")
}

/// Exit status for a problem with the environment (no server, port taken…).
const ENVIRONMENT: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = dispatch(cli.command);
    interrupt::settle();
    code
}

fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::List => {
            let options = Options::default();
            for case in cases::ALL {
                println!("{}  {}", case.id, (case.title)(&options));
            }
            ExitCode::SUCCESS
        }
        Command::Run(args) => {
            interrupt::install();
            report(run_cases(args))
        }
        Command::Bench { seconds, runs, out } => {
            interrupt::install();
            let out = out.unwrap_or_else(|| lab::paths::evidence_dir().join("bench.md"));
            report(bench(&lab::bench::Options { seconds, runs, out }))
        }
        Command::Suite { workers, only } => {
            interrupt::install();
            report(lab::suite::run(&lab::suite::Options { workers, only }).map(verdict))
        }
        Command::Mutants { names, accept } => {
            interrupt::install();
            if accept && std::env::var("CI").as_deref() == Ok("true") {
                eprintln!("lab: --accept re-locks evidence and is not for CI");
                return ExitCode::from(2);
            }
            report(lab::mutants::harness::run_all(&names, accept).map(verdict))
        }
        Command::Try { name: None, .. } => {
            lab::mutants::harness::list();
            ExitCode::SUCCESS
        }
        Command::Try { name: Some(name), color } => {
            interrupt::install();
            report(lab::mutants::harness::try_one(&name, color.on()).map(verdict))
        }
        Command::Chaos(args) => {
            interrupt::install();
            report(chaos(args))
        }
        Command::Timeline { case } => report(lab::timeline::page(&case).map(|page| {
            let chart = page.with_extension("mmd");
            print!("{}", std::fs::read_to_string(&chart).unwrap_or_default());
            println!("\nthe chart: {}\nopen in a browser: {}", chart.display(), page.display());
            if !lab::paths::root().join("target/mermaid/mermaid.min.js").is_file() {
                println!("(the page draws with the book's mermaid.js: run ./run.sh book once)");
            }
            ExitCode::SUCCESS
        })),
        Command::Stress { case, runs } => {
            interrupt::install();
            report(stress(&case, runs))
        }
        Command::ServerBin => report(Cluster::locate().map(|c| {
            println!("{}", c.bin_dir().display());
            ExitCode::SUCCESS
        })),
        Command::Cluster { action } => {
            interrupt::install();
            report(cluster(action))
        }
        Command::Etcd { action } => report(etcd(action)),
        Command::LeaseStores { out } => {
            interrupt::install();
            let out = out.unwrap_or_else(lab::lease_stores::default_out);
            report(lab::lease_stores::compare(&out).map(|table| {
                print!("{table}");
                eprintln!("lab: written to {}", out.display());
                ExitCode::SUCCESS
            }))
        }
        Command::Psql { database, args } => report(psql(database, args)),
        Command::Facts { check } => report(lab::facts::run(check).map(verdict)),
        Command::Diff { case, file, color } => report(diff(&case, file, color.on())),
    }
}

impl Color {
    /// Whether to colour: asked, or a terminal and no NO_COLOR.
    fn on(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
}

/// Exit 0 for a verdict that held, 1 otherwise.
fn verdict(held: bool) -> ExitCode {
    if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn report(outcome: Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lab: {}", chain(e.as_ref()));
            ExitCode::from(ENVIRONMENT)
        }
    }
}

fn run_cases(args: RunArgs) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let selected = cases::select(&args.cases);
    if let Some(picked) = args.mode {
        // A case named on the command line that cannot run the picked mode
        // is refused, not silently run in its own.
        let named = |c: &cases::Case| args.cases.iter().any(|id| id.eq_ignore_ascii_case(c.id));
        if let Some(case) = selected.iter().find(|c| named(c) && !c.modes.is_empty() && !c.takes_mode(picked)) {
            let takes: Vec<&str> = case.modes.iter().map(|m| m.cli_name()).collect();
            eprintln!("lab: {} takes --mode {} only", case.id, takes.join(" or "));
            return Ok(ExitCode::from(2));
        }
    }
    let holder_bin = std::env::current_exe()?.with_file_name("holder");
    let options = Options { mode: args.mode, pause_before_check: args.pause_before_check, threads: args.threads.into() };
    let runner = Runner::begin(holder_bin, options)?;
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
    if let Some(out) = &args.out {
        // The evidence run keeps its pictures too, for the book.
        keep_timelines(&selected, out)?;
        // Written whole and renamed into place: a reader never finds half a run.
        lab::paths::write_whole(out, t.text()).map_err(|e| format!("writing {}: {e}", out.display()))?;
    }
    drop(runner);
    print_times(&times, started.elapsed());
    Ok(if t.failed() == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `lab chaos`: the same seeded schedule against one mode or all five, and
/// the checker's table. Exit 0 when every verdict is the expected one: the
/// scope fences (FENCED_SCOPE, FENCED_SCOPE_CTE) clean, every broken mode caught.
fn chaos(args: ChaosArgs) -> Result<ExitCode> {
    use lab::chaos::{report, run_mode, Config, Schedule};
    let holder_bin = std::env::current_exe()?.with_file_name("holder");
    if !holder_bin.is_file() {
        return Err(format!("the holder binary is missing ({}): build with `cargo build`", holder_bin.display()).into());
    }
    let session = lab::cluster::Session::begin()?;
    db::setup::recreate_databases()?;
    let config = Config { seed: args.seed, holders: args.holders.into(), duration: args.duration, holder_bin, trace: args.trace };
    let schedule = Schedule::generate(config.seed, config.duration);
    let modes: Vec<FenceMode> = args.mode.0.map_or(FenceMode::ALL.to_vec(), |m| vec![m]);
    let version: String = db::connect(db::RES_DB, "lab chaos")?.query_one("SELECT current_setting('server_version')", &[])?.get(0);
    let machine = lab::chaos::report::machine_facts(&version);
    println!("chaos: {schedule}");
    println!("chaos: {} holders, each mode {}s; replay with the same --seed", config.holders, config.duration.as_secs_f64());
    let mut runs = Vec::new();
    for mode in modes {
        eprintln!("chaos: {mode} for {}s…", config.duration.as_secs_f64());
        let run = run_mode(session.cluster(), &config, &schedule, mode, &mut |line| eprintln!("{line}"))?;
        eprintln!("chaos: {mode} done in {:.0}s: {} faults injected, verdict {}", run.took.as_secs_f64(), run.verdict.faults.values().sum::<usize>(), if run.verdict.is_clean() { "clean" } else { "NOT clean" });
        if let Some(failure) = &run.first_failure {
            eprintln!("chaos: {} holder processes failed on their own; the first:\n{failure}", run.failed);
        }
        runs.push(run);
    }
    println!("{}", report::table(&runs));
    if let Some(out) = &args.out {
        report::write_files(&config, &schedule, &runs, &machine, out)?;
        println!("chaos: table written to {}, a chart per mode beside it", out.display());
    }
    let unexpected: Vec<String> = runs
        .iter()
        .filter(|r| r.verdict.is_clean() != FenceMode::SCOPE_FENCES.contains(&r.mode))
        .map(|r| format!("{} {}", r.mode, if r.verdict.is_clean() { "was not caught" } else { "is NOT clean" }))
        .collect();
    drop(session);
    if unexpected.is_empty() {
        println!("chaos: as expected: the scope fences clean, every broken mode caught");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("chaos: UNEXPECTED: {}", unexpected.join("; "));
        Ok(ExitCode::FAILURE)
    }
}

/// Copies the pictures of the cases just run next to `out` (the evidence
/// run: evidence/26/timelines/F4.mmd …).
fn keep_timelines(selected: &[&cases::Case], out: &std::path::Path) -> Result<()> {
    let kept = out.with_file_name("timelines");
    for case in selected {
        let chart = lab::timeline::dir().join(format!("{}.mmd", case.id));
        if chart.is_file() {
            std::fs::create_dir_all(&kept)?;
            std::fs::copy(&chart, kept.join(format!("{}.mmd", case.id)))?;
        }
    }
    Ok(())
}

/// Where the run's time went: per case, elapsed and waited by design (the
/// rest is overhead), and the whole run including the cluster's start and
/// stop. Printed on stderr, after the transcript and never into it: stdout
/// is the transcript alone (the mutation harness and `try` compare it), and
/// these numbers vary.
fn print_times(times: &[(&str, cases::CaseTime)], run: std::time::Duration) {
    let secs = |d: std::time::Duration| d.as_secs_f64();
    eprintln!("\n{:<6} {:>8} {:>9} {:>9}", "case", "elapsed", "designed", "overhead");
    let (mut elapsed, mut designed) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for (id, time) in times {
        eprintln!("{id:<6} {:>7.2}s {:>8.2}s {:>8.2}s", secs(time.elapsed), secs(time.designed), secs(time.overhead()));
        elapsed += time.elapsed;
        designed += time.designed;
    }
    eprintln!("{:<6} {:>7.2}s {:>8.2}s {:>8.2}s", "cases", secs(elapsed), secs(designed), secs(elapsed.saturating_sub(designed)));
    eprintln!("run    {:>7.2}s {:>8.2}s {:>8.2}s   (cases plus starting, resetting and stopping the cluster)", secs(run), secs(designed), secs(run.saturating_sub(designed)));
}

/// `lab stress`: one case `runs` times on one cluster. A run passes when it
/// has no FAIL line and its redacted transcript is the locked one.
fn stress(id: &str, runs: u32) -> Result<ExitCode> {
    let case = cases::find(id).ok_or("unknown case")?;
    let holder_bin = std::env::current_exe()?.with_file_name("holder");
    let runner = Runner::begin(holder_bin, Options::default())?;
    let locked = std::fs::read_to_string(evidence::snapshot_path(case.id))?;
    let locked = evidence::snapshot_body(&locked).ok_or("the evidence is not a snapshot")?.trim_end().to_owned();
    let (mut failed, mut slowest) = (Vec::new(), std::time::Duration::ZERO);
    for run in 1..=runs {
        let mut t = Transcript::quiet();
        runner.run_each(&[case], &mut t, |_, t, time| {
            let elapsed = time.elapsed;
            slowest = slowest.max(elapsed);
            let text = t.case_text();
            let differs = evidence::redact(&text).trim_end() != locked;
            let verdict = if t.case_failed() > 0 || differs { "FAILED" } else { "ok" };
            eprintln!("stress {}: run {run}/{runs} {verdict} ({:.1}s)", case.id, elapsed.as_secs_f64());
            if verdict != "ok" {
                let diff = evidence::unified_diff(&locked, &evidence::redact(&text), "evidence", &format!("run {run}"), false);
                failed.push(format!("run {run}:\n{diff}"));
            }
            Ok(())
        })?;
    }
    println!("stress {}: {} of {runs} runs passed, {} failed; slowest run {:.1}s", case.id, runs as usize - failed.len(), failed.len(), slowest.as_secs_f64());
    for f in &failed {
        println!("\n{f}");
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn bench(options: &lab::bench::Options) -> Result<ExitCode> {
    let results = lab::bench::run(options)?;
    print!("{}", lab::bench::report::markdown(&results));
    lab::bench::report::write_files(&results, &options.out)?;
    eprintln!("bench: wrote {} and {}", options.out.display(), options.out.with_extension("csv").display());
    Ok(ExitCode::SUCCESS)
}

fn cluster(action: ClusterAction) -> Result<ExitCode> {
    let cluster = Cluster::locate()?;
    match action {
        ClusterAction::Start => {
            cluster.start()?;
            // The reader's now: no run of cases stops it at its end.
            owner::write(cluster.dir(), &Owner::Reader)?;
            // Every command the book gives after `cluster start` needs them.
            db::setup::ensure_databases()?;
            println!("cluster {} running on {}:{}; stop it with `./run.sh cluster stop`", lab::cluster::NAME, lab::cluster::HOST, cluster.port());
        }
        ClusterAction::Stop { if_idle } => {
            // Held while stopping, so no run can start on it meanwhile.
            let _lock = match lab::cluster::lock_runs()? {
                Ok(lock) => Some(lock),
                Err(pid) if if_idle => {
                    println!("cluster {} is in use by lab run pid {pid}; left running", lab::cluster::NAME);
                    return Ok(ExitCode::SUCCESS);
                }
                Err(_) => None,
            };
            cluster.stop()?;
            println!("cluster {} stopped", lab::cluster::NAME);
        }
        ClusterAction::RestartImmediate => {
            if !cluster.is_running()? {
                return Err("the cluster is not running: start it with `./run.sh cluster start`".into());
            }
            cluster.restart_immediate()?;
            println!("cluster {} crash-stopped and restarted (WAL recovery: see {})", lab::cluster::NAME, cluster.log_path().display());
        }
        ClusterAction::Status => {
            println!("{}", cluster.describe()?);
            // Scripts ask "is it running?" with the exit status, like pg_ctl status.
            if !cluster.is_running()? {
                return Ok(ExitCode::FAILURE);
            }
        }
        ClusterAction::Log => {
            let text = cluster.log_since(0)?;
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth reporting.
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
        ClusterAction::Reset | ClusterAction::Forget => {
            // Held while deleting: a run using the cluster is not pulled from under.
            let _lock = lab::cluster::lock_runs()?.map_err(|pid| format!("lab run pid {pid} is using the cluster; wait for it to finish"))?;
            let removed = cluster.forget(matches!(action, ClusterAction::Forget))?;
            if removed.is_empty() {
                println!("cluster {}: nothing to remove", lab::cluster::NAME);
            }
            for dir in removed {
                println!("removed {}", dir.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `lab etcd`: the reader's etcd cluster. A run of F16 starts its own
/// (from empty data) and ends it; what the reader starts here stays up,
/// in a session of its own, until `etcd stop`.
fn etcd(action: EtcdAction) -> Result<ExitCode> {
    use lab::cluster::etcd::{self, EtcdCluster};
    let cluster = EtcdCluster::locate()?;
    match action {
        EtcdAction::Start => {
            let leader = cluster.start(Owner::Reader)?;
            println!("{}", cluster.describe()?);
            println!(
                "etcd cluster {} running, leader {}; clients on {}; stop it with `./run.sh etcd stop`",
                etcd::NAME,
                leader.name,
                cluster.gateway().members().iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        EtcdAction::Stop => {
            // A run's members are the run's to end (it kills the leader on
            // purpose, and ends them all at its end): not the reader's.
            if let Some(Owner::Run { pid, .. }) = owner::read(cluster.dir())?.filter(|o| !o.is_dead_run()) {
                return Err(format!("etcd cluster {} belongs to lab run pid {pid}, which stops it at its end", etcd::NAME).into());
            }
            cluster.stop()?;
            println!("etcd cluster {} stopped", etcd::NAME);
        }
        EtcdAction::Status => {
            let status = cluster.status()?;
            println!("{}", cluster.describe()?);
            // Scripts ask "is it running?" with the exit status, like `cluster status`.
            if !status.members.iter().all(|m| m.pid.is_some()) {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn psql(database: Database, args: Vec<String>) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let cluster = Cluster::locate()?;
    if !cluster.is_running()? {
        return Err("the cluster is not running: start it with `./run.sh cluster start` (a run of cases stops it again at its end)".into());
    }
    let name = match database {
        Database::Lease26 => db::LEASE_DB,
        Database::Res26 => db::RES_DB,
    };
    let local = cluster.bin_dir().join("psql");
    let program = if local.is_file() { local } else { PathBuf::from("psql") };
    let port = cluster.port().to_string();
    let err = std::process::Command::new(&program)
        .args(["-h", lab::cluster::HOST, "-p", &port, "-U", credentials::ROLE, "-d", name])
        // The password comes from the cluster's credentials file, readable by this account only.
        .env("PGPASSFILE", lab::cluster::credentials_file()?)
        .args(args)
        .exec();
    Err(format!("cannot run {}: {err} (psql comes with the postgresql-client package)", program.display()).into())
}

fn diff(case: &str, file: Option<PathBuf>, color: bool) -> Result<ExitCode> {
    let comparison = evidence::compare(case, file.as_deref(), color)?;
    let shown = |p: &std::path::Path| p.strip_prefix(lab::paths::root()).unwrap_or(p).display().to_string();
    if comparison.diff.is_empty() {
        println!("{} matches {}", shown(&comparison.transcript), shown(&comparison.evidence));
        Ok(ExitCode::SUCCESS)
    } else {
        print!("{}", comparison.diff);
        Ok(ExitCode::FAILURE)
    }
}
