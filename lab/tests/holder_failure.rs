//! A holder that fails is reported with everything needed to understand it:
//! its argv, its exit status, its stderr and the server log's path — never
//! a hang. (A binary of its own: it points LAB_PORT, which children inherit,
//! at a port where nothing listens.)

use lab::holder::{HolderArgs, WaitPoint};
use lab::holder_guard::HolderGuard;
use std::net::TcpListener;
use std::path::Path;

/// The holder cannot reach the database: the parent's error shows why.
#[test]
fn a_failing_holder_is_reported_with_argv_status_and_stderr() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::env::set_var("LAB_PORT", port.to_string());
    let args = HolderArgs { waits: vec![WaitPoint::BeforeWrite], ..HolderArgs::new("holder-a", "rows=200(A)") };
    let mut holder = HolderGuard::spawn(Path::new(env!("CARGO_BIN_EXE_holder")), &args).unwrap();
    let err = holder.next_step().expect_err("a holder without a database prints no protocol line").to_string();
    for want in [
        "holder-a ended its output early",
        "argv: holder --lease report-job --holder holder-a --ttl-ms 1500",
        // Said once: the code, not `ExitStatus`'s own "exit status: 1".
        "\nexit status: 1\n",
        &format!("/server/socket/.s.PGSQL.{port} (database lease26)"),
        "server log: ",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}
