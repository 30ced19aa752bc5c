//! What the model checks: the book's invariants as properties of every
//! reachable state, and the examples that prove the model is not vacuous.
//!
//! The model keeps a little history beside the system's state, as a
//! checker of a real run does ([`Ghost`]): the tokens issued, each holding
//! and whether it has ended by the database clock, the largest token whose
//! write took effect, and flags set by the step at which a guarded thing
//! went wrong. A flag is set by comparing what a statement *did* with what
//! the history says it *should* do, never by the guard that decides it, so
//! a switched-off guard (a [`ModelMutation`](super::mutation::ModelMutation))
//! shows as a flag.

use super::holder::Phase;
use super::{LeaseModel, State};
use crate::vocabulary::FenceMode;
use stateright::{Expectation, Property};

/// One holding: from an acquire to its end by the database clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Holding {
    /// Who acquired it.
    pub holder: u8,
    /// With which token.
    pub token: u8,
    /// Ended: its lease expired, or its holder released it.
    pub ended: bool,
}

/// The history the properties read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Every token an acquire returned, in order.
    pub issued: Vec<u8>,
    /// Every holding, in order of acquire.
    pub holdings: Vec<Holding>,
    /// The largest token whose write took effect in the scope.
    pub bar: u8,
    /// The [`Flag`]s set so far.
    pub flags: u16,
}

/// Something a step did that a property is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Flag {
    /// An acquire succeeded while another holding had not ended (I1).
    Overlap = 1,
    /// A write took effect with a token below one that already had (I3).
    StaleAccepted = 2,
    /// The floor was set below its committed value.
    FloorDown = 4,
    /// A part's row was overwritten by a smaller token.
    PartDown = 8,
    /// A renewal succeeded on an ended holding, or was refused on one
    /// that had not ended.
    GrantBroken = 16,
    /// A write with the newest token issued was refused.
    NewestRefused = 32,
    /// A holder whose holding had ended passed its deadline check.
    PastDeadline = 64,
    /// A write was started with a token below the newest issued.
    StaleAttempted = 128,
    /// Such a stale write was refused.
    StaleRefused = 256,
}

impl Ghost {
    /// Sets `flag`.
    pub fn set(&mut self, flag: Flag) {
        self.flags |= flag as u16;
    }

    /// Whether `flag` was set.
    pub fn has(&self, flag: Flag) -> bool {
        self.flags & flag as u16 != 0
    }

    /// The newest token issued (0: none).
    pub fn newest(&self) -> u8 {
        self.issued.iter().copied().max().unwrap_or(0)
    }

    /// Whether some holding but `except` has not ended.
    pub fn another_live_holding(&self, except: usize) -> bool {
        self.holdings.iter().enumerate().any(|(i, h)| i != except && !h.ended)
    }
}

/// A property's name in the table and the Explorer.
pub mod name {
    /// I1.
    pub const I1: &str = "I1 one holding at a time";
    /// I2.
    pub const I2: &str = "I2 no token issued twice";
    /// I3.
    pub const I3: &str = "I3 no stale write accepted";
    /// The floor.
    pub const FLOOR: &str = "floor never decreases";
    /// A part's row.
    pub const PART: &str = "part token never decreases";
    /// A grant means one unbroken holding.
    pub const GRANT: &str = "renewal iff own live holding";
    /// The newest token writes.
    pub const NEWEST: &str = "newest token never refused";
    /// The local deadline.
    pub const DEADLINE: &str = "no write past the deadline";
    /// Example: a stale write.
    pub const STALE_ATTEMPTED: &str = "a stale write is attempted";
    /// Example: a stale write refused.
    pub const STALE_REFUSED: &str = "a stale write is refused";
    /// Example: two beliefs overlap.
    pub const OVERLAP: &str = "two holders believe they hold";
    /// Example: the standby was promoted.
    pub const PROMOTED: &str = "the standby is promoted";
}

// ANCHOR: properties
/// Every property of the model in its configuration: the `always` ones in
/// order of importance, then the examples that must be found. UNFENCED
/// refuses nothing, and VERSION_CAS retries every put it lost until it
/// passes, so neither is asked for a refused stale write; only a
/// store with a standby is asked for a promotion.
pub fn properties(model: &LeaseModel) -> Vec<Property<LeaseModel>> {
    let mut all = vec![
        Property::always(name::I2, |_, s: &State| {
            let mut issued = s.ghost.issued.clone();
            issued.sort_unstable();
            issued.windows(2).all(|w| w[0] != w[1])
        }),
        Property::always(name::I3, |_, s: &State| !s.ghost.has(Flag::StaleAccepted)),
        Property::always(name::FLOOR, |_, s: &State| !s.ghost.has(Flag::FloorDown)),
        Property::always(name::I1, |_, s: &State| !s.ghost.has(Flag::Overlap)),
        Property::always(name::PART, |_, s: &State| !s.ghost.has(Flag::PartDown)),
        Property::always(name::GRANT, |_, s: &State| !s.ghost.has(Flag::GrantBroken)),
        Property::always(name::NEWEST, |_, s: &State| !s.ghost.has(Flag::NewestRefused)),
        Property::always(name::DEADLINE, |_, s: &State| !s.ghost.has(Flag::PastDeadline)),
        Property::sometimes(name::STALE_ATTEMPTED, |_, s: &State| s.ghost.has(Flag::StaleAttempted)),
        Property::sometimes(name::OVERLAP, |_, s: &State| s.holders.iter().filter(|h| h.believes_it_holds()).count() >= 2),
    ];
    if !matches!(model.config.mode, FenceMode::Unfenced | FenceMode::VersionCas) {
        all.push(Property::sometimes(name::STALE_REFUSED, |_, s: &State| s.ghost.has(Flag::StaleRefused)));
    }
    if model.config.store != super::StoreKind::Single {
        all.push(Property::sometimes(name::PROMOTED, |_, s: &State| s.store.promoted));
    }
    all
}
// ANCHOR_END: properties

/// Whether a property is an invariant (a counterexample breaks it) or an
/// example (it must be found).
pub fn is_invariant(property: &Property<LeaseModel>) -> bool {
    property.expectation == Expectation::Always
}

/// Whether a holder that is not done still has work (used by the timeline:
/// a pause is a stretch in which such a holder takes no step).
pub fn is_active(phase: Phase) -> bool {
    !matches!(phase, Phase::Idle | Phase::Done | Phase::Crashed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Config, LeaseModel, StoreKind};

    fn holds(model: &LeaseModel, name: &str, state: &State) -> bool {
        let p = properties(model).into_iter().find(|p| p.name == name).unwrap();
        (p.condition)(model, state)
    }

    /// Each invariant fails on a state planted to break it, and holds on
    /// the initial state: a check that cannot fail would pass both.
    #[test]
    fn planted_states_break_each_invariant() {
        let model = LeaseModel::new(Config::new(FenceMode::FencedScope, StoreKind::Single));
        let clean = model.initial();
        for (name, flag) in [
            (name::I3, Flag::StaleAccepted),
            (name::FLOOR, Flag::FloorDown),
            (name::I1, Flag::Overlap),
            (name::PART, Flag::PartDown),
            (name::GRANT, Flag::GrantBroken),
            (name::NEWEST, Flag::NewestRefused),
            (name::DEADLINE, Flag::PastDeadline),
        ] {
            assert!(holds(&model, name, &clean), "{name} fails on the initial state");
            let mut broken = clean.clone();
            broken.ghost.set(flag);
            assert!(!holds(&model, name, &broken), "{name} holds on a state with {flag:?}");
        }
        let mut twice = clean.clone();
        twice.ghost.issued = vec![1, 2, 1];
        assert!(holds(&model, name::I2, &clean) && !holds(&model, name::I2, &twice));
    }
}
