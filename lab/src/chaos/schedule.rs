//! The nemesis's fault schedule, drawn up front from a seed.
//!
//! Everything the nemesis will do is decided before the first holder
//! starts: when each fault comes, of which kind, how long it lasts, and a
//! number that picks its target. The same seed gives the same schedule, on
//! any machine, so a reader can replay a run by its seed. What cannot be
//! decided up front is which holders are alive at that moment (a killed
//! holder is restarting, a paused one is already stopped): the target is
//! picked at run time by that number, among the slots that can take the
//! fault then (see `nemesis.rs`). The timing of the run itself (who wins
//! each acquire, where exactly a pause lands) is the machine's; the
//! schedule is the seed's.
//!
//! The randomness is a SplitMix64 of the lab's own (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", 2014: the generator
//! Java's `SplittableRandom` uses): ten lines, no dependency, and a fixed
//! sequence for a fixed seed, which is all a schedule needs.
//!
//! Faults, restarts and partitions come from three streams of the seed, so
//! a shorter run is the beginning of a longer one (F15's few seconds are
//! the first seconds of `lab chaos --seed 1 --duration 120s`), and the
//! partitions, added last, left every other fault of a seed where it was.
//!
//! Why this file stays whole: the plan's numbers and the drawing that uses
//! them are read together, each number beside the reason for it.

use crate::vocabulary::FaultKind;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// SplitMix64: a 64-bit state that advances by a constant, and a mix of it.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    /// The state; the seed to begin with.
    state: u64,
}

impl SplitMix64 {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi` (the modulo's bias is far below anything a
    /// schedule can show).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// A duration in `lo..=hi`, to the millisecond.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        Duration::from_millis(self.between(lo.as_millis() as u64, hi.as_millis() as u64))
    }

    /// A generator of its own for one part of the work (a slot, the
    /// restarts), so that what one part draws does not shift another's
    /// numbers.
    pub fn stream(seed: u64, stream: u64) -> SplitMix64 {
        let mut mixer = SplitMix64::new(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        SplitMix64::new(mixer.next_u64())
    }
}

/// Which slots a fault may hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aim {
    /// The slot whose holder holds the lease, at its next write: a pause
    /// lands between its deadline check and its write (where F4 pauses), a
    /// delay slows the link its write is about to take. When no slot holds
    /// the lease, the fault waits a little for one that does.
    Writer,
    /// A slot whose holder is waiting for the lease, at once: faults also
    /// hit the instances that are not working right now. When every live
    /// holder is holding, any live holder.
    Bystander,
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// When, from the start of the run.
    pub at: Duration,
    /// What.
    pub kind: FaultKind,
    /// Which slots it may hit (not used by a database restart).
    pub aim: Aim,
    /// Picks the target among the slots it may hit at that moment:
    /// `pick % candidates`.
    pub pick: u64,
    /// A pause's length, or how long a delayed link stays slow; zero for a
    /// kill and a restart.
    pub length: Duration,
    /// A delay's delay of each chunk; zero for the other kinds.
    pub delay: Duration,
    /// For a pause aimed at the writer: where in its write the SIGSTOP
    /// lands (see [`plan::INTO_WRITE`]).
    pub into_write: Duration,
    /// For a split: how many holders' hosts it cuts off together; 1 for
    /// every other kind.
    pub group: usize,
}

/// What the schedule draws from: the mix of faults and their sizes. One
/// home for the numbers, with the reason for each.
pub mod plan {
    use super::*;

    /// The gap between two faults: 20–180 ms, about ten faults a second,
    /// so that two minutes bring more than a thousand.
    pub const GAP: (Duration, Duration) = (Duration::from_millis(20), Duration::from_millis(180));

    /// A short pause: well under the ttl (0.03–0.4 of it), so a holder's
    /// lease usually survives it and the holder carries on.
    pub const PAUSE_SHORT: (Duration, Duration) = (Duration::from_millis(50), Duration::from_millis(600));

    /// A long pause: longer than the ttl (1.13–1.8 of it), by enough that
    /// another holder can acquire and write before the paused one resumes.
    pub const PAUSE_LONG: (Duration, Duration) = (Duration::from_millis(1700), Duration::from_millis(2700));

    /// How much a delayed link delays each chunk: from a fraction of the
    /// ttl to twice it, so renewals arrive late and a write sent while the
    /// lease was valid can arrive after it expired.
    pub const DELAY: (Duration, Duration) = (Duration::from_millis(300), Duration::from_millis(3000));

    /// How long a bystander's link stays delayed. A chunk that waits
    /// longer than the span goes out when the span ends: the delay ends as
    /// a real slow path recovers, with everything queued arriving at once.
    pub const DELAY_SPAN: (Duration, Duration) = (Duration::from_millis(500), Duration::from_millis(1500));

    /// How long the writer's link stays delayed: longer than the ttl, so
    /// its renewals stop arriving and its lease expires while its write is
    /// on the wire, statement after statement (each waits the delay): a
    /// check-then-write's check can then be read before a new holder's
    /// write and acted on after it (F6a), a plain write land after it (F12).
    pub const WRITER_DELAY_SPAN: (Duration, Duration) = (Duration::from_millis(2000), Duration::from_millis(4000));

    /// Where in the writer's write a pause aimed at it lands. The holder
    /// waits for the slot's go-ahead before each write; below 1.5 ms the
    /// SIGSTOP goes out before the go-ahead, so the write leaves only after
    /// SIGCONT (F4's window); above it, this long minus 1.5 ms after the
    /// go-ahead (see `workload::BEFORE_WRITE`). A write is a few
    /// statements, each a round trip of a fraction of a millisecond here:
    /// 0–3 ms spreads the pauses over them — before the first, between
    /// check-then-write's read of the floor and its writes (F6a's window),
    /// inside the fenced transaction (F11's) — instead of always at one
    /// place.
    pub const INTO_WRITE: (Duration, Duration) = (Duration::ZERO, Duration::from_millis(3));

    /// The gap between two database restarts, the first one after the
    /// first gap: a crash-restart takes seconds and fails every holder, so
    /// it comes rarely.
    pub const RESTART_GAP: (Duration, Duration) = (Duration::from_secs(15), Duration::from_secs(30));

    /// The mix of the other kinds, per thousand faults, and how many of
    /// each kind's thousand aim at the writer (see [`Aim`]); the others hit
    /// a bystander. One lease means one writer at a time: at ten faults a
    /// second, faults that all fell on it would leave no holding unbroken.
    /// A long pause or a delay of the writer is what can make a write stale
    /// (F4, F12), so those aim at it most: a long pause of the writer about
    /// once a second, a delay every two. A writer can take one order at a
    /// time, so the other kinds seldom aim at it: a short pause or a kill
    /// armed on the writer would send the next long pause to a bystander,
    /// where it breaks nothing. Short pauses and kills, cheap for a waiting
    /// holder, make up most of the rest.
    pub const MIX: [(FaultKind, u64, u64); 4] =
        [(FaultKind::PauseShort, 520, 20), (FaultKind::PauseLong, 140, 800), (FaultKind::Kill, 160, 20), (FaultKind::Delay, 180, 300)];

    /// The gap between two partitions, drawn from a stream of their own (so
    /// the faults above are the same for a seed with or without them): the
    /// switch holds one partition at a time, and each lasts about two
    /// seconds, so 2–6 s apart leaves the network whole for a while
    /// between two.
    pub const PARTITION_GAP: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(6));

    /// How long a partition lasts: longer than the ttl, as a long pause, so
    /// that a cut-off writer's lease expires and another holder takes over
    /// while what it sent waits in the network.
    pub const PARTITION: (Duration, Duration) = (Duration::from_millis(1700), Duration::from_millis(2700));

    /// Of a thousand partitions, how many isolate one host (the others
    /// split off a group), and how many aim at the writer: cutting off the
    /// holder that is writing is what can make a write stale; a bystander
    /// cut off only misses its turn.
    pub const PARTITION_ISOLATE: u64 = 500;
    /// See [`PARTITION_ISOLATE`].
    pub const PARTITION_AIMED: u64 = 700;

    /// How many holders a split cuts off together.
    pub const SPLIT_GROUP: (u64, u64) = (2, 3);
}

/// The stream of the seed the faults are drawn from.
const FAULT_STREAM: u64 = 1;
/// The stream of the seed the database restarts are drawn from.
const RESTART_STREAM: u64 = 2;
/// The stream of the seed the partitions are drawn from.
const PARTITION_STREAM: u64 = 3;

/// The events of one stream of `seed`: the first one `gap` after the
/// start, each next one a `gap` later (each gap drawn from the stream),
/// until `duration`; `draw` makes each event, at its time, from the same
/// stream's generator.
fn stream_of(seed: u64, stream: u64, duration: Duration, gap: (Duration, Duration), mut draw: impl FnMut(&mut SplitMix64, Duration) -> Event) -> Vec<Event> {
    let mut rng = SplitMix64::stream(seed, stream);
    let mut events = Vec::new();
    let mut at = Duration::ZERO;
    loop {
        at += rng.duration(gap.0, gap.1);
        if at >= duration {
            return events;
        }
        events.push(draw(&mut rng, at));
    }
}

/// The fault schedule of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// How long the run lasts; no fault comes later.
    pub duration: Duration,
    /// The faults, in time order.
    pub events: Vec<Event>,
}

impl Schedule {
    /// The schedule of `seed` for a run of `duration`.
    pub fn generate(seed: u64, duration: Duration) -> Schedule {
        let mut events = stream_of(seed, FAULT_STREAM, duration, plan::GAP, |rng, at| {
            let mut roll = rng.between(0, 999);
            let (kind, aimed) = plan::MIX
                .iter()
                .find_map(|&(kind, share, aimed)| {
                    if roll < share {
                        Some((kind, aimed))
                    } else {
                        roll -= share;
                        None
                    }
                })
                .expect("the mix sums to a thousand");
            let aim = if rng.between(0, 999) < aimed { Aim::Writer } else { Aim::Bystander };
            let pick = rng.next_u64();
            let into_write = Duration::from_micros(rng.between(plan::INTO_WRITE.0.as_micros() as u64, plan::INTO_WRITE.1.as_micros() as u64));
            let (length, delay) = match kind {
                FaultKind::PauseShort => (rng.duration(plan::PAUSE_SHORT.0, plan::PAUSE_SHORT.1), Duration::ZERO),
                FaultKind::PauseLong => (rng.duration(plan::PAUSE_LONG.0, plan::PAUSE_LONG.1), Duration::ZERO),
                FaultKind::Delay => {
                    let span = if aim == Aim::Writer { plan::WRITER_DELAY_SPAN } else { plan::DELAY_SPAN };
                    (rng.duration(span.0, span.1), rng.duration(plan::DELAY.0, plan::DELAY.1))
                }
                _ => (Duration::ZERO, Duration::ZERO),
            };
            Event { at, kind, aim, pick, length, delay, into_write, group: 1 }
        });
        let none = Duration::ZERO;
        events.extend(stream_of(seed, RESTART_STREAM, duration, plan::RESTART_GAP, |_, at| Event {
            at,
            kind: FaultKind::DbRestart,
            aim: Aim::Bystander,
            pick: 0,
            length: none,
            delay: none,
            into_write: none,
            group: 1,
        }));
        events.extend(stream_of(seed, PARTITION_STREAM, duration, plan::PARTITION_GAP, |rng, at| {
            let kind = if rng.between(0, 999) < plan::PARTITION_ISOLATE { FaultKind::PartitionIsolate } else { FaultKind::PartitionSplit };
            let aim = if rng.between(0, 999) < plan::PARTITION_AIMED { Aim::Writer } else { Aim::Bystander };
            let (pick, length) = (rng.next_u64(), rng.duration(plan::PARTITION.0, plan::PARTITION.1));
            let group = if kind == FaultKind::PartitionSplit { rng.between(plan::SPLIT_GROUP.0, plan::SPLIT_GROUP.1) as usize } else { 1 };
            Event { at, kind, aim, pick, length, delay: none, into_write: none, group }
        }));
        // Stable: a restart (or a partition) drawn at the same millisecond as
        // a fault comes after it.
        events.sort_by_key(|e| e.at);
        Schedule { seed, duration, events }
    }

    /// How many faults of each kind, in the order of kinds.
    pub fn counts(&self) -> BTreeMap<FaultKind, usize> {
        let mut counts = BTreeMap::new();
        for e in &self.events {
            *counts.entry(e.kind).or_insert(0) += 1;
        }
        counts
    }

    /// How many faults are aimed at the writer (a server's restart aims at
    /// no holder).
    pub fn aimed(&self) -> usize {
        self.events.iter().filter(|e| e.aim == Aim::Writer && e.kind != FaultKind::DbRestart).count()
    }

    /// How many faults in all.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the schedule has no fault at all.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// One line: `seed 1, 120s: 1187 faults scheduled (db-restart 5, delay 410,
/// …), 712 of them aimed at the writer`.
impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<String> = self.counts().iter().map(|(k, n)| format!("{k} {n}")).collect();
        let aimed = self.aimed();
        write!(
            f,
            "seed {}, {}s: {} faults scheduled ({}), {aimed} of them aimed at the writer",
            self.seed,
            self.duration.as_secs_f64(),
            self.events.len(),
            kinds.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::TTL;

    /// The kinds' order is their names' order: tables list them alphabetically.
    #[test]
    fn kinds_are_in_the_order_of_their_names() {
        let names = FaultKind::ALL.map(FaultKind::name);
        let mut sorted = names;
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(FaultKind::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    /// SplitMix64's published first outputs for seed 0 (the reference
    /// implementation's), so the generator is the one the doc names.
    #[test]
    fn splitmix64_matches_the_reference() {
        let mut rng = SplitMix64::new(0);
        assert_eq!([rng.next_u64(), rng.next_u64(), rng.next_u64()], [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]);
    }

    /// The same seed gives the same schedule; another seed another one.
    #[test]
    fn same_seed_same_schedule() {
        let d = Duration::from_secs(30);
        assert_eq!(Schedule::generate(1, d), Schedule::generate(1, d));
        assert_ne!(Schedule::generate(1, d).events, Schedule::generate(2, d).events);
    }

    /// The partitions came last, from a stream of their own: without them,
    /// seed 1's first 20 s are what they were before (F15's schedule line
    /// then read `203 faults scheduled (delay 38, kill 25, pause-long 26,
    /// pause-short 114), 41 of them aimed at the writer`), and with them
    /// they are what F15's evidence locks now.
    #[test]
    fn partitions_leave_every_other_fault_where_it_was() {
        let with = Schedule::generate(1, Duration::from_secs(20));
        let partition = |e: &Event| matches!(e.kind, FaultKind::PartitionIsolate | FaultKind::PartitionSplit);
        let without = Schedule { events: with.events.iter().filter(|e| !partition(e)).cloned().collect(), ..with.clone() };
        assert_eq!(without.to_string(), "seed 1, 20s: 203 faults scheduled (delay 38, kill 25, pause-long 26, pause-short 114), 41 of them aimed at the writer");
        assert_eq!(
            with.to_string(),
            "seed 1, 20s: 207 faults scheduled (delay 38, kill 25, partition-isolate 2, partition-split 2, pause-long 26, pause-short 114), 43 of them aimed at the writer"
        );
    }

    /// A shorter run's schedule is the beginning of a longer one's.
    #[test]
    fn shorter_run_is_a_prefix() {
        let long = Schedule::generate(7, Duration::from_secs(120));
        let short = Schedule::generate(7, Duration::from_secs(10));
        assert_eq!(short.events[..], long.events[..short.events.len()]);
        assert!(long.events[short.events.len()].at >= Duration::from_secs(10));
    }

    /// Two minutes bring more than a thousand faults, of every kind, a few
    /// restarts among them, in time order and within the run.
    #[test]
    fn two_minutes_bring_a_thousand_faults_of_every_kind() {
        let s = Schedule::generate(1, Duration::from_secs(120));
        assert!(s.events.len() >= 1000, "{s}");
        let counts = s.counts();
        assert_eq!(counts.len(), FaultKind::ALL.len(), "{s}");
        assert!((3..=8).contains(&counts[&FaultKind::DbRestart]), "{s}");
        assert!(s.events.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(s.events.iter().all(|e| e.at < s.duration));
    }

    /// Short pauses are shorter than the ttl and long ones longer; delays
    /// and their spans stay in their ranges; a kill has no length.
    #[test]
    fn sizes_keep_to_the_plan() {
        for e in Schedule::generate(3, Duration::from_secs(120)).events {
            match e.kind {
                FaultKind::PauseShort => assert!(e.length < TTL && e.delay.is_zero()),
                FaultKind::PauseLong => assert!(e.length > TTL && e.delay.is_zero()),
                FaultKind::Delay => {
                    assert!((plan::DELAY.0..=plan::DELAY.1).contains(&e.delay));
                    let span = if e.aim == Aim::Writer { plan::WRITER_DELAY_SPAN } else { plan::DELAY_SPAN };
                    assert!((span.0..=span.1).contains(&e.length));
                }
                FaultKind::Kill | FaultKind::DbRestart => assert!(e.length.is_zero() && e.delay.is_zero()),
                FaultKind::PartitionIsolate | FaultKind::PartitionSplit => {
                    assert!(e.length > TTL && e.delay.is_zero());
                    let sizes = if e.kind == FaultKind::PartitionSplit { plan::SPLIT_GROUP.0..=plan::SPLIT_GROUP.1 } else { 1..=1 };
                    assert!(sizes.contains(&(e.group as u64)), "{e:?}");
                }
            }
        }
    }
}
