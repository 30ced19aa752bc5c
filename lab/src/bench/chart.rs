//! The cost chapter's figures: one per writer count, every fenced mode's
//! writes per second relative to `unfenced`, side by side, on one scope and
//! on 16 (`bench-writers-4.svg` … beside `bench.md`). The chapter includes
//! each file as it is: an SVG is HTML, and mdBook passes it through.
//!
//! Why SVG, when the chaos chapter's charts are mermaid's xychart: the
//! mermaid that mdbook-mermaid 0.17.1 bundles (11.6) draws a second bar
//! series at the very place of the first, on top of it, and draws no
//! legend; modes side by side cannot be told apart. Here every bar has its
//! mode's colour, its value written above it, and a legend names the
//! colours. The colours come from CSS classes (`series-0` …), which
//! `style/book.css` colours per theme; the `fill` attribute under each is
//! the light theme's, for the file opened on its own. Text takes the
//! theme's colour the same way (`var(--fg)`).

use super::report::Row;
use super::{MODES, SCOPES, WRITERS};
use crate::vocabulary::FenceMode;
use std::fmt::Write as _;

/// How many series colours `style/book.css` defines (`series-0` …).
pub const SERIES_COLOURS: usize = 6;

/// The light theme's series colours, in `style/book.css`'s order, for the
/// `fill` attribute (the book's CSS overrides it per theme).
const LIGHT_FILLS: [&str; SERIES_COLOURS] = ["#2874a6", "#c0392b", "#1e8449", "#8e44ad", "#7d6608", "#117a65"];

/// The figure's size in its own units; it scales down to a narrower column.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 330.0;
/// The plot area: left of it the axis's labels, above it the title.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 48.0;
const PLOT_HEIGHT: f64 = 190.0;

/// The fenced modes, in the bench's order: one series each.
fn fenced_modes() -> Vec<FenceMode> {
    MODES.iter().copied().filter(|m| *m != FenceMode::Unfenced).collect()
}

/// Every figure: (name beside the table, SVG), one per writer count.
pub fn figures(rows: &[Row]) -> Vec<(String, String)> {
    WRITERS.iter().map(|&writers| (format!("writers-{writers}.svg"), figure(rows, writers))).collect()
}

/// One writer count's figure: a group of bars per scope count, a bar per
/// fenced mode, a dashed line at 1 (`unfenced` itself).
fn figure(rows: &[Row], writers: usize) -> String {
    let modes = fenced_modes();
    let ratio = |mode: FenceMode, scopes: usize| {
        rows.iter().find(|r| r.cell.mode == mode && r.cell.writers == writers && r.cell.scopes == scopes).map(|r| r.ratio).filter(|r| r.is_finite())
    };
    let highest = modes.iter().flat_map(|m| SCOPES.iter().filter_map(move |s| ratio(*m, *s))).fold(1.0_f64, f64::max);
    // Room above the tallest bar for its value.
    let top = (highest * 1.15 * 4.0).ceil() / 4.0;
    let y = |value: f64| TOP + PLOT_HEIGHT * (1.0 - value / top);
    let bottom = y(0.0);
    let id = format!("bench-writers-{writers}");
    let title = format!("{writers} 个写入者：各模式相对 UNFENCED 的写入吞吐");
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
    // UNFENCED itself: 1, under the bars.
    let _ = writeln!(svg, r##"<line class="baseline" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#000000" stroke-dasharray="6 4"/>"##, y(1.0), WIDTH - RIGHT);
    let _ = writeln!(svg, r#"<text class="value" x="{}" y="{:.1}" text-anchor="end" font-size="12">UNFENCED = 1</text>"#, WIDTH - RIGHT, y(1.0) - 6.0);
    // A group of bars per scope count.
    let group = (WIDTH - LEFT - RIGHT) / SCOPES.len() as f64;
    let bar = (group * 0.7 / modes.len() as f64).min(72.0);
    let gap = bar * 0.15;
    for (g, scopes) in SCOPES.iter().enumerate() {
        let middle = LEFT + group * (g as f64 + 0.5);
        let start = middle - (bar * modes.len() as f64 + gap * (modes.len() - 1) as f64) / 2.0;
        for (i, mode) in modes.iter().enumerate() {
            let x = start + i as f64 * (bar + gap);
            let Some(value) = ratio(*mode, *scopes) else {
                let _ = writeln!(svg, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">无数据</text>"#, x + bar / 2.0, bottom - 6.0);
                continue;
            };
            let _ = writeln!(
                svg,
                r#"<rect class="series-{i}" data-series="{mode}" x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}" fill="{}"/>"#,
                y(value),
                bottom - y(value),
                LIGHT_FILLS[i % SERIES_COLOURS]
            );
            let _ = writeln!(svg, r#"<text class="value" x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{value:.2}×</text>"#, x + bar / 2.0, y(value) - 5.0);
        }
        let _ = writeln!(svg, r#"<text x="{middle:.1}" y="{:.1}" text-anchor="middle" font-size="13">{scopes} 个作用域</text>"#, bottom + 20.0);
    }
    // The legend: which colour is which mode, in one row that a fifth or
    // sixth mode still fits.
    let item = ((WIDTH - 16.0) / modes.len() as f64).min(180.0);
    let first = WIDTH / 2.0 - item * modes.len() as f64 / 2.0;
    for (i, mode) in modes.iter().enumerate() {
        let x = first + i as f64 * item;
        let _ = writeln!(svg, r#"<rect class="series-{i}" data-series="{mode}" x="{x:.1}" y="{:.1}" width="14" height="14" fill="{}"/>"#, HEIGHT - 34.0, LIGHT_FILLS[i % SERIES_COLOURS]);
        let _ = writeln!(svg, r#"<text x="{:.1}" y="{:.1}" font-size="13">{mode}</text>"#, x + 20.0, HEIGHT - 22.0);
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Cell;
    use std::time::Duration;

    fn row(mode: FenceMode, writers: usize, scopes: usize, ratio: f64) -> Row {
        Row { cell: Cell { mode, writers, scopes }, per_second: 1000.0, ratio, p50: Duration::ZERO, p99: Duration::ZERO, refused: 0, wal_per_write: 0.0 }
    }

    /// Every fenced mode has a colour of its own in the book's CSS.
    #[test]
    fn every_mode_has_a_colour() {
        assert!(fenced_modes().len() <= SERIES_COLOURS, "style/book.css colours {SERIES_COLOURS} series; the bench has {} fenced modes", fenced_modes().len());
    }

    /// A figure per writer count; in it, a bar per fenced mode and scope
    /// count with its value, in its mode's series, and a legend entry per mode.
    #[test]
    fn a_figure_compares_every_mode_in_every_scope_count() {
        let mut rows = Vec::new();
        for &writers in &WRITERS {
            for &scopes in &SCOPES {
                for (i, &mode) in MODES.iter().enumerate() {
                    rows.push(row(mode, writers, scopes, if mode == FenceMode::Unfenced { 1.0 } else { 0.1 * (i + writers) as f64 }));
                }
            }
        }
        let figures = figures(&rows);
        assert_eq!(figures.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["writers-1.svg", "writers-4.svg", "writers-16.svg"]);
        let (_, four) = &figures[1];
        assert!(four.starts_with("<svg ") && four.ends_with("</svg>\n") && !four.contains("\n\n"), "one HTML block for mdBook:\n{four}");
        for (i, mode) in fenced_modes().iter().enumerate() {
            let marks = four.matches(&format!(r#"class="series-{i}" data-series="{mode}""#)).count();
            assert_eq!(marks, SCOPES.len() + 1, "{mode}: a bar per scope count and a legend entry:\n{four}");
            assert!(four.contains(&format!("{:.2}×", 0.1 * (i + 1 + 4) as f64)), "{mode}'s value is written:\n{four}");
        }
        assert!(!four.contains("data-series=\"UNFENCED\""), "unfenced is the line at 1, not a bar");
        assert!(four.contains("16 个作用域") && four.contains("4 个写入者"));
    }

    /// A cell the rows lack is said, not drawn as zero.
    #[test]
    fn a_missing_cell_is_said() {
        let svg = figure(&[row(FenceMode::FencedRow, 1, 1, 0.9)], 1);
        assert_eq!(svg.matches("<rect class=\"series-0\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("无数据").count(), fenced_modes().len() * SCOPES.len() - 1, "{svg}");
    }
}
