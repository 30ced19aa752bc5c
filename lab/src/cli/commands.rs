//! The commands that are plumbing around the library: the case list, the
//! reader's PostgreSQL cluster and etcd cluster, psql, `lab diff`, `lab
//! timeline` and `lab history`. Each returns whether its answer was yes
//! (exit 0) or no (exit 1, e.g. `cluster status` of a stopped cluster); an
//! error is the environment's (exit 3).

use super::{ClusterAction, Database, EtcdAction};
use crate::cases::{self, CaseOptions};
use crate::owner::{self, Owner};
use crate::cluster::{credentials, Cluster};
use crate::error::{Result, ResultExt};
use crate::chaos::checker::{self, CheckerInput};
use crate::{db, evidence, history, paths, timeline};
use std::path::PathBuf;

/// `lab list`: every case and what it shows.
pub fn list() {
    let options = CaseOptions::default();
    for case in cases::ALL {
        println!("{}  {}", case.id, (case.title)(&options));
    }
}

/// `lab timeline`: a run's saved chart, and the page that draws it.
pub fn timeline(name: &str) -> Result<()> {
    let page = timeline::page(name)?;
    let chart = page.with_extension("mmd");
    print!("{}", std::fs::read_to_string(&chart).with_context(|| format!("reading {}", chart.display()))?);
    println!("\nthe chart: {}\nopen in a browser: {}", chart.display(), page.display());
    if !paths::root().join("target/mermaid/mermaid.min.js").is_file() {
        println!("(the page draws with the book's mermaid.js: run ./run.sh book once)");
    }
    Ok(())
}

/// `lab history`: a run's page drawn again from its JSON lines, with the
/// checker's verdict on them.
pub fn history(run: &str) -> Result<()> {
    let jsonl = history::find(run)?;
    let text = std::fs::read_to_string(&jsonl).with_context(|| format!("reading {}", jsonl.display()))?;
    let record = history::Record::from_jsonl(&text).with_context(|| format!("reading {}", jsonl.display()))?;
    let judged = CheckerInput::from_record(&record)?;
    // Beside its JSON lines, except for a locked run's: a reader's command
    // never rewrites the evidence, so that page goes to the lab's own folder.
    let beside = jsonl.parent().ok_or("a history file has a folder")?.to_path_buf();
    let locked = beside.canonicalize().ok().zip(paths::evidence_dir().canonicalize().ok()).is_some_and(|(b, e)| b.starts_with(e));
    let folder = if locked { history::dir() } else { beside };
    let page = history::save_page(&folder, &record, &checker::findings(&judged))?;
    println!("{}: {} operations, {} faults, from {}", record.run.name, record.ops.len(), record.faults.len(), jsonl.display());
    println!("{}", checker::check(&judged));
    println!("open in a browser: {}", page.display());
    Ok(())
}

/// `lab cluster`: the reader's server, which stays up until `cluster stop`.
pub fn cluster(action: ClusterAction) -> Result<bool> {
    let cluster = Cluster::locate()?;
    match action {
        ClusterAction::Start => {
            cluster.start()?;
            // The reader's now: no run of cases stops it at its end.
            owner::write(cluster.dir(), &Owner::Reader)?;
            // Every command the book gives after `cluster start` needs them.
            db::setup::ensure_databases()?;
            println!("cluster {} running on its Unix socket {}; stop it with `./run.sh cluster stop`", crate::cluster::NAME, cluster.socket_path().display());
        }
        ClusterAction::Stop { if_idle } => {
            // Held while stopping, so no run can start on it meanwhile.
            let _lock = match crate::cluster::lock_runs()? {
                Ok(lock) => Some(lock),
                Err(pid) if if_idle => {
                    println!("cluster {} is in use by lab run pid {pid}; left running", crate::cluster::NAME);
                    return Ok(true);
                }
                Err(_) => None,
            };
            cluster.stop()?;
            println!("cluster {} stopped", crate::cluster::NAME);
        }
        ClusterAction::RestartImmediate => {
            if !cluster.is_running()? {
                return Err("the cluster is not running: start it with `./run.sh cluster start`".into());
            }
            cluster.restart_immediate()?;
            println!("cluster {} crash-stopped and restarted (WAL recovery: see {})", crate::cluster::NAME, cluster.log_path().display());
        }
        ClusterAction::Status => {
            println!("{}", cluster.describe()?);
            // Scripts ask "is it running?" with the exit status, like pg_ctl status.
            if !cluster.is_running()? {
                return Ok(false);
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
            let _lock = crate::cluster::lock_runs()?.map_err(|pid| format!("lab run pid {pid} is using the cluster; wait for it to finish"))?;
            let removed = cluster.forget(matches!(action, ClusterAction::Forget))?;
            if removed.is_empty() {
                println!("cluster {}: nothing to remove", crate::cluster::NAME);
            }
            for dir in removed {
                println!("removed {}", dir.display());
            }
        }
    }
    Ok(true)
}

/// `lab etcd`: the reader's etcd cluster. A run of F16 starts its own
/// (from empty data) and ends it; what the reader starts here stays up,
/// in a session of its own, until `etcd stop`.
pub fn etcd(action: EtcdAction) -> Result<bool> {
    use crate::cluster::etcd::{self, EtcdCluster};
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
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// `lab psql`: replaces this process with psql on one of the lab's
/// databases; returns only when psql cannot be started.
pub fn psql(database: Database, args: Vec<String>) -> Result<()> {
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
        // Through the server's Unix socket, its only way in.
        .arg("-h")
        .arg(cluster.socket_dir())
        .args(["-p", &port, "-U", credentials::ROLE, "-d", name])
        // No password: on the socket the server asks the kernel who connects
        // (peer) and lets in this account only.
        .args(args)
        .exec();
    Err(format!("cannot run {}: {err} (psql comes with the postgresql-client package)", program.display()).into())
}

/// `lab diff`: a case's last transcript (or `file`) against its locked
/// evidence; `true` when they match.
pub fn diff(case: &str, file: Option<PathBuf>, color: bool) -> Result<bool> {
    let comparison = evidence::compare(case, file.as_deref(), color)?;
    let shown = |p: &std::path::Path| p.strip_prefix(paths::root()).unwrap_or(p).display().to_string();
    if comparison.diff.is_empty() {
        println!("{} matches {}", shown(&comparison.transcript), shown(&comparison.evidence));
        Ok(true)
    } else {
        print!("{}", comparison.diff);
        Ok(false)
    }
}
