//! The files a measured run leaves for the book (`lab chaos`, `lab bench`):
//! a table, what goes beside it (a CSV), and one chart per resource mode
//! named after the table (`chaos-fenced-scope.mmd` beside `chaos.md`),
//! because mermaid's xychart draws no legend and so one mode a chart. Each
//! file is written whole and then renamed into place: a reader (or the
//! book's build) never finds half a table.

use crate::error::{Result, ResultExt};
use crate::paths;
use crate::resource::FenceMode;
use std::path::{Path, PathBuf};

/// Every file of a report, at its place: `table` at `out`, each of
/// `beside` (an extension and a text) next to it with that extension, and
/// each chart as `<stem of out>-<mode>.mmd` next to it.
pub fn placed(out: &Path, table: String, beside: Vec<(&str, String)>, charts: Vec<(FenceMode, String)>) -> Result<Vec<(PathBuf, String)>> {
    let stem = out.file_stem().ok_or_else(|| format!("{} names no file to write the table to", out.display()))?.to_string_lossy().into_owned();
    let mut files = vec![(out.to_path_buf(), table)];
    files.extend(beside.into_iter().map(|(extension, text)| (out.with_extension(extension), text)));
    files.extend(charts.into_iter().map(|(mode, chart)| (out.with_file_name(format!("{stem}-{}.mmd", mode.cli_name())), chart)));
    Ok(files)
}

/// Writes the report's files (see [`placed`]), each whole.
pub fn write(out: &Path, table: String, beside: Vec<(&str, String)>, charts: Vec<(FenceMode, String)>) -> Result<()> {
    for (path, text) in placed(out, table, beside, charts)? {
        paths::write_whole(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table where asked, the CSV beside it, a chart per mode named
    /// after the table; a place that names no file is refused.
    #[test]
    fn files_are_placed_beside_the_table() {
        let files = placed(Path::new("/e/bench.md"), "t".into(), vec![("csv", "c".into())], vec![(FenceMode::FencedScopeCte, "m".into())]).unwrap();
        let names: Vec<&str> = files.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(names, ["/e/bench.md", "/e/bench.csv", "/e/bench-fenced-scope-cte.mmd"]);
        assert!(placed(Path::new("/"), "t".into(), Vec::new(), Vec::new()).is_err());
    }
}
