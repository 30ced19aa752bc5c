//! Who may ask the notebook anything: a request with the run's token, for
//! this server by name, from this server's own pages.

/// `Ok` for a request the notebook answers; otherwise the status and the
/// reason to send back.
pub fn admit(request: &tiny_http::Request, port: u16, token: &str) -> Result<(), (u16, String)> {
    let ours = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    let header = |name: &str| request.headers().iter().find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name)).map(|h| h.value.as_str().to_owned());
    // Host: a page of another site whose name was made to point at
    // 127.0.0.1 (DNS rebinding) sends its own name here.
    match header("Host") {
        Some(host) if ours.contains(&host) => {}
        Some(host) => return Err((421, format!("refused: this server is 127.0.0.1:{port}, not {host}"))),
        None => return Err((400, "refused: a request without a Host header".into())),
    }
    if !request.url().starts_with(&format!("/{token}/")) {
        return Err((403, "refused: the path lacks the notebook's token; open the address `./run.sh serve` printed".into()));
    }
    // Origin: sent by browsers with every POST and every cross-site
    // request; a page of another site names its own.
    let origin = header("Origin");
    if let Some(origin) = &origin {
        if !ours.iter().any(|o| *origin == format!("http://{o}")) {
            return Err((403, format!("refused: a request from {origin}, not from the notebook's own pages")));
        }
    }
    if *request.method() != tiny_http::Method::Get && origin.is_none() {
        return Err((403, "refused: a request that changes something must come from the notebook's own pages (no Origin header)".into()));
    }
    Ok(())
}
