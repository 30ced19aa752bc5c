//! The operations of a history, from the calls the parent heard and the
//! resource's attempt rows: each `CALL` paired with its `RETURN`, each
//! write with the row that recorded it.

use super::{hundredths, Op};
use crate::call_log::Heard;
use crate::error::Result;
use crate::holder::{Call, Invoke};
use crate::vocabulary::{Operation, Outcome, WriteAttempt};
use std::collections::{BTreeMap, VecDeque};

/// Pairs the calls of `heard` into operations (times from `t0_unix_ms`),
/// numbers the granted acquires of each incarnation, and gives each write
/// its row of `attempts`. A return without its call, a call made twice, a
/// write answered but not recorded, or a recorded attempt whose call was
/// not heard, means the record is not whole, and is an error: a page of
/// it would draw a history that did not happen.
pub fn ops_from_calls(heard: &[Heard], attempts: Vec<WriteAttempt>, t0_unix_ms: f64) -> Result<Vec<Op>> {
    let at = |ms: f64| hundredths(ms - t0_unix_ms);
    let mut ops: Vec<Op> = Vec::new();
    let mut open: BTreeMap<(u64, u32), usize> = BTreeMap::new();
    for h in heard {
        match &h.call {
            Call::Invoke { id, invoke } => {
                if open.insert((h.process, *id), ops.len()).is_some() {
                    return Err(format!("{} (process {}) made call {id} twice", h.holder, h.process).into());
                }
                let (token, part) = match invoke {
                    Invoke::Acquire => (None, None),
                    Invoke::Renew { token } | Invoke::Release { token } => (Some(*token), None),
                    Invoke::Write { token, part } => (Some(*token), Some(part.clone())),
                };
                ops.push(Op {
                    id: 0,
                    holder: h.holder.clone(),
                    incarnation: h.incarnation,
                    process: h.process,
                    f: invoke.operation(),
                    invoke_ms: Some(at(h.at_ms)),
                    complete_ms: None,
                    // No return heard (yet): it may have happened.
                    outcome: Outcome::Info,
                    token,
                    part,
                    tries: None,
                    code: None,
                    holding: None,
                    attempt: None,
                });
            }
            Call::Return { id, ret } => {
                let Some(&index) = open.get(&(h.process, *id)) else {
                    return Err(format!("{} (process {}) returned from call {id}, which it never made", h.holder, h.process).into());
                };
                let op = &mut ops[index];
                if op.complete_ms.is_some() {
                    return Err(format!("{} (process {}) returned from call {id} twice", h.holder, h.process).into());
                }
                op.complete_ms = Some(at(h.at_ms));
                op.outcome = ret.outcome;
                op.token = op.token.or(ret.token);
                op.tries = ret.tries;
                op.code = ret.code.clone();
            }
        }
    }
    // The order of invocation (the log is in order of arrival already; the
    // sort is stable, so equal times keep it).
    ops.sort_by(|a, b| a.invoke_ms.partial_cmp(&b.invoke_ms).expect("times are numbers"));

    let mut holdings: BTreeMap<(String, u32), u32> = BTreeMap::new();
    for op in ops.iter_mut().filter(|o| o.f == Operation::Acquire && o.outcome == Outcome::Ok) {
        let n = holdings.entry((op.holder.clone(), op.incarnation)).or_insert(0);
        *n += 1;
        op.holding = Some(*n);
    }

    let mut rows: BTreeMap<(String, i64, String), VecDeque<WriteAttempt>> = BTreeMap::new();
    for row in attempts {
        rows.entry((row.writer.clone(), row.token, row.part.clone())).or_default().push_back(row);
    }
    for op in ops.iter_mut().filter(|o| o.f == Operation::Write) {
        let key = (op.holder.clone(), op.token.unwrap_or_default(), op.part.clone().unwrap_or_default());
        op.attempt = rows.get_mut(&key).and_then(VecDeque::pop_front);
        if op.attempt.is_none() && op.outcome != Outcome::Info {
            return Err(format!(
                "{}#{}'s write of {} with token {} was answered ({}) but write_attempt has no row for it",
                op.holder,
                op.incarnation,
                key.2,
                key.1,
                op.outcome
            )
            .into());
        }
    }
    if let Some(row) = rows.values().flatten().next() {
        return Err(format!("write_attempt {} ({} token {} part {}) has no call of its holder's: a call line was lost", row.id, row.writer, row.token, row.part).into());
    }
    for (n, op) in ops.iter_mut().enumerate() {
        op.id = n as u64 + 1;
    }
    Ok(ops)
}
