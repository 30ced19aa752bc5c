//! The holder's command line: [`HolderArgs`], where it waits
//! ([`WaitPoint`]), which store keeps its lease ([`LeaseStoreKind`]), and the
//! argv the parent builds that parses back to the same parameters.

use crate::cluster::Endpoint;
use crate::error::Result;
use crate::params;
use crate::stats::ms;
use crate::arg_values;
use crate::vocabulary::{FenceMode, LeaseStoreKind};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the holder waits for a line on stdin, if anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitPoint {
    /// Runs straight through (holder-b in F4).
    None,
    /// After the passed deadline check, before the write: the window in which
    /// F4 pauses holder-a, and where no client-side check can help.
    BeforeWrite,
    /// Before the deadline check: the pause is then caught by the holder
    /// itself, which sees its local deadline passed and gives up.
    BeforeCheck,
    /// Inside the fenced write: the floor advanced, the part and its audit
    /// row written, the transaction not committed, the floor row locked
    /// (F10 kills the holder there, F11 freezes it there).
    InsideFence,
}

/// The holder's parameters.
#[derive(clap::Parser, Clone, Debug, PartialEq)]
#[command(name = "holder", about = "One instance of the report job: acquire, renew in the background, check the local deadline, write, renew, release. Prints one protocol line per step, and one line as each call to a server starts (CALL) and returns (RETURN), for the run's history.")]
pub struct HolderArgs {
    /// The lease to acquire.
    #[arg(long, default_value = params::LEASE)]
    pub lease: String,
    /// This instance's holder id, e.g. holder-a.
    #[arg(long)]
    pub holder: String,
    /// Which store keeps the lease: postgres, or etcd (the cluster at LAB_ETCD_PORT_BASE).
    #[arg(long, value_parser = arg_values::lease_store(), default_value = "postgres")]
    pub lease_backend: LeaseStoreKind,
    /// Lease ttl in milliseconds, by the store's clock (etcd: whole seconds).
    #[arg(long, default_value_t = ms(params::TTL) as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: u64,
    /// Background renewal period in milliseconds.
    #[arg(long, default_value_t = ms(params::RENEW_EVERY) as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub renew_ms: u64,
    /// Local safety margin in milliseconds: the local deadline is ttl - margin after each request is sent.
    #[arg(long, default_value_t = ms(params::margin(params::TTL)) as u64)]
    pub margin_ms: u64,
    /// The scope to write in.
    #[arg(long, default_value = params::SCOPE)]
    pub scope: String,
    /// The parts to write, in order, one write each (comma-separated):
    /// each after its own local deadline check.
    #[arg(long = "part", alias = "parts", value_delimiter = ',', num_args = 1.., default_value = params::PART_SUMMARY)]
    pub parts: Vec<String>,
    /// The work before each part after the first, in milliseconds
    /// (comma-separated, one per part after the first; missing ones are 0):
    /// the time a real job spends computing the next part.
    #[arg(long = "work-ms", value_delimiter = ',', num_args = 1..)]
    pub work_ms: Vec<u64>,
    /// While someone else holds the lease, try again every this many
    /// milliseconds; 0: try once, and print NOT_ACQUIRED and exit 3.
    #[arg(long, default_value_t = 0)]
    pub acquire_every_ms: u64,
    /// The report content to write, e.g. rows=200(A).
    #[arg(long)]
    pub content: String,
    /// How the resource judges the write: fenced-scope, fenced-scope-cte, fenced-scope-shared, fenced-row, unfenced, check-then-write.
    #[arg(long, value_parser = arg_values::fence_mode(), default_value = "fenced-scope", hide_possible_values = true)]
    pub mode: FenceMode,
    /// Where to wait for one line on stdin (repeat for several points).
    #[arg(long = "wait", value_enum)]
    pub waits: Vec<WaitPoint>,
    /// Let the server end the resource session after this long idle inside
    /// a transaction (idle_in_transaction_session_timeout); 0: never.
    #[arg(long, default_value_t = 0)]
    pub idle_timeout_ms: u64,
    /// Run without the background renewer: the lease then ends one ttl
    /// after the acquire, while the holder runs on (F13's clock faults).
    #[arg(long)]
    pub no_renewer: bool,
    /// Write without checking the local deadline first: what the fence
    /// alone does with a holder that cannot tell its lease is over (F17).
    #[arg(long)]
    pub skip_deadline_check: bool,
    /// The lease store's PostgreSQL server as ADDR:PORT, reached over TCP,
    /// when it is not the lab's cluster through its Unix socket (a server
    /// on a host of the lab's network, F17/F18; a delay proxy, F12).
    #[arg(long, requires = "lease_server_dir")]
    pub lease_server: Option<SocketAddr>,
    /// That server's folder, which holds its credentials.
    #[arg(long, requires = "lease_server")]
    pub lease_server_dir: Option<PathBuf>,
    /// The resource's PostgreSQL server as ADDR:PORT, reached over TCP,
    /// when it is not the lab's cluster through its Unix socket.
    #[arg(long, requires = "resource_server_dir")]
    pub resource_server: Option<SocketAddr>,
    /// That server's folder, which holds its credentials.
    #[arg(long, requires = "resource_server")]
    pub resource_server_dir: Option<PathBuf>,
    /// The etcd members this holder's client talks to (comma-separated
    /// ADDR:PORT, over TCP), when not the lab's cluster on its Unix sockets
    /// in its folder (F19).
    #[arg(long, value_delimiter = ',')]
    pub etcd_members: Vec<SocketAddr>,
}

impl HolderArgs {
    /// A holder with the command line's defaults (the article's parameters),
    /// named `holder`, writing `content`.
    pub fn new(holder: &str, content: &str) -> HolderArgs {
        <HolderArgs as clap::Parser>::parse_from(["holder", "--holder", holder, "--content", content])
    }

    /// These arguments with every session of the holder (lease, renewer,
    /// resource) sent to the lab's cluster through a delay proxy listening
    /// on `port` of 127.0.0.1 (F12, the model's replays): the cluster
    /// itself has only its Unix socket, which the proxy forwards to.
    pub fn via_proxy(self, port: u16) -> HolderArgs {
        let at = SocketAddr::from(([127, 0, 0, 1], port));
        let dir = crate::paths::cluster_dir();
        HolderArgs {
            lease_server: Some(at),
            lease_server_dir: Some(dir.clone()),
            resource_server: Some(at),
            resource_server_dir: Some(dir),
            ..self
        }
    }

    /// Whether the holder waits for a line at `point`.
    pub fn waits_at(&self, point: WaitPoint) -> bool {
        self.waits.contains(&point)
    }

    /// Where the lease store's PostgreSQL server is: `--lease-server`, else
    /// the lab's cluster.
    pub fn lease_endpoint(&self) -> Result<Endpoint> {
        endpoint("the lease store", self.lease_server, &self.lease_server_dir)
    }

    /// Where the resource's server is: `--resource-server`, else the lab's
    /// cluster.
    pub fn resource_endpoint(&self) -> Result<Endpoint> {
        endpoint("the resource", self.resource_server, &self.resource_server_dir)
    }

    /// The work before the part at `index` (none before the first).
    pub fn work_before(&self, index: usize) -> Duration {
        let ms = index.checked_sub(1).and_then(|gap| self.work_ms.get(gap)).copied().unwrap_or(0);
        Duration::from_millis(ms)
    }
}

impl HolderArgs {
    /// The command line that makes `holder` parse back to `self`.
    pub fn to_argv(&self) -> Vec<String> {
        let mut argv = vec![
            "--lease".into(), self.lease.clone(),
            "--holder".into(), self.holder.clone(),
            "--ttl-ms".into(), self.ttl_ms.to_string(),
            "--renew-ms".into(), self.renew_ms.to_string(),
            "--margin-ms".into(), self.margin_ms.to_string(),
            "--scope".into(), self.scope.clone(),
            "--part".into(), self.parts.join(","),
            "--content".into(), self.content.clone(),
            "--mode".into(), self.mode.cli_name().to_owned(),
            "--idle-timeout-ms".into(), self.idle_timeout_ms.to_string(),
        ];
        // Named only when it is not the article's store: an argv in a
        // failure report (and in the evidence that locks one) reads as it
        // did before there were two.
        if self.lease_backend != LeaseStoreKind::Postgres {
            argv.extend(["--lease-backend".into(), self.lease_backend.name().to_owned()]);
        }
        for point in &self.waits {
            argv.extend(["--wait".into(), value_name(point)]);
        }
        if self.no_renewer {
            argv.push("--no-renewer".into());
        }
        // The partition cases' flags, only when set, like the chaos run's.
        if self.skip_deadline_check {
            argv.push("--skip-deadline-check".into());
        }
        for (flag, server, dir) in [("lease", self.lease_server, &self.lease_server_dir), ("resource", self.resource_server, &self.resource_server_dir)] {
            if let (Some(server), Some(dir)) = (server, dir) {
                argv.extend([format!("--{flag}-server"), server.to_string(), format!("--{flag}-server-dir"), dir.display().to_string()]);
            }
        }
        if !self.etcd_members.is_empty() {
            argv.extend(["--etcd-members".into(), self.etcd_members.iter().map(SocketAddr::to_string).collect::<Vec<_>>().join(",")]);
        }
        // The chaos run's flags, only when set: a case's argv (which a
        // failure report shows) stays as it was.
        if !self.work_ms.is_empty() {
            argv.extend(["--work-ms".into(), self.work_ms.iter().map(u64::to_string).collect::<Vec<_>>().join(",")]);
        }
        if self.acquire_every_ms > 0 {
            argv.extend(["--acquire-every-ms".into(), self.acquire_every_ms.to_string()]);
        }
        argv
    }

    // ANCHOR: validate
    /// Refuses parameters under which the experiment means nothing.
    pub fn validate(&self) -> Result<()> {
        if self.margin_ms >= self.ttl_ms {
            return Err(format!("--margin-ms {} must be below --ttl-ms {}", self.margin_ms, self.ttl_ms).into());
        }
        if self.parts.iter().any(|p| p.is_empty() || p.contains(char::is_whitespace)) {
            return Err(format!("--part {:?} names an empty part, or one with a space (a call line names the part)", self.parts.join(",")).into());
        }
        if self.renew_ms >= self.ttl_ms - self.margin_ms {
            return Err(format!(
                "--renew-ms {} cannot keep the lease: renewals must come before the local deadline (ttl - margin = {} ms)",
                self.renew_ms,
                self.ttl_ms - self.margin_ms
            )
            .into());
        }
        // etcd counts a lease's TTL in whole seconds and raises a shorter
        // one to its minimum: a TTL it cannot keep exactly is refused here,
        // not silently lengthened.
        if self.lease_backend == LeaseStoreKind::Etcd && !self.ttl_ms.is_multiple_of(1000) {
            return Err(format!("--ttl-ms {} is not whole seconds, which is all an etcd lease can be", self.ttl_ms).into());
        }
        Ok(())
    }
    // ANCHOR_END: validate
}

impl HolderArgs {
    /// The folders whose credentials this holder reads: its lease store's
    /// and its resource's servers (the lab's cluster unless named), and the
    /// etcd cluster's when the lease lives there.
    pub fn credential_folders(&self) -> Vec<PathBuf> {
        let cluster = || crate::paths::cluster_dir();
        let mut folders = vec![self.resource_server_dir.clone().unwrap_or_else(cluster)];
        match self.lease_backend {
            LeaseStoreKind::Postgres => folders.push(self.lease_server_dir.clone().unwrap_or_else(cluster)),
            LeaseStoreKind::Etcd => folders.push(crate::cluster::etcd::default_dir()),
        }
        folders.sort();
        folders.dedup();
        folders
    }
}

/// A server named on the command line, or the lab's cluster.
fn endpoint(what: &str, server: Option<SocketAddr>, dir: &Option<PathBuf>) -> Result<Endpoint> {
    match (server, dir) {
        (Some(server), Some(dir)) => Ok(Endpoint::at(what, server, dir.clone())),
        _ => Endpoint::lab(),
    }
}

/// The command-line spelling of one of the holder's enum values, e.g. `before-write`.
fn value_name(value: &impl clap::ValueEnum) -> String {
    value.to_possible_value().expect("no variant is skipped").get_name().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn holder_a() -> HolderArgs {
        HolderArgs::parse_from(["holder", "--holder", "holder-a", "--content", "rows=200(A)", "--wait", "before-write", "--wait", "inside-fence"])
    }

    /// The argv the parent builds parses back to the same parameters.
    #[test]
    fn argv_round_trips() {
        let mut args = holder_a();
        args.mode = FenceMode::CheckThenWrite;
        let mut argv = vec!["holder".to_owned()];
        argv.extend(args.to_argv());
        assert_eq!(HolderArgs::parse_from(argv), args);
    }

    /// The chaos run's holding (several parts, work times, an acquire that
    /// waits its turn) round-trips too; a case's argv shows none of its flags.
    #[test]
    fn chaos_holding_round_trips_and_cases_argv_is_unchanged() {
        let mut argv = vec!["holder".to_owned()];
        let chaos = HolderArgs::parse_from([
            "holder", "--holder", "holder-3", "--content", "c", "--part", "summary,detail,totals", "--work-ms", "120,40", "--acquire-every-ms", "80",
        ]);
        assert_eq!(chaos.parts, ["summary", "detail", "totals"]);
        assert_eq!((chaos.work_before(0), chaos.work_before(1), chaos.work_before(2), chaos.work_before(3)), (Duration::ZERO, Duration::from_millis(120), Duration::from_millis(40), Duration::ZERO));
        argv.extend(chaos.to_argv());
        assert_eq!(HolderArgs::parse_from(argv), chaos);
        assert_eq!(
            HolderArgs::new("holder-b", "rows=503(B)").to_argv().join(" "),
            "--lease report-job --holder holder-b --ttl-ms 1500 --renew-ms 400 --margin-ms 300 --scope daily-report --part summary --content rows=503(B) --mode fenced-scope --idle-timeout-ms 0"
        );
        let mut empty = chaos.clone();
        empty.parts = vec!["summary".into(), String::new()];
        assert!(empty.validate().is_err());
    }

    /// The article's F4 parameters are the defaults, and they are valid.
    #[test]
    fn defaults_are_the_articles() {
        let args = holder_a();
        assert_eq!((args.ttl_ms, args.renew_ms, args.margin_ms), (1500, 400, 300));
        assert!(args.validate().is_ok());
    }

    /// Every mode's command-line spelling parses back to it; the
    /// transcripts' name is not a command-line spelling.
    #[test]
    fn modes_parse_by_their_cli_names() {
        for mode in FenceMode::ALL {
            let parsed = HolderArgs::try_parse_from(["holder", "--holder", "h", "--content", "c", "--mode", &mode.cli_name()]).map(|a| a.mode);
            assert_eq!(parsed.ok(), Some(mode));
        }
        assert!(HolderArgs::try_parse_from(["holder", "--holder", "h", "--content", "c", "--mode", "FENCED_SCOPE"]).is_err());
        assert_eq!(FenceMode::ALL.map(FenceMode::cli_name), ["fenced-scope", "fenced-scope-cte", "fenced-scope-shared", "fenced-row", "unfenced", "check-then-write", "version-cas", "claim-first"]);
    }

    /// A renewal period that cannot beat the local deadline is refused.
    #[test]
    fn slow_renewal_is_refused() {
        let mut args = holder_a();
        args.renew_ms = 1200;
        assert!(args.validate().is_err());
        args.renew_ms = 400;
        args.margin_ms = 1500;
        assert!(args.validate().is_err());
    }

    /// The partition cases' flags (servers on hosts, etcd members, the
    /// check skipped) round-trip, and a server needs its folder.
    #[test]
    fn partition_flags_round_trip() {
        let args = HolderArgs::parse_from([
            "holder", "--holder", "holder-a", "--content", "c", "--skip-deadline-check", "--lease-server", "10.26.0.3:26429",
            "--lease-server-dir", "/p/lease", "--resource-server", "10.26.0.4:26430", "--resource-server-dir", "/p/resource",
            "--etcd-members", "10.26.0.1:26431,10.26.0.2:26432",
        ]);
        let mut argv = vec!["holder".to_owned()];
        argv.extend(args.to_argv());
        assert_eq!(HolderArgs::parse_from(argv), args);
        assert_eq!(args.lease_endpoint().unwrap().socket_addr().to_string(), "10.26.0.3:26429");
        assert_eq!(args.etcd_members.len(), 2);
        assert!(HolderArgs::try_parse_from(["holder", "--holder", "h", "--content", "c", "--lease-server", "10.26.0.3:1"]).is_err());
    }

    /// On etcd the TTL must be whole seconds; the backend survives the argv.
    #[test]
    fn etcd_ttls_are_whole_seconds() {
        let mut args = holder_a();
        args.lease_backend = LeaseStoreKind::Etcd;
        assert!(args.validate().is_err(), "etcd cannot keep a 1500 ms lease");
        (args.ttl_ms, args.margin_ms, args.renew_ms) = (2000, 400, 500);
        assert!(args.validate().is_ok());
        let mut argv = vec!["holder".to_owned()];
        argv.extend(args.to_argv());
        assert_eq!(HolderArgs::parse_from(argv).lease_backend, LeaseStoreKind::Etcd);
    }
}
