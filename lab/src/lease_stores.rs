//! The lease stores the book has run, side by side: what one acquire costs
//! on each, measured one way on this machine (`lab lease-stores`).
//!
//! [`acquire_times`] is that one way: [`SAMPLES`] acquires of a lease of
//! its own ([`PROBE`], so the report job's tokens are left alone), each
//! released untimed, over [`LeaseService`], so the same loop times a
//! PostgreSQL statement and etcd's grant + txn. F14 prints its medians for
//! the replicated PostgreSQL, F16 its median for etcd; [`compare`] measures
//! all four stores in one run and writes the table the book includes
//! (`evidence/26/lease-stores.md`), with the facts of the machine that the
//! numbers belong to.
//!
//! The four stores, each on servers this run holds or starts, as the cases
//! do: one PostgreSQL (`b3-26`, the article's), F14's pair with the standby
//! asynchronous, then synchronous (`remote_apply`), and F16's etcd cluster,
//! started from empty data. Started from this thread: the servers' death
//! signals follow the thread that started them.

use crate::cluster::etcd::{self, EtcdCluster};
use crate::cluster::replica::FailoverPair;
use crate::cluster::{Cluster, Session};
use crate::db::replication::{self, Mode, SYNCHRONOUS_COMMIT};
use crate::error::{Result, ResultExt};
use crate::etcd_lease::EtcdLeaseStore;
use crate::lease::{LeaseService, LeaseStore};
use crate::params::{margin, ETCD_TTL, TTL};
use crate::result_data::ResultData;
use crate::stats::{median, ms, quantile};
use crate::sysinfo::{self, Machine};
use crate::{db, paths};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// A lease of its own for the latency samples.
pub const PROBE: &str = "latency-probe";

/// Acquires per median: enough that one slow fsync does not move it.
pub const SAMPLES: usize = 50;

// ANCHOR: median_acquire
/// The times of [`SAMPLES`] acquires of [`PROBE`] with `ttl` (each
/// released, untimed), shortest first.
pub fn acquire_times<S: LeaseService>(store: &mut S, ttl: Duration) -> Result<Vec<Duration>> {
    let mut times: Vec<Duration> = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let holding = store.acquire(PROBE, "latency-probe", ttl, margin(ttl))?.ok_or("the latency probe's lease was held")?;
        times.push(started.elapsed());
        store.release(&holding)?;
    }
    times.sort();
    Ok(times)
}

/// The median of [`acquire_times`], in milliseconds (the mean of the two
/// middle samples).
pub fn median_acquire_ms<S: LeaseService>(store: &mut S, ttl: Duration) -> Result<f64> {
    Ok(median_ms(&acquire_times(store, ttl)?))
}
// ANCHOR_END: median_acquire

/// The median of some times, in milliseconds.
fn median_ms(times: &[Duration]) -> f64 {
    median(&times.iter().copied().map(ms).collect::<Vec<_>>())
}

/// The sample below which 90 % of them lie (nearest rank), in
/// milliseconds; NaN for none, as the median.
fn p90_ms(sorted: &[Duration]) -> f64 {
    quantile(sorted, 0.9).map_or(f64::NAN, ms)
}

/// One store, measured.
struct Row {
    /// Its id in the data (`postgres`, `postgres-async`, `postgres-sync`, `etcd`).
    id: &'static str,
    /// The store, as the table names it.
    store: &'static str,
    /// What one acquire waits for before it returns.
    waits_for: String,
    /// The case that shows what it does when a server fails.
    shown_in: &'static str,
    /// The acquires' times, shortest first.
    times: Vec<Duration>,
}

/// The lease stores' table as data: what `lab lease-stores` writes beside
/// its table (`lease-stores.json`), what the table is drawn from and the
/// book's facts read ([`ResultData::read`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoresData {
    /// The format's version ([`ResultData::SCHEMA`]).
    pub schema: u32,
    /// Acquires timed on each store.
    pub samples: usize,
    /// Each store, in the table's order.
    pub stores: Vec<StoreData>,
    /// The lines under the table: the machine, its load, the servers, the
    /// file systems, when and how long.
    pub notes: Vec<String>,
}

/// One store's acquires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreData {
    /// `postgres`, `postgres-async`, `postgres-sync` or `etcd`.
    pub id: String,
    /// The store, as the table names it.
    pub store: String,
    /// What one acquire waits for.
    pub waits_for: String,
    /// The median acquire, in ms.
    pub median_ms: f64,
    /// The acquire below which nine in ten lie, in ms.
    pub p90_ms: f64,
    /// The case that shows what it does when a server fails.
    pub shown_in: String,
}

impl StoresData {
    /// The store `id`, or an error naming it.
    pub fn store(&self, id: &str) -> Result<&StoreData> {
        self.stores.iter().find(|s| s.id == id).ok_or_else(|| format!("the lease stores' table has no store {id}").into())
    }
}

impl ResultData for StoresData {
    const SCHEMA: u32 = 1;
    fn schema(&self) -> u32 {
        self.schema
    }
}

/// Where the measured data lives, and on what.
struct Place {
    /// Which server's data.
    what: String,
    /// Its folder.
    dir: PathBuf,
}

/// `lab lease-stores`: measures every store, writes the data beside `out`
/// (`.json`) and the table drawn from it to `out`, and returns the table.
pub fn compare(out: &Path) -> Result<String> {
    let before = Machine::read();
    let started = Instant::now();
    let session = Session::begin()?;
    let (rows, places, versions) = measure(session.cluster())?;
    drop(session);
    let data = StoresData {
        schema: <StoresData as ResultData>::SCHEMA,
        samples: SAMPLES,
        stores: rows
            .iter()
            .map(|r| StoreData {
                id: r.id.into(),
                store: r.store.into(),
                waits_for: r.waits_for.clone(),
                median_ms: median_ms(&r.times),
                p90_ms: p90_ms(&r.times),
                shown_in: r.shown_in.into(),
            })
            .collect(),
        notes: notes(&places, &versions, &before, started.elapsed()),
    };
    data.write(&out.with_extension("json"))?;
    let text = table(&data);
    paths::write_whole(out, &text).with_context(|| format!("writing {}", out.display()))?;
    Ok(text)
}

/// The default place of the table: the reader's own (`target/lab/`); the
/// book's is re-locked with `--out evidence/26/lease-stores.md`.
pub fn default_out() -> PathBuf {
    paths::reader_out("lease-stores.md")
}


fn measure(cluster: &Cluster) -> Result<(Vec<Row>, Vec<Place>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut places = Vec::new();
    let mut versions = Vec::new();

    // One PostgreSQL: lease26 on b3-26, its lease table afresh.
    db::setup::ensure_databases()?;
    db::reset_schema(&mut *db::connect(db::LEASE_DB, "lab lease-stores")?, db::LEASE_SCHEMA)?;
    let mut one = LeaseStore::connect("lab lease-stores")?;
    let settings = one.client().query_one(
        "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')",
        &[],
    )?;
    let (pg_version, fsync, commit): (String, String, String) = (settings.get(0), settings.get(1), settings.get(2));
    versions.push(format!("PostgreSQL {pg_version}（fsync={fsync}，synchronous_commit={commit}）"));
    rows.push(Row {
        id: "postgres",
        store: "一台 PostgreSQL（`b3-26`，原文的做法）",
        waits_for: "一条语句提交：本机 WAL 刷盘".into(),
        shown_in: "F8（崩溃重启后 token 还在）",
        times: acquire_times(&mut one, TTL)?,
    });
    places.push(Place { what: cluster.name().to_owned(), dir: cluster.data_dir() });

    // F14's pair: the same acquire on its primary, the standby asynchronous, then synchronous.
    let pair = FailoverPair::beside(cluster)?;
    replication::build(&pair, Mode::Async)?;
    rows.push(Row {
        id: "postgres-async",
        store: "PostgreSQL + 异步流复制备库",
        waits_for: "同上：只等主库本机刷盘，备库随后追上".into(),
        shown_in: "F14（一）：切换后同一个 token 又发了一次",
        times: acquire_times(&mut LeaseStore::connect_to(&pair.primary().endpoint(), "lab lease-stores")?, TTL)?,
    });
    replication::build(&pair, Mode::Sync)?;
    rows.push(Row {
        id: "postgres-sync",
        store: "PostgreSQL + 同步流复制备库",
        waits_for: format!("主库刷盘，再等备库收到、刷盘并回放（synchronous_commit={SYNCHRONOUS_COMMIT}）"),
        shown_in: "F14（二）：切换后 token 继续递增；备库不在时获取一直等",
        times: acquire_times(&mut LeaseStore::connect_to(&pair.primary().endpoint(), "lab lease-stores")?, TTL)?,
    });
    places.push(Place { what: format!("{} / {}", pair.primary().name(), pair.standby().name()), dir: pair.primary().data_dir() });
    drop(pair);

    // F16's etcd cluster, from empty data.
    let etcd = EtcdCluster::locate()?;
    etcd.start_fresh_for_run()?;
    let mut store = EtcdLeaseStore::new(etcd.gateway().another());
    rows.push(Row {
        id: "etcd",
        store: "etcd，三个成员（`etcd-26`）",
        waits_for: "两次 raft 提交（lease grant，再一个 txn）：各等 leader 与一个 follower 把日志写盘".into(),
        shown_in: "F16：杀掉 leader 后 token 仍然递增",
        times: acquire_times(&mut store, ETCD_TTL)?,
    });
    versions.push(format!(
        "etcd {}（heartbeat {}ms，election timeout {}ms）",
        etcd.version(),
        etcd::HEARTBEAT.as_millis(),
        etcd::ELECTION_TIMEOUT.as_millis()
    ));
    places.push(Place { what: etcd::NAME.to_owned(), dir: etcd.data_dir(0) });
    drop(etcd);
    Ok((rows, places, versions))
}

/// The table the book includes, drawn from the data.
pub fn table(data: &StoresData) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "<!-- 由 `./run.sh lease-stores` 生成（lab/src/lease_stores.rs）；不要手改，重新测量即可。 -->");
    let _ = writeln!(text, "| 租约库 | 一次获取要等什么 | 获取延迟中位数 | p90 | 出故障时（见用例） |");
    let _ = writeln!(text, "|---|---|---|---|---|");
    for row in &data.stores {
        let _ = writeln!(text, "| {} | {} | {:.1} ms | {:.1} ms | {} |", row.store, row.waits_for, row.median_ms, row.p90_ms, row.shown_in);
    }
    let _ = writeln!(text);
    let _ = writeln!(
        text,
        "每个租约库 {} 次获取（每次之后释放，释放不计时），同一个循环（`acquire_times`，经 `LeaseService`），客户端与服务器在同一台机器上，经 Unix 套接字连接（PostgreSQL 和 etcd 都不监听 TCP 端口）。",
        data.samples
    );
    let _ = writeln!(text);
    for note in &data.notes {
        let _ = writeln!(text, "- {note}");
    }
    text
}

/// The lines under the table: what the numbers belong to.
fn notes(places: &[Place], versions: &[String], before: &Machine, took: Duration) -> Vec<String> {
    let places: Vec<String> = places.iter().map(|p| format!("{} 在 {}", p.what, filesystem(&p.dir))).collect();
    // Said only when the load says so: a 1-minute load above half the
    // processors means other work shared the machine with the measurement.
    let load_after = sysinfo::load_average();
    let busy = [before.load.as_str(), load_after.as_str()].iter().any(|l| {
        let one_minute = l.split_whitespace().next().and_then(|m| m.parse::<f64>().ok());
        one_minute.zip(before.cpus).is_some_and(|(load, cpus)| load > cpus as f64 / 2.0)
    });
    vec![
        format!("机器：{}，{} 个逻辑 CPU；Linux {}", before.model, before.cpus_shown(), before.kernel),
        format!(
            "负载（/proc/loadavg 的 1、5、15 分钟均值）：测量前 {}，测量后 {load_after}{}",
            before.load,
            if busy { "；这台机器同时在跑别的工作" } else { "" }
        ),
        format!("服务器：{}", versions.join("；")),
        format!("数据目录所在的文件系统（决定一次刷盘的代价）：{}", places.join("；")),
        format!("测量于 {}，用时 {:.0} s（含建备库、启动 etcd）", utc_now(), took.as_secs_f64()),
    ]
}

/// The filesystem type and device under `dir` (see [`sysinfo::mount_of`]).
fn filesystem(dir: &Path) -> String {
    let mount = sysinfo::mount_of(dir).map_or("unknown".into(), |m| format!("{}（{}，挂载于 {}）", m.kind, m.device, m.point.display()));
    format!("{}：{mount}", dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()).display())
}

/// Now, as `2026-12-02 19:40 UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rest / 3600, rest % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's table is what its data draws, line for line.
    #[test]
    fn the_table_is_drawn_from_its_data() {
        let locked = paths::evidence_dir().join("lease-stores.md");
        let data = StoresData::read(&locked.with_extension("json")).unwrap();
        assert_eq!(std::fs::read_to_string(&locked).unwrap(), table(&data), "evidence/26/lease-stores.md is not what lease-stores.json draws");
    }

    /// The median of an even count is the mean of the two middle samples;
    /// the p90 of 50 is the 45th.
    #[test]
    fn median_and_p90_of_sorted_samples() {
        let samples: Vec<Duration> = (1..=50).map(Duration::from_millis).collect();
        assert_eq!((median_ms(&samples), p90_ms(&samples)), (25.5, 45.0));
        assert_eq!(median_ms(&[Duration::from_millis(3)]), 3.0);
    }
}
