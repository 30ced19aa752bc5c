//! s3probe: races conditional PUTs (If-Match, If-None-Match) on a real
//! S3-compatible server, s3s-fs, run in this process on a Unix socket, and
//! counts the rounds in which more than one writer won.
//!
//! Exit status: 0 when the run completed and the `serialized` control had
//! exactly one winner (and no torn state) in every round of both probes;
//! 1 on any failure or a control that did not hold; 2 on a usage error;
//! 130/143 on SIGINT/SIGTERM. The private folder is removed on every path.

mod client;
mod probe;
mod report;
mod server;

use probe::Probe;
use report::{Row, Tally};
use server::{Credentials, Server, Variant};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio::signal::unix::{signal, SignalKind};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The lock file this binary was built from: the versions it reports.
pub const CARGO_LOCK: &str = include_str!("../Cargo.lock");

const USAGE: &str = "usage: s3probe --dir PARENT [--writers W] [--rounds R] [--out FILE.json]
  --dir PARENT   a private folder of the caller's; s3probe makes its own 0700 folder
                 inside it for the server's data and socket, and removes it on exit
  --writers W    concurrent writers per round (default 4, at least 2)
  --rounds R     rounds per variant and probe (default 200, at least 1)
  --out FILE     also write the results as JSON
Nothing is drawn at random but the credentials, so there is no --seed.";

struct Args {
    dir: PathBuf,
    writers: usize,
    rounds: usize,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let (mut dir, mut writers, mut rounds, mut out) = (None, 4, 200, None);
    let mut it = args.iter();
    let mut seen = Vec::new();
    while let Some(flag) = it.next() {
        // A flag given twice (a caller's --dir after run.sh's, say) is a
        // mistake to name, not a last-one-wins.
        if seen.contains(&flag) {
            return Err(format!("{flag} given twice"));
        }
        seen.push(flag);
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--writers" => writers = count(flag, value()?, 2)?,
            "--rounds" => rounds = count(flag, value()?, 1)?,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(Args { dir: dir.ok_or("--dir is required")?, writers, rounds, out })
}

fn count(flag: &str, value: &str, least: usize) -> Result<usize, String> {
    match value.parse() {
        Ok(n) if n >= least => Ok(n),
        _ => Err(format!("{flag} takes a whole number of at least {least}, not {value:?}")),
    }
}

fn main() -> ExitCode {
    let command_line: Vec<String> = std::env::args().collect();
    let args = match parse(&command_line[1..]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("s3probe: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let folder = match server::private_folder(&args.dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("s3probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("s3probe: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(until_signal(&args, folder.path(), &command_line));
    // Every task (server, connections, writers, s3s-fs's file I/O) ends
    // with the runtime, before the folder they write into is removed.
    drop(runtime);
    let path = folder.path().to_path_buf();
    if let Err(e) = folder.close() {
        eprintln!("s3probe: could not remove {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    ExitCode::from(code)
}

/// The run, or the first SIGINT/SIGTERM: 130/143 then, as a shell would.
async fn until_signal(args: &Args, folder: &std::path::Path, command_line: &[String]) -> u8 {
    let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("s3probe: cannot handle signals: {e}");
            return 1;
        }
    };
    tokio::select! {
        result = run(args, folder, command_line) => match result {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(e) => {
                eprintln!("s3probe: FAILED: {e}");
                1
            }
        },
        _ = int.recv() => { eprintln!("s3probe: interrupted; cleaning up"); 130 }
        _ = term.recv() => { eprintln!("s3probe: terminated; cleaning up"); 143 }
    }
}

/// Every variant × probe; `Ok(true)` when the control held.
async fn run(args: &Args, folder: &std::path::Path, command_line: &[String]) -> Result<bool, Error> {
    // Read before anything runs: a report that cannot say what it measured
    // is not worth the minutes.
    let versions = report::versions(CARGO_LOCK)?;
    let cpus = std::thread::available_parallelism().map_err(|e| format!("CPU count: {e}"))?.get();
    let creds = Credentials::random()?;
    let mut rows = Vec::new();
    for variant in Variant::ALL {
        let server = Server::start(variant, &folder.join(variant.name()), &creds)?;
        client::check_auth_is_on(&server.socket, &creds).await.map_err(|e| format!("{}: {e}", variant.name()))?;
        let setup = client::authorised(&server.socket, &creds)?;
        let writers = (0..args.writers).map(|_| client::authorised(&server.socket, &creds).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        for probe in Probe::ALL {
            let started = Instant::now();
            let rounds = probe::run(probe, &setup, &writers, args.rounds).await.map_err(|e| format!("{} {}: {e}", variant.name(), probe.name()))?;
            let tally = Tally::count(args.writers, &rounds).map_err(|e| format!("{} {}: {e}", variant.name(), probe.name()))?;
            eprintln!("s3probe: {:<10} {:<13} {:.1} s: {}", variant.name(), probe.name(), started.elapsed().as_secs_f64(), tally.summary());
            rows.push(Row { variant: variant.name(), probe: probe.name(), tally });
        }
    }

    let control_holds = rows.iter().filter(|r| r.variant == Variant::Serialized.name()).all(|r| r.tally.exactly_one_winner());
    print!("{}", report::markdown(&rows, &versions, cpus, control_holds));
    if let Some(out) = &args.out {
        let json = report::json(&rows, &versions, cpus, command_line, control_holds);
        std::fs::write(out, serde_json::to_string_pretty(&json)? + "\n").map_err(|e| format!("--out {}: {e}", out.display()))?;
    }
    let stock_doubles: usize = rows.iter().filter(|r| r.variant == Variant::Stock.name()).map(|r| r.tally.rounds_with_double_success).sum();
    eprintln!("s3probe: stock s3s-fs let more than one conditional PUT win in {stock_doubles} of {} rounds", Probe::ALL.len() * args.rounds);
    if control_holds {
        eprintln!("s3probe: the serialized control held: exactly one winner in every round");
    } else {
        eprintln!("s3probe: FAILED: the serialized control did not hold (see the table): the probe or the lock is wrong");
    }
    Ok(control_holds)
}
