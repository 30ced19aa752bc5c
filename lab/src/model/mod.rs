//! The model: every interleaving of the lease and each resource mode, not
//! only the ones the cases stage (`lab model`).
//!
//! The cases run one staged timeline each against PostgreSQL; the chaos run
//! samples random ones. Neither shows that a mode is safe in *every* order
//! of its steps. A model checker does: the model is a [`stateright`]
//! `Model`, and [`search`] starts from the initial state, takes every step
//! enabled in it, then every step enabled in each state reached, and so on
//! until no new state turns up, checking every property in every state.
//! Breadth first, so the first path it finds to a broken property is a
//! shortest one: a counterexample.
//!
//! The parts, one file per concept:
//! - [`store`]: the lease row and the three statements of `lease.rs`, on
//!   one server, or a primary with an asynchronous or synchronous standby
//!   that may be promoted; expiry as a step of abstract time.
//! - [`resource`]: `fence_floor` and `report_part`, and each mode's
//!   statements, with what READ COMMITTED lets each see and the row locks
//!   that make a statement wait.
//! - [`holder`]: the holder's phases, from acquire to release; pauses,
//!   delays and crashes.
//! - [`properties`]: I1, I2, I3 and the other guarded facts, and the
//!   examples that must be found for the check to mean anything.
//! - [`mutation`]: the patches of `mutants/` that have a counterpart here.
//! - [`search`]: the breadth-first search of every reachable state, and
//!   the first path to each state that decides a property.
//! - [`symmetry`]: holders with the same script are interchangeable; the
//!   search visits one state of each class.
//! - [`table`]: `lab model`: every mode on every store, the verdicts, the
//!   shortest counterexamples, and the same against the mutations.
//! - [`timeline`]: a counterexample drawn as the cases' runs are drawn.
//! - [`results`]: the tables as data (`model.json`, `model-mutants.json`),
//!   what the Markdown is drawn from and the book's facts read.
//! - [`explore`]: `lab model --explore`: stateright's Explorer on 127.0.0.1.
//!
//! A counterexample is replayed against the real cluster by
//! [`crate::replay`] (`lab model --replay MODE`), outside the model, which
//! stays pure.
//!
//! The bounds ([`Bounds`]) keep the space small enough to check whole in
//! seconds: two holders (holder-a writes `summary` then `detail`, as in F7;
//! holder-b writes `summary`), three acquires, one crash.

pub mod store;
pub mod resource;
pub mod holder;
pub mod properties;
pub mod mutation;
pub mod results;
pub mod table;
pub mod search;
pub mod symmetry;
pub mod timeline;
pub mod explore;

pub use holder::{Holder, Phase};
pub use mutation::ModelMutation;
pub use properties::{Flag, Ghost};
pub use resource::{Resource, Statement};
pub use store::{Store, StoreKind};

use crate::vocabulary::FenceMode;
use stateright::{Model, Property};

/// How far the checker looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// How many holders (2: holder-a and holder-b).
    pub holders: usize,
    /// How many acquires may be attempted in all (a holder that crashed
    /// and was restarted acquires again).
    pub acquires: u8,
    /// How many crashes (SIGKILL) in all.
    pub crashes: u8,
}

impl Bounds {
    /// The table's bounds.
    pub const TABLE: Bounds = Bounds { holders: 2, acquires: 3, crashes: 1 };
}

/// What is checked: a resource mode, on a lease store, maybe with a guard
/// switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The resource mode.
    pub mode: FenceMode,
    /// The lease store.
    pub store: StoreKind,
    /// A guard switched off, or none.
    pub mutation: Option<ModelMutation>,
    /// The bounds.
    pub bounds: Bounds,
    /// Whether the search visits one state of each class of interchangeable
    /// holders (`symmetry`); off only to count what that saves.
    pub symmetric: bool,
}

impl Config {
    /// `mode` on `store`, unmutated, within the table's bounds.
    pub fn new(mode: FenceMode, store: StoreKind) -> Config {
        Config { mode, store, mutation: None, bounds: Bounds::TABLE, symmetric: true }
    }
}

/// The model of one configuration.
pub struct LeaseModel {
    /// What it models.
    pub config: Config,
}

/// Everything at one moment: the servers, the holders, and the history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The lease store.
    pub store: Store,
    /// The resource's committed rows.
    pub resource: Resource,
    /// The holders, holder-a first.
    pub holders: Vec<Holder>,
    /// Acquires attempted so far.
    pub acquires: u8,
    /// Crashes so far.
    pub crashes: u8,
    /// The history the properties read.
    pub ghost: Ghost,
}

// ANCHOR: action
/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The holder runs `ACQUIRE`.
    Acquire(usize),
    /// The holder checks its local deadline before its next part.
    Check(usize),
    /// The holder's next statement of its write runs.
    Write(usize, Statement),
    /// The holder runs `RENEW` after its writes.
    Renew(usize),
    /// The holder runs `RELEASE`.
    Release(usize),
    /// The holder is killed (SIGKILL).
    Crash(usize),
    /// A new process of the same name starts.
    Restart(usize),
    /// The store's clock passes `expires_at`: nobody renewed meanwhile.
    Expire,
    /// The asynchronous standby replays the primary's WAL.
    Replicate,
    /// The primary crashes and the standby is promoted.
    Promote,
}
// ANCHOR_END: action

impl LeaseModel {
    /// The model of `config`.
    pub fn new(config: Config) -> LeaseModel {
        LeaseModel { config }
    }

    /// The parts holder `h` writes: holder-a two (as in F7), the others one.
    pub fn parts(&self, h: usize) -> usize {
        if h == 0 { 2 } else { 1 }
    }

    /// The part index (into [`resource::PARTS`]) of holder `h`'s `i`-th part.
    pub fn part(&self, _h: usize, i: u8) -> u8 {
        i
    }

    /// The initial state: no lease row, an empty resource, nobody started.
    pub fn initial(&self) -> State {
        State {
            store: Store::new(),
            resource: Resource::default(),
            holders: vec![Holder::new(); self.config.bounds.holders],
            acquires: 0,
            crashes: 0,
            ghost: Ghost::default(),
        }
    }

    /// The statement holder `h` would run next, if it is writing.
    pub fn next_statement(&self, holder: &Holder) -> Option<Statement> {
        match holder.phase {
            Phase::Write { statement, .. } => resource::statements(self.config.mode, self.config.mutation).get(usize::from(statement)).copied(),
            _ => None,
        }
    }

    /// What holder `h`'s `statement` does in `state` (the state itself is
    /// left as it is): for a path's description.
    pub fn outcome(&self, state: &State, h: usize, statement: Statement) -> resource::Outcome {
        let Phase::Write { part, mut seen, .. } = state.holders[h].phase else { return resource::Outcome::Next };
        let Phase::Write { statement: index, .. } = state.holders[h].phase else { return resource::Outcome::Next };
        let (mut resource, mut tx, mut claimed) = (state.resource.clone(), state.holders[h].tx, state.holders[h].claimed);
        let w = resource::Write { token: state.holders[h].token, part: self.part(h, part), seen: &mut seen, claimed: &mut claimed, tx: &mut tx, index };
        resource.execute(self.config.mode, self.config.mutation, statement, w).0
    }

    /// Runs holder `h`'s next statement.
    fn write(&self, s: &mut State, h: usize, statement: Statement) {
        let Phase::Write { part, statement: index, mut seen } = s.holders[h].phase else { return };
        let token = s.holders[h].token;
        let newest = s.ghost.newest();
        if index == 0 && token < newest {
            s.ghost.set(Flag::StaleAttempted);
        }
        let (mut tx, mut claimed) = (s.holders[h].tx, s.holders[h].claimed);
        let w = resource::Write { token, part: self.part(h, part), seen: &mut seen, claimed: &mut claimed, tx: &mut tx, index };
        let (outcome, effects) = s.resource.execute(self.config.mode, self.config.mutation, statement, w);
        (s.holders[h].tx, s.holders[h].claimed) = (tx, claimed);
        for effect in effects {
            match effect {
                resource::Effect::Floor { from, to } if to < from => s.ghost.set(Flag::FloorDown),
                resource::Effect::Part { from, token, .. } => {
                    if from.is_some_and(|old| token < old) {
                        s.ghost.set(Flag::PartDown);
                    }
                    if token < s.ghost.bar {
                        s.ghost.set(Flag::StaleAccepted);
                    }
                    s.ghost.bar = s.ghost.bar.max(token);
                }
                resource::Effect::Floor { .. } => {}
            }
        }
        s.holders[h].phase = match outcome {
            resource::Outcome::Next => Phase::Write { part, statement: index + 1, seen },
            resource::Outcome::Goto(at) => Phase::Write { part, statement: at, seen },
            resource::Outcome::Accepted => Holder::after_part(part, self.parts(h)),
            resource::Outcome::Refused => {
                if token < newest {
                    s.ghost.set(Flag::StaleRefused);
                }
                if token == newest {
                    s.ghost.set(Flag::NewestRefused);
                }
                Holder::after_part(part, self.parts(h))
            }
        };
    }
}

/// The report object's versions the model explores (see `within_boundary`).
pub const MAX_VERSION: u8 = 24;

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    /// The report object's version grows by one with every accepted put
    /// (VERSION_CAS, CLAIM_FIRST). Unmutated, the puts are bounded by the
    /// acquires: a put lost is lost to another's accepted put, and a lost
    /// claim ends at a larger token's claim. A mutated claim that ignores a
    /// larger token lets two holders take the object from each other
    /// forever; the states past this version are not explored, and its
    /// counterexample lies far inside it.
    fn within_boundary(&self, s: &State) -> bool {
        s.resource.version < MAX_VERSION
    }

    // ANCHOR: actions
    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let Config { store, mutation, bounds, .. } = self.config;
        for (h, holder) in s.holders.iter().enumerate() {
            match holder.phase {
                Phase::Idle if s.acquires < bounds.acquires => actions.push(Action::Acquire(h)),
                Phase::Check { .. } => actions.push(Action::Check(h)),
                Phase::Write { part, .. } => {
                    let statement = self.next_statement(holder).expect("a writing holder has a next statement");
                    let others: Vec<resource::Tx> = s.holders.iter().enumerate().filter(|(o, _)| *o != h).map(|(_, o)| o.tx).collect();
                    // A statement waiting on a lock is no step: it runs once
                    // the lock is free.
                    if resource::runnable(statement, self.part(h, part), &others, mutation) {
                        actions.push(Action::Write(h, statement));
                    }
                }
                Phase::Renew => actions.push(Action::Renew(h)),
                Phase::Release => actions.push(Action::Release(h)),
                Phase::Crashed if s.acquires < bounds.acquires => actions.push(Action::Restart(h)),
                _ => {}
            }
            if holder.believes_it_holds() && s.crashes < bounds.crashes {
                actions.push(Action::Crash(h));
            }
        }
        let live = s.store.primary.is_some_and(|r| r.live) || s.ghost.holdings.iter().any(|h| !h.ended);
        if live {
            actions.push(Action::Expire);
        }
        if s.store.lags(store, mutation) {
            actions.push(Action::Replicate);
        }
        if store != StoreKind::Single && !s.store.promoted {
            actions.push(Action::Promote);
        }
    }
    // ANCHOR_END: actions

    // ANCHOR: next_state
    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let Config { store: kind, mutation, .. } = self.config;
        let mut s = last.clone();
        match action {
            Action::Acquire(h) => {
                s.acquires += 1;
                match s.store.acquire(h as u8, kind, mutation) {
                    Some(token) => {
                        let index = s.ghost.holdings.len();
                        if s.ghost.another_live_holding(usize::MAX) {
                            s.ghost.set(Flag::Overlap);
                        }
                        s.ghost.issued.push(token);
                        s.ghost.holdings.push(properties::Holding { holder: h as u8, token, ended: false });
                        s.holders[h] = Holder { phase: Phase::Check { part: 0 }, token, holding: index as u8, tx: Default::default(), claimed: None };
                    }
                    // NOT_ACQUIRED: the holder exits.
                    None => s.holders[h].phase = Phase::Done,
                }
            }
            Action::Check(h) => {
                let Phase::Check { part } = s.holders[h].phase else { return None };
                let ended = s.ghost.holdings[usize::from(s.holders[h].holding)].ended;
                let skips = mutation == Some(ModelMutation::HolderSkipsDeadlineCheck);
                if !ended || skips {
                    if ended {
                        s.ghost.set(Flag::PastDeadline);
                    }
                    s.holders[h].phase = Phase::Write { part, statement: 0, seen: 0 };
                } else {
                    // DEADLINE_PASSED: the holder gives up without writing.
                    s.holders[h].phase = Phase::Done;
                }
            }
            Action::Write(h, statement) => self.write(&mut s, h, statement),
            Action::Renew(h) => {
                let holder = s.holders[h];
                let renewed = s.store.renew(h as u8, holder.token, kind, mutation);
                if renewed == s.ghost.holdings[usize::from(holder.holding)].ended {
                    s.ghost.set(Flag::GrantBroken);
                }
                // LEASE_LOST ends the holder; a renewal lets it release.
                s.holders[h].phase = if renewed { Phase::Release } else { Phase::Done };
            }
            Action::Release(h) => {
                let holder = s.holders[h];
                if s.store.release(h as u8, holder.token, kind, mutation) {
                    s.ghost.holdings[usize::from(holder.holding)].ended = true;
                }
                s.holders[h].phase = Phase::Done;
            }
            Action::Crash(h) => {
                // The server rolls its open transaction back: locks free.
                s.crashes += 1;
                s.holders[h].phase = Phase::Crashed;
                s.holders[h].tx = Default::default();
            }
            Action::Restart(h) => s.holders[h] = Holder::new(),
            Action::Expire => {
                s.store.expire();
                for holding in &mut s.ghost.holdings {
                    holding.ended = true;
                }
            }
            Action::Replicate => s.store.replicate(),
            Action::Promote => s.store.promote(),
        }
        Some(s)
    }
    // ANCHOR_END: next_state

    fn properties(&self) -> Vec<Property<Self>> {
        properties::properties(self)
    }

    fn format_action(&self, action: &Action) -> String {
        table::action_text(action)
    }
}
