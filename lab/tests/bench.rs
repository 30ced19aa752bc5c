//! `lab bench` cannot rot: a one-second run of every cell against a private
//! cluster must finish and write a table of the right shape. Its numbers are
//! never asserted: performance is the bench's output, not a test's verdict.

mod common;

use common::{assert_exit, leftovers, stderr, stdout, PrivateCluster};

/// The modes as the table names them, baseline first.
const MODES: [&str; 5] = ["unfenced", "fenced-row", "fenced-scope", "fenced-scope-cte", "fenced-scope-shared"];

/// A one-second, one-run bench writes the markdown and the CSV with every
/// cell once, every write accepted, the durability settings read from the
/// server, and leaves no server running.
#[test]
fn a_one_second_bench_writes_the_whole_table() {
    let cluster = PrivateCluster::new("bench");
    let out = cluster.dir.0.join("out").join("bench.md");
    let run = cluster.lab(&["bench", "--seconds", "1", "--runs", "1", "--out", out.to_str().unwrap()]);
    assert_exit(&run, 0, "lab bench --seconds 1 --runs 1");

    let md = std::fs::read_to_string(&out).unwrap();
    assert_eq!(stdout(&run), md, "stdout and the file must be the same table");
    for fact in ["核", "PostgreSQL 1", "fsync=", "synchronous_commit=", "`lab bench --seconds 1 --runs 1`"] {
        assert!(md.contains(fact), "the facts lack {fact:?}:\n{md}");
    }
    // The write table: one row per (scopes, writers, mode), in table order.
    let rows: Vec<Vec<&str>> = md
        .lines()
        .filter(|l| MODES.iter().any(|m| l.contains(&format!("| {m} |"))))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let mut expected = Vec::new();
    for scopes in ["1", "16"] {
        for writers in ["1", "4", "16"] {
            for mode in MODES {
                expected.push(format!("{scopes} {writers} {mode}"));
            }
        }
    }
    let seen: Vec<String> = rows.iter().map(|r| r[..3].join(" ")).collect();
    assert_eq!(seen, expected, "{md}");
    for row in &rows {
        assert_eq!(row.len(), 9, "a row of 9 columns: {row:?}");
        assert!(row[3].parse::<f64>().is_ok_and(|w| w > 0.0), "writes/s of {row:?}");
        assert!(row[4].ends_with('×'), "a ratio in {row:?}");
        assert!(row[5].ends_with("ms") && row[6].ends_with("ms"), "latencies in {row:?}");
        assert!(row[7].parse::<f64>().is_ok_and(|b| b > 0.0), "WAL bytes per write of {row:?}");
        assert_eq!(row[8], "0", "every write of the bench holds the current token and must be accepted: {row:?}");
    }
    assert!(rows.iter().filter(|r| r[2] == "unfenced").all(|r| r[4] == "1.00×"), "the baseline's ratio is 1");
    assert!(md.contains("| 16 |") && md.contains("尝试/秒"), "the acquire table is missing:\n{md}");
    // Issue 14's two targets, and issue 23's in each of the six cells.
    assert_eq!(md.matches("目标 ≥").count(), 2 + 6, "every target is reported:\n{md}");

    let csv = std::fs::read_to_string(out.with_extension("csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "kind,mode,writers,scopes,per_second,ratio_to_unfenced,p50_ms,p99_ms,wal_bytes_per_write,refused,granted");
    assert_eq!(lines.len(), 1 + expected.len() + 1, "{csv}");
    assert!(lines[1..=expected.len()].iter().all(|l| l.starts_with("write,") && l.split(',').count() == 11), "{csv}");
    assert!(lines.last().unwrap().starts_with("acquire,,16,"), "{csv}");

    // One figure per writer count: a bar per fenced mode and scope count
    // (two each), and the legend's swatch.
    for writers in ["1", "4", "16"] {
        let figure = std::fs::read_to_string(out.with_file_name(format!("bench-writers-{writers}.svg"))).unwrap();
        assert!(figure.starts_with("<svg ") && figure.contains(&format!("{writers} 个写入者")), "{figure}");
        for mode in ["FENCED_ROW", "FENCED_SCOPE", "FENCED_SCOPE_CTE", "FENCED_SCOPE_SHARED"] {
            assert_eq!(figure.matches(&format!("data-series=\"{mode}\"")).count(), 3, "{mode} in {figure}");
        }
    }
    // --redraw draws the same figures again from the CSV, measuring nothing.
    let figure = out.with_file_name("bench-writers-4.svg");
    let drawn = std::fs::read_to_string(&figure).unwrap();
    std::fs::remove_file(&figure).unwrap();
    assert_exit(&cluster.lab(&["bench", "--redraw", "--out", out.to_str().unwrap()]), 0, "lab bench --redraw");
    assert_eq!(std::fs::read_to_string(&figure).unwrap(), drawn, "the redrawn figure differs from the measured run's");

    // Progress: one line per group of cells (2 scope counts × 3 writer counts) and one for the acquires.
    assert!(stderr(&run).contains("[7/7]"), "no progress on stderr:\n{}", stderr(&run));
    // The bench started the cluster, so it stopped it again.
    assert_exit(&cluster.lab(&["cluster", "status"]), 1, "cluster status after the bench");
    let left = leftovers(cluster.dir.path());
    assert!(left.is_empty(), "the bench left processes behind:\n{}", left.join("\n"));
}
