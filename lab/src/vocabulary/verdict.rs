//! What the checker found: the counts ([`Verdict`]), what a history lacks
//! for them to mean anything ([`Gap`]), and the conclusion ([`Judgement`]).

use super::FaultKind;
use std::collections::BTreeMap;
use std::fmt;


/// What the checker found in one history.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// Write attempts recorded.
    pub attempts: usize,
    /// Attempts the resource accepted.
    pub accepted: usize,
    /// Attempts the resource refused.
    pub refused: usize,
    /// Distinct holdings the holders reported: zero here means the grants
    /// log is missing, and the reuse count below has nothing to judge.
    pub holdings: usize,
    /// Accepted attempts whose token is smaller than a token the same scope
    /// had already accepted earlier in id order. An equal token is not
    /// stale: the fence compares with `<=`, so one grant may write many
    /// times. Refused attempts never count and never raise the bar.
    pub stale_accepted: usize,
    /// Distinct tokens granted to more than one holding (I2). A holding
    /// reported twice is still one holding.
    pub tokens_reused: usize,
    /// Attempts that recorded a `floor_after`: zero means the column was not
    /// recorded, and the regression count below has nothing to judge.
    pub floors_recorded: usize,
    /// Times a scope's recorded `floor_after` went down compared with the
    /// previous recorded value for that scope, in id order, over all
    /// attempts that recorded one (accepted or refused).
    pub floor_regressions: usize,
    /// Accepted writes whose effect vanished without a larger token
    /// overwriting it. Per (scope, part): the accepted attempts whose token
    /// is larger than the final row's token; when the part has no final row,
    /// all its accepted attempts. A stale write that creates a part nobody
    /// else wrote loses nothing (F7); one that overwrites a newer token's
    /// row loses that write (F5).
    pub lost_writes: usize,
    /// The nemesis's faults, counted by kind.
    pub faults: BTreeMap<FaultKind, usize>,
}

/// What a history lacks for a zero count to mean anything: each gap leaves
/// some count with nothing to judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// No holder reported a holding: the reuse count (I2) saw no grant.
    NoHoldings,
    /// The resource accepted no write: the stale and lost counts saw none.
    NoAcceptedWrite,
    /// No attempt, or an attempt without its `floor_after`: the regression
    /// count saw no floor, or not every one.
    FloorsUnrecorded,
    /// The nemesis injected no fault: whatever held, held undisturbed.
    NoFault,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Gap::NoHoldings => "no holding granted",
            Gap::NoAcceptedWrite => "no write accepted",
            Gap::FloorsUnrecorded => "not every write attempt recorded its floor",
            Gap::NoFault => "no fault injected",
        })
    }
}

/// The checker's conclusion from a [`Verdict`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Every count judged something, and every one is zero.
    Clean,
    /// Some count found what it looks for: evidence, whatever else the
    /// history lacks.
    NotClean,
    /// Every count is zero, but some of them saw nothing to count: the
    /// zeros prove nothing, and the run is neither clean nor caught.
    NothingToJudge(Vec<Gap>),
}

impl Judgement {
    /// The conclusion in a word or three, as a table's cell shows it.
    pub fn word(&self) -> &'static str {
        match self {
            Judgement::Clean => "clean",
            Judgement::NotClean => "NOT clean",
            Judgement::NothingToJudge(_) => "nothing to judge",
        }
    }
}

/// The word, and for nothing to judge what was missing.
impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())?;
        if let Judgement::NothingToJudge(gaps) = self {
            let gaps: Vec<String> = gaps.iter().map(Gap::to_string).collect();
            write!(f, " ({})", gaps.join(", "))?;
        }
        Ok(())
    }
}

impl Verdict {
    /// What the history lacks; empty when every count had something to judge.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut gaps = Vec::new();
        if self.holdings == 0 {
            gaps.push(Gap::NoHoldings);
        }
        if self.accepted == 0 {
            gaps.push(Gap::NoAcceptedWrite);
        }
        if self.attempts == 0 || self.floors_recorded < self.attempts {
            gaps.push(Gap::FloorsUnrecorded);
        }
        if self.faults.values().sum::<usize>() == 0 {
            gaps.push(Gap::NoFault);
        }
        gaps
    }

    /// Not clean when a stale write was accepted, a token reused, a floor
    /// regressed or a write lost; otherwise clean only when nothing is
    /// missing from the history. The fault counts say what the run
    /// survived, not whether it survived it.
    pub fn judgement(&self) -> Judgement {
        let gaps = self.gaps();
        if self.stale_accepted > 0 || self.tokens_reused > 0 || self.floor_regressions > 0 || self.lost_writes > 0 {
            Judgement::NotClean
        } else if gaps.is_empty() {
            Judgement::Clean
        } else {
            Judgement::NothingToJudge(gaps)
        }
    }
}


/// The verdict as a transcript prints it: one measure a line, always in
/// this order, faults last by kind in alphabetical order.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: [(&str, usize, String); 9] = [
            ("write attempts", self.attempts, String::new()),
            ("accepted", self.accepted, String::new()),
            ("refused", self.refused, String::new()),
            ("holdings granted", self.holdings, String::new()),
            ("stale writes accepted (I3)", self.stale_accepted, "below a token its scope had accepted".into()),
            ("tokens reused (I2)", self.tokens_reused, "granted to more than one holding".into()),
            ("floor regressions (I3)", self.floor_regressions, format!("of {} recorded floors", self.floors_recorded)),
            ("lost writes", self.lost_writes, "overwritten by a smaller token, or gone".into()),
            ("faults injected", self.faults.values().sum(), String::new()),
        ];
        for (label, count, why) in lines {
            writeln!(f, "{}", row(label, count, &why))?;
        }
        for (kind, count) in &self.faults {
            writeln!(f, "{}", row(&format!("  {kind}"), *count, ""))?;
        }
        write!(f, "verdict: {}", self.judgement())
    }
}

/// `label ....... count  why`, aligned.
fn row(label: &str, count: usize, why: &str) -> String {
    format!("{label:<28}{count:>6}  {why}").trim_end().to_owned()
}
