//! A history as one self-contained HTML page: plain SVG drawn here from the
//! record, and a little JavaScript (`page.js`, included whole) that only
//! filters, zooms and shows what is under the pointer. No library, no
//! font, nothing fetched: the page opens offline, and a test can count
//! what it draws against the record.
//!
//! What the page draws, on one time axis (ms from the run's start):
//! - a lane per holder incarnation (`holder-c#2`): its calls as bars from
//!   call to return, the lease's (acquire, renew, release) above, the
//!   writes below, coloured by how they returned; a call that never
//!   returned runs to the lane's end, faded;
//! - the faults as bands in the lanes they hit (a kind's colour; one
//!   without an end is a thin mark), and the server's faults in a lane of
//!   their own and across every lane;
//! - the floor as the resource recorded it, a step line over time, with
//!   each accepted write's token as a mark beside it;
//! - every finding of the checker (a stale write accepted, …) marked on
//!   its operation, with the checker's reason in the operation's tooltip.
//!
//! Each operation is one element with `data-op` (its id in the record),
//! each fault one or more with `data-fault`; the filters hide elements with
//! `display="none"` and never remove one. `#only=stale` (or `regression`,
//! `lost`, `reused`, `refused`) shows only those operations, `#holders=`
//! some holders, `#from=`/`#to=` a window in seconds.

use super::{Finding, FindingKind, Op, Record, Target};
use crate::vocabulary::{Operation, Outcome};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The most a page may weigh, which the history test holds every evidence
/// page to: a page of a two minutes' run must open in any browser (users
/// of Porcupine, whose pages draw every operation too, met one of 1.5 GB).
pub const MAX_BYTES: u64 = 2 * 1024 * 1024;

/// The label column's width, px.
const LABEL_W: f64 = 130.0;
/// The plot's width before the browser measures it, px.
const PLOT_W: f64 = 1100.0;
/// A lane's height, px.
const LANE_H: f64 = 18.0;
/// The floor strip's height, px.
const FLOOR_H: f64 = 80.0;
/// The axis's height, px.
const AXIS_H: f64 = 20.0;
/// The narrowest a bar is drawn, px: a call of a millisecond in a two
/// minutes' run would be a hundredth of a pixel.
const MIN_PX: f64 = 2.0;

/// Colours of the fault kinds, by their place in the run's list of kinds:
/// a kind added later gets the next one.
const FAULT_COLOURS: [&str; 10] = ["#b45f06", "#8e7cc3", "#c27ba0", "#e06666", "#f6b26b", "#76a5af", "#93c47d", "#a61c00", "#674ea7", "#bf9000"];

/// The page's script and style, kept as files of their own.
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// One lane: a holder incarnation, and the span it covers.
struct Lane {
    /// `holder-c`.
    holder: String,
    /// 2.
    incarnation: u32,
    /// Its first call.
    start: f64,
    /// The next incarnation's first call, or the run's end.
    end: f64,
}

/// The page of `record`, marked with the checker's `findings`.
pub fn render(record: &Record, findings: &[Finding]) -> String {
    let run = &record.run;
    let end = record.ops.iter().filter_map(|o| o.complete_ms.or(o.invoke_ms)).fold(run.end_ms, f64::max).max(1.0);
    let lanes = lanes(record, end);
    let lane_of = |holder: &str, t: f64| -> Option<usize> {
        let mine: Vec<usize> = (0..lanes.len()).filter(|&i| lanes[i].holder == holder).collect();
        mine.iter().copied().rev().find(|&i| lanes[i].start <= t).or(mine.first().copied())
    };
    let height = AXIS_H + FLOOR_H + LANE_H * (lanes.len() + 1) as f64;
    let scale = PLOT_W / end;
    let min_w = MIN_PX / scale;
    let plot = format!("translate({LABEL_W},0) scale({scale:.6},1)");

    // What the checker found, by attempt and by token.
    let mut by_attempt: BTreeMap<i64, Vec<&Finding>> = BTreeMap::new();
    let mut by_token: BTreeMap<i64, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        match f.on {
            Target::Attempt(id) => by_attempt.entry(id).or_default().push(f),
            Target::Token(token) => by_token.entry(token).or_default().push(f),
        }
    }
    let found_for = |op: &Op| -> Vec<&Finding> {
        let mut found = op.attempt.as_ref().and_then(|a| by_attempt.get(&a.id)).cloned().unwrap_or_default();
        if op.f == Operation::Acquire && op.outcome == Outcome::Ok {
            found.extend(op.token.and_then(|t| by_token.get(&t)).into_iter().flatten().copied());
        }
        found
    };

    // Each lane's elements: faults behind, calls above them.
    let server_lane = lanes.len();
    let mut lane_svg: Vec<String> = vec![String::new(); lanes.len() + 1];
    let mut wide = String::new();
    for fault in &record.faults {
        let kind_at = run.fault_kinds.iter().position(|k| *k == fault.kind).unwrap_or(run.fault_kinds.len());
        let colour = FAULT_COLOURS[kind_at % FAULT_COLOURS.len()];
        let length = fault.end_ms.map(|e| e - fault.start_ms);
        let title = format!(
            "{} · {} · {} 开始{}",
            fault.kind,
            if fault.targets.is_empty() { "服务器".to_owned() } else { fault.targets.join("+") },
            secs(fault.start_ms),
            match length {
                Some(l) => format!("，持续 {l:.0} ms"),
                None => "（瞬时，或没有记下结束）".into(),
            }
        );
        let width = bar_width(length.unwrap_or(0.0), min_w);
        let band = |y: f64, h: f64, class: &str| {
            format!(
                "<rect class=\"{class}\" data-fault=\"{}\" data-kind=\"{}\" x=\"{:.2}\" y=\"{y}\" {width} height=\"{h}\" fill=\"{colour}\"><title>{}</title></rect>",
                fault.id,
                esc(fault.kind.name()),
                fault.start_ms,
                esc(&title)
            )
        };
        if fault.targets.is_empty() {
            lane_svg[server_lane].push_str(&band(1.0, LANE_H - 2.0, "fault"));
            wide.push_str(&band(AXIS_H + FLOOR_H, height - AXIS_H - FLOOR_H, "fault wide"));
        }
        for target in &fault.targets {
            let lane = lane_of(target, fault.start_ms).unwrap_or(server_lane);
            lane_svg[lane].push_str(&band(1.0, LANE_H - 2.0, "fault"));
        }
    }
    for op in &record.ops {
        let Some(lane) = lane_of(&op.holder, op.invoke_ms.unwrap_or(0.0)) else { continue };
        let found = found_for(op);
        let from = op.invoke_ms.or(op.attempt.as_ref().map(|a| a.at_ms)).unwrap_or(0.0);
        let to = op.complete_ms.unwrap_or(if op.invoke_ms.is_some() { lanes[lane].end } else { from });
        let (y, h) = if op.f == Operation::Write { (9.0, 7.0) } else { (2.0, 5.0) };
        let mut class = format!("op {} {}", op.f, state(op));
        for f in &found {
            let _ = write!(class, " {}", f.kind.name());
        }
        if op.complete_ms.is_none() {
            class.push_str(" open");
        }
        let _ = write!(
            lane_svg[lane],
            "<rect class=\"{class}\" data-op=\"{}\" x=\"{from:.2}\" y=\"{y}\" {} height=\"{h}\"><title>{}</title></rect>",
            op.id,
            bar_width(to - from, min_w),
            esc(&op_title(op, &found))
        );
    }

    // The floor, and the token of each accepted write, over time.
    let mut attempts: Vec<_> = record.ops.iter().filter_map(|o| o.attempt.as_ref()).collect();
    attempts.sort_by_key(|a| a.id);
    let top = attempts.iter().flat_map(|a| [a.token, a.floor_after.unwrap_or(0)]).max().unwrap_or(1).max(1) as f64;
    let fy = |token: i64| AXIS_H + FLOOR_H - 6.0 - (token as f64 / top) * (FLOOR_H - 14.0);
    let mut floor_path = String::new();
    let mut marks = String::new();
    for a in &attempts {
        // A step line: level until the next recorded floor, then up or down to it.
        if let Some(floor) = a.floor_after {
            if floor_path.is_empty() {
                let _ = write!(floor_path, "M{:.2} {:.1}", a.at_ms, fy(floor));
            } else {
                let _ = write!(floor_path, " H{:.2} V{:.1}", a.at_ms, fy(floor));
            }
        }
        if a.accepted {
            let stale = by_attempt.get(&a.id).is_some_and(|f| f.iter().any(|f| f.kind == FindingKind::Stale));
            let _ = write!(
                marks,
                "<rect class=\"tok{}\" x=\"{:.2}\" y=\"{:.1}\" {} height=\"3\"><title>attempt {} · {} · token={} 被接受（{}）</title></rect>",
                if stale { " stale" } else { "" },
                a.at_ms,
                fy(a.token) - 1.5,
                bar_width(0.0, min_w),
                a.id,
                esc(&a.writer),
                a.token,
                secs(a.at_ms)
            );
        }
    }

    if !floor_path.is_empty() {
        let _ = write!(floor_path, " H{end:.2}");
    }

    let mut out = String::new();
    let title = format!("历史：{}", run.name);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"zh-CN\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>{}</title>\n<style>{STYLE}</style></head>\n<body>\n",
        esc(&title)
    );
    let _ = write!(out, "<h1>{}</h1>\n<p class=\"run\"><code>{}</code> · 资源端模式 <code>{}</code> · <a href=\"{}.jsonl\">JSON lines</a></p>\n", esc(&title), esc(&run.command), esc(run.mode.map_or("（没有写入）", |m| m.name())), esc(&run.name));
    out.push_str(&summary(record, findings));
    out.push_str(&controls(record));
    out.push_str(&legend(record));
    let _ = write!(
        out,
        "<svg id=\"chart\" width=\"{}\" height=\"{height}\" data-end=\"{end:.2}\" data-label=\"{LABEL_W}\" data-lane=\"{LANE_H}\" data-top=\"{}\" data-min=\"{MIN_PX}\">\n",
        LABEL_W + PLOT_W,
        AXIS_H + FLOOR_H
    );
    // What is zoomed out of the window is clipped at the plot's edges, not
    // drawn over the labels.
    let _ = write!(out, "<defs><clipPath id=\"plotarea\"><rect id=\"cliprect\" x=\"{LABEL_W}\" y=\"-5\" width=\"{PLOT_W}\" height=\"1000000\"/></clipPath></defs>\n");
    let _ = write!(out, "<g id=\"axis\"></g>\n<g clip-path=\"url(#plotarea)\"><g id=\"wide\" class=\"zoom\" transform=\"{plot}\">{wide}</g></g>\n");
    let _ = write!(
        out,
        "<g id=\"floor\"><text x=\"4\" y=\"{}\">floor 与被接受的 token</text><text x=\"4\" y=\"{}\" class=\"dim\">最大 {top}</text><g clip-path=\"url(#plotarea)\"><g class=\"zoom\" transform=\"{plot}\"><path d=\"{floor_path}\" vector-effect=\"non-scaling-stroke\"/>{marks}</g></g></g>\n",
        AXIS_H + 14.0,
        AXIS_H + 30.0
    );
    let _ = write!(
        out,
        "<g class=\"lane server\" data-holder=\"\" data-start=\"0\" data-end=\"{end:.2}\" transform=\"translate(0,{})\"><text x=\"4\" y=\"13\">服务器</text><g clip-path=\"url(#plotarea)\"><g class=\"zoom\" transform=\"{plot}\">{}</g></g></g>\n",
        AXIS_H + FLOOR_H,
        lane_svg[server_lane]
    );
    for (i, lane) in lanes.iter().enumerate() {
        let _ = write!(
            out,
            "<g class=\"lane\" data-holder=\"{}\" data-start=\"{:.2}\" data-end=\"{:.2}\" transform=\"translate(0,{})\"><text x=\"4\" y=\"13\">{}#{}</text><g clip-path=\"url(#plotarea)\"><g class=\"zoom\" transform=\"{plot}\">{}</g></g></g>\n",
            esc(&lane.holder),
            lane.start,
            lane.end,
            AXIS_H + FLOOR_H + LANE_H * (i + 1) as f64,
            esc(&lane.holder),
            lane.incarnation,
            lane_svg[i]
        );
    }
    out.push_str("</svg>\n<pre id=\"detail\">点一个操作或故障，看它的细节。</pre>\n");
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}

/// The lanes: each holder incarnation that made a call, from its first
/// call to the next incarnation's first (or the run's end).
fn lanes(record: &Record, end: f64) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = record
        .lanes()
        .into_iter()
        .map(|(holder, incarnation)| {
            let start = record
                .ops
                .iter()
                .filter(|o| o.holder == holder && o.incarnation == incarnation)
                .filter_map(|o| o.invoke_ms)
                .fold(f64::INFINITY, f64::min);
            Lane { holder, incarnation, start: if start.is_finite() { start } else { 0.0 }, end }
        })
        .collect();
    for i in 1..lanes.len() {
        if lanes[i].holder == lanes[i - 1].holder {
            lanes[i - 1].end = lanes[i].start;
        }
    }
    lanes
}

/// How an operation returned, as a class: `acc`/`ref` for a write the
/// resource accepted or refused, else its outcome.
fn state(op: &Op) -> &'static str {
    match (&op.attempt, op.outcome) {
        (Some(a), _) if a.accepted => "acc",
        (Some(_), _) => "ref",
        (None, outcome) => outcome.name(),
    }
}

/// The tooltip of an operation: what it was, how it returned, its times,
/// and what the checker said of it.
fn op_title(op: &Op, found: &[&Finding]) -> String {
    let who = format!("{}#{}", op.holder, op.incarnation);
    let token = op.token.map(|t| format!(" token={t}")).unwrap_or_default();
    let what = match op.f {
        Operation::Acquire => match (op.outcome, op.holding) {
            (Outcome::Ok, Some(n)) => format!("获取：得到{token}（这一代的第 {n} 次持有）"),
            _ => "获取".into(),
        },
        Operation::Renew => format!("续租{token}"),
        Operation::Release => format!("释放{token}"),
        Operation::Write => format!("写入 {}{token}", op.part.as_deref().unwrap_or("")),
    };
    let answer = match (&op.attempt, op.outcome, &op.code) {
        (Some(a), _, _) => format!(
            "资源端{}（write_attempt {}，它看到的 floor={}，服务器时间 {}）",
            if a.accepted { "接受" } else { "拒绝" },
            a.id,
            a.floor_after.map_or("无".into(), |f| f.to_string()),
            secs(a.at_ms)
        ),
        (None, Outcome::Ok, _) => "成功".into(),
        (None, Outcome::Fail, _) => "被拒绝".into(),
        (None, _, Some(code)) => format!("出错 code={code}：结果未知"),
        (None, _, None) => "没有返回（进程被杀，或运行结束）：结果未知".into(),
    };
    let tries = op.tries.filter(|&t| t > 1).map(|t| format!("，共尝试 {t} 次")).unwrap_or_default();
    let times = match (op.invoke_ms, op.complete_ms) {
        (Some(i), Some(c)) => format!("调用 {} → 返回 {}（{:.1} ms{tries}）", secs(i), secs(c), c - i),
        (Some(i), None) => format!("调用 {}，没有返回", secs(i)),
        _ => "调用没有被听到".into(),
    };
    let mut title = format!("{who} · 操作 {} · {what}\n{answer}\n{times}", op.id);
    for f in found {
        let _ = write!(title, "\n检查器：{}", f.reason);
    }
    title
}

/// The counts at the top, each a link that filters the page to its operations.
fn summary(record: &Record, findings: &[Finding]) -> String {
    let writes: Vec<_> = record.ops.iter().filter_map(|o| o.attempt.as_ref()).collect();
    let accepted = writes.iter().filter(|a| a.accepted).count();
    let mut out = format!(
        "<p class=\"counts\">{} 个操作 · {} 次写入尝试（接受 {accepted}，<a href=\"#only=refused\">拒绝 {}</a>）· {} 个故障 · 检查器：",
        record.ops.len(),
        writes.len(),
        writes.len() - accepted,
        record.faults.len()
    );
    let label = |k: FindingKind| match k {
        FindingKind::Stale => "被接受的过期写入",
        FindingKind::Reused => "重复发出的 token",
        FindingKind::Regression => "floor 倒退",
        FindingKind::Lost => "丢失的写入",
    };
    let parts: Vec<String> = FindingKind::ALL
        .iter()
        .map(|&k| {
            let n = findings.iter().filter(|f| f.kind == k).count();
            if n == 0 {
                format!("{} 0", label(k))
            } else {
                format!("<a class=\"finding\" href=\"#only={}\">{} {n}</a>", k.name(), label(k))
            }
        })
        .collect();
    out.push_str(&parts.join(" · "));
    out.push_str("</p>\n");
    out
}

/// The filters and the zoom.
fn controls(record: &Record) -> String {
    let mut out = String::from("<form id=\"controls\"><fieldset><legend>持有者</legend>");
    for holder in &record.run.holders {
        let _ = write!(out, "<label><input type=\"checkbox\" name=\"holder\" value=\"{0}\" checked>{0}</label> ", esc(holder));
    }
    out.push_str("</fieldset><fieldset><legend>只看</legend><select name=\"only\"><option value=\"\">全部操作</option>");
    for (value, label) in [("stale", "被接受的过期写入"), ("regression", "floor 倒退"), ("lost", "丢失的写入"), ("reused", "重复发出的 token"), ("refused", "被拒绝的写入")] {
        let _ = write!(out, "<option value=\"{value}\">{label}</option>");
    }
    out.push_str(
        "</select></fieldset><fieldset><legend>时间（秒）</legend><input name=\"from\" size=\"6\"> – <input name=\"to\" size=\"6\"> \
         <button type=\"submit\">看这一段</button> <button type=\"button\" name=\"zoomin\">放大</button> <button type=\"button\" name=\"zoomout\">缩小</button> \
         <button type=\"button\" name=\"whole\">整段</button></fieldset></form>\n<p class=\"hint\">滚轮缩放，拖动平移；悬停看细节，点击固定在下方。</p>\n",
    );
    out
}

/// What the colours mean: the calls, and every fault kind the run could inject.
fn legend(record: &Record) -> String {
    let mut out = String::from(
        "<p class=\"legend\"><span class=\"key acquire\"></span>获取 <span class=\"key renew\"></span>续租 <span class=\"key release\"></span>释放 \
         <span class=\"key acc\"></span>写入被接受 <span class=\"key ref\"></span>写入被拒绝 <span class=\"key info\"></span>出错或没有返回 \
         <span class=\"key stale\"></span>检查器的发现 ｜ 故障：",
    );
    for (i, kind) in record.run.fault_kinds.iter().enumerate() {
        let _ = write!(out, "<span class=\"key\" style=\"background:{}\"></span>{} ", FAULT_COLOURS[i % FAULT_COLOURS.len()], esc(kind.name()));
    }
    out.push_str("</p>\n");
    out
}

/// A bar's `width` attribute: its length in ms, drawn no narrower than
/// `min_w`; a bar drawn wider keeps its true length in `data-w`, from which
/// the script widens it to [`MIN_PX`] again at every zoom.
fn bar_width(length: f64, min_w: f64) -> String {
    if length >= min_w {
        format!("width=\"{length:.2}\"")
    } else {
        format!("width=\"{min_w:.2}\" data-w=\"{length:.2}\"")
    }
}

/// `12.345 s`.
fn secs(ms: f64) -> String {
    format!("{:.3} s", ms / 1000.0)
}

/// Text for HTML and SVG: the five characters that could end a tag or an attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
