//! `lab bench` cannot rot, and its figures in the book cannot drift.
//!
//! The measuring run is the book's own: chapter 22 tells the reader to type
//! `./run.sh bench --seconds 1 --runs 1 --writers … --scopes … --out
//! target/bench-mine.md`, and
//! the book-commands test checks what it wrote with `common/bench_table.rs`
//! (every cell of its grid once, the CSV, the figures, progress). One
//! measuring run per test run: the bench saturates both cores for a minute.
//!
//! This test measures nothing. `lab bench --redraw` draws the figures from
//! the locked CSV (`evidence/26/bench.csv`), and they must be the very
//! figures the book includes: a chart drawn differently, or a CSV changed
//! without its figures, fails here.

mod common;

use common::{assert_exit, bench_table, stdout, LAB};
use std::path::Path;

/// The measuring run this test leaves to the book is there: some chapter
/// shows a bench that writes its table, so the book-commands test checks one.
#[test]
fn the_book_shows_a_measuring_bench() {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("book");
    let mut found = Vec::new();
    for chapter in lab::suite::book::chapters(&book).unwrap() {
        let text = std::fs::read_to_string(book.join(&chapter)).unwrap();
        found.extend(lab::suite::book::commands(&chapter, &text).into_iter().filter(|c| bench_table::measured_table(&c.line).is_some()).map(|c| c.at));
    }
    assert!(!found.is_empty(), "no chapter shows `./run.sh bench … --out FILE`: nothing would measure the bench in a test run");
}

#[test]
fn the_locked_figures_are_drawn_from_the_locked_csv() {
    let evidence = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("evidence/26");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench.md");
    std::fs::copy(evidence.join("bench.csv"), out.with_extension("csv")).unwrap();
    let run = common::run(LAB, &["bench", "--redraw", "--out", out.to_str().unwrap()], &[]);
    assert_exit(&run, 0, "lab bench --redraw");
    for scopes in ["1", "16", "1000", "10000"] {
        let name = format!("bench-scopes-{scopes}.svg");
        let locked = std::fs::read_to_string(evidence.join(&name)).unwrap();
        let redrawn = std::fs::read_to_string(dir.path().join(&name)).unwrap_or_else(|e| panic!("--redraw did not draw {name}: {e}\n{}", stdout(&run)));
        assert!(redrawn == locked, "evidence/26/{name} is not what evidence/26/bench.csv draws: redraw it with ./run.sh bench --redraw --out evidence/26/bench.md");
    }
    // It measured nothing: no table was written beside the CSV.
    assert!(!out.exists(), "--redraw wrote a table: it must only draw");
}
