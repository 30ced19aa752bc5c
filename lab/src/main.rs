//! `lab`: run the cases, manage the cluster, open psql, compare a transcript
//! with the evidence. Thin: parse the command line (`lab::cli`), call the
//! library, and turn what it answers into an exit status.

use clap::Parser;
use lab::cli::{self, commands, Cli, Command};
use lab::error::{chain, Result};
use lab::{bench, cases, chaos, interrupt, lease_stores, mutants, paths};
use std::process::ExitCode;

/// Exit status for a problem with the environment (no server, port taken…).
const ENVIRONMENT: u8 = 3;

/// Exit status for a command line the lab refuses (as clap's own).
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = dispatch(cli.command);
    interrupt::settle();
    code
}

fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::List => {
            commands::list();
            ExitCode::SUCCESS
        }
        Command::Needs { what, args } => {
            if cases::any_needs(what, &args) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Run(args) => {
            if let Some(why) = args.refusal() {
                return usage(&why);
            }
            interrupt::install();
            report(cli::holder_bin().map_err(Into::into).and_then(|bin| cases::command::run(&args.request(bin))).map(verdict))
        }
        Command::Bench { seconds, runs, out, redraw, writers, scopes } => {
            let out = out.unwrap_or_else(|| paths::reader_out("bench.md"));
            if redraw {
                return report(bench::report::redraw(&out).map(|written| {
                    written.iter().for_each(|path| println!("bench: drew {}", path.display()));
                    ExitCode::SUCCESS
                }));
            }
            interrupt::install();
            let (writers, scopes) = (bench::ascending(writers), bench::ascending(scopes));
            report(bench::command(&bench::BenchOptions { seconds, runs, out, writers, scopes }).map(|()| ExitCode::SUCCESS))
        }
        Command::Suite { workers, only } => {
            interrupt::install();
            report(lab::suite::run(&lab::suite::SuiteOptions { workers, only }).map(verdict))
        }
        Command::Mutants { names, accept } => {
            if accept && std::env::var("CI").as_deref() == Ok("true") {
                return usage("--accept re-locks evidence and is not for CI");
            }
            interrupt::install();
            report(mutants::harness::run_all(&names, accept).map(verdict))
        }
        Command::Try { name: None, .. } => {
            mutants::harness::list();
            ExitCode::SUCCESS
        }
        Command::Try { name: Some(name), color } => {
            interrupt::install();
            report(mutants::harness::try_one(&name, color.on()).map(verdict))
        }
        Command::Chaos(args) => {
            interrupt::install();
            report(cli::holder_bin().map_err(Into::into).and_then(|bin| chaos::command::run(&args.options(bin))).map(verdict))
        }
        Command::QueueChaos(args) => {
            interrupt::install();
            report(lab::queue::chaos::report::run(&args.options()).map(verdict))
        }
        Command::Queues(args) => {
            interrupt::install();
            report(lab::queue::crates::report::run(&args.options()).map(verdict))
        }
        Command::Model(args) => {
            if args.starts_processes() {
                interrupt::install();
            }
            report(args.run().map(verdict))
        }
        Command::Timeline { case } => report(commands::timeline(&case).map(|()| ExitCode::SUCCESS)),
        Command::History { run } => report(commands::history(&run).map(|()| ExitCode::SUCCESS)),
        Command::Stress { case, runs, mode } => {
            interrupt::install();
            report(cli::holder_bin().map_err(Into::into).and_then(|bin| cases::command::stress(&case, runs, mode, bin)).map(verdict))
        }
        Command::ServerBin => report(lab::cluster::Cluster::locate().map(|c| {
            println!("{}", c.bin_dir().display());
            ExitCode::SUCCESS
        })),
        Command::Cluster { action } => {
            interrupt::install();
            report(commands::cluster(action).map(verdict))
        }
        Command::Etcd { action } => report(commands::etcd(action).map(verdict)),
        Command::LeaseStores { out } => {
            interrupt::install();
            let out = out.unwrap_or_else(lease_stores::default_out);
            report(lease_stores::compare(&out).map(|table| {
                print!("{table}");
                eprintln!("lab: written to {}", out.display());
                ExitCode::SUCCESS
            }))
        }
        Command::Notebook { book, port } => report(lab::notebook::serve(book.unwrap_or_else(|| lab::paths::root().join("target/book")), port).map(|()| ExitCode::SUCCESS)),
        Command::Psql { database, args } => report(commands::psql(database, args).map(|()| ExitCode::SUCCESS)),
        Command::Facts { check } => report(lab::facts::run(check).map(verdict)),
        Command::Diff { case, file, color } => report(commands::diff(&case, file, color.on()).map(verdict)),
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

/// A command line the lab refuses: why, and exit 2.
fn usage(why: &str) -> ExitCode {
    eprintln!("lab: {why}");
    ExitCode::from(USAGE)
}

/// The outcome's exit status, or the error chain and exit 3.
fn report(outcome: Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        // After a stop signal the interrupt thread is stopping what this
        // command started (and reaping its children, which fails the
        // command's own wait): the failure is its work, not news.
        Err(_) if interrupt::requested() => ExitCode::from(130),
        Err(e) => {
            eprintln!("lab: {}", chain(e.as_ref()));
            ExitCode::from(ENVIRONMENT)
        }
    }
}
