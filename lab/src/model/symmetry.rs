//! Symmetry: holders that run the same script are interchangeable, so a
//! state and the same state with two of them swapped have the same future
//! up to that swap, and the same verdicts (no property names a holder).
//! The search visits one state of each such class.
//!
//! holder-a writes `summary` then `detail`; every other holder writes
//! `summary` (`LeaseModel::parts`). So the holders after holder-a may be
//! permuted among themselves, holder-a never. A state is known by the
//! smallest fingerprint among its permutations: the search keeps the first
//! state of each class it meets, and the path it took there, so a
//! counterexample is a real path, never a relabelled one. With two holders
//! there is only the identity, and nothing changes.

use super::{LeaseModel, State};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// Every permutation of the holders that keeps each one's script: holder-a
/// (0) in place, the others in every order. `perm[i]` is where holder `i`
/// goes.
pub fn permutations(holders: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest: Vec<u8> = (1..holders as u8).collect();
    permute(&mut rest, 0, &mut out);
    out.into_iter().map(|r| std::iter::once(0).chain(r).collect()).collect()
}

/// Heap's algorithm would do; this is the plain recursive one.
fn permute(items: &mut Vec<u8>, from: usize, out: &mut Vec<Vec<u8>>) {
    if from + 1 >= items.len() {
        out.push(items.clone());
        return;
    }
    for i in from..items.len() {
        items.swap(from, i);
        permute(items, from + 1, out);
        items.swap(from, i);
    }
}

/// `state` with holder `i` renamed `perm[i]` everywhere a holder is named:
/// the holders' own places, the lease row on each server, and the history.
pub fn relabelled(state: &State, perm: &[u8]) -> State {
    let mut s = state.clone();
    for (i, holder) in state.holders.iter().enumerate() {
        s.holders[usize::from(perm[i])] = *holder;
    }
    for row in [&mut s.store.primary, &mut s.store.standby].into_iter().flatten() {
        row.holder = perm[usize::from(row.holder)];
    }
    for holding in &mut s.ghost.holdings {
        holding.holder = perm[usize::from(holding.holder)];
    }
    s
}

/// The fingerprint of `state`'s class: the smallest fingerprint among its
/// permutations (`perms`, from [`permutations`]).
pub fn class_fingerprint(state: &State, perms: &[Vec<u8>]) -> u64 {
    perms
        .iter()
        .map(|perm| if perm.iter().enumerate().all(|(i, &p)| usize::from(p) == i) { fingerprint(state) } else { fingerprint(&relabelled(state, perm)) })
        .min()
        .expect("the identity is always a permutation")
}

/// A 64-bit hash of a state, as stateright knows a state.
pub fn fingerprint(state: &State) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

impl LeaseModel {
    /// The permutations of this model's holders that keep their scripts
    /// (the identity alone when the search is not to use them).
    pub fn symmetries(&self) -> Vec<Vec<u8>> {
        let holders = self.config.bounds.holders;
        if self.config.symmetric { permutations(holders) } else { vec![(0..holders as u8).collect()] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Bounds, Config, StoreKind};
    use crate::vocabulary::FenceMode;
    use stateright::Model;

    /// With three holders, the reduced search reaches fewer states and the
    /// same verdicts, examples and shortest counterexamples as the full one:
    /// a safe mode and an unsafe one on one server.
    #[test]
    fn the_reduction_keeps_the_verdicts() {
        for mode in [FenceMode::FencedScope, FenceMode::FencedRow] {
            let three = Config { bounds: Bounds { holders: 3, acquires: 3, crashes: 1 }, ..Config::new(mode, StoreKind::Single) };
            let reduced = crate::model::table::check(three);
            let full = crate::model::table::check(Config { symmetric: false, ..three });
            assert!(reduced.states < full.states, "{mode}: {} states reduced, {} full", reduced.states, full.states);
            let lengths = |c: &crate::model::table::ConfigCheck| c.broken.iter().map(|(n, p)| (*n, p.clone().into_actions().len())).collect::<Vec<_>>();
            assert_eq!(lengths(&reduced), lengths(&full), "{mode}");
            assert_eq!((reduced.found.clone(), reduced.missing.clone()), (full.found.clone(), full.missing.clone()), "{mode}");
            assert!(reduced.is_meaningful(), "{mode}");
        }
    }

    /// holder-a stays; the others take every order.
    #[test]
    fn permutations_keep_holder_a() {
        assert_eq!(permutations(2), vec![vec![0, 1]]);
        assert_eq!(permutations(3), vec![vec![0, 1, 2], vec![0, 2, 1]]);
        assert_eq!(permutations(4).len(), 6);
        assert!(permutations(4).iter().all(|p| p[0] == 0));
    }

    /// B acquiring and C acquiring lead to one class; A acquiring does not
    /// join it (A's script differs); and relabelling renames the lease row
    /// and the history too, not only the holders' places.
    #[test]
    fn swapped_holders_are_one_class() {
        let model = LeaseModel::new(Config { bounds: Bounds { holders: 3, acquires: 3, crashes: 1 }, ..Config::new(FenceMode::FencedScope, StoreKind::Single) });
        let perms = model.symmetries();
        let init = model.initial();
        let by = |h| model.next_state(&init, crate::model::Action::Acquire(h)).unwrap();
        let (a, b, c) = (by(0), by(1), by(2));
        assert_ne!(b, c);
        assert_eq!(class_fingerprint(&b, &perms), class_fingerprint(&c, &perms));
        assert_ne!(class_fingerprint(&a, &perms), class_fingerprint(&b, &perms));
        let swapped = relabelled(&b, &[0, 2, 1]);
        assert_eq!(swapped, c);
        assert_eq!(swapped.store.primary.map(|r| r.holder), Some(2));
        assert_eq!(swapped.ghost.holdings[0].holder, 2);
    }
}
