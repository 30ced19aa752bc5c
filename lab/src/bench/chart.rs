//! The cost chapter's figures: how each fenced mode's price grows, one
//! figure per scope count (`bench-scopes-1.svg` … beside `bench.md`): the
//! writer counts along the bottom, writes per second relative to
//! `unfenced` up the side, a line per fenced mode. The chapter includes each
//! file as it is: an SVG is HTML, and mdBook passes it through.
//!
//! Why SVG, when the chaos chapter's charts are mermaid's xychart: the
//! mermaid that mdbook-mermaid 0.17.1 bundles (11.6) draws no legend, and
//! six series cannot be told apart without one. Here every line and point
//! has its mode's colour, each point names its mode and value when pointed
//! at (its `<title>`), and a legend names the colours. The colours come
//! from CSS classes (`series-0` …), which `style/book.css` colours per
//! theme; the `fill` and `stroke` attributes are the light theme's, for the
//! file opened on its own. Text takes the theme's colour the same way
//! (`var(--fg)`).

use super::report::Row;
use super::MODES;
use crate::vocabulary::FenceMode;
use std::fmt::Write as _;

/// How many series colours `style/book.css` defines (`series-0` …).
pub const SERIES_COLOURS: usize = 6;

/// The light theme's series colours, in `style/book.css`'s order, for the
/// `fill` attribute (the book's CSS overrides it per theme).
const LIGHT_FILLS: [&str; SERIES_COLOURS] = ["#2874a6", "#c0392b", "#1e8449", "#8e44ad", "#7d6608", "#117a65"];

/// The figure's size in its own units; it scales down to a narrower column.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 350.0;
/// Legend entries per row.
const LEGEND_PER_ROW: usize = 3;
/// The plot area: left of it the axis's labels, above it the title.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 48.0;
const PLOT_HEIGHT: f64 = 190.0;

/// The fenced modes, in the bench's order: one series each.
fn fenced_modes() -> Vec<FenceMode> {
    MODES.iter().copied().filter(|m| *m != FenceMode::Unfenced).collect()
}

/// Every figure: (name beside the table, SVG), one per scope count in
/// the rows, fewest first.
pub fn figures(rows: &[Row]) -> Vec<(String, String)> {
    distinct(rows.iter().map(|r| r.cell.scopes)).into_iter().map(|scopes| (format!("scopes-{scopes}.svg"), figure(rows, scopes))).collect()
}

/// The distinct values, ascending.
fn distinct(values: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = values.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// One scope count's figure: a line per fenced mode through its ratio at
/// each writer count, a dashed line at 1 (`unfenced` itself).
fn figure(rows: &[Row], scopes: usize) -> String {
    let modes = fenced_modes();
    let writer_counts = distinct(rows.iter().filter(|r| r.cell.scopes == scopes).map(|r| r.cell.writers));
    let ratio = |mode: FenceMode, writers: usize| {
        rows.iter().find(|r| r.cell.mode == mode && r.cell.writers == writers && r.cell.scopes == scopes).map(|r| r.ratio).filter(|r| r.is_finite())
    };
    let highest = modes.iter().flat_map(|m| writer_counts.iter().filter_map(move |w| ratio(*m, *w))).fold(1.0_f64, f64::max);
    let top = (highest * 1.1 * 4.0).ceil() / 4.0;
    let y = |value: f64| TOP + PLOT_HEIGHT * (1.0 - value / top);
    let bottom = y(0.0);
    // The writer counts evenly spaced (they grow fourfold), inset from the edges.
    let step = (WIDTH - LEFT - RIGHT) / writer_counts.len().max(1) as f64;
    let x = |k: usize| LEFT + step * (k as f64 + 0.5);
    let id = format!("bench-scopes-{scopes}");
    let title = format!("{scopes} 个作用域：各模式相对 UNFENCED 的写入吞吐，随写入者增多");
    let mut svg = String::new();
    let _ = writeln!(svg, r#"<svg xmlns="http://www.w3.org/2000/svg" class="bench-chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-labelledby="{id}-title">"#);
    let _ = writeln!(svg, r#"<title id="{id}-title">{title}（1 = 与 UNFENCED 一样快）</title>"#);
    let _ = writeln!(svg, r#"<text x="{}" y="22" text-anchor="middle" font-size="16">{title}</text>"#, WIDTH / 2.0);
    // The value axis: a grid line and a label every 0.25.
    let mut tick = 0.0;
    while tick <= top + 1e-9 {
        let _ = writeln!(svg, r##"<line class="grid" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#dddddd"/>"##, y(tick), WIDTH - RIGHT);
        let _ = writeln!(svg, r#"<text x="{}" y="{:.1}" text-anchor="end" font-size="12">{}</text>"#, LEFT - 8.0, y(tick) + 4.0, tick);
        tick += 0.25;
    }
    let _ = writeln!(svg, r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">相对 UNFENCED</text>"#, TOP + PLOT_HEIGHT / 2.0);
    let _ = writeln!(svg, r##"<line class="axis" x1="{LEFT}" y1="{bottom:.1}" x2="{}" y2="{bottom:.1}" stroke="#000000"/>"##, WIDTH - RIGHT);
    // UNFENCED itself: 1, under the lines.
    let _ = writeln!(svg, r##"<line class="baseline" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#000000" stroke-dasharray="6 4"/>"##, y(1.0), WIDTH - RIGHT);
    let _ = writeln!(svg, r#"<text class="value" x="{}" y="{:.1}" text-anchor="end" font-size="12">UNFENCED = 1</text>"#, WIDTH - RIGHT, y(1.0) - 6.0);
    for (k, writers) in writer_counts.iter().enumerate() {
        let _ = writeln!(svg, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{writers} 个写入者</text>"#, x(k), bottom + 20.0);
    }
    // A line per mode through the writer counts it was measured at; a
    // point at each, named when pointed at. A missing cell breaks the line.
    // Lines and points cross and overlap one another, so they carry their
    // mode as `data-mode`; the legend's swatch, on the page itself, is the
    // series' mark (`data-series`) whose colour the book's visual test
    // holds against the page and against the other series'.
    for (i, mode) in modes.iter().enumerate() {
        let colour = LIGHT_FILLS[i % SERIES_COLOURS];
        let points: Vec<Option<(f64, f64, usize, f64)>> = writer_counts.iter().enumerate().map(|(k, &w)| ratio(*mode, w).map(|r| (x(k), y(r), w, r))).collect();
        for run in points.split(|p| p.is_none()).filter(|run| run.len() > 1) {
            let path: Vec<String> = run.iter().flatten().enumerate().map(|(n, (px, py, _, _))| format!("{}{px:.1} {py:.1}", if n == 0 { "M" } else { "L" })).collect();
            let _ = writeln!(svg, r#"<path class="series-{i}" data-mode="{mode}" d="{}" fill="none" stroke="{colour}" stroke-width="2.5"/>"#, path.join(" "));
        }
        for (px, py, writers, value) in points.iter().flatten() {
            let _ = writeln!(
                svg,
                r#"<circle class="series-{i}" data-mode="{mode}" cx="{px:.1}" cy="{py:.1}" r="4.5" fill="{colour}"><title>{mode}，{writers} 个写入者：{value:.2}×</title></circle>"#
            );
        }
    }
    if writer_counts.is_empty() {
        let _ = writeln!(svg, r#"<text x="{}" y="{:.1}" text-anchor="middle" font-size="12">无数据</text>"#, WIDTH / 2.0, bottom - 6.0);
    }
    // The legend: which colour is which mode, three to a row, so that the
    // longest names (FENCED_SCOPE_SHARED) never run into the next.
    let per_row = LEGEND_PER_ROW.min(modes.len()).max(1);
    let item = (WIDTH - 32.0) / per_row as f64;
    let first = WIDTH / 2.0 - item * per_row as f64 / 2.0;
    let rows = modes.len().div_ceil(per_row);
    for (i, mode) in modes.iter().enumerate() {
        let lx = first + (i % per_row) as f64 * item + 16.0;
        let ly = HEIGHT - 12.0 - 22.0 * (rows - i / per_row) as f64;
        let _ = writeln!(svg, r#"<rect class="series-{i}" data-series="{mode}" x="{lx:.1}" y="{ly:.1}" width="14" height="14" fill="{}"/>"#, LIGHT_FILLS[i % SERIES_COLOURS]);
        let _ = writeln!(svg, r#"<text x="{:.1}" y="{:.1}" font-size="13">{mode}</text>"#, lx + 20.0, ly + 12.0);
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Cell, SCOPES, WRITERS};
    use std::time::Duration;

    fn row(mode: FenceMode, writers: usize, scopes: usize, ratio: f64) -> Row {
        Row {
            cell: Cell { mode, writers, scopes },
            per_second: 1000.0,
            per_second_low: 900.0,
            per_second_high: 1100.0,
            ratio,
            ratio_p25: ratio,
            ratio_p75: ratio,
            p50: Duration::ZERO,
            p99: Duration::ZERO,
            refused: 0,
            wal_per_write: 0.0,
        }
    }

    /// Every fenced mode has a colour of its own in the book's CSS.
    #[test]
    fn every_mode_has_a_colour() {
        assert!(fenced_modes().len() <= SERIES_COLOURS, "style/book.css colours {SERIES_COLOURS} series; the bench has {} fenced modes", fenced_modes().len());
    }

    /// A figure per scope count; in it, a line per fenced mode through a
    /// point per writer count, each point naming its value, and a legend
    /// entry per mode.
    #[test]
    fn a_figure_follows_every_mode_across_the_writer_counts() {
        let mut rows = Vec::new();
        for &writers in &WRITERS {
            for &scopes in &SCOPES {
                for (i, &mode) in MODES.iter().enumerate() {
                    rows.push(row(mode, writers, scopes, if mode == FenceMode::Unfenced { 1.0 } else { 0.01 * (i + writers) as f64 }));
                }
            }
        }
        let figures = figures(&rows);
        assert_eq!(figures.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["scopes-1.svg", "scopes-16.svg", "scopes-1000.svg", "scopes-10000.svg"]);
        let (_, sixteen) = &figures[1];
        assert!(sixteen.starts_with("<svg ") && sixteen.ends_with("</svg>\n") && !sixteen.contains("\n\n"), "one HTML block for mdBook:\n{sixteen}");
        for (i, mode) in fenced_modes().iter().enumerate() {
            assert_eq!(sixteen.matches(&format!(r#"<path class="series-{i}" data-mode="{mode}""#)).count(), 1, "{mode}'s line:\n{sixteen}");
            assert_eq!(sixteen.matches(&format!(r#"<circle class="series-{i}" data-mode="{mode}""#)).count(), WRITERS.len(), "{mode}'s points:\n{sixteen}");
            assert_eq!(sixteen.matches(&format!(r#"<rect class="series-{i}" data-series="{mode}""#)).count(), 1, "{mode}'s legend entry:\n{sixteen}");
            assert!(sixteen.contains(&format!("{mode}，64 个写入者：{:.2}×", 0.01 * (i + 1 + 64) as f64)), "{mode}'s value is named:\n{sixteen}");
        }
        assert!(!sixteen.contains("data-series=\"UNFENCED\""), "unfenced is the line at 1, not a series");
        assert!(sixteen.contains("16 个作用域") && sixteen.contains("64 个写入者"));
    }

    /// A cell the rows lack breaks its mode's line there; it is not drawn as zero.
    #[test]
    fn a_missing_cell_is_not_drawn() {
        let rows = [row(FenceMode::FencedRow, 1, 1, 0.9), row(FenceMode::FencedRow, 4, 1, 0.8), row(FenceMode::FencedScope, 16, 1, 0.5)];
        let svg = figure(&rows, 1);
        assert_eq!(svg.matches("<circle class=\"series-0\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("<path class=\"series-0\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("<circle class=\"series-1\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("<path class=\"series-1\"").count(), 0, "one point is no line: {svg}");
        assert!(!svg.contains("0.00×"), "{svg}");
    }
}
