//! The notebook's calls: the cases a page may run and their parameters,
//! a run, a stop, and a run's history page.

use super::{files, respond_text, Notebook};
use std::io::Read;
use crate::cases::{self, Case};
use crate::vocabulary::FenceMode;
use serde::Deserialize;
use serde_json::json;

/// What a page asks to run: only what `./run.sh help` offers for the case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAsked {
    /// The case id, `F4`.
    pub case: String,
    /// The resource mode (`unfenced`, …), for a case that takes one.
    #[serde(default)]
    pub mode: Option<String>,
    /// F4/F5: pause before the deadline check instead of after it.
    #[serde(default)]
    pub pause_before_check: bool,
}

/// Answers `api/<call>`.
pub fn answer(notebook: &Notebook, call: &str, mut request: tiny_http::Request) {
    let get = *request.method() == tiny_http::Method::Get;
    match (call, get) {
        ("cases", true) => {
            let cases: Vec<_> = cases::ALL.iter().map(|c| describe(c)).collect();
            respond_json(request, 200, &json!({ "cases": cases }));
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
        "pause_before_check": case.mode.is_some(),
    })
}

/// The `lab run` arguments for what a page asked, and the run's name (its
/// snapshot's): refused unless every value is one the case takes.
pub fn arguments(body: &str) -> Result<(Vec<String>, String), String> {
    let asked: RunAsked = serde_json::from_str(body).map_err(|e| format!("the run asked for is not understood: {e}"))?;
    let case = cases::ALL.iter().copied().find(|c| c.id == asked.case).ok_or_else(|| format!("no case {:?}: the cases are F1 … F{}", asked.case, cases::ALL.len()))?;
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
        if case.mode.is_none() {
            return Err(format!("{} takes no --pause-before-check", case.id));
        }
        options.pause_before_check = true;
        args.push("--pause-before-check".into());
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
        assert!(arguments(r#"{"case":"F4","extra":1}"#).unwrap_err().contains("unknown field"));
        assert!(arguments("F4; reboot").is_err());
    }
}
