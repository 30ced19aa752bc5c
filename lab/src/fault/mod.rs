//! Faults injected from outside, the way a real one happens: not a flag the
//! code under test consults, but a change in the world around it, which the
//! holder and the resource meet as they would in production.
//!
//! - [`proxy`]: [`DelayProxy`], a TCP proxy of the lab's own on the wire
//!   between a holder and the resource's database; it holds a request in
//!   flight until released (F12: a write delayed in the network), or delays
//!   every request a little (the chaos run).
//!
//! Clock faults through `libfaketime` (a holder whose clock runs fast or
//! slow) will come beside it.

pub mod proxy;

pub use proxy::DelayProxy;
