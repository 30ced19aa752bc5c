//! The two databases, `lease26` and `res26`: recreated empty at the start of
//! every run of cases, and created (if missing) when the reader starts the
//! cluster by hand, so that every command the book gives after
//! `./run.sh cluster start` finds them.

use super::Cluster;
use crate::db;
use crate::error::{Result, ResultExt};

impl Cluster {
    /// Drops and creates `lease26` and `res26`: every run starts from nothing.
    pub fn recreate_databases(&self) -> Result<()> {
        let mut admin = db::connect("postgres", "lab admin")?;
        for name in [db::LEASE_DB, db::RES_DB] {
            // Separate statements: DROP/CREATE DATABASE refuse to run inside
            // the implicit transaction of a multi-statement batch. FORCE ends
            // sessions a reader may have left open in psql.
            admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .with_context(|| format!("dropping database {name}"))?;
            admin.batch_execute(&format!("CREATE DATABASE {name}")).with_context(|| format!("creating database {name}"))?;
        }
        Ok(())
    }

    /// Creates `lease26` and `res26` with their schema where they do not
    /// exist yet; leaves existing ones (and what a reader put in them) alone.
    pub fn ensure_databases(&self) -> Result<()> {
        let mut admin = db::connect("postgres", "lab admin")?;
        for (name, schema) in [(db::LEASE_DB, db::LEASE_SCHEMA), (db::RES_DB, db::RES_SCHEMA)] {
            // pg_database is the catalogue of databases; one row per database.
            let exists = admin
                .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
                .context("reading pg_database")?
                .is_some();
            if !exists {
                admin.batch_execute(&format!("CREATE DATABASE {name}")).with_context(|| format!("creating database {name}"))?;
                db::reset_schema(&mut db::connect(name, "lab setup")?, schema)?;
            }
        }
        Ok(())
    }
}
