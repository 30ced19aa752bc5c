//! `lab-queues`: real job-queue crates, unmodified, as a reader would use
//! them, each job's handler writing a side effect into the lab's resource.
//! The lab (`lab queues`) starts the server, makes the database, runs
//! `setup` once and a `worker` process per slot, deals the faults and
//! judges the record; this binary only speaks each crate's API.
//!
//! - [`handler`]: what every job's handler does, whatever the crate: the
//!   lab's latches, the work, the side effect, fenced or not;
//! - [`graphile`]: graphile_worker 0.14.1;
//! - [`apalis_pg`]: apalis 1.0.0 with apalis-postgres 1.0.0.
//!
//! A cargo workspace member of its own, not a default one: its async stack
//! is built only by `./run.sh queues` and the suite group that runs it.

mod apalis_pg;
mod graphile;
mod handler;

use clap::{Parser, Subcommand, ValueEnum};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};
use std::path::PathBuf;
use std::process::ExitCode;

/// The crates under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Crate {
    /// graphile_worker 0.14.1 (a port of Node's graphile-worker).
    Graphile,
    /// apalis 1.0.0 on apalis-postgres 1.0.0.
    Apalis,
}

/// Whether the handler fences its side effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fence {
    /// The side effect as most handlers write it: an upsert, last writer wins.
    None,
    /// The fix: the claim's token through the lab's `fenced_write_shared`.
    Token,
}

/// Where the lab's server is and which database the run uses.
#[derive(clap::Args, Clone, Debug)]
pub struct Server {
    /// The server's Unix socket folder (private to the lab's account: the
    /// server asks the kernel who connects, and no password is sent).
    #[arg(long)]
    socket: PathBuf,
    /// The server's port (names its socket file).
    #[arg(long)]
    port: u16,
    /// The database of the run.
    #[arg(long, default_value = "queues26")]
    db: String,
    /// Connect through the lab's delay proxy on 127.0.0.1 at this port
    /// instead (the nemesis's delayed connection): the proxy forwards to the
    /// socket above, and the server still asks the kernel who connects (the
    /// proxy runs as the lab's account, the same as this process).
    #[arg(long)]
    proxy_port: Option<u16>,
}

impl Server {
    /// The connection options of a session named `who` (its
    /// application_name: the completion triggers record it).
    pub fn options(&self, who: &str) -> PgConnectOptions {
        let session = PgConnectOptions::new().username("lab").database(&self.db).application_name(who);
        match self.proxy_port {
            // No TLS: the proxy's far end is the private socket.
            Some(port) => session.host("127.0.0.1").port(port).ssl_mode(PgSslMode::Disable),
            None => session.socket(&self.socket).port(self.port),
        }
    }

    /// A pool of sessions named `who`.
    pub async fn pool(&self, who: &str, size: u32) -> Result<PgPool, String> {
        PgPoolOptions::new()
            .max_connections(size)
            .connect_with(self.options(who))
            .await
            .map_err(|e| format!("cannot connect to {} as {who}: {e}", self.db))
    }
}

#[derive(Parser, Debug)]
#[command(name = "lab-queues", about = "Real job-queue crates for `lab queues` (run by the lab, not by hand)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Make the crate's schema (its own migrations), install the completion
    /// triggers on its job table, and enqueue every job of `queue_job`.
    Setup {
        #[arg(long = "crate", value_enum)]
        krate: Crate,
        #[command(flatten)]
        server: Server,
    },
    /// Run one worker process: the crate's worker, one job at a time, until
    /// the lab kills it.
    Worker {
        #[arg(long = "crate", value_enum)]
        krate: Crate,
        #[command(flatten)]
        server: Server,
        /// This worker process's name (`worker-2#1`): its sessions'
        /// application_name and, where the crate lets it be set, its worker id.
        #[arg(long)]
        name: String,
        /// Whether the handler fences its side effect.
        #[arg(long, value_enum)]
        fence: Fence,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lab-queues: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Setup { krate: Crate::Graphile, server } => graphile::setup(&server).await,
            Command::Setup { krate: Crate::Apalis, server } => apalis_pg::setup(&server).await,
            Command::Worker { krate: Crate::Graphile, server, name, fence } => graphile::work(&server, &name, fence).await,
            Command::Worker { krate: Crate::Apalis, server, name, fence } => apalis_pg::work(&server, &name, fence).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lab-queues: {e}");
            ExitCode::FAILURE
        }
    }
}
