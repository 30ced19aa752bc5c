//! The one case runner, used by `lab run` and by the snapshot test: it holds
//! the cluster for the run, starts every run from fresh databases, and runs
//! the cases one after another into one transcript.

use super::{history as case_history, Case, Lab, CaseOptions};
use crate::chaos::checker::{self, CheckerInput};
use crate::history;
use crate::cluster::Session;
use crate::error::{chain, Result, ResultExt};
use crate::transcript::Transcript;
use crate::{db, interrupt, timeline};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long one case took, and how much of that it waited by design
/// (see [`crate::poll::designed`]); the rest is the lab's overhead.
#[derive(Clone, Copy, Debug)]
pub struct CaseTime {
    /// From the header to the last line.
    pub elapsed: Duration,
    /// The part spent in waits the experiment needs.
    pub designed: Duration,
}

impl CaseTime {
    /// What is neither the experiment's own waiting nor nothing: overhead.
    pub fn overhead(&self) -> Duration {
        self.elapsed.saturating_sub(self.designed)
    }
}

/// A run of cases: the cluster held, the databases fresh.
pub struct Runner {
    /// Dropped last: stops the cluster if this run started it.
    _session: Session,
    /// What the cases run against.
    lab: Lab,
}

impl Runner {
    /// Takes the cluster (starting it if needed) and recreates both databases.
    pub fn begin(holder_bin: PathBuf, options: CaseOptions) -> Result<Runner> {
        if !holder_bin.is_file() {
            return Err(format!("the holder binary is missing ({}): build with `cargo build`", holder_bin.display()).into());
        }
        let session = Session::begin()?;
        db::setup::recreate_databases()?;
        // The cases' sessions to the cluster are kept for the next login.
        db::pool::keep_idle_sessions();
        let lab = Lab { holder_bin, cluster: session.cluster().clone(), options, own: Default::default() };
        Ok(Runner { _session: session, lab })
    }

    /// The reader's knobs for the cases run from now on.
    pub fn set_options(&mut self, options: CaseOptions) {
        self.lab.options = options;
    }

    /// The knobs in force.
    pub fn options(&self) -> &CaseOptions {
        &self.lab.options
    }

    /// Runs `cases` in order into `t`, and hands each finished case, with
    /// how long it took, to `done`. A case that errs ends with a FAIL line
    /// that carries the whole error chain, and the run goes on; so does one
    /// whose picture cannot be drawn. After a stop signal, the run ends
    /// with an error and `done` is not called again.
    pub fn run_each(&self, cases: &[&Case], t: &mut Transcript, mut done: impl FnMut(&Case, &Transcript, CaseTime) -> Result<()>) -> Result<()> {
        for case in cases {
            crate::poll::take_designed();
            let start = Instant::now();
            t.case(case.id, &(case.title)(&self.lab.options));
            let began_ms = crate::events::now_ms();
            let name = case.run_name(&self.lab.options);
            // The last run's picture goes first: a picture of this run, or none.
            let ran = timeline::discard(&name)
                .and_then(|()| self.lab.reset())
                .and_then(|()| {
                    timeline::clear();
                    case_history::begin();
                    (case.run)(&self.lab, t)
                })
                .and_then(|()| self.draw(case.id, &name, began_ms).with_context(|| format!("drawing the timeline and the history of {name}")));
            if let Err(e) = ran {
                t.abort(chain(e.as_ref()));
            }
            if interrupt::requested() {
                // A run cut short leaves the saved transcripts and the
                // evidence as they were: nothing of it is worth keeping.
                return Err("interrupted".into());
            }
            done(case, t, CaseTime { elapsed: start.elapsed(), designed: crate::poll::take_designed() })?;
        }
        Ok(())
    }

    /// Saves the picture of a run `name` of case `id` that ran holder
    /// processes (the parent's signals mark one), and the history of each
    /// stretch whose holders made calls (see `cases::history`).
    fn draw(&self, id: &str, name: &str, began_ms: f64) -> Result<()> {
        for record in case_history::take(id, name)? {
            let findings = checker::findings(&CheckerInput::from_record(&record)?);
            history::save(&history::dir(), &record, &findings)?;
        }
        let lease = self.lab.own.on(db::LEASE_DB, timeline::lease_events_on)?;
        let writes = self.lab.own.on(db::RES_DB, timeline::write_events_on)?;
        let recorded = timeline::collect(lease, writes);
        if recorded.has_holders() {
            timeline::save(name, &recorded.gantt(name, began_ms))?;
        }
        Ok(())
    }
}
