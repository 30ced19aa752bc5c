//! The snapshot test's command line (`cargo test --test cases -- …`), read
//! as libtest reads its own, since that binary has its own `main`
//! (harness = false) and cargo passes it libtest's flags as they were
//! typed: `--test-threads 1` is a flag and its value, not a filter "1";
//! `--skip F14` leaves F14 out; `--list` lists.
//!
//! One difference, on purpose: a filter or a skip names a case or a
//! variant whole (`F4`, `F4-unfenced`, in any case), where libtest matches
//! substrings, because `F1` is a prefix of F10–F19. `--exact` is therefore
//! what happens anyway. A skip of a case skips its variants too.
//!
//! Another: a filter that names no case or variant is refused
//! ([`TestArgs::runs_nothing`]), where libtest runs nothing and passes.

/// libtest's flags that take a value (`--test-threads 2` or `--test-threads=2`).
const WITH_VALUE: [&str; 7] = ["--test-threads", "--skip", "--color", "--format", "--logfile", "--shuffle-seed", "-Z"];

/// libtest's flags that take none.
const ALONE: [&str; 16] = [
    "--list",
    "--exact",
    "-q",
    "--quiet",
    "--nocapture",
    "--show-output",
    "--include-ignored",
    "--ignored",
    "--test",
    "--bench",
    "--report-time",
    "--ensure-time",
    "--shuffle",
    "--force-run-in-process",
    "--exclude-should-panic",
    "--no-capture",
];

/// What the command line asks of the snapshot test.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestArgs {
    /// Cases and variants named to run; none: every case and variant.
    pub filters: Vec<String>,
    /// Cases and variants named to leave out (`--skip`).
    pub skips: Vec<String>,
    /// `--list`: name what would run, run nothing.
    pub list: bool,
    /// `--ignored` or `--bench`: only ignored tests, or benchmarks, of
    /// which this binary has none.
    pub none_of_these: bool,
    /// `--help`: say how to call it.
    pub help: bool,
}

impl TestArgs {
    /// Reads the arguments after `--`; a flag libtest does not know, or
    /// one missing its value, is refused as libtest refuses it.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<TestArgs, String> {
        let mut parsed = TestArgs::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if !arg.starts_with('-') {
                parsed.filters.push(arg);
                continue;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg.clone(), None),
            };
            if WITH_VALUE.contains(&flag.as_str()) {
                let value = match inline {
                    Some(value) => value,
                    None => args.next().ok_or_else(|| format!("Argument to option '{}' missing", flag.trim_start_matches('-')))?,
                };
                if flag == "--skip" {
                    parsed.skips.push(value);
                }
            } else if inline.is_some() || !(ALONE.contains(&flag.as_str()) || flag == "-h" || flag == "--help") {
                return Err(format!("Unrecognized option: '{}'", arg.trim_start_matches('-')));
            } else {
                match flag.as_str() {
                    "--list" => parsed.list = true,
                    "--ignored" | "--bench" => parsed.none_of_these = true,
                    "-h" | "--help" => parsed.help = true,
                    _ => {}
                }
            }
        }
        Ok(parsed)
    }

    /// Whether the run named `name` (a case id, or a variant's name) of
    /// case `case` runs: named by a filter, or every one when there is no
    /// filter; and neither it nor its case skipped.
    pub fn selects(&self, name: &str, case: &str) -> bool {
        let is = |pattern: &String| pattern.eq_ignore_ascii_case(name);
        let wanted = self.filters.is_empty() || self.filters.iter().any(is);
        let skipped = self.skips.iter().any(|s| is(s) || s.eq_ignore_ascii_case(case));
        wanted && !skipped && !self.none_of_these
    }

    /// Why a run of this command line would check nothing it was asked
    /// to, if so: a filter that names no case or variant (a typo, or a
    /// test of another binary, since a bare `cargo test FILTER` passes
    /// FILTER to every test binary, this one included), or filters and
    /// skips that leave nothing. A run of nothing would pass on nothing,
    /// so the snapshot test refuses it. `runs`: every run there is, its
    /// name (a case id or a variant's name) and its case's id.
    /// `--ignored` and `--bench` are no such request: they ask for kinds
    /// of test this binary has none of, and get none, as from any libtest
    /// binary.
    pub fn runs_nothing(&self, runs: &[(String, &str)]) -> Option<String> {
        if self.none_of_these {
            return None;
        }
        let unmatched: Vec<&String> = self.filters.iter().filter(|f| !runs.iter().any(|(name, _)| name.eq_ignore_ascii_case(f))).collect();
        if unmatched.is_empty() && runs.iter().any(|(name, case)| self.selects(name, case)) {
            return None;
        }
        let names = |variants: bool| runs.iter().filter(|(name, case)| (name != case) == variants).map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(" ");
        let why = if unmatched.is_empty() {
            format!("the filters {:?} with --skip {:?} leave no case or variant to run", self.filters, self.skips)
        } else {
            let asked: Vec<String> = unmatched.iter().map(|f| format!("{f:?}")).collect();
            format!(
                "the filter {} names no case or variant (a bare `cargo test FILTER` passes FILTER to every test binary, this one too: \
                 name the binary, `cargo test --test NAME FILTER` or `--lib`)",
                asked.join(", ")
            )
        };
        Some(format!(
            "{why}; the cases are {}; the variants are {} (whole names, any case; `cargo test --test cases -- --list` lists them)",
            names(false),
            names(true)
        ))
    }
}

/// How to call the snapshot test.
pub const USAGE: &str = "usage: cargo test --test cases -- [CASE|VARIANT ...] [--skip CASE|VARIANT ...] [--list]
CASE is F1 … F28, VARIANT a locked variant such as F4-unfenced (whole names, any case);
libtest's other flags (--test-threads N, --exact, -q, --nocapture, --color X, --format X, -Z X, …) are accepted and change nothing here.";

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments after `cargo test --test cases --`.
    fn parse(line: &str) -> Result<TestArgs, String> {
        TestArgs::parse(line.split_whitespace().map(str::to_owned))
    }

    /// The cases and variants a command line selects.
    fn selected(line: &str) -> Vec<String> {
        let args = parse(line).unwrap();
        let cases = crate::cases::ALL.iter().filter(|c| args.selects(c.id, c.id)).map(|c| c.id.to_owned());
        let variants = crate::cases::variants().into_iter().filter(|v| args.selects(&v.name(), v.case.id)).map(|v| v.name());
        cases.chain(variants).collect()
    }

    /// Every case and every variant.
    fn everything() -> Vec<String> {
        selected("")
    }

    /// A flag's value is not a filter: `--test-threads 1` runs everything.
    #[test]
    fn test_threads_selects_every_case() {
        assert_eq!(everything().len(), crate::cases::ALL.len() + crate::cases::variants().len());
        assert_eq!(selected("--test-threads 1"), everything());
        assert_eq!(selected("--test-threads=1 -q --nocapture --color never --format terse -Z unstable-options"), everything());
        assert_eq!(selected("--exact --include-ignored --show-output --logfile out.txt"), everything());
    }

    /// `--skip F14` leaves out F14 only; a skipped case takes its variants along.
    #[test]
    fn skip_leaves_out_what_it_names() {
        let without = selected("--skip F14");
        assert_eq!(without.len(), everything().len() - 1);
        assert!(!without.contains(&"F14".to_owned()));
        let without_f4 = selected("--skip f4");
        assert!(without_f4.iter().all(|n| n != "F4" && !n.starts_with("F4-")), "{without_f4:?}");
        assert!(without_f4.contains(&"F5".to_owned()) && without_f4.contains(&"F5-pause-before-check".to_owned()));
        assert_eq!(selected("F4 F14 --skip F14"), ["F4"]);
    }

    /// Filters name cases and variants whole, in any case: F1 is not F10.
    #[test]
    fn filters_name_whole_cases() {
        assert_eq!(selected("F1 f4 F4-unfenced --exact"), ["F1", "F4", "F4-unfenced"]);
        assert_eq!(selected("book"), Vec::<String>::new());
        assert_eq!(selected("--ignored"), Vec::<String>::new());
    }

    /// What `runs_nothing` is given: every case and variant, with its case.
    fn runs() -> Vec<(String, &'static str)> {
        let cases = crate::cases::ALL.iter().map(|c| (c.id.to_owned(), c.id));
        cases.chain(crate::cases::variants().into_iter().map(|v| (v.name(), v.case.id))).collect()
    }

    /// A filter that names nothing, or filters and skips that leave
    /// nothing, would run nothing and pass: refused, naming the filter
    /// and the cases and variants there are. What names something runs.
    #[test]
    fn a_selection_of_nothing_is_refused() {
        let why = parse("F999").unwrap().runs_nothing(&runs()).expect("F999 names no case, and was not refused");
        assert!(why.contains("\"F999\"") && why.contains("F1 F2 F3") && why.contains(&format!("{};", crate::cases::ALL.last().expect("cases").id)) && why.contains("F4-unfenced"), "{why}");
        let typo = parse("F4 F4-unfenced F4-unfencd").unwrap().runs_nothing(&runs()).expect("a typo among good names");
        assert!(typo.contains("\"F4-unfencd\"") && !typo.contains("\"F4\""), "{typo}");
        let left = parse("F4 --skip F4").unwrap().runs_nothing(&runs()).expect("F4 skipped leaves nothing");
        assert!(left.contains("leave no case or variant"), "{left}");
        for line in ["", "F4", "f4-UNFENCED --exact", "--skip F14", "--test-threads 1", "--ignored"] {
            assert_eq!(parse(line).unwrap().runs_nothing(&runs()), None, "{line:?} was refused");
        }
    }

    /// `--list` lists; unknown flags and missing values are refused.
    #[test]
    fn list_and_refusals() {
        assert!(parse("--list").unwrap().list);
        assert!(parse("-h").unwrap().help);
        assert_eq!(parse("--bogus"), Err("Unrecognized option: 'bogus'".into()));
        assert_eq!(parse("--list=yes"), Err("Unrecognized option: 'list=yes'".into()));
        assert_eq!(parse("F4 --skip"), Err("Argument to option 'skip' missing".into()));
    }
}
