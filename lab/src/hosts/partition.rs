//! The partition: the switch drops every frame between two groups of hosts.
//!
//! The cut is made where a real one happens, in the network between the
//! machines, not in the machines: one nftables table of the `bridge`
//! family in the switch's namespace, with a `drop` rule for each direction
//! of each pair of switch ports that must not talk. The hosts' own network
//! stacks are untouched; a host sends as before and hears nothing back, as
//! behind a failed link. Three other ways were not taken:
//!
//! - `reject` (or an ICMP error) would tell the sender at once that the
//!   path is closed: an error, where a partition is silence, and a client
//!   would give up in a millisecond instead of waiting out its timeouts;
//! - `ip link set … down` on a host's port makes the host's own kernel
//!   answer "network is unreachable" at once: an error again;
//! - detaching a host's port from the bridge can only isolate a host from
//!   everyone, while the cases need a host cut from one server and still
//!   reaching another (F17: the lease store gone, the resource there).
//!
//! Each partition is one nft transaction, so every cut of it starts at
//! the same moment, and healing ends all of them at once. A transaction
//! only adds, never deletes: on the machine the lab is measured on, an
//! `nft -f` whose transaction deletes anything (a rule, a set element, a
//! table) takes 17-19 ms, one that only adds 4-5 ms, nft's own start
//! included, and the cases cut and heal often. So each partition is a new
//! chain, put in front of the older ones, which are never reached again;
//! they all go with the switch's namespace.

use super::netns::Netns;
use crate::error::{Result, ResultExt};
use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;

/// The table's name in the switch.
pub const TABLE: &str = "lab26_partition";

/// The switch port a host is plugged into: `p-<host>`.
pub fn port(host: &str) -> String {
    format!("p-{host}")
}

// ANCHOR: ruleset
/// The nft script that makes the switch ready for partitions: the table
/// and its forward chain, which lets every frame through.
pub fn switch_table() -> String {
    format!("table bridge {TABLE} {{\n    chain forward {{\n        type filter hook forward priority 0; policy accept;\n    }}\n}}\n")
}

/// The nft script that puts partition number `generation` in force: a new
/// chain that drops every frame between each pair of `cuts` (host names),
/// in both directions, and lets every other frame through, and a jump to
/// it put first in the forward chain. With no cuts, it heals.
pub fn ruleset(generation: u32, cuts: &[(String, String)]) -> String {
    let chain = format!("partition_{generation}");
    let mut script = format!("add chain bridge {TABLE} {chain}\n");
    // The forward hook sees each frame once for each port it leaves by, so
    // a frame from one side reaches the other by no port at all. Only IPv4
    // is dropped: ARP still passes, so a sender's kernel keeps the other
    // host's address resolved and never concludes "no route to host" (what
    // a failed ARP makes it say after three seconds). To the hosts the cut
    // is silence only, as when the break lies beyond a router.
    for (a, b) in cuts {
        for (from, to) in [(a, b), (b, a)] {
            // drop, not reject: the sender hears nothing, as behind a broken link.
            script.push_str(&format!("add rule bridge {TABLE} {chain} iifname \"{}\" oifname \"{}\" ether type ip drop comment \"{from} -/-> {to}\"\n", port(from), port(to)));
        }
    }
    // Every other frame is let through here, its verdict final: the older
    // partitions' chains, behind this one, are never reached again.
    script.push_str(&format!("add rule bridge {TABLE} {chain} accept\n"));
    script.push_str(&format!("insert rule bridge {TABLE} forward jump {chain}\n"));
    script
}
// ANCHOR_END: ruleset

/// Loads `script` into the switch's namespace, as one transaction.
pub fn apply(switch: &Arc<Netns>, script: &str) -> Result<()> {
    // nft is started inside the switch: its netlink socket, and so the
    // rules, belong to the switch's namespace.
    let mut child = super::admin_command(switch, "nft", vec![])?
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft (nftables)")?;
    child.stdin.take().expect("piped").write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!(
            "nft -f - in the switch failed ({}): {}\nscript:\n{script}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pair is cut in both directions, by switch port, in a chain of
    /// the partition's own put first; no cut heals; nothing is deleted.
    #[test]
    fn a_cut_drops_both_directions_of_each_pair() {
        let script = ruleset(3, &[("holder-a".into(), "lease-p".into())]);
        assert!(script.starts_with("add chain bridge lab26_partition partition_3\n"), "{script}");
        assert!(script.contains("add rule bridge lab26_partition partition_3 iifname \"p-holder-a\" oifname \"p-lease-p\" ether type ip drop"), "{script}");
        assert!(script.contains("iifname \"p-lease-p\" oifname \"p-holder-a\" ether type ip drop"), "{script}");
        assert_eq!(script.matches(" drop ").count(), 2, "{script}");
        assert!(script.ends_with("partition_3 accept\ninsert rule bridge lab26_partition forward jump partition_3\n"), "{script}");
        assert_eq!(ruleset(4, &[]), "add chain bridge lab26_partition partition_4\nadd rule bridge lab26_partition partition_4 accept\ninsert rule bridge lab26_partition forward jump partition_4\n");
        assert!(!script.contains("delete") && !script.contains("flush"), "{script}");
    }
}
