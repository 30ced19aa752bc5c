//! `lab model --explore [MODE]`: stateright's Explorer, a web page that
//! shows the model's initial state and lets a reader take one step at a
//! time, see every property in every state, and follow a counterexample.
//!
//! It listens on 127.0.0.1 only, on a port the kernel picks free: the
//! listener that asks for it is closed just before the Explorer binds the
//! same port (stateright takes an address, not a socket). The page and its
//! scripts are served from the binary itself; nothing is fetched from
//! elsewhere. It runs until the process is stopped (Ctrl-C).

use super::{Config, LeaseModel};
use crate::error::Result;
use stateright::Model;
use std::net::{Ipv4Addr, TcpListener};

/// A free port on 127.0.0.1, as the kernel hands one out.
fn free_port() -> Result<u16> {
    let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(probe.local_addr()?.port())
}

/// Serves the Explorer for `config`; prints its address first. Returns
/// only if the server fails.
pub fn serve(config: Config) -> Result<()> {
    let port = free_port()?;
    println!("model: the Explorer of {} on {} at http://127.0.0.1:{port}/ (Ctrl-C to stop)", config.mode, config.store.name());
    // Flushed: a reader (or a test) waits for this line before it connects.
    use std::io::Write;
    std::io::stdout().flush()?;
    LeaseModel::new(config).checker().serve((Ipv4Addr::LOCALHOST, port));
    Err("the Explorer stopped".into())
}
