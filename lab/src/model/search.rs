//! The search: every state the model can reach, level by level, and the
//! first (so a shortest) path to each state that decides a property.
//!
//! stateright's breadth-first checker hands a visitor each state's whole
//! path, rebuilt by replaying it from the initial state: one `next_state`
//! per step of the path, for every state. That was about two thirds of
//! the checker's time (the 2-holder table on one thread: 28.5 s with it,
//! 6.7 s with this search; the same states and counterexamples). Its own record of a
//! discovery is overwritten by later states that decide the same property.
//! This search keeps, for each state, only its parent and the step from
//! it, takes the queue in order, and rebuilds a path only for the few
//! states that decide a property.

use super::properties::is_invariant;
use super::symmetry::class_fingerprint;
use super::{Action, LeaseModel, State};
use stateright::{Model, Path};
use std::collections::{HashSet, VecDeque};

/// What one search found.
pub struct Found {
    /// Distinct states reached (within the model's boundary), one per
    /// class of interchangeable holders (`symmetry`).
    pub states: usize,
    /// Each property decided (an invariant broken, an example found), with
    /// the first path to a state that decides it, in the order found.
    pub first: Vec<(&'static str, Path<State, Action>)>,
}

/// How a state is reached: the index of the state it is reached from
/// (`ROOT` for the initial state) and the step.
struct Node {
    parent: u32,
    action: Option<Action>,
}

/// The parent of the initial state.
const ROOT: u32 = u32::MAX;

// ANCHOR: breadth_first
/// Searches the model breadth first from its initial state, checking every
/// property in every state, until the space is exhausted or every property
/// is decided (then nothing more could change the verdict).
pub fn breadth_first(model: &LeaseModel) -> Found {
    let properties = model.properties();
    let init = model.initial();
    let perms = model.symmetries();
    // A state is known by a 64-bit hash of its class, as stateright knows
    // a state by a hash of it.
    let mut known: HashSet<u64> = HashSet::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut queue: VecDeque<(State, u32)> = VecDeque::new();
    let mut first: Vec<(&'static str, Path<State, Action>)> = Vec::new();
    if model.within_boundary(&init) {
        known.insert(class_fingerprint(&init, &perms));
        nodes.push(Node { parent: ROOT, action: None });
        queue.push_back((init.clone(), 0));
    }
    let mut actions = Vec::new();
    let mut decided = vec![false; properties.len()];
    while let Some((state, index)) = queue.pop_front() {
        let mut undecided = false;
        for (p, decided) in properties.iter().zip(&mut decided) {
            if *decided {
                continue;
            }
            if (p.condition)(model, &state) != is_invariant(p) {
                *decided = true;
                first.push((p.name, path_to(model, &init, &nodes, index)));
            } else {
                undecided = true;
            }
        }
        if !undecided {
            break;
        }
        model.actions(&state, &mut actions);
        for action in actions.drain(..) {
            let Some(next) = model.next_state(&state, action) else { continue };
            if !model.within_boundary(&next) {
                continue;
            }
            if known.insert(class_fingerprint(&next, &perms)) {
                let at = u32::try_from(nodes.len()).expect("fewer than 2^32 states");
                nodes.push(Node { parent: index, action: Some(action) });
                queue.push_back((next, at));
            }
        }
    }
    Found { states: known.len(), first }
}
// ANCHOR_END: breadth_first

/// The path from the initial state to node `index`, replayed once.
fn path_to(model: &LeaseModel, init: &State, nodes: &[Node], index: u32) -> Path<State, Action> {
    let mut steps = Vec::new();
    let mut at = index;
    while at != ROOT {
        let node = &nodes[at as usize];
        steps.extend(node.action);
        at = node.parent;
    }
    steps.reverse();
    Path::from_actions(model, init.clone(), steps.iter()).expect("a path the search took replays")
}
