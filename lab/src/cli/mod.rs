//! The `lab` command line: its arguments as clap derives them, the
//! parsers of case ids, of `--mode all` and of the model's store (one
//! mode is parsed by [`crate::arg_values`]), and (in [`commands`]) the
//! commands that are plumbing around the library (list, cluster, etcd,
//! psql, diff, timeline, history). `main.rs` parses, dispatches each
//! command to the library and turns the outcome into an exit status; here
//! the arguments become the library's requests, where a test can build
//! and inspect them.

pub mod commands;

use crate::cases::{self, command::RunRequest, CaseOptions};
use crate::chaos::{self, Config};
use crate::vocabulary::FenceMode;
use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;

/// The lease + fencing lab: cases F1–F9, and F10–F34 beyond the article, against a throw-away PostgreSQL.
#[derive(Parser)]
#[command(name = "lab", version, about, after_help = "Most readers use ./run.sh, which builds first and calls this.")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List the cases and what each shows.
    List,
    /// Whether a run of these cases needs a program besides PostgreSQL: exit 0 if it does, 1 if not (run.sh asks before it installs one).
    #[command(hide = true)]
    Needs {
        /// etcd, hosts (ip and nft) or faketime.
        #[arg(value_parser = need())]
        what: cases::Need,
        /// The run's arguments: case ids (or `all`) and flags; no case id means every case.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<String>,
    },
    /// Run cases (all by default); starts and stops the cluster unless it was already running.
    Run(RunArgs),
    /// Manage the lab's cluster b3-26 (its Unix socket in target/lab/b3-26/server/socket).
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
        /// Where to write the table (default: target/lab/lease-stores.md; the
        /// book's is evidence/26/lease-stores.md); its data goes beside it as
        /// JSON (lease-stores.json), which `lab facts` reads.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Serve the built book with a cell on each case's page that runs it here (./run.sh serve).
    Notebook {
        /// The built book [default: target/book].
        #[arg(long)]
        book: Option<PathBuf>,
        /// The port on 127.0.0.1 (0: a free one, printed).
        #[arg(long, default_value_t = 0)]
        port: u16,
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
        /// The table's markdown file (a CSV is written beside it) [default: target/lab/bench.md; the book's is evidence/26/bench.md].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Measure nothing: draw the figures again from the CSV beside --out.
        #[arg(long)]
        redraw: bool,
        /// The writer counts to measure, comma-separated (each 1-200).
        #[arg(long, value_delimiter = ',', default_values_t = crate::bench::WRITERS, value_parser = clap::value_parser!(u32).range(1..=crate::bench::MOST_WRITERS as i64).map(|n| n as usize))]
        writers: Vec<usize>,
        /// The scope counts to measure, comma-separated (each 1-100000).
        #[arg(long, value_delimiter = ',', default_values_t = crate::bench::SCOPES, value_parser = clap::value_parser!(u32).range(1..=crate::bench::MOST_SCOPES as i64).map(|n| n as usize))]
        scopes: Vec<usize>,
    },
    /// The whole test suite, its groups in parallel (what `./run.sh test` and CI run).
    Suite {
        /// How many groups run at once. Their time is mostly designed
        /// waiting (and the disk's flushes), and beside other busy work a
        /// group gets its share of the cores per process: six on 2 cores
        /// (eight made each group about twice as slow: the servers the
        /// groups start use the cores too, beyond the groups' own time).
        #[arg(long, default_value_t = 6)]
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
    /// The chaos run: holders under a seeded nemesis, judged by the history checker; each mode's history is written as JSON lines and an offline page.
    Chaos(ChaosArgs),
    /// The bug zoo's job queue under a seeded nemesis: the fixed queue and each bug put back, in turn, with the harm each let through counted from the database.
    QueueChaos(QueueChaosArgs),
    /// Real job-queue crates (graphile_worker, apalis-postgres) under a seeded nemesis, each job's handler unfenced and then fenced by a token from the crate's claim; the harm each let through counted from the database (needs the lab-queues binary: `./run.sh queues` builds it).
    Queues(QueuesArgs),
    /// The model checker: every interleaving of the lease and each resource mode; its verdicts as a table.
    Model(ModelArgs),
    /// Draw what happened in a case's last run (one with holder processes:
    /// F4, F5, F10–F13, F15–F19): a page that shows each holder's holdings,
    /// pauses and writes on one time axis.
    Timeline {
        /// The case or variant, e.g. F4 or F4-unfenced.
        #[arg(value_parser = run_name)]
        case: String,
    },
    /// Draw a run's history again from its JSON lines, and judge it: one self-contained
    /// page (nothing fetched) with a lane per holder incarnation, every call from call
    /// to return, the faults as bands, the floor over time and each finding of the
    /// checker; filter by holder, finding or time, and zoom, in the browser. Every
    /// chaos run (`lab chaos`, F15) and every case whose holders made calls (F4, F5,
    /// F10–F12, F16) writes its history as it ends.
    History {
        /// The run (F4, F12-unfenced, chaos-fenced-row, …: its .jsonl in target/lab/history/,
        /// else in evidence/26/history/), or the path of a .jsonl file; the page is written beside it.
        run: String,
    },
    /// Run one case many times; report passes, failures and the slowest run.
    Stress {
        /// The case, e.g. F11.
        #[arg(value_parser = case_id)]
        case: String,
        /// How many runs.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        runs: u32,
        /// The resource mode, as for `lab run`: each run is then compared
        /// with the variant's locked transcript (e.g. F6-fenced-scope-shared).
        #[arg(long, value_parser = crate::arg_values::fence_mode(), hide_possible_values = true)]
        mode: Option<FenceMode>,
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
pub struct RunArgs {
    /// Cases to run (F1, F2, …: `lab list` names them all), or all.
    #[arg(value_parser = case_or_all, default_value = "all")]
    cases: Vec<String>,
    /// F4/F5: judge writes with this resource mode instead of the case's own
    /// (fenced-scope, fenced-scope-cte, fenced-scope-shared, fenced-row, unfenced,
    /// check-then-write); F6/F7: the scope fence of (b) and of the scope half
    /// (fenced-scope, fenced-scope-cte, fenced-scope-shared).
    #[arg(long, value_parser = crate::arg_values::fence_mode(), hide_possible_values = true)]
    mode: Option<FenceMode>,
    /// F4/F5: pause holder-a before its local deadline check instead of after it.
    #[arg(long)]
    pause_before_check: bool,
    /// F3: how many threads race for the lease.
    #[arg(long, default_value_t = crate::params::RACERS as u16, value_parser = clap::value_parser!(u16).range(2..=crate::params::MAX_RACERS as i64))]
    threads: u16,
    /// Also write the whole transcript to this file (./run.sh: target/lab/output.txt; ./run.sh lock: evidence/26/output.txt), its data beside it as JSON (output.json, which `lab facts` reads), and keep the run's timelines and histories beside it (timelines/, history/).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
pub struct ChaosArgs {
    /// The seed of the fault schedule (and of the holders' work times): the same seed, the same schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many holder slots compete for the lease.
    #[arg(long, default_value_t = crate::chaos::workload::DEFAULT_HOLDERS, value_parser = clap::value_parser!(u16).range(2..=crate::chaos::workload::MAX_HOLDERS as i64))]
    holders: u16,
    /// How long each mode runs, e.g. 120s, 2m, 500ms.
    #[arg(long, default_value = "120s", value_parser = crate::chaos::run::parse_duration)]
    duration: std::time::Duration,
    /// The resource mode (fenced-scope, fenced-scope-cte, fenced-scope-shared, fenced-row, unfenced, check-then-write), or all of them in turn.
    #[arg(long, default_value = "all", value_parser = mode_or_all)]
    mode: ModeChoice,
    /// Also write the table, with the run's parameters and the machine's facts, as Markdown to this file (the book's evidence/26/chaos.md), its data beside it as JSON (chaos.json, which `lab facts` reads), and each mode's history (its JSON lines and its page) in history/ beside it; without it, the histories go to target/lab/history/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print every holder's protocol lines and every fault on stderr as they happen.
    #[arg(long)]
    trace: bool,
}

#[derive(Args)]
pub struct QueueChaosArgs {
    /// The seed of the nemesis (and of the work times): the same seed, the same faults in the same order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many worker slots take jobs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=16))]
    workers: u16,
    /// How long each switch runs, e.g. 20s, 1m.
    #[arg(long, default_value = "20s", value_parser = crate::chaos::run::parse_duration)]
    duration: std::time::Duration,
    /// The switches to run, comma-separated: fixed, or a bug of the zoo (name-as-identity, late-heartbeat, …), or all (the fixed queue, then Z1–Z9).
    #[arg(long, default_value = "all", value_parser = switches)]
    switch: Switches,
    /// Also write the table as Markdown to this file (the book's evidence/26/chaos-queue.md), its data beside it as JSON (chaos-queue.json, which `lab facts` reads).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
pub struct QueuesArgs {
    /// The seed of the nemesis (and of the work times): the same seed, the same faults on the same jobs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many jobs each run enqueues (a restart at the start; then one job in every two meets a fault; at least six, so that each of pause, kill and delay strikes; more than the workers can take over needs more workers, and the run says so).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(crate::queue::crates::nemesis::MIN_JOBS as i64..=1000))]
    jobs: u16,
    /// How many worker processes take jobs.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=16))]
    workers: u16,
    /// The crate: graphile (graphile_worker 0.14.1), apalis (apalis-postgres 1.0.0), or all.
    #[arg(long = "crate", default_value = "all", value_parser = crate_choice)]
    krate: CrateChoice,
    /// The handler's side effect: none (an upsert), token (fenced by the claim's token), or both.
    #[arg(long, default_value = "both", value_parser = fence_choice)]
    fence: FenceChoice,
    /// Also write the table as Markdown to this file (the book's evidence/26/queues.md), its data beside it as JSON (queues.json, which `lab facts` reads).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The crates of `lab queues`.
#[derive(Clone, Debug)]
pub struct CrateChoice(Vec<crate::queue::crates::CrateName>);

fn crate_choice(text: &str) -> std::result::Result<CrateChoice, String> {
    use crate::queue::crates::CrateName;
    one_or_all(text, "all", &CrateName::ALL, CrateName::name, "the crates are graphile, apalis, or all").map(CrateChoice)
}

/// The fences of `lab queues`.
#[derive(Clone, Debug)]
pub struct FenceChoice(Vec<crate::queue::crates::HandlerFence>);

fn fence_choice(text: &str) -> std::result::Result<FenceChoice, String> {
    use crate::queue::crates::HandlerFence;
    one_or_all(text, "both", &HandlerFence::ALL, HandlerFence::name, "the fences are none, token, or both").map(FenceChoice)
}

/// `every` for all of `items`, or the one whose `name` is `text`; else `choices`.
fn one_or_all<T: Copy>(text: &str, every: &str, items: &[T], name: fn(T) -> &'static str, choices: &str) -> std::result::Result<Vec<T>, String> {
    if text == every {
        return Ok(items.to_vec());
    }
    items.iter().find(|i| name(**i) == text).map(|i| vec![*i]).ok_or_else(|| choices.to_owned())
}

impl QueuesArgs {
    /// The run these arguments ask for.
    pub fn options(&self) -> crate::queue::crates::QueuesOptions {
        crate::queue::crates::QueuesOptions {
            config: crate::queue::crates::run::CrateConfig { seed: self.seed, jobs: self.jobs.into(), workers: self.workers.into() },
            crates: self.krate.0.clone(),
            fences: self.fence.0.clone(),
            out: self.out.clone(),
        }
    }
}

/// The switches of `lab queue-chaos`: `None` is the fixed queue.
#[derive(Clone, Debug)]
pub struct Switches(Vec<Option<crate::queue::Bug>>);

fn switches(text: &str) -> std::result::Result<Switches, String> {
    use crate::queue::Bug;
    if text == "all" {
        return Ok(Switches(std::iter::once(None).chain(Bug::ALL.map(Some)).collect()));
    }
    let one = |name: &str| match name {
        "fixed" => Ok(None),
        _ => Bug::ALL.iter().find(|b| b.name() == name).map(|b| Some(*b)).ok_or_else(|| {
            format!("unknown switch {name:?}; the switches are fixed, {}, or all", Bug::ALL.map(Bug::name).join(", "))
        }),
    };
    Ok(Switches(text.split(',').map(|n| one(n.trim())).collect::<std::result::Result<_, _>>()?))
}

impl QueueChaosArgs {
    /// The run these arguments ask for.
    pub fn options(&self) -> crate::queue::chaos::QueueChaosOptions {
        crate::queue::chaos::QueueChaosOptions {
            config: crate::queue::chaos::QueueConfig { seed: self.seed, workers: self.workers.into(), duration: self.duration },
            switches: self.switch.0.clone(),
            out: self.out.clone(),
        }
    }
}

#[derive(Args)]
pub struct ModelArgs {
    /// Also write the table to this file (the book's evidence/26/model.md; with --mutants, model-mutants.md), its data beside it as JSON (model.json, model-mutants.json, which `lab facts` reads), and each counterexample's chart beside it; with --replay, the redacted transcript only.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Check the model with each mutation of mutants/ that has a counterpart in it.
    #[arg(long, conflicts_with_all = ["replay", "explore"])]
    mutants: bool,
    /// Replay MODE's counterexample (and the same schedule in fenced-scope) against the real cluster.
    #[arg(long, value_parser = crate::arg_values::fence_mode(), hide_possible_values = true, conflicts_with = "explore")]
    replay: Option<FenceMode>,
    /// Serve stateright's Explorer for MODE (default fenced-scope) on 127.0.0.1.
    #[arg(long, value_parser = crate::arg_values::fence_mode(), hide_possible_values = true, num_args = 0..=1, default_missing_value = "fenced-scope")]
    explore: Option<FenceMode>,
    /// The lease store of --explore and --replay: single, sync or async.
    #[arg(long, default_value = "single", value_parser = store_kind)]
    store: crate::model::StoreKind,
    /// How many holders the table's model runs: 2 (the book's table, its counterexamples and replays) to 4; beyond 2, holders after holder-a are taken as interchangeable (symmetry), and each configuration is searched again without that, to compare (evidence/26/model-3.md).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=4), conflicts_with_all = ["mutants", "replay", "explore"])]
    holders: u8,
}

fn store_kind(text: &str) -> std::result::Result<crate::model::StoreKind, String> {
    crate::model::StoreKind::ALL.into_iter().find(|s| s.cli_name() == text).ok_or_else(|| "the stores are single, sync, async".to_owned())
}

impl ModelArgs {
    /// Whether the command needs the interrupt handler (a replay starts
    /// holders and servers; the checker and the Explorer start nothing).
    pub fn starts_processes(&self) -> bool {
        self.replay.is_some()
    }

    /// Runs `lab model`: the Explorer, a replay, the mutants' table or the
    /// table; true when its verdict held.
    pub fn run(&self) -> crate::Result<bool> {
        use crate::model::{explore, table, Config};
        use crate::replay;
        if let Some(mode) = self.explore {
            explore::serve(Config::new(mode, self.store))?;
            return Ok(true);
        }
        if let Some(mode) = self.replay {
            return replay::run(mode, self.store, holder_bin()?, self.out.as_deref());
        }
        if self.mutants {
            return table::run_mutants(self.out.as_deref());
        }
        table::run(self.out.as_deref(), self.holders.into())
    }
}

/// `--mode`: one mode, or every mode.
#[derive(Clone, Copy)]
pub struct ModeChoice(Option<FenceMode>);

fn mode_or_all(text: &str) -> std::result::Result<ModeChoice, String> {
    if text == "all" {
        return Ok(ModeChoice(None));
    }
    text.parse::<FenceMode>().map(|m| ModeChoice(Some(m))).map_err(|_| {
        format!("unknown mode {text:?}; the modes are {}, or all", FenceMode::ALL.map(FenceMode::cli_name).join(", "))
    })
}

#[derive(Subcommand)]
pub enum ClusterAction {
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
pub enum EtcdAction {
    /// Start the three members (from their data, if they have run before) and wait for a leader; leave them running.
    Start,
    /// Stop every member cleanly (SIGTERM, followers first).
    Stop,
    /// Each member's process, ports and answer, and the leader; exit 0 only if all three run.
    Status,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Database {
    Lease26,
    Res26,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// Accepts a case id (F1, F2, …) in any case, and says which ids exist otherwise.
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

impl RunArgs {
    /// The run these arguments ask for, with the holders from `holder_bin`.
    pub fn request(&self, holder_bin: PathBuf) -> RunRequest {
        RunRequest {
            cases: self.cases.clone(),
            options: CaseOptions { mode: self.mode, pause_before_check: self.pause_before_check, threads: self.threads.into() },
            out: self.out.clone(),
            holder_bin,
        }
    }

    /// Why the cases named refuse `--mode` or `--pause-before-check`, if
    /// they do (a usage error).
    pub fn refusal(&self) -> Option<String> {
        cases::command::refusal(&self.cases, self.mode).or_else(|| cases::command::pause_refusal(&self.cases, self.pause_before_check))
    }
}

impl ChaosArgs {
    /// The chaos run these arguments ask for, with the holders from `holder_bin`.
    pub fn options(&self, holder_bin: PathBuf) -> chaos::command::ChaosOptions {
        chaos::command::ChaosOptions {
            config: Config { seed: self.seed, holders: self.holders.into(), duration: self.duration, holder_bin, trace: self.trace, case: None },
            modes: self.mode.0.map_or(FenceMode::ALL.to_vec(), |m| vec![m]),
            out: self.out.clone(),
        }
    }
}

impl Color {
    /// Whether to colour: asked, or a terminal and no NO_COLOR.
    pub fn on(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
}

/// The `holder` binary beside the running `lab`.
pub fn holder_bin() -> std::io::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name("holder"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lab` parsed from `args`, or clap's refusal.
    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("lab").chain(args.iter().copied())).map(|cli| cli.command)
    }

    /// `--mode all` (the default) runs every mode in turn; one mode runs alone.
    #[test]
    fn queue_chaos_runs_the_switches_asked_for() {
        use crate::queue::Bug;
        let switches = |args: &[&str]| match parse(args).expect("parses") {
            Command::QueueChaos(q) => q.options().switches,
            _ => unreachable!(),
        };
        assert_eq!(switches(&["queue-chaos"]).len(), 1 + Bug::ALL.len());
        assert_eq!(switches(&["queue-chaos", "--switch", "fixed,late-heartbeat"]), [None, Some(Bug::LateHeartbeat)]);
        let refused = parse(&["queue-chaos", "--switch", "Z2"]).err().expect("a row is not a switch's name").to_string();
        assert!(refused.contains("the switches are fixed, name-as-identity"), "{refused}");
    }

    /// `queues` runs every crate and both fences unless told otherwise, and
    /// refuses a crate or fence it does not know, and too few jobs for both
    /// kinds of fault, with the choices named.
    #[test]
    fn queues_runs_the_crates_and_fences_asked_for() {
        use crate::queue::crates::{CrateName, HandlerFence};
        let options = |args: &[&str]| match parse(args).expect("parses") {
            Command::Queues(q) => q.options(),
            _ => unreachable!(),
        };
        let all = options(&["queues"]);
        assert_eq!((all.crates, all.fences, all.config.jobs, all.config.workers), (CrateName::ALL.to_vec(), HandlerFence::ALL.to_vec(), 6, 3));
        let one = options(&["queues", "--crate", "apalis", "--fence", "token", "--jobs", "6"]);
        assert_eq!((one.crates, one.fences, one.config.jobs), (vec![CrateName::Apalis], vec![HandlerFence::Token], 6));
        let refused = |args: &[&str]| parse(args).err().expect("refused").to_string();
        assert!(refused(&["queues", "--crate", "sqlxmq"]).contains("the crates are graphile, apalis, or all"));
        assert!(refused(&["queues", "--fence", "yes"]).contains("the fences are none, token, or both"));
        assert!(refused(&["queues", "--jobs", "5"]).contains("5 is not in 6..=1000"));
    }

    #[test]
    fn chaos_runs_one_mode_or_every_mode() {
        let modes = |args: &[&str]| match parse(args).unwrap() {
            Command::Chaos(chaos) => chaos.options(PathBuf::from("holder")).modes,
            _ => unreachable!(),
        };
        assert_eq!(modes(&["chaos"]), FenceMode::ALL);
        assert_eq!(modes(&["chaos", "--mode", "all"]), FenceMode::ALL);
        assert_eq!(modes(&["chaos", "--mode", "check-then-write"]), [FenceMode::CheckThenWrite]);
        let refused = parse(&["chaos", "--mode", "FENCED_SCOPE"]).err().expect("not a command-line spelling").to_string();
        assert!(refused.contains("the modes are fenced-scope, fenced-scope-cte, fenced-scope-shared, fenced-row, unfenced, check-then-write, version-cas, claim-first, or all"), "{refused}");
    }

    /// Case ids are accepted in any case and named in the article's form;
    /// every case that exists is named when one does not.
    #[test]
    fn case_ids_are_checked_against_the_cases() {
        let Command::Run(run) = parse(&["run", "f4", "F16", "--mode", "unfenced"]).unwrap() else { unreachable!() };
        let request = run.request(PathBuf::from("holder"));
        assert_eq!((request.cases, request.options.mode), (vec!["F4".to_owned(), "F16".to_owned()], Some(FenceMode::Unfenced)));
        let refused = parse(&["run", "F999"]).err().expect("no case F999").to_string();
        let valid: Vec<&str> = cases::ALL.iter().map(|c| c.id).collect();
        assert!(refused.contains(&format!("valid cases: {}, all", valid.join(", "))), "{refused}");
    }

    /// What each kind of the notebook's cells asks is a command line the lab
    /// itself takes: a cell cannot ask for a run that `lab` would refuse as
    /// a usage error (tested here, above the notebook, where `Cli` is).
    #[test]
    fn every_cell_asks_what_the_lab_takes() {
        for asked in [
            r#"{"case":"F4","mode":"unfenced","pause_before_check":true}"#,
            r#"{"case":"F3","threads":4}"#,
            r#"{"command":"chaos","seed":9,"duration_s":5,"mode":"all","holders":4}"#,
            r#"{"command":"try","name":"fence-accepts-any-token"}"#,
            r#"{"command":"model"}"#,
            r#"{"command":"bench"}"#,
        ] {
            let (args, _) = crate::notebook::arguments(asked).unwrap();
            let parsed = Cli::try_parse_from(std::iter::once("lab".to_owned()).chain(args.iter().cloned()));
            assert!(parsed.is_ok(), "{asked} asks for `lab {}`, which the lab refuses: {}", args.join(" "), parsed.err().unwrap());
        }
    }
}

/// `lab needs etcd`: a program some cases need, by [`cases::Need::name`].
fn need() -> impl clap::builder::TypedValueParser<Value = cases::Need> {
    use clap::builder::TypedValueParser;
    use crate::cases::Need;
    clap::builder::PossibleValuesParser::new(Need::ALL.map(Need::name)).map(|text| Need::ALL.into_iter().find(|n| n.name() == text).expect("a possible value is a need"))
}
