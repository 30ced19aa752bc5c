//! One group of write cells: every mode with the same writers on the same
//! scopes. Each mode has its own team of writers (a thread and a connection
//! each); the teams take turns in short slices until each has written for
//! the cell's time; then the resource's own count of what they did.
//!
//! Why slices: this machine is shared, and a flush's latency moves with
//! whatever else is writing to the disk. A mode measured for three seconds
//! and the next mode three seconds later can see two different machines;
//! modes that alternate every quarter of a second see the same one, so
//! their ratio holds even when the absolute figures drift.

use super::{Sample, MODES, SCOPES};
use crate::stats::quantile;
use crate::db;
use crate::error::{panic_message, Result, ResultExt};
use crate::resource::{PartWrite, ResourceStore};
use crate::vocabulary::FenceMode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long one team writes before the next takes over.
pub const SLICE: Duration = Duration::from_millis(250);

/// The grant every writer writes with: one holding, written many times
/// (equal tokens pass every fence), above the seeded floor of 0.
const TOKEN: i64 = 1;

/// How many parts each writer rewrites in turn: a small report's parts.
const PARTS: usize = 4;

/// The bench's scopes, `scope-00` … with their floors at 0: a fenced write
/// needs its scope's floor row to lock and compare (sql/res26.sql seeds only
/// `daily-report`). As many as the most scopes a cell writes.
const SEED_SCOPES: &str = "
    INSERT INTO fence_floor (scope, max_token)
    SELECT format('scope-%s', lpad(i::text, 2, '0')), 0 FROM generate_series(0, $1 - 1) AS i";

/// One mode's attempts as the resource recorded them, all and accepted. The
/// schema is fresh for every group, so every row is this group's.
const COUNT_ATTEMPTS: &str = "SELECT count(*), count(*) FILTER (WHERE accepted) FROM write_attempt WHERE mode = $1";

/// Where the server will insert its next WAL record, as a byte position:
/// the difference over a slice is the WAL that slice's writes generated
/// (only one team writes at a time). Unlike `pg_stat_wal`, which backends
/// report at most once a second, it is exact at every moment.
const WAL_POSITION: &str = "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint";

/// One writer of a team: its connection and what it writes.
struct Writer {
    /// Its own session, judging writes in the team's mode.
    store: ResourceStore,
    /// `scope-<i mod scopes>`.
    scope: String,
    /// `writer-<i>`.
    name: String,
    /// The parts it rewrites in turn, and the next one.
    parts: Vec<String>,
    next: usize,
}

impl Writer {
    /// Writes its next part; `true` when accepted.
    fn write_next(&mut self) -> Result<bool> {
        let part = &self.parts[self.next % self.parts.len()];
        self.next += 1;
        self.store.write(&PartWrite { scope: &self.scope, part, content: "rows=200", writer: &self.name, token: TOKEN })
    }
}

/// What one writer did in one slice.
struct Slice {
    latencies: Vec<Duration>,
    refused: u64,
    started: Instant,
    ended: Instant,
}

/// One mode's writers and everything they measured so far.
struct Team {
    mode: FenceMode,
    writers: Vec<Writer>,
    /// Every timed write's latency.
    latencies: Vec<Duration>,
    /// Timed writes refused.
    refused: u64,
    /// The sum of the slices' lengths, first start to last end.
    elapsed: Duration,
    /// Untimed writes (each part's first write).
    warm_up: u64,
    /// WAL bytes generated during the team's slices.
    wal_bytes: i64,
    /// Each slice's writes per second, in the order of the rounds.
    slice_rates: Vec<f64>,
}

impl Team {
    fn connect(mode: FenceMode, writers: usize, scopes: usize) -> Result<Team> {
        let writers = (0..writers)
            .map(|i| {
                Ok(Writer {
                    store: ResourceStore::connect(mode, &format!("bench {} writer-{i:02}", mode.cli_name()))?,
                    scope: format!("scope-{:02}", i % scopes),
                    name: format!("writer-{i:02}"),
                    parts: (0..PARTS).map(|p| format!("w{i:02}-part-{p}")).collect(),
                    next: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Team { mode, writers, latencies: Vec::new(), refused: 0, elapsed: Duration::ZERO, warm_up: 0, wal_bytes: 0, slice_rates: Vec::new() })
    }

    /// Each writer writes each of its parts once, untimed: the first write of
    /// a part is an insert, every later one an overwrite.
    fn warm_up(&mut self) -> Result<()> {
        for writer in &mut self.writers {
            for _ in 0..PARTS {
                writer.write_next()?;
                self.warm_up += 1;
            }
        }
        Ok(())
    }

    /// All writers at once, released together, for `length`; `observer`
    /// reads the WAL position before and after.
    fn slice(&mut self, length: Duration, observer: &mut postgres::Client) -> Result<()> {
        let wal_before: i64 = observer.query_one(WAL_POSITION, &[]).context("reading the WAL position")?.get(0);
        let barrier = Barrier::new(self.writers.len());
        let slices: Vec<Result<Slice>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .writers
                .iter_mut()
                .map(|writer| {
                    let barrier = &barrier;
                    s.spawn(move || write_for(writer, barrier, length))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| Err(format!("a bench writer panicked: {}", panic_message(&*panic)).into()))).collect()
        });
        let slices = slices.into_iter().collect::<Result<Vec<_>>>()?;
        let wal_after: i64 = observer.query_one(WAL_POSITION, &[]).context("reading the WAL position")?.get(0);
        self.wal_bytes += wal_after - wal_before;
        let start = slices.iter().map(|s| s.started).min().expect("a team has writers");
        let end = slices.iter().map(|s| s.ended).max().expect("a team has writers");
        self.elapsed += end - start;
        let writes: usize = slices.iter().map(|s| s.latencies.len()).sum();
        self.slice_rates.push(writes as f64 / (end - start).as_secs_f64());
        for slice in slices {
            self.refused += slice.refused;
            self.latencies.extend(slice.latencies);
        }
        Ok(())
    }

    /// Compares the team's count with `write_attempt`'s, then sums it up.
    fn sample(mut self, client: &mut postgres::Client) -> Result<Sample> {
        let timed = self.latencies.len() as u64;
        let made = timed + self.warm_up;
        let row = client.query_one(COUNT_ATTEMPTS, &[&self.mode.name()]).context("counting write_attempt")?;
        let (recorded, accepted): (i64, i64) = (row.get(0), row.get(1));
        if recorded as u64 != made || (recorded - accepted) as u64 != self.refused {
            return Err(format!(
                "{} with {} writers: the writers made {made} writes ({} refused) but write_attempt holds {recorded} ({} refused)",
                self.mode,
                self.writers.len(),
                self.refused,
                recorded - accepted
            )
            .into());
        }
        self.latencies.sort_unstable();
        let untimed = || format!("{} with {} writers: no write was timed", self.mode, self.writers.len());
        Ok(Sample {
            per_second: timed as f64 / self.elapsed.as_secs_f64(),
            p50: quantile(&self.latencies, 0.5).ok_or_else(untimed)?,
            p99: quantile(&self.latencies, 0.99).ok_or_else(untimed)?,
            refused: self.refused,
            wal_per_write: self.wal_bytes as f64 / timed as f64,
            slice_rates: self.slice_rates,
        })
    }
}

/// Measures every mode with `writers` writers on `scopes` scopes, each mode
/// for about `seconds`, from a fresh resource schema; one sample per mode,
/// in [`MODES`] order.
pub fn measure_group(writers: usize, scopes: usize, seconds: Duration) -> Result<Vec<Sample>> {
    let mut setup = db::connect(db::RES_DB, "lab bench")?;
    db::reset_schema(&mut setup, db::RES_SCHEMA)?;
    let seeded = SCOPES.iter().copied().max().unwrap_or(1) as i32;
    setup.execute(SEED_SCOPES, &[&seeded]).context("seeding the bench's scopes")?;
    let mut teams = MODES.iter().map(|&mode| Team::connect(mode, writers, scopes)).collect::<Result<Vec<_>>>()?;
    for team in &mut teams {
        team.warm_up()?;
    }
    // After the warm-up's inserts: no team pays for the dirty pages of another's.
    db::setup::checkpoint()?;
    let rounds = (seconds.as_secs_f64() / SLICE.as_secs_f64()).ceil() as usize;
    for round in 0..rounds {
        // Rotated, so that no team always follows the same one.
        for k in 0..teams.len() {
            let team = (k + round) % teams.len();
            teams[team].slice(SLICE, &mut setup)?;
        }
    }
    teams.into_iter().map(|team| team.sample(&mut setup)).collect()
}

/// One writer's slice: waits for the others, then writes until `length` has passed.
fn write_for(writer: &mut Writer, barrier: &Barrier, length: Duration) -> Result<Slice> {
    barrier.wait();
    let started = Instant::now();
    let deadline = started + length;
    let (mut latencies, mut refused) = (Vec::with_capacity(1024), 0);
    loop {
        let before = Instant::now();
        let accepted = writer.write_next()?;
        let after = Instant::now();
        latencies.push(after - before);
        refused += u64::from(!accepted);
        if after >= deadline {
            return Ok(Slice { latencies, refused, started, ended: after });
        }
    }
}
