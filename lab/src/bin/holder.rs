//! The holder process: one instance of the report job. Thin: parse the
//! parameters, validate them (exit 2), run [`lab::holder::hold`], exit
//! with its status.

use clap::Parser;
use lab::holder::{self, HolderArgs};

fn main() {
    let args = HolderArgs::parse();
    if let Err(e) = args.validate() {
        eprintln!("holder: {e}");
        std::process::exit(2);
    }
    match holder::hold(&args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("holder {}: {}", args.holder, lab::error::chain(e.as_ref()));
            std::process::exit(1);
        }
    }
}
