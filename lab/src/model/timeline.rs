//! A counterexample drawn the way the cases' runs are drawn: the path's
//! steps become the events `timeline::Timeline` draws (holdings, pauses,
//! kills, writes accepted or refused), on an axis where one second is one
//! step, and the same gantt chart comes out.
//!
//! A pause is what the model leaves implicit: a holder that believes it
//! holds, and takes no step while others do. It is drawn from the step
//! after its last one to the step before its next, as a SIGSTOP is.

use super::holder::name;
use super::properties::is_active;
use super::resource::Outcome;
use super::{Action, LeaseModel, State};
use crate::events::ParentEvent;
use crate::timeline::{LeaseEvent, Timeline};
use crate::vocabulary::{Act, LeaseEventKind, WriteAttempt};
use stateright::Path;

/// Milliseconds per step on the chart's axis.
const STEP_MS: f64 = 1000.0;

/// The section of the lease store's own steps (expiry, promotion).
pub const STORE: &str = "租约库";

/// The events of `path`, as a run's timeline.
pub fn events(model: &LeaseModel, path: &Path<State, Action>) -> Timeline {
    let pairs = path.clone().into_vec();
    let at = |i: usize| i as f64 * STEP_MS;
    let (mut lease, mut writes, mut parent) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_step: Vec<Option<usize>> = vec![None; model.config.bounds.holders];
    let end = pairs.len();
    for (i, window) in pairs.windows(2).enumerate() {
        let (before, after) = (&window[0].0, &window[1].0);
        let action = window[0].1.expect("a step between two states");
        let step = i + 1;
        let mover = match action {
            Action::Acquire(h) | Action::Check(h) | Action::Write(h, _) | Action::Renew(h) | Action::Release(h) | Action::Crash(h) | Action::Restart(h) => Some(h),
            _ => None,
        };
        // Every active holder that did not move here, and moved before,
        // pauses until its next step.
        if let Some(h) = mover {
            if let Some(prev) = last_step[h] {
                if step > prev + 1 && is_active(before.holders[h].phase) {
                    parent.push(ParentEvent { at_ms: at(prev) + 200.0, holder: name(h), act: Act::Stop });
                    parent.push(ParentEvent { at_ms: at(step) - 200.0, holder: name(h), act: Act::Cont });
                }
            }
            last_step[h] = Some(step);
        }
        match action {
            Action::Acquire(h) if after.ghost.holdings.len() > before.ghost.holdings.len() => {
                let index = after.ghost.holdings.len() - 1;
                // The holding lasts until the step that ended it (a release
                // or an expiry), or to the path's end.
                let ended = (step..end).find(|&k| pairs[k].0.ghost.holdings[index].ended);
                let token = i64::from(after.holders[h].token);
                match ended.map(|k| (k, pairs[k - 1].1)) {
                    Some((k, Some(Action::Release(_)))) => {
                        lease.push(LeaseEvent::new(at(step), &name(h), token, LeaseEventKind::Acquire, at(k) + STEP_MS));
                        lease.push(LeaseEvent::new(at(k), &name(h), token, LeaseEventKind::Release, f64::NEG_INFINITY));
                    }
                    Some((k, _)) => lease.push(LeaseEvent::new(at(step), &name(h), token, LeaseEventKind::Acquire, at(k))),
                    None => lease.push(LeaseEvent::new(at(step), &name(h), token, LeaseEventKind::Acquire, at(end))),
                }
            }
            Action::Write(h, statement) => {
                let accepted = match model.outcome(before, h, statement) {
                    Outcome::Accepted => true,
                    Outcome::Refused => false,
                    Outcome::Next | Outcome::Goto(_) => continue,
                };
                let super::holder::Phase::Write { part, .. } = before.holders[h].phase else { continue };
                writes.push(WriteAttempt {
                    id: writes.len() as i64 + 1,
                    scope: crate::params::SCOPE.into(),
                    part: super::resource::PARTS[usize::from(model.part(h, part))].into(),
                    writer: name(h),
                    token: i64::from(before.holders[h].token),
                    mode: model.config.mode,
                    accepted,
                    // The model does not record the floor a write saw.
                    floor_after: None,
                    at_ms: at(step),
                });
            }
            Action::Crash(h) => parent.push(ParentEvent { at_ms: at(step), holder: name(h), act: Act::Kill }),
            Action::Expire => parent.push(ParentEvent { at_ms: at(step), holder: STORE.to_owned(), act: Act::Expire }),
            Action::Promote => parent.push(ParentEvent { at_ms: at(step), holder: STORE.to_owned(), act: Act::Promote }),
            _ => {}
        }
    }
    Timeline::from_events(lease, writes, parent)
}

/// The counterexample's chart, titled `title`.
pub fn gantt(model: &LeaseModel, path: &Path<State, Action>, title: &str) -> String {
    events(model, path).gantt(title, 0.0)
}
