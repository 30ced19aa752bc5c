//! A reset between and within cases gives the next one the schema as
//! loaded, whether it empties the tables or loads the schema again
//! (`db::emptying`): rows, seeds and sequences back to the load's, and a
//! schema that something changed loaded afresh, not emptied. And a session
//! the runner kept from an earlier owner (`db::pool`) is as good as a new
//! login: nothing of that owner's is left on it, and a dead one is never
//! handed out.

use lab::cases::{Case, CaseOptions, Lab, Runner};
use lab::db;
use lab::error::Result;
use lab::transcript::Transcript;
use postgres::Client;
use std::path::PathBuf;

/// The steps, run as a case by the one runner (which resets before it).
fn resets(lab: &Lab, t: &mut Transcript) -> Result<()> {
    let mut res = db::connect(db::RES_DB, "test resets")?;
    let mut lease = db::connect(db::LEASE_DB, "test resets")?;

    // The table's identity: the same after a reset that empties, a new
    // one after a reset that loads the schema again.
    let oid = |res: &mut Client| -> Result<u32> { Ok(res.query_one("SELECT 'fence_floor'::regclass::oid", &[])?.get(0)) };
    let loaded = oid(&mut res)?;

    let job_loaded: u32 = lease.query_one("SELECT 'job'::regclass::oid", &[])?.get(0);

    // Rows, a moved seed and used sequences, then a reset that empties.
    res.batch_execute(
        "UPDATE fence_floor SET max_token = 7;
         INSERT INTO fence_floor VALUES ('other', 3);
         INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
              VALUES ('daily-report', 'summary', 'holder-x', 7, 'fenced_scope', true, 7);",
    )?;
    lease.batch_execute("INSERT INTO lease (name, holder, token, expires_at) VALUES ('report-job', 'holder-x', 7, now())")?;
    // The queue's and the objects' tables, part of every load.
    lease.batch_execute(
        "INSERT INTO job (id) VALUES (1);
         INSERT INTO job_event (job, kind, incarnation, accepted) VALUES (1, 'claim', 'worker-1#1', true);",
    )?;
    res.batch_execute(
        "INSERT INTO object (key, body, version, etag, writer) VALUES ('k', 'b', 1, md5('b'), 'setup');
         INSERT INTO object_attempt (key, writer, token, condition, accepted) VALUES ('k', 'w', 1, 'none', true);",
    )?;
    lab.reset()?;
    let floors: String = res.query_one("SELECT string_agg(scope || '=' || max_token, ',' ORDER BY scope) FROM fence_floor", &[])?.get(0);
    t.check_eq_shown("after a reset: fence_floor holds the load's one row", "daily-report=0".to_owned(), floors);
    let left: i64 = res.query_one("SELECT (SELECT count(*) FROM write_attempt) + (SELECT count(*) FROM object) + (SELECT count(*) FROM object_attempt)", &[])?.get(0);
    let leases: i64 = lease.query_one("SELECT (SELECT count(*) FROM lease) + (SELECT count(*) FROM lease_event) + (SELECT count(*) FROM job) + (SELECT count(*) FROM job_event)", &[])?.get(0);
    t.check_eq_shown("after a reset: no write attempt, object or object attempt; no lease row, lease event, job or job event", "0 0".to_owned(), format!("{left} {leases}"));
    let id: i64 = res
        .query_one(
            "INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
                  VALUES ('daily-report', 'summary', 'holder-y', 1, 'fenced_scope', true, 1) RETURNING id",
            &[],
        )?
        .get(0);
    t.check_eq_shown("after a reset: the next write attempt's id starts again at 1", 1, id);
    t.check_eq_shown("that reset emptied the tables: fence_floor is the table the load made", loaded, oid(&mut res)?);
    let job_after: u32 = lease.query_one("SELECT 'job'::regclass::oid", &[])?.get(0);
    t.check_eq_shown("in lease26 too, the queue's tables with it: job is the table the load made", job_loaded, job_after);

    // Only a function replaced: its catalog row's new version alone must
    // make the reset load the schema again.
    res.batch_execute("CREATE OR REPLACE FUNCTION fence_lock_space() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 28';")?;
    lab.reset()?;
    let space: i32 = res.query_one("SELECT fence_lock_space()", &[])?.get(0);
    t.check_eq_shown("after a reset of a replaced function: the function is the load's", 26, space);
    let reloaded = oid(&mut res)?;
    t.check(reloaded != loaded, "that reset loaded the schema again: fence_floor is a new table", || format!("oid {reloaded}"));

    // A changed schema: an extra table, a replaced function. The reset
    // must load the schema again, not empty the changed one.
    res.batch_execute(
        "CREATE TABLE extra (x int);
         CREATE OR REPLACE FUNCTION fence_lock_space() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 27';",
    )?;
    lab.reset()?;
    let extra: bool = res.query_one("SELECT to_regclass('public.extra') IS NULL", &[])?.get(0);
    let space: i32 = res.query_one("SELECT fence_lock_space()", &[])?.get(0);
    t.check_eq_shown("after a reset of a changed schema: the extra table is gone, the function is the load's", "true 26".to_owned(), format!("{extra} {space}"));

    // The sessions the runner keeps may die with their server: a reset
    // after a restart still works, on a fresh session, and still empties:
    // what the last load left outlives the session that made it.
    lab.reset()?;
    let before = oid(&mut res)?;
    drop(res);
    lab.cluster.restart_immediate()?;
    lab.reset()?;
    let mut res = db::connect(db::RES_DB, "test resets")?;
    let floors: String = res.query_one("SELECT string_agg(scope || '=' || max_token, ',' ORDER BY scope) FROM fence_floor", &[])?.get(0);
    t.check_eq_shown("after the server's crash and restart, a reset still works", "daily-report=0".to_owned(), floors);
    t.check_eq_shown("and it emptied the tables: fence_floor is the table the last load made", before, oid(&mut res)?);

    // A partition case's servers are reset through `db::setup`, which
    // shares the record of the last load with the lab's own sessions:
    // both its resets of a database the case's reset left as loaded empty.
    let server = lab::cluster::Endpoint::lab()?;
    let shared = oid(&mut res)?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let first = oid(&mut res)?;
    res.batch_execute("UPDATE fence_floor SET max_token = 5")?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let floors: String = res.query_one("SELECT string_agg(scope || '=' || max_token, ',' ORDER BY scope) FROM fence_floor", &[])?.get(0);
    t.check_eq_shown("two resets through db::setup after the case's: the load's rows, in the table the last load made", format!("daily-report=0 {shared} {shared}"), format!("{floors} {first} {}", oid(&mut res)?));

    // Those resets also keep what a load left in the database itself, for
    // the next process (the lab's own servers keep their databases from run
    // to run). A process starts with no record of its own: forgotten here,
    // the first reset finds none stored yet and loads (and stores); then
    // the stored one lets a reset empty, and a change it does not match
    // makes a reset load.
    let forget = || db::setup::with_load_record(&server, db::RES_DB, |record| Ok(*record = None));
    forget()?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let stored = oid(&mut res)?;
    t.check(stored != shared, "a reset with no record in the process, and none stored before, loads the schema", || format!("oid {stored}"));
    let now = db::emptying::signature(&mut res)?;
    let kept: Vec<String> = res.query("SELECT signature FROM lab_load.record", &[])?.iter().map(|r| r.get(0)).collect();
    t.check(kept == [now], "that load stored its record: one row, with the schema's signature now", || format!("{} rows", kept.len()));
    forget()?;
    res.batch_execute("UPDATE fence_floor SET max_token = 5")?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let floors: String = res.query_one("SELECT string_agg(scope || '=' || max_token, ',' ORDER BY scope) FROM fence_floor", &[])?.get(0);
    t.check_eq_shown("with only the stored record, a reset empties: the load's rows, in the table the load made", format!("daily-report=0 {stored}"), format!("{floors} {}", oid(&mut res)?));
    // A record another build stored is not trusted: the reset loads.
    res.batch_execute("UPDATE lab_load.record SET built_by = 'another build'")?;
    forget()?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let rebuilt = oid(&mut res)?;
    t.check(rebuilt != stored, "a record stored by another build is not used: the reset loads the schema", || format!("oid {rebuilt}"));
    let stored = rebuilt;
    forget()?;
    res.batch_execute("CREATE TABLE extra (x int)")?;
    db::setup::reloaded_databases(&server, &[(db::RES_DB, db::RES_SCHEMA)])?;
    let extra: bool = res.query_one("SELECT to_regclass('public.extra') IS NULL", &[])?.get(0);
    let after = oid(&mut res)?;
    t.check(extra && after != stored, "with only the stored record, a reset of a changed schema loads it again: the extra table is gone, fence_floor is new", || format!("extra gone {extra}, oid {after}"));
    Ok(())
}

/// The steps for the kept sessions.
fn kept_sessions(lab: &Lab, t: &mut Transcript) -> Result<()> {
    // The server's log from here on: tidying a session must not complain.
    let logged_before = lab.cluster.log_len()?;
    let pid_of = |s: &mut Client| -> Result<i32> { Ok(s.query_one("SELECT pg_backend_pid()", &[])?.get(0)) };
    let mut watcher = db::open(&lab::cluster::Endpoint::lab()?, lab::cluster::credentials::ROLE, db::RES_DB, "test watcher", None)?;
    let named = |w: &mut Client, who: &str| -> Result<i64> {
        Ok(w.query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", &[&who])?.get(0))
    };

    // An owner that leaves everything a session can hold: a setting, a
    // temporary table, a session-level advisory lock, and a transaction
    // open with a row lock.
    let first = {
        let mut a = db::connect(db::RES_DB, "test owner a")?;
        a.batch_execute(
            "SET lock_timeout = '7s';
             CREATE TEMP TABLE left_behind (x int);
             SELECT pg_advisory_lock(26);",
        )?;
        a.batch_execute("BEGIN; SELECT * FROM fence_floor FOR UPDATE;")?;
        pid_of(&mut a)?
    };
    // Not by its first owner's either (R1's, say, whose name it logged in
    // with, and which RESET ALL would give back).
    t.check_eq_shown(
        "no session goes by the name of an owner that ended: test owner a | test resets",
        "0 | 0".to_owned(),
        format!("{} | {}", named(&mut watcher, "test owner a")?, named(&mut watcher, "test resets")?),
    );
    let mut b = db::connect(db::RES_DB, "test owner b")?;
    t.check_eq_shown("the next connect to the same database takes the kept session", first, pid_of(&mut b)?);
    let row = b.query_one(
        "SELECT current_setting('lock_timeout'), to_regclass('pg_temp.left_behind') IS NULL,
                (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'),
                current_setting('application_name')",
        &[],
    )?;
    let (timeout, no_temp, advisory, name): (String, bool, i64, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    t.check_eq_shown(
        "on it: the default lock_timeout, no temporary table, no advisory lock, the new owner's name",
        "0 true 0 test owner b".to_owned(),
        format!("{timeout} {no_temp} {advisory} {name}"),
    );
    let free = watcher.query_opt("SELECT 1 FROM fence_floor FOR UPDATE NOWAIT", &[]).is_ok();
    t.check_eq_shown("the first owner's open transaction was rolled back: its row lock is free", true, free);

    // A kept session that dies while idle (its server process ended) is
    // not handed out: the next connect gets a live one.
    drop(b);
    watcher.execute("SELECT pg_terminate_backend($1)", &[&first])?;
    let gone = lab::poll::poll_until(lab::poll::BOUND, lab::poll::EVERY, || -> Result<bool> {
        Ok(watcher.query_one("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $1", &[&first])?.get(0))
    })?;
    if !gone {
        return Err("the terminated session did not end".into());
    }
    let mut c = db::connect(db::RES_DB, "test owner c")?;
    let answered: i32 = c.query_one("SELECT 1", &[])?.get(0);
    t.check_eq_shown("after the kept session was terminated, the next connect gets another that answers", format!("{} 1", true), format!("{} {answered}", pid_of(&mut c)? != first));

    // An owner whose transaction failed: its session is kept, out of the
    // failed block.
    drop(c);
    let failed = {
        let mut d = db::connect(db::RES_DB, "test owner d")?;
        let pid = pid_of(&mut d)?;
        d.batch_execute("BEGIN")?;
        (pid, d.batch_execute("SELECT 1 / 0").is_err())
    };
    let mut e = db::connect(db::RES_DB, "test owner e")?;
    let answered: i32 = e.query_one("SELECT 1", &[])?.get(0);
    t.check_eq_shown(
        "an owner's failed transaction: its session kept, and it answers the next owner",
        format!("{} true 1", failed.0),
        format!("{} {} {answered}", pid_of(&mut e)?, failed.1),
    );

    // More sessions end at once than are kept, each on its own thread,
    // released together: the oldest log out, and no race lets the kept
    // ones pass the cap. (The race is not forced: a cap that a race could
    // pass fails here only when the threads interleave so.)
    drop(e);
    let many = (0..db::pool::MOST + 6).map(|i| db::connect(db::RES_DB, &format!("test many {i}"))).collect::<Result<Vec<_>>>()?;
    let together = std::sync::Barrier::new(many.len());
    std::thread::scope(|s| {
        for session in many {
            let together = &together;
            s.spawn(move || {
                together.wait();
                drop(session);
            });
        }
    });
    // The ones let go log out; their server processes end a moment later.
    let mut idle = 0;
    lab::poll::poll_until(lab::poll::BOUND, lab::poll::EVERY, || -> Result<bool> {
        idle = named(&mut watcher, "lab idle")?;
        Ok(idle <= db::pool::MOST as i64)
    })?;
    t.check_eq_shown("after more sessions ended than the lab keeps: the idle ones it kept", db::pool::MOST as i64, idle);

    // Every session above was tidied on its way in; only owner a's had a
    // transaction open. A ROLLBACK outside one would leave a warning.
    let since = lab.cluster.log_since(logged_before)?;
    t.check_eq_shown("the server's log since these steps: warnings that no transaction was in progress", 0, since.matches("there is no transaction in progress").count());
    Ok(())
}

const KEPT: Case = Case { id: "R2", title: |_| "kept sessions".into(), run: kept_sessions, mode: None, modes: &[], needs: &[] };

const RESETS: Case = Case { id: "R1", title: |_| "resets".into(), run: resets, mode: None, modes: &[], needs: &[] };

#[test]
fn a_reset_gives_the_schema_as_loaded() {
    lab::interrupt::install();
    let runner = Runner::begin(PathBuf::from(env!("CARGO_BIN_EXE_holder")), CaseOptions::default()).expect("the cluster");
    let mut t = Transcript::quiet();
    runner.run_each(&[&RESETS, &KEPT], &mut t, |_, _, _| Ok(())).expect("the run");
    println!("{}", t.text());
    assert_eq!(t.failed(), 0, "{}", t.text());
    // Every check above ran: a run that stopped early passes nothing.
    assert_eq!(t.passed(), 16 + 8, "{}", t.text());
}
