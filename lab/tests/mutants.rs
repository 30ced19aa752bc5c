//! Every guard is proven, and by one run each.
//!
//! A mutation is judged by breaking its guard in a scratch copy, running
//! the case the table names, and comparing the broken transcript with its
//! lock (`evidence/26/try/`). The book gives the reader that very judgement
//! for each mutation, `./run.sh try NAME`, which exits 0 only when the
//! mutant is killed by its own case and its broken run equals its lock —
//! the same verdict `lab mutants` prints per row. The book-commands test
//! runs every one of those commands, so the suite judges each mutant once,
//! there; this test holds the book to the table: every mutation has its
//! `try` command, promised to exit 0, on a page the book-commands test
//! runs, and no `try` command names a mutation the table lacks.
//! (`./run.sh mutants` runs the whole table in one go, for a developer.)

use lab::mutants::MUTATIONS;
use lab::suite::book::{chapters, commands};
use std::collections::BTreeMap;
use std::path::Path;

/// The mutations the book tries, with where.
fn tried_in_the_book() -> BTreeMap<String, Vec<String>> {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("book");
    let mut tried: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for chapter in chapters(&book).unwrap() {
        let text = std::fs::read_to_string(book.join(&chapter)).unwrap();
        for c in commands(&chapter, &text) {
            if let ["./run.sh", "try", name, ..] = c.line.split_whitespace().collect::<Vec<_>>().as_slice() {
                if !name.starts_with('#') {
                    assert_eq!(c.exit, 0, "{}: `{}` is promised to exit {}, not 0 (a killed mutant matching its lock)", c.at, c.line, c.exit);
                    tried.entry((*name).to_owned()).or_default().push(c.at.clone());
                }
            }
        }
    }
    tried
}

/// Every mutation of the table is tried by the book, and the book tries none other.
#[test]
fn every_mutation_is_judged_by_the_books_try_command() {
    let tried = tried_in_the_book();
    let missing: Vec<&str> = MUTATIONS.iter().map(|m| m.name).filter(|n| !tried.contains_key(*n)).collect();
    assert!(missing.is_empty(), "mutations the book never tries (so no test judges them): {missing:?}");
    let unknown: Vec<&String> = tried.keys().filter(|n| !MUTATIONS.iter().any(|m| m.name == n.as_str())).collect();
    assert!(unknown.is_empty(), "the book tries mutations the table does not have: {unknown:?}");
    println!("{} mutations, each judged by the book's `./run.sh try NAME`", MUTATIONS.len());
}
