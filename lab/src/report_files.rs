//! The files a measured run leaves for the book (`lab chaos`, `lab bench`):
//! a table, what goes beside it (bench's CSV; the chaos run's data,
//! `chaos.json`, is written by `chaos::report::write_files` before it calls
//! here), and its charts, each named after the table
//! (`chaos-fenced-scope.mmd` beside `chaos.md`, one per mode;
//! `bench-scopes-16.svg` beside `bench.md`, one per scope count). Each
//! file is written whole and then renamed into place: a reader (or the
//! book's build) never finds half a table.

use crate::error::{Result, ResultExt};
use crate::result_data::ResultData;
use crate::paths;
use std::path::{Path, PathBuf};

/// Every file of a report, at its place: `table` at `out`, each of
/// `beside` (an extension and a text) next to it with that extension, and
/// each chart (a name and a text) as `<stem of out>-<name>` next to it.
pub fn placed(out: &Path, table: String, beside: Vec<(&str, String)>, charts: Vec<(String, String)>) -> Result<Vec<(PathBuf, String)>> {
    let mut files = vec![(out.to_path_buf(), table)];
    files.extend(beside.into_iter().map(|(extension, text)| (out.with_extension(extension), text)));
    files.extend(charts_placed(out, charts)?);
    Ok(files)
}

/// Each chart (a name and a text) at `<stem of out>-<name>`, beside `out`.
pub fn charts_placed(out: &Path, charts: Vec<(String, String)>) -> Result<Vec<(PathBuf, String)>> {
    let stem = out.file_stem().ok_or_else(|| format!("{} names no file to write the table to", out.display()))?.to_string_lossy().into_owned();
    Ok(charts.into_iter().map(|(name, chart)| (out.with_file_name(format!("{stem}-{name}")), chart)).collect())
}

/// Writes files at their places, each whole.
pub fn write_all(files: Vec<(PathBuf, String)>) -> Result<()> {
    for (path, text) in files {
        paths::write_whole(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Writes the report's files (see [`placed`]), each whole.
pub fn write(out: &Path, table: String, beside: Vec<(&str, String)>, charts: Vec<(String, String)>) -> Result<()> {
    write_all(placed(out, table, beside, charts)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table where asked, the CSV beside it, a chart named after the
    /// table; a place that names no file is refused.
    #[test]
    fn files_are_placed_beside_the_table() {
        let files = placed(Path::new("/e/bench.md"), "t".into(), vec![("csv", "c".into())], vec![("scopes-16.svg".into(), "s".into())]).unwrap();
        let names: Vec<&str> = files.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(names, ["/e/bench.md", "/e/bench.csv", "/e/bench-scopes-16.svg"]);
        assert!(placed(Path::new("/"), "t".into(), Vec::new(), Vec::new()).is_err());
    }
}

/// Ends a judged run's report (`lab queue-chaos`, `lab queues`): writes
/// `table` at `out` and `data` beside it as JSON, unless some verdict had
/// nothing to judge (a run that tested nothing is no evidence), then prints
/// `expected` or what was unexpected. Whether every verdict was expected.
pub fn conclude<D: ResultData>(command: &str, out: Option<&Path>, table: &str, data: &D, unexpected: &[String], expected: &str) -> Result<bool> {
    if let Some(out) = out {
        if unexpected.iter().any(|u| u.contains("nothing to judge")) {
            println!("{command}: {} NOT written: a run with nothing to judge is no evidence", out.display());
        } else {
            paths::write_whole(out, table)?;
            data.write(&out.with_extension("json"))?;
            println!("{command}: table written to {}, its data beside it", out.display());
        }
    }
    if unexpected.is_empty() {
        println!("{command}: as expected: {expected}");
    } else {
        println!("{command}: UNEXPECTED: {}", unexpected.join("; "));
    }
    Ok(unexpected.is_empty())
}
