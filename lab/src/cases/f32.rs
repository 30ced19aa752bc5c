//! F32 — probe a store before trusting its conditional writes. Several
//! writers read the same version, all reach the point where a write can
//! be interrupted, then all write conditional on that version. The
//! reference (compare and write in one statement) lets one through; a
//! store that checks and then writes with nothing held between lets every
//! one through, and so does one that ignores the condition: S3-compatible
//! servers have shipped both. On such a store a stale holder's conditional
//! write that races a newer holder's gets through as well, claiming first
//! or not.

use super::{Case, Lab};
use crate::error::Result;
use crate::object::probe::{probe, KEY, WRITERS};
use crate::object::{ObjectStore, Server};
use crate::transcript::Transcript;

/// The case.
pub const CASE: Case = Case { id: "F32", title: |_| "先探一探：并发的条件写入有几个成功".into(), run, mode: None, modes: &[], needs: &[] };

fn run(lab: &Lab, t: &mut Transcript) -> Result<()> {
    t.note(format!("探针：{WRITERS} 个写入者读到同一个 version，都走到各自可以被打断的那一步，然后一起以这个 version 为条件写入"));
    let mut accepted = Vec::new();
    for server in Server::ALL {
        lab.reset()?;
        ObjectStore::reset(KEY, "probe")?;
        let n = probe(server)?;
        t.note(format!("{}：{n} 个被接受", server.name()));
        accepted.push(n);
    }
    t.check_eq_shown("原子的存储（比较和写入在同一条语句里）：只接受一个", format!("1 of {WRITERS}"), format!("{} of {WRITERS}", accepted[0]));
    t.exposes(accepted[1] > 1, "先检查、再写入、中间什么都不拿着的存储：不止一个被接受", || format!("{} of {WRITERS}", accepted[1]));
    t.exposes(accepted[2] == WRITERS, "不看条件的存储：全部被接受", || format!("{} of {WRITERS}", accepted[2]));
    Ok(())
}
