//! A schema reset that empties the tables instead of loading the schema
//! again, when nothing has changed the schema since its last load (what
//! that load left, [`Loaded`], is kept in one record per server and
//! database for the whole process, across the sessions that come and go:
//! `setup::with_load_record`; for the lab's own servers beside `b3-26`,
//! whose databases outlive a run, also in the database itself, for the
//! next process: `Loaded::stored`).
//!
//! A run resets the lab's two databases some 70 times. Loading a schema
//! drops and creates every table, index, sequence, function and trigger:
//! about twenty relation files removed and made again, 15–40 ms on this
//! machine's disk, where making a file after many were removed is slow.
//! Emptying the tables of a schema that is still the one loaded gives the
//! next case the same rows, the same sequences and the same objects, in a
//! few milliseconds and without a file made.
//!
//! "Still the one loaded" is read from the catalogs, not assumed: every
//! object of the schema `public` (relations, their columns and defaults,
//! rules and policies, functions, triggers, constraints, types) with its
//! catalog row's version (`xmin`). Creating or dropping any of them makes
//! or removes a row; CREATE OR REPLACE, ALTER and GRANT write a new
//! version of one. So the signature read before a reset differs from the
//! one read after the load, and the reset loads the schema again. Writing
//! rows changes no catalog row (VACUUM and ANALYZE update theirs in
//! place, keeping the version): the signature stays. A case that made
//! tables of its own would change it, and so would every reset after it;
//! that is why the job queue's and the objects' tables are part of every
//! load (see [`super::LEASE_SCHEMA`]), not made by their cases.
//!
//! Emptying is one transaction. It first locks every table of the schema
//! exclusively, so that, like the DROP it replaces, it waits for any
//! transaction still writing there (a killed holder's last statement).
//! Then every table's rows are deleted, the rows the load itself inserted
//! (the seeds: `fence_floor`'s first row) put back, and every sequence set
//! back to where the load left it. Where that could differ from a load (a
//! trigger on DELETE or TRUNCATE, an INSERT trigger on a seeded table, a
//! rule, a foreign key, inheritance, a generated or identity column), the
//! schema is always loaded instead; so it is when emptying fails.

use super::literal;
use crate::error::{Result, ResultExt};
use postgres::Client;

/// What a load left: enough to recognise the schema and to empty it back.
pub struct Loaded {
    /// The schema's SQL, as loaded.
    schema: String,
    /// The catalog signature right after the load (see [`signature`]).
    signature: String,
    /// The statements that bring the tables back to the load's rows, as
    /// one batch; `None` where the schema cannot be emptied exactly.
    empty: Option<String>,
}

/// Every object of `public` with its catalog row's version, in one string.
const SIGNATURE: &str = "
  WITH rel AS (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)
  SELECT coalesce(string_agg(o, ',' ORDER BY o), '') FROM (
    SELECT 'n' || oid || ':' || xmin FROM pg_namespace WHERE nspname = 'public'
    UNION ALL SELECT 'c' || oid || ':' || xmin FROM pg_class WHERE oid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'a' || attrelid || '.' || attnum || ':' || xmin FROM pg_attribute WHERE attrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'd' || oid || ':' || xmin FROM pg_attrdef WHERE adrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'r' || oid || ':' || xmin FROM pg_rewrite WHERE ev_class IN (SELECT oid FROM rel)
    UNION ALL SELECT 'o' || oid || ':' || xmin FROM pg_policy WHERE polrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 't' || oid || ':' || xmin FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'p' || oid || ':' || xmin FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    UNION ALL SELECT 'y' || oid || ':' || xmin FROM pg_type WHERE typnamespace = 'public'::regnamespace
    UNION ALL SELECT 'k' || oid || ':' || xmin FROM pg_constraint WHERE connamespace = 'public'::regnamespace
  ) objects(o)";

/// Whether emptying could leave something a load would not: a trigger
/// that fires on DELETE or TRUNCATE (tgtype bits 8, 32; one on INSERT,
/// bit 4, only where the load put rows: see [`Loaded::read`]); a rule on a
/// table; a foreign key (its order of deletes); inheritance; a
/// generated or identity column (its rows cannot be put back as read).
const NOT_EMPTIABLE: &str = "
  WITH rel AS (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)
  SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rel) AND tgtype & (8 | 32) <> 0)
      OR EXISTS (SELECT 1 FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
                  WHERE c.oid IN (SELECT oid FROM rel) AND c.relkind IN ('r', 'p'))
      OR EXISTS (SELECT 1 FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype = 'f')
      OR EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid IN (SELECT oid FROM rel) OR inhparent IN (SELECT oid FROM rel))
      OR EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid IN (SELECT oid FROM rel) AND attnum > 0
                    AND (attgenerated <> '' OR attidentity <> ''))";

/// The tables of `public`, as names to put in a statement.
const TABLES: &str = "
  SELECT c.oid::regclass::text FROM pg_class c
   WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1";

/// Each sequence of `public`, and the `setval` that sets it back to where
/// it is now (`last_value` is NULL before the first `nextval`).
const SEQUENCES: &str = "
  SELECT format('SELECT setval(%L, %s, %L);', schemaname || '.' || sequencename,
                coalesce(last_value, start_value), last_value IS NOT NULL)
    FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1";

/// The catalog signature of `public` now.
pub fn signature(client: &mut Client) -> Result<String> {
    Ok(client.query_one(SIGNATURE, &[]).context("reading the schema's signature")?.get(0))
}

impl Loaded {
    /// Reads, right after `schema` was loaded on `client`, what emptying
    /// needs: the signature, and every table's and sequence's state now.
    pub fn read(client: &mut Client, schema: &str) -> Result<Loaded> {
        let signature = signature(client)?;
        let not_emptiable: bool = client.query_one(NOT_EMPTIABLE, &[]).context("checking whether the schema can be emptied")?.get(0);
        if not_emptiable {
            return Ok(Loaded { schema: schema.to_owned(), signature, empty: None });
        }
        let tables: Vec<String> = client.query(TABLES, &[]).context("listing the schema's tables")?.iter().map(|r| r.get(0)).collect();
        // Exclusive locks first: the batch waits, as a DROP would, for any
        // transaction still writing to these tables.
        let mut batch = if tables.is_empty() { String::new() } else { format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE;\n", tables.join(", ")) };
        for table in &tables {
            batch.push_str(&format!("DELETE FROM {table};\n"));
            // The load's own rows, as JSON, put back by column name.
            let seeds: String = client
                .query_one(&format!("SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb)::text FROM {table} t"), &[])
                .with_context(|| format!("reading the rows the load put in {table}"))?
                .get(0);
            if seeds != "[]" {
                // Putting the seeds back would fire an INSERT trigger (bit 4) a second time.
                let fires: bool = client
                    .query_one("SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = $1::text::regclass AND tgtype & 4 <> 0)", &[table])
                    .with_context(|| format!("reading {table}'s triggers"))?
                    .get(0);
                if fires {
                    return Ok(Loaded { schema: schema.to_owned(), signature, empty: None });
                }
                batch.push_str(&format!("INSERT INTO {table} SELECT * FROM jsonb_populate_recordset(NULL::{table}, {});\n", literal(&seeds)));
            }
        }
        for row in client.query(SEQUENCES, &[]).context("reading the schema's sequences")? {
            batch.push_str(&row.get::<_, String>(0));
            batch.push('\n');
        }
        Ok(Loaded { schema: schema.to_owned(), signature, empty: Some(batch) })
    }
}

/// How a [`reset`] brought the schema back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// Its tables emptied: the schema was still the one loaded.
    Emptied,
    /// Loaded again: the record describes the new load.
    Loaded,
}

/// Resets `public` on `client` to `schema` as loaded: by emptying its
/// tables when `loaded` describes a load of that schema and the catalogs
/// say nothing changed it since; by loading it otherwise, after which
/// `loaded` describes the new load.
pub fn reset(client: &mut Client, schema: &str, loaded: &mut Option<Loaded>) -> Result<Reset> {
    if let Some(Loaded { signature: then, empty: Some(batch), .. }) = loaded.as_ref().filter(|l| l.schema == schema) {
        if signature(client)? == *then {
            match client.batch_execute(batch) {
                Ok(()) => return Ok(Reset::Emptied),
                // A dead session is the caller's to replace; on a live one the
                // batch rolled back whole, and a load is the way that cannot
                // depend on what the signature missed.
                Err(e) if client.is_closed() => return Err(e).context("emptying the schema's tables"),
                Err(_) => {}
            }
        }
    }
    *loaded = None;
    super::reset_schema(client, schema)?;
    *loaded = Some(Loaded::read(client, schema)?);
    Ok(Reset::Loaded)
}

/// The record of a load kept in its database, for the next process: the
/// lab's own servers beside `b3-26` keep their databases from run to run,
/// and without it each run's first reset of each would load (see
/// `setup::reload`). It lives outside `public`, so the signature never
/// covers it, and is the owner's alone, like the schema it describes.
const STORED_SCHEMA: &str = "lab_load";

/// Its one table, in [`STORED_SCHEMA`].
const STORED_TABLE: &str = "lab_load.record";

impl Loaded {
    /// The record the last load stored in `client`'s database, if one is
    /// there and was made by this very build of the lab: the signature
    /// says the schema is the one loaded, not that the record was built by
    /// today's code, so a record from another build is not used.
    pub(super) fn stored(client: &mut Client) -> Result<Option<Loaded>> {
        // to_regclass: NULL where no load stored one yet (asked first, so
        // that the server logs no error for a table that is not there).
        let exists: bool = client.query_one(&format!("SELECT to_regclass('{STORED_TABLE}') IS NOT NULL"), &[]).context("looking for the stored record of the last load")?.get(0);
        if !exists {
            return Ok(None);
        }
        // Its one row (store makes the table afresh with exactly one).
        let rows = client.query(&format!("SELECT built_by, schema, signature, empty FROM {STORED_TABLE}"), &[]).context("reading the stored record of the last load")?;
        let [row] = rows.as_slice() else { return Ok(None) };
        if row.try_get::<_, String>(0)? != built_by()? {
            return Ok(None);
        }
        Ok(Some(Loaded { schema: row.try_get(1)?, signature: row.try_get(2)?, empty: row.try_get(3)? }))
    }

    /// Stores this record in `client`'s database, in place of the last.
    pub(super) fn store(&self, client: &mut Client) -> Result<()> {
        let mut t = client.transaction()?;
        // The schema and its table made afresh, whatever an older build
        // left there: one row, in today's layout. Two stores of one
        // database do not overlap (one run at a time uses a place's
        // servers: the run lock); if they did, the second would wait at
        // DROP SCHEMA and replace the first's row, or, when there was no
        // schema yet, fail at CREATE SCHEMA: never two rows.
        t.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {STORED_SCHEMA} CASCADE; \
             CREATE SCHEMA {STORED_SCHEMA}; \
             CREATE TABLE {STORED_TABLE} (built_by text NOT NULL, schema text NOT NULL, signature text NOT NULL, empty text);"
        ))?;
        // The one row: who built it, the load's schema, its signature, its emptying batch.
        t.execute(&format!("INSERT INTO {STORED_TABLE} (built_by, schema, signature, empty) VALUES ($1, $2, $3, $4)"), &[&built_by()?, &self.schema, &self.signature, &self.empty])?;
        t.commit().context("storing the record of the load")
    }
}

/// This build of the lab: the running executable's size and modification
/// time. Any rebuild changes it, so a record that older code built (its
/// catalog queries, its seeds, its batch) is never used by newer code;
/// the first reset after a rebuild loads, and stores anew. (Another
/// executable, a test's, stores its own: only a load more.)
fn built_by() -> Result<String> {
    // /proc/self/exe is the running file itself, even after a rebuild has
    // replaced the one at its path.
    let meta = std::fs::metadata("/proc/self/exe").context("reading the lab's own executable (/proc/self/exe)")?;
    let modified = meta.modified()?.duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?;
    Ok(format!("{} bytes, modified {}.{:09}", meta.len(), modified.as_secs(), modified.subsec_nanos()))
}
