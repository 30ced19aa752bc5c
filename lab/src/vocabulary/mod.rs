//! The lab's words: each thing the experiments talk about, as one type that
//! every layer uses, from the holder's command line to the book's facts.
//!
//! Free of clap and of servers: a command line spells these words in its own
//! way at its edge ([`crate::arg_values`]), a server's row is read into them
//! where it is read. Each type has one spelling per place it is written
//! (the transcripts and `write_attempt.mode`, the command line, the JSON of
//! the results and histories) and one parser for each.
//!
//! - [`FenceMode`]: how the resource decides whether to accept a write.
//! - [`LeaseStoreKind`]: which store keeps the lease (PostgreSQL or etcd).
//! - [`FaultKind`]: the faults the chaos run injects.
//! - [`Act`]: what the parent does to a holder (SIGSTOP, a cut, …), and
//!   [`LeaseEventKind`]: what changed the lease row: the events of a run's
//!   pictures.
//! - [`Operation`] and [`Outcome`]: a holder's call to a server, and how it
//!   returned (Jepsen's invoke and complete).
//! - [`WriteAttempt`]: one row of `write_attempt`, the resource's record of
//!   a write it judged; [`StoredPart`]: one row of `report_part`, the part
//!   that stayed.
//! - [`Verdict`]: what the history checker found in a run (its counts,
//!   the [`Gap`]s that leave a count nothing to judge, and the
//!   [`Judgement`]: clean, not clean, or nothing to judge).

/// `Display` by one spelling and `FromStr` by another (often the same):
/// each word's one printer and one parser, written once for all of them.
macro_rules! spelled {
    ($word:ty, shown by $show:path, read by $read:path, as $what:literal) => {
        impl std::fmt::Display for $word {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($show(*self))
            }
        }

        impl std::str::FromStr for $word {
            type Err = String;
            fn from_str(text: &str) -> Result<$word, String> {
                super::parse(&<$word>::ALL, $read, text, $what)
            }
        }
    };
}

mod act;
mod call;
mod fault_kind;
mod fence_mode;
mod lease_event;
mod lease_store;
mod stored_part;
mod verdict;
mod write_attempt;

pub use act::Act;
pub use call::{Operation, Outcome};
pub use fault_kind::FaultKind;
pub use fence_mode::FenceMode;
pub use lease_event::LeaseEventKind;
pub use lease_store::LeaseStoreKind;
pub use stored_part::StoredPart;
pub use verdict::{Gap, Judgement, Verdict};
pub use write_attempt::WriteAttempt;

/// Finds the one of `all` whose spelling `spell` gives is `text`, or says
/// what `text` could have been: the one parser of every word here.
fn parse<T: Copy>(all: &[T], spell: impl Fn(T) -> &'static str, text: &str, what: &str) -> Result<T, String> {
    all.iter().copied().find(|w| spell(*w) == text).ok_or_else(|| {
        let known: Vec<&str> = all.iter().map(|w| spell(*w)).collect();
        format!("{text:?} is no {what} (one of: {})", known.join(", "))
    })
}
