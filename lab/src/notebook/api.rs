//! The notebook's calls: the cases a page may run and their parameters,
//! a run, a stop, and a run's history page.

use super::{files, respond_text, Notebook};
use std::io::Read;
use crate::cases::{self, Case};
use crate::vocabulary::FenceMode;
use serde::Deserialize;
use serde_json::json;

/// What a page asks to run: a case (the default), a short chaos run, the
/// model, a `try` exercise or a small bench; only values that
/// `./run.sh help` offers, and only the fields of the command asked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAsked {
    /// `case` (when absent), `chaos`, `model`, `try` or `bench`.
    #[serde(default)]
    pub command: Option<String>,
    /// The case id, `F4`.
    #[serde(default)]
    pub case: Option<String>,
    /// The resource mode (`unfenced`, …): a case's that takes one, or the
    /// chaos run's (`all` too).
    #[serde(default)]
    pub mode: Option<String>,
    /// F4/F5: pause before the deadline check instead of after it.
    #[serde(default)]
    pub pause_before_check: bool,
    /// The chaos run's seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The chaos run's seconds per mode.
    #[serde(default)]
    pub duration_s: Option<u32>,
    /// The chaos run's holders.
    #[serde(default)]
    pub holders: Option<u16>,
    /// The `try` exercise: a mutation's name.
    #[serde(default)]
    pub name: Option<String>,
    /// F3: how many threads race for the lease.
    #[serde(default)]
    pub threads: Option<u16>,
}

/// The longest chaos run a page may start, per mode: the short seeded form
/// (the book's own run is 120 s, from the terminal).
pub const CHAOS_MAX_S: u32 = 30;

/// Answers `api/<call>`.
pub fn answer(notebook: &Notebook, call: &str, mut request: tiny_http::Request) {
    let get = *request.method() == tiny_http::Method::Get;
    match (call, get) {
        ("cases", true) => {
            let cases: Vec<_> = cases::ALL.iter().map(|c| describe(c)).collect();
            let modes: Vec<&str> = FenceMode::ALL.iter().map(|m| m.cli_name()).collect();
            respond_json(request, 200, &json!({ "cases": cases, "modes": modes, "chaos_max_s": CHAOS_MAX_S, "threads": crate::params::RACERS, "max_threads": crate::params::MAX_RACERS }));
        }
        ("run", false) => {
            let mut body = String::new();
            if request.as_reader().take(4096).read_to_string(&mut body).is_err() {
                return respond_text(request, 400, "refused: the request's body is not text");
            }
            match arguments(&body) {
                Ok((args, run_name)) => notebook.runs.start(args, run_name, request),
                Err(why) => respond_text(request, 400, &format!("refused: {why}")),
            }
        }
        ("stop", false) => match notebook.runs.stop() {
            Ok(text) => respond_text(request, 200, &text),
            Err(text) => respond_text(request, 409, &text),
        },
        (history, true) if history.starts_with("history/") => files::history(&history["history/".len()..], request),
        _ => respond_text(request, 404, &format!("no call {call:?} ({})", if get { "GET" } else { "POST" })),
    }
}

/// A case as a page's cell shows it: its command and the parameters it takes.
fn describe(case: &Case) -> serde_json::Value {
    let modes: Vec<&str> = case.modes.iter().map(|m| m.cli_name()).collect();
    json!({
        "id": case.id,
        "title": (case.title)(&cases::CaseOptions::default()),
        "mode": case.mode.map(FenceMode::cli_name),
        "modes": modes,
        "pause_before_check": case.takes_pause_before_check(),
        "threads": case.takes_threads(),
    })
}

/// The `lab` arguments for what a page asked, and the run's name (its
/// snapshot's, for a case): refused unless every value is one it takes.
pub fn arguments(body: &str) -> Result<(Vec<String>, String), String> {
    let asked: RunAsked = serde_json::from_str(body).map_err(|e| format!("the run asked for is not understood: {e}"))?;
    let command = asked.command.clone().unwrap_or_else(|| "case".into());
    // Each command's fields; any other field set is refused.
    let allowed: &[&str] = match command.as_str() {
        "case" => &["case", "mode", "pause_before_check", "threads"],
        "chaos" => &["seed", "duration_s", "mode", "holders"],
        "try" => &["name"],
        "model" | "bench" => &[],
        other => return Err(format!("no command {other:?}: a page runs a case, chaos, model, try or bench")),
    };
    let set = [
        ("case", asked.case.is_some()),
        ("mode", asked.mode.is_some()),
        ("pause_before_check", asked.pause_before_check),
        ("seed", asked.seed.is_some()),
        ("duration_s", asked.duration_s.is_some()),
        ("holders", asked.holders.is_some()),
        ("name", asked.name.is_some()),
        ("threads", asked.threads.is_some()),
    ];
    if let Some((field, _)) = set.iter().find(|(field, on)| *on && !allowed.contains(field)) {
        return Err(format!("{command} takes no {field}"));
    }
    match command.as_str() {
        "case" => case_arguments(&asked),
        "chaos" => {
            let mut args = vec!["chaos".to_owned()];
            if let Some(seed) = asked.seed {
                args.extend(["--seed".into(), seed.to_string()]);
            }
            let seconds = asked.duration_s.unwrap_or(10);
            if !(1..=CHAOS_MAX_S).contains(&seconds) {
                return Err(format!("a chaos run from a page lasts 1 to {CHAOS_MAX_S} s per mode, not {seconds}"));
            }
            args.extend(["--duration".into(), format!("{seconds}s")]);
            if let Some(mode) = &asked.mode {
                if mode != "all" && !FenceMode::ALL.iter().any(|m| m.cli_name() == mode) {
                    return Err(format!("no resource mode {mode:?}"));
                }
                args.extend(["--mode".into(), mode.clone()]);
            }
            if let Some(holders) = asked.holders {
                if !(2..=crate::chaos::workload::MAX_HOLDERS as u16).contains(&holders) {
                    return Err(format!("a chaos run has 2 to {} holders, not {holders}", crate::chaos::workload::MAX_HOLDERS));
                }
                args.extend(["--holders".into(), holders.to_string()]);
            }
            Ok((args, "chaos".into()))
        }
        "try" => {
            let name = asked.name.clone().unwrap_or_default();
            let mutation = crate::mutants::find(&name).ok_or_else(|| format!("no exercise {name:?}: `./run.sh try` lists them"))?;
            Ok((vec!["try".into(), mutation.name.to_owned()], format!("try-{}", mutation.name)))
        }
        "model" => Ok((vec!["model".into()], "model".into())),
        // Its table and charts beside the reader's, not over them; the
        // short grid of chapter 22's own command (the whole grid is
        // minutes of warming up ten thousand scopes).
        _ => {
            let out = crate::paths::root().join("target/lab/bench-notebook.md").display().to_string();
            Ok((["bench", "--seconds", "1", "--runs", "1", "--writers", "1,16", "--scopes", "1,1000", "--out", &out].map(str::to_owned).to_vec(), "bench".into()))
        }
    }
}

/// [`arguments`] for a case.
fn case_arguments(asked: &RunAsked) -> Result<(Vec<String>, String), String> {
    let id = asked.case.clone().unwrap_or_default();
    let case = cases::ALL.iter().copied().find(|c| c.id == id).ok_or_else(|| format!("no case {id:?}: the cases are F1 … F{}", cases::ALL.len()))?;
    let mut args = vec!["run".to_owned(), case.id.to_owned()];
    let mut options = cases::CaseOptions::default();
    if let Some(name) = &asked.mode {
        let mode = case.modes.iter().copied().find(|m| m.cli_name() == name.as_str()).ok_or_else(|| {
            let takes: Vec<&str> = case.modes.iter().map(|m| m.cli_name()).collect();
            if takes.is_empty() { format!("{} takes no mode", case.id) } else { format!("{} takes --mode {} only, not {name:?}", case.id, takes.join(", ")) }
        })?;
        options.mode = Some(mode);
        args.extend(["--mode".to_owned(), name.clone()]);
    }
    if asked.pause_before_check {
        if !case.takes_pause_before_check() {
            return Err(format!("{} takes no --pause-before-check", case.id));
        }
        options.pause_before_check = true;
        args.push("--pause-before-check".into());
    }
    if let Some(threads) = asked.threads {
        if !case.takes_threads() {
            return Err(format!("{} takes no --threads", case.id));
        }
        if !(2..=crate::params::MAX_RACERS).contains(&threads) {
            return Err(format!("--threads is 2 to {}, not {threads}", crate::params::MAX_RACERS));
        }
        options.threads = threads.into();
        args.extend(["--threads".into(), threads.to_string()]);
    }
    Ok((args, case.run_name(&options)))
}

/// A JSON answer with `status`.
pub fn respond_json(request: tiny_http::Request, status: u16, value: &serde_json::Value) {
    super::respond(request, status, "application/json", value.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::arguments;

    /// Only case ids and values the lab knows become a run.
    #[test]
    fn only_known_cases_and_values_run() {
        assert_eq!(arguments(r#"{"case":"F4","mode":"unfenced"}"#).unwrap(), (vec!["run".into(), "F4".into(), "--mode".into(), "unfenced".into()], "F4-unfenced".into()));
        assert_eq!(arguments(r#"{"case":"F1"}"#).unwrap().1, "F1");
        assert!(arguments(r#"{"case":"F99"}"#).unwrap_err().contains("no case"));
        assert!(arguments(r#"{"case":"F4","mode":"rm -rf"}"#).unwrap_err().contains("takes --mode"));
        assert!(arguments(r#"{"case":"F1","mode":"unfenced"}"#).unwrap_err().contains("F1 takes no mode"));
        assert!(arguments(r#"{"case":"F1","pause_before_check":true}"#).unwrap_err().contains("no --pause-before-check"));
        assert!(arguments(r#"{"case":"F6","pause_before_check":true}"#).unwrap_err().contains("F6 takes no --pause-before-check"));
        assert_eq!(arguments(r#"{"case":"F5","pause_before_check":true}"#).unwrap().1, "F5-pause-before-check");
        assert!(arguments(r#"{"case":"F4","extra":1}"#).unwrap_err().contains("unknown field"));
        assert!(arguments("F4; reboot").is_err());
        assert_eq!(arguments(r#"{"command":"chaos","seed":9,"duration_s":5,"mode":"unfenced"}"#).unwrap().0.join(" "), "chaos --seed 9 --duration 5s --mode unfenced");
        assert!(arguments(r#"{"command":"chaos","duration_s":3600}"#).unwrap_err().contains("1 to 30 s"));
        assert!(arguments(r#"{"command":"chaos","mode":"--out=/etc/x"}"#).unwrap_err().contains("no resource mode"));
        assert!(arguments(r#"{"command":"chaos","name":"x"}"#).unwrap_err().contains("chaos takes no name"));
        assert_eq!(arguments(r#"{"command":"try","name":"fence-accepts-any-token"}"#).unwrap().0, ["try", "fence-accepts-any-token"]);
        assert!(arguments(r#"{"command":"try","name":"../x"}"#).unwrap_err().contains("no exercise"));
        assert!(arguments(r#"{"command":"bench"}"#).unwrap().0.join(" ").starts_with("bench --seconds 1 --runs 1 --writers 1,16 --scopes 1,1000 --out /"));
        assert_eq!(arguments(r#"{"case":"F3","threads":4}"#).unwrap(), (vec!["run".into(), "F3".into(), "--threads".into(), "4".into()], "F3-threads-4".into()));
        assert!(arguments(r#"{"case":"F4","threads":4}"#).unwrap_err().contains("F4 takes no --threads"));
        assert!(arguments(r#"{"case":"F3","threads":9999}"#).unwrap_err().contains("--threads is 2 to"));
        assert!(arguments(r#"{"command":"rm"}"#).unwrap_err().contains("no command"));
    }
}
