//! Facts from the code's own tables: the cases, the variants, the
//! mutations and their questions, the redactions, the parameters, what the
//! cases need, and the shapes of the chaos run and the bench. Nothing here
//! reads the evidence: these files change only when the code does.

use super::{Fact, Facts, ARTICLE_CASES};
use crate::cases::{self, CaseOptions};
use crate::cluster::etcd::ELECTION_TIMEOUT;
use crate::evidence::REDACTIONS;
use crate::lease_stores;
use crate::mutants::{Group, MUTATIONS};
use crate::params;
use crate::vocabulary::FenceMode;
use std::collections::BTreeMap;

/// Ids joined the way the book lists them: `F1、F2、F4`.
pub(super) fn listed<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("、")
}

/// The case a mutation's killer runs (`F4` for `F4 --mode fenced-scope-cte`).
/// A guard of the model is killed by `lab model`, which the book names as
/// the reader runs it.
fn killer_case(killer: &[&str]) -> &'static str {
    let id = killer.first().copied().unwrap_or_default();
    if id == crate::mutants::harness::MODEL {
        return "`./run.sh model`";
    }
    cases::find(id).map_or("?", |c| c.id)
}

/// The cases in the article's order that appear in `ids`, then the other
/// killers among `ids` (`lab model`), once each.
fn in_case_order(ids: impl IntoIterator<Item = &'static str>) -> Vec<&'static str> {
    let ids: Vec<&'static str> = ids.into_iter().collect();
    let mut order: Vec<&'static str> = cases::ALL.iter().map(|c| c.id).filter(|id| ids.contains(id)).collect();
    for id in ids {
        if cases::find(id).is_none() && !order.contains(&id) {
            order.push(id);
        }
    }
    order
}

/// `F1（4 个）、F10（1 个）`: how many of `mutations` each case kills.
fn killers_phrase<'a>(mutations: impl IntoIterator<Item = &'a crate::mutants::Mutation>) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in mutations {
        *count.entry(killer_case(m.killer)).or_default() += 1;
    }
    let order = in_case_order(count.keys().copied().collect::<Vec<_>>());
    listed(&order.iter().map(|id| format!("{id}（{} 个）", count[id])).collect::<Vec<_>>())
}

/// The book's name of a group of exercises, as its anchor says it.
fn group_anchor(group: Group) -> &'static str {
    match group {
        Group::Acquire => "acquire",
        Group::RenewRelease => "renew-release",
        Group::Fence => "fence",
        Group::Client => "client",
        Group::Failover => "failover",
        Group::Chaos => "chaos",
        Group::Etcd => "etcd",
        Group::Faults => "faults",
        Group::Model => "model",
        Group::Queue => "queue",
        Group::Object => "object",
    }
}

/// Counts and names from the code's tables.
pub(super) fn code_facts() -> Vec<Fact> {
    let mut f = Facts(Vec::new());
    let ids: Vec<&str> = cases::ALL.iter().map(|c| c.id).collect();
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    f.add("cases", ids.len());
    // The bug zoo's rows (Z1 …), one switch and one case each.
    f.add("queue-bugs", crate::queue::Bug::ALL.len());
    f.add("case-range", format!("{first}–{last}"));
    f.add("article-range", format!("{first}–{}", ids[ARTICLE_CASES - 1]));
    f.add("beyond-range", format!("{}–{last}", ids[ARTICLE_CASES]));
    f.add("beyond-cases", ids.len() - ARTICLE_CASES);

    let variants = cases::variants();
    f.add("modes", crate::vocabulary::FenceMode::ALL.len());
    f.add("scope-fences", crate::vocabulary::FenceMode::SCOPE_FENCES.len());
    f.add("variants", variants.len());
    f.add("variant-names", listed(&variants.iter().map(|v| format!("`{}`", v.name())).collect::<Vec<_>>()));

    f.add("mutations", MUTATIONS.len());
    f.add("mutation-cases", listed(&in_case_order(MUTATIONS.iter().map(|m| killer_case(m.killer)))));
    // The beyond-the-article cases and how many mutations each brought,
    // grouped by that number: `F10、F11 各 1 个，F15、F16 各 2 个`.
    let mut by_count: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for id in &ids[ARTICLE_CASES..] {
        let n = MUTATIONS.iter().filter(|m| killer_case(m.killer) == *id).count();
        by_count.entry(n).or_default().push(id);
    }
    // 各 ("each") only where several cases share the number.
    let phrase: Vec<String> =
        by_count.iter().map(|(n, ids)| if ids.len() > 1 { format!("{} 各 {n} 个", listed(ids)) } else { format!("{} {n} 个", listed(ids)) }).collect();
    f.add("mutations-beyond", phrase.join("，"));
    let groups = [Group::Acquire, Group::RenewRelease, Group::Fence, Group::Client, Group::Failover, Group::Chaos, Group::Etcd, Group::Faults, Group::Model, Group::Queue, Group::Object];
    for group in groups {
        let of: Vec<_> = MUTATIONS.iter().filter(|m| m.group == group).collect();
        f.add(format!("exercises-{}", group_anchor(group)), of.len());
        f.add(format!("exercises-{}-killers", group_anchor(group)), killers_phrase(of.iter().copied()));
    }
    debug_assert_eq!(groups.len(), {
        let mut seen: Vec<Group> = MUTATIONS.iter().map(|m| m.group).collect();
        seen.dedup();
        seen.len()
    });

    // What the cases need besides PostgreSQL, from the case table.
    for need in cases::Need::ALL {
        let ids: Vec<&str> = cases::ALL.iter().filter(|c| c.needs.contains(&need)).map(|c| c.id).collect();
        f.add(format!("{}-cases", need.name()), listed(&ids));
    }

    // The article's parameters and the lab's own, as `params` has them.
    let ms = |d: std::time::Duration| format!("{} ms", d.as_millis());
    f.add("ttl", ms(params::TTL));
    f.add("renew-every", ms(params::RENEW_EVERY));
    f.add("margin", ms(params::margin(params::TTL)));
    f.add("ttl-minus-margin", ms(params::TTL - params::margin(params::TTL)));
    f.add("observe", ms(params::OBSERVE));
    f.add("short-ttl", ms(params::SHORT_TTL));
    f.add("short-margin", ms(params::margin(params::SHORT_TTL)));
    f.add("crash-ttl", ms(params::CRASH_TTL));
    f.add("etcd-ttl", ms(params::ETCD_TTL));
    f.add("etcd-renew-every", ms(params::ETCD_RENEW_EVERY));
    f.add("racers", params::RACERS);
    f.add("racers-max", params::MAX_RACERS);
    f.add("wait-bound", format!("{} s", crate::poll::BOUND.as_secs()));
    f.add("poll-every", ms(crate::poll::EVERY));
    f.add("answer-bound", format!("{} s", crate::holder_guard::ANSWER_BOUND.as_secs()));
    f.add("etcd-members", crate::cluster::etcd::MEMBERS);
    f.add("subnet", crate::hosts::SUBNET_CIDR);
    f.add("slow-response-wait", ms(cases::f2::slow_response_wait()));
    f.add("lead-round-trip", ms(cases::common::LEAD_ROUND_TRIP));
    f.add("lead-readings", cases::common::LEAD_READINGS);
    f.add("suite-nicer-by", crate::suite::schedule::NICER_BY);
    f.add("f13-covered", format!("x{}", cases::f13::COVERED));
    f.add("f13-not-covered", format!("x{}", cases::f13::NOT_COVERED));
    f.add("f13-jump", format!("{} s", cases::f13::JUMP.as_secs()));

    // The resource modes by kind.
    f.add("broken-modes", FenceMode::ALL.iter().filter(|m| !m.refuses_stale()).count());
    f.add("model-stores", crate::model::store::StoreKind::ALL.len());

    // The chaos run's shape and its fault schedule, from `chaos` and F15.
    use crate::chaos::schedule::plan;
    let range = |(low, high): (std::time::Duration, std::time::Duration)| {
        if low.as_millis() % 1000 == 0 && high.as_millis() % 1000 == 0 {
            format!("{}–{} s", low.as_secs(), high.as_secs())
        } else {
            format!("{}–{} ms", low.as_millis(), high.as_millis())
        }
    };
    f.add("chaos-holders", crate::chaos::workload::DEFAULT_HOLDERS);
    f.add("chaos-max-holders", crate::chaos::workload::MAX_HOLDERS);
    f.add("notebook-chaos-max", format!("{} s", crate::notebook::CHAOS_MAX_S));
    f.add("chaos-parts", crate::chaos::workload::PARTS.len());
    f.add("fault-kinds", crate::vocabulary::FaultKind::ALL.len());
    f.add("f15-holders", cases::f15::HOLDERS);
    f.add("f15-duration", format!("{} s", cases::f15::DURATION.as_secs()));
    f.add("plan-gap", range(plan::GAP));
    f.add("plan-pause-short", range(plan::PAUSE_SHORT));
    f.add("plan-pause-long", range(plan::PAUSE_LONG));
    f.add("plan-delay", range(plan::DELAY));
    f.add("plan-delay-span", range(plan::DELAY_SPAN));
    f.add("plan-writer-delay-span", range(plan::WRITER_DELAY_SPAN));
    f.add("plan-restart-gap", range(plan::RESTART_GAP));
    f.add("plan-partition-gap", range(plan::PARTITION_GAP));
    f.add("plan-partition", range(plan::PARTITION));

    // The bench's shape.
    f.add("bench-modes", crate::bench::MODES.len());
    f.add("bench-writers", listed(&crate::bench::WRITERS.map(|w| w.to_string())));
    f.add("bench-scopes", crate::bench::SCOPES.iter().max().copied().unwrap_or(1));
    f.add("bench-acquirers", crate::bench::ACQUIRERS);
    f.add("bench-slice", format!("{} s", crate::bench::writers::SLICE.as_secs_f64()));
    f.add("bench-round", format!("{} s", crate::bench::writers::SLICE.as_secs_f64() * crate::bench::MODES.len() as f64));
    f.add("bench-scope-counts", listed(&crate::bench::SCOPES.map(|s| s.to_string())));
    f.add("bench-target", format!("{:.2}×", crate::bench::report::TARGET));
    f.add("bench-wal-up-to", crate::bench::report::WAL_COMPARED_UP_TO);

    f.add("redactions", REDACTIONS.len());
    f.add("redaction-tokens", listed(&REDACTIONS.iter().map(|(_, with)| format!("`{with}`")).collect::<Vec<_>>()));
    f.add("etcd-election-timeout", format!("{} ms", ELECTION_TIMEOUT.as_millis()));
    f.add("lease-store-samples", lease_stores::SAMPLES);
    f.add("pair-wal-segment", format!("{} MB", crate::cluster::replica::WAL_SEGMENT_MB));
    f.0
}

/// Each exercise's question, as `./run.sh try` prints it: the pages
/// include it, so page and command never ask two different things.
pub(super) fn try_facts() -> Vec<Fact> {
    let mut f = Facts(Vec::new());
    for m in MUTATIONS {
        f.add(format!("question-{}", m.name), m.question);
    }
    f.0
}

/// The case table as `./run.sh list` prints it: id and title.
pub(super) fn case_facts() -> Vec<Fact> {
    let options = CaseOptions::default();
    let mut table = String::from("| 用例 | 标题（`./run.sh list` 打印的那一行） |\n|---|---|");
    for case in cases::ALL {
        table.push_str(&format!("\n| {} | {} |", case.id, (case.title)(&options).replace('|', "\\|")));
    }
    let mut f = Facts(Vec::new());
    f.add("list", table);
    f.0
}
