//! A schema reset that empties the tables instead of loading the schema
//! again, when nothing has changed the schema since this session loaded it.
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
//! object of the schema `public` (relations, functions, triggers,
//! constraints, types) with its row version (`xmin`). Creating, dropping
//! or altering any of them makes a new catalog row or a new version of
//! one, so the signature read before a reset differs from the one read
//! after the load, and the reset loads the schema again. Writing rows
//! changes no catalog row: the signature stays. A case that loads more
//! tables into the schema (the job queue's, the objects') changes it too.
//!
//! Emptying is one transaction: every table's rows deleted, the rows the
//! load itself inserted (the seeds: `fence_floor`'s first row) put back,
//! every sequence set back to where the load left it. Where that could
//! differ from a load (a trigger that fires on DELETE, a foreign key, a
//! generated or identity column), the schema is always loaded instead.

use crate::error::{Result, ResultExt};
use postgres::Client;

/// What a load left: enough to recognise the schema and to empty it back.
pub struct Loaded {
    /// The schema's SQL, as loaded.
    schema: &'static str,
    /// The catalog signature right after the load (see [`signature`]).
    signature: String,
    /// The statements that bring the tables back to the load's rows, as
    /// one batch; `None` where the schema cannot be emptied exactly.
    empty: Option<String>,
}

/// Every object of `public` with its catalog row's version, in one string.
const SIGNATURE: &str = "
  SELECT coalesce(string_agg(o, ',' ORDER BY o), '') FROM (
    SELECT 'n' || oid || ':' || xmin FROM pg_namespace WHERE nspname = 'public'
    UNION ALL SELECT 'c' || oid || ':' || xmin FROM pg_class WHERE relnamespace = 'public'::regnamespace
    UNION ALL SELECT 'p' || oid || ':' || xmin FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    UNION ALL SELECT 'y' || oid || ':' || xmin FROM pg_type WHERE typnamespace = 'public'::regnamespace
    UNION ALL SELECT 'k' || oid || ':' || xmin FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT 't' || t.oid || ':' || t.xmin FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE c.relnamespace = 'public'::regnamespace
  ) objects(o)";

/// Whether emptying could leave something a load would not: a trigger
/// that fires on DELETE (tgtype bit 8), a foreign key (its order of
/// deletes), a generated or identity column (its rows cannot be put back
/// as they were read).
const NOT_EMPTIABLE: &str = "
  SELECT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                  WHERE c.relnamespace = 'public'::regnamespace AND t.tgtype & 8 <> 0)
      OR EXISTS (SELECT 1 FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype = 'f')
      OR EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                  WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0
                    AND (a.attgenerated <> '' OR a.attidentity <> ''))";

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
    pub fn read(client: &mut Client, schema: &'static str) -> Result<Loaded> {
        let signature = signature(client)?;
        let not_emptiable: bool = client.query_one(NOT_EMPTIABLE, &[]).context("checking whether the schema can be emptied")?.get(0);
        if not_emptiable {
            return Ok(Loaded { schema, signature, empty: None });
        }
        let mut batch = String::new();
        for row in client.query(TABLES, &[]).context("listing the schema's tables")? {
            let table: String = row.get(0);
            batch.push_str(&format!("DELETE FROM {table};\n"));
            // The load's own rows, as JSON, put back by column name.
            let seeds: String = client
                .query_one(&format!("SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb)::text FROM {table} t"), &[])
                .with_context(|| format!("reading the rows the load put in {table}"))?
                .get(0);
            if seeds != "[]" {
                batch.push_str(&format!("INSERT INTO {table} SELECT * FROM jsonb_populate_recordset(NULL::{table}, {});\n", literal(&seeds)));
            }
        }
        for row in client.query(SEQUENCES, &[]).context("reading the schema's sequences")? {
            batch.push_str(&row.get::<_, String>(0));
            batch.push('\n');
        }
        Ok(Loaded { schema, signature, empty: Some(batch) })
    }
}

/// Resets `public` on `client` to `schema` as loaded: by emptying its
/// tables when `loaded` says this session loaded that schema and the
/// catalogs say nothing changed it since; by loading it otherwise, after
/// which `loaded` describes the new load.
pub fn reset(client: &mut Client, schema: &'static str, loaded: &mut Option<Loaded>) -> Result<()> {
    if let Some(Loaded { signature: then, empty: Some(batch), .. }) = loaded.as_ref().filter(|l| l.schema == schema) {
        if signature(client)? == *then {
            return client.batch_execute(batch).context("emptying the schema's tables");
        }
    }
    *loaded = None;
    super::reset_schema(client, schema)?;
    *loaded = Some(Loaded::read(client, schema)?);
    Ok(())
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal doubles every quote, so the JSON of the seeds cannot end it.
    #[test]
    fn a_literal_doubles_quotes() {
        assert_eq!(literal(r#"[{"scope": "it's"}]"#), r#"'[{"scope": "it''s"}]'"#);
    }
}
