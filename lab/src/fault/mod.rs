//! Faults injected from outside, the way a real one happens: not a flag the
//! code under test consults, but a change in the world around it, which the
//! holder and the resource meet as they would in production.
//!
//! - [`proxy`]: [`DelayProxy`], a TCP proxy of the lab's own on the wire
//!   between a holder and the resource's database; it holds a request in
//!   flight until released (F12: a write delayed in the network), or delays
//!   every chunk for a span (the chaos run: each holder slot has a link of
//!   its own, and the nemesis slows one at a time).
//!
//! - [`clock`]: clocks that run wrong, through `libfaketime` preloaded into
//!   one process: a holder whose clock runs slow, a server whose wall clock
//!   steps ahead (F13).

pub mod clock;
pub mod proxy;

pub use proxy::DelayProxy;
