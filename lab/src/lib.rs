//! # The lease + fencing lab
//!
//! A daily report job runs as several instances; a lease table in PostgreSQL
//! lets one of them work at a time, and a fencing token issued with every
//! acquire lets the protected resource refuse a holder that paused past its
//! lease. This crate runs the experiments (cases F1–F9, and F10–F34 beyond
//! the article) against a real, throw-away PostgreSQL cluster and prints
//! their transcripts.
//!
//! # Where a number is born
//!
//! Every number the book shows is measured once, by a run, and kept as
//! data; everything a reader sees is drawn from that data, and nothing
//! reads a number back out of text:
//!
//! ```text
//!  a run: lab run, lab chaos, lab model, lab lease-stores, lab bench
//!    │  reads the database and the processes (never a literal)
//!    ▼
//!  data: output.json, chaos.json, model.json, model-mutants.json,
//!        lease-stores.json, bench.csv, history/*.jsonl
//!    │  one reader each ([`result_data`] lists them)
//!    ├──► what a reader looks at: the transcript, the Markdown tables,
//!    │    the charts, the history pages (drawn from the data)
//!    ├──► the book's facts: `lab facts` → evidence/26/facts/*.md, which
//!    │    the chapters include by anchor (a missing field is an error)
//!    └──► the tests: a table is what its data draws; the checker judges
//!         a history's lines again; the facts are what the data gives now
//! ```
//!
//! # Layout
//!
//! The map is also the order of the layers: a module uses only modules
//! listed above it, never one below (`tests/layers.rs` checks this), so the
//! crate has no cycle and reads from the bottom up.
//!
//! Process-wide ground:
//! - [`error`]: the crate's one error type, with context.
//! - [`vocabulary`]: the lab's words, one type each (resource mode, lease
//!   store, fault kind, a parent's act, a call and its outcome, a write
//!   attempt, the checker's verdict), free of clap and of servers.
//! - [`arg_values`]: how command lines spell those words (clap's value
//!   parsers): the command lines' edge, the only place clap meets them.
//! - [`result_data`]: results as JSON data beside the human files, each
//!   format with its one reader: what the book's facts and tables read.
//! - [`paths`]: where things live: the project root, `target/lab`, the
//!   evidence, and the cluster's folder (moved under
//!   `/var/lib/lease-fencing-lab` when the server account cannot reach the
//!   checkout).
//! - [`safe_dir`]: folders no other account can have placed first: a
//!   trusted path checked from `/`, descriptors and `O_NOFOLLOW` inside,
//!   and the marker without which the lab neither uses nor deletes a folder.
//! - [`interrupt`]: Ctrl-C and friends: the one place that knows a stop
//!   signal arrived; it stops the holders and runs registered cleanups.
//! - [`poll`]: waiting for a state by asking for it, with a bound.
//! - [`latch`]: the one-shot latch the cases use to force interleavings.
//! - [`stats`]: the arithmetic on measurements, one home each: a duration
//!   in milliseconds, a median, a quantile by nearest rank.
//! - [`sysinfo`]: facts of the machine and its processes from `/proc`:
//!   processors, kernel, load, the file system under a folder, and a
//!   process's state and start time (`/proc/<pid>/stat`).
//! - [`owner`]: who started a server the lab runs, `b3-26` or the etcd
//!   cluster (a run, named by pid and start time, or the reader), so that
//!   the next run ends what a killed one left behind.
//! - [`events`]: what the parent did to a holder (SIGSTOP, SIGCONT,
//!   SIGKILL), stamped with the wall clock, for the pictures of a run.
//! - [`params`]: the article's parameters (TTL, margin, renewal period,
//!   observation window, names), one home with a why for each.
//!
//! Machines and the network between them:
//! - [`hosts`]: separate network hosts on one machine (a Linux network
//!   namespace each, plugged into a virtual switch, each with its address
//!   on a private subnet), the servers and holders started inside them,
//!   and the partitions between them: the switch drops every frame
//!   between two groups of hosts, silently, until healed (F17–F19).
//! - [`etcd_client`]: the client of etcd's JSON gateway and its typed
//!   replies, with which the lab talks to etcd members on any of them (it
//!   sits below the servers: the etcd cluster's lifecycle asks it for the
//!   leader, and the etcd lease store makes its calls with it).
//!
//! The database server:
//! - [`cluster`]: the `b3-26` cluster's lifecycle (binaries, initdb, start,
//!   stop, immediate stop), its credentials, and a run's ownership of it;
//!   `cluster/replica.rs`: F14's lease store on a primary and its streaming
//!   standby beside it (the same lifecycle, twice, plus a base backup and a
//!   promotion), tied to the run; [`cluster::etcd`]: the second lease
//!   store's server, the three-member etcd cluster `etcd-26` (lifecycle,
//!   members, status, authentication on).
//! - [`db`]: how every client reaches a server (as the role `lab`), the
//!   schema each case starts from, and the superuser's setup;
//!   `db/replication.rs`: F14's replication setup, fault and checks in SQL;
//!   `db/emptying.rs`: a reset that empties the tables when the catalogs
//!   say the schema is still the one loaded.
//!
//! Faults injected from outside, the way a real one happens:
//! - [`fault`]: `DelayProxy`, a TCP proxy on the wire between a holder and
//!   the resource's database that holds a request in flight (F12) or delays
//!   every chunk for a span (a holder slot's link in the chaos run);
//!   [`fault::clock`]: libfaketime on a process (a slow clock for a holder,
//!   a jumping one for the server: F13).
//!
//! The lease side (database `lease26`):
//! - [`lease`]: `LeaseStore` (acquire, renew, release: single autocommit
//!   statements) and `Grant`, with the holder's local deadline; and
//!   `LeaseService`, the lease as a holder uses it on either store.
//! - [`etcd_lease`]: the same operations on the etcd cluster `etcd-26`
//!   (a lease with a key attached; the token is the key's create
//!   revision), `EtcdGrant` wrapping a `Grant`, the second `LeaseService`;
//!   the parent's view of the key, the revision and the leader.
//! - [`renewer`]: the background renewal thread a holder runs, on either
//!   store.
//!
//! The resource side (database `res26`), which never reads the lease table:
//! - [`resource`]: `ResourceStore::write` in the three forms of the scope
//!   fence and the three broken modes kept for the negative controls;
//!   `ResourceView` observes.
//! - [`publish`]: F9's stand-in for an external publisher that takes no token.
//! - [`object`]: a resource that cannot compare tokens (F29–F33): an
//!   object store whose writes are conditional on its own version or ETag,
//!   or on nothing; and a holder writing to it naively or claiming first.
//!
//! Processes:
//! - [`holder`]: the holder process (the `holder` binary): its command line
//!   (`holder/args.rs`), its protocol lines, printed and parsed in one place
//!   (`holder/protocol.rs`: `Step`), its calls to the servers, each printed
//!   as it starts and returns (`holder/call.rs`: `Call`), and one `hold`
//!   over `LeaseService`, its store picked by `--lease-backend postgres|etcd`.
//! - [`call_log`]: the holders' calls to the servers (`CALL`/`RETURN`
//!   lines) as the parent heard them, each stamped with its clock on
//!   arrival: the operations of a run's history, in a process-wide log.
//! - [`holder_guard`]: the parent's guard on one holder process: signals,
//!   `/proc` state, bounded reads, and no holder outliving its case.
//! - [`report_files`]: the files a measured run leaves for the book (`lab
//!   chaos`, `lab bench`): a table, a CSV beside it, its charts, each
//!   written whole.
//! - [`history`]: a run's history whole (every call from call to return,
//!   each write's attempt row, every fault from start to end, the rows that
//!   stayed), written as JSON lines of a documented schema and drawn as one
//!   self-contained HTML page (plain SVG, a little script to filter and
//!   zoom); below `chaos`, whose checker reads it, and `cases`, which
//!   record theirs.
//! - [`chaos`]: the chaos run (F15, `lab chaos`): the fault schedule from a
//!   seed, the workload (holder slots, each the one owner of its holder
//!   processes, each on a network host of its own and behind a link of its
//!   own, a `DelayProxy`), the nemesis that injects pauses, kills, slow
//!   links, partitions and database restarts, and the
//!   checker, a pure function from the run's history (write attempts,
//!   grants, final parts, faults) to counts of stale writes accepted,
//!   tokens reused, floor regressions and lost writes, and to a judgement
//!   that knows when there was nothing to judge; `lab chaos` itself
//!   (`chaos::command`). Below `cases`, whose F15 runs a short fixed-seed
//!   chaos run.
//! - [`queue`]: the bug zoo's job queue (F20 on): claims, heartbeats, a
//!   rescuer, a pruner and completion on `lease26`, each lease bug that a
//!   published queue (or a similar project) shipped as a switch that puts
//!   it back, the zoo's staged runs with the harm they count, and the
//!   queue's own chaos run (`lab queue-chaos`: many workers under a nemesis
//!   that deals each claim its fault, the harm counted from the record).
//!   Above `chaos`, whose seeded generator and machine line it uses.
//!
//! The experiments and their evidence:
//! - [`transcript`]: the `ok`/`note`/`FAIL` format, written and read back.
//! - [`evidence`]: the locked transcripts, the redactions, and `lab diff`.
//! - [`timeline`]: pictures of a run: each holder's holdings, pauses and
//!   writes on one time axis, from the database's and the parent's clocks.
//! - [`lease_stores`]: the lease stores side by side: one acquire timed the
//!   same way on each (F14's and F16's medians), and `lab lease-stores`,
//!   which times all four on this machine and writes the book's table.
//! - [`cases`]: one module per case, `F1` … `F34`, what they share, the
//!   one runner that `lab run` and the snapshot test both use (and the two
//!   sessions it keeps for resets, `cases::own_sessions`), `lab run`
//!   and `lab stress` themselves (`cases::command`), and the snapshot
//!   test's command line read as libtest reads it (`cases::test_args`).
//! - [`bench`]: what fencing costs: writes per second and latency per
//!   resource mode, side by side, and contended acquires (`lab bench`,
//!   `bench::command`).
//! - [`mutants`]: every guard proven: the mutation table, the scratch copy
//!   each mutant is built and judged in, and the reader's `try` exercises.
//! - [`model`]: every interleaving, not only the staged ones: the lease
//!   store, the holders and each resource mode as a model that stateright
//!   checks whole (`lab model`), the same against the mutations, and its
//!   Explorer. A counterexample is replayed by [`replay`], below.
//! - [`replay`]: a counterexample of the model run again with real holders
//!   on PostgreSQL, then the same schedule fenced: a case driven by the
//!   model's path (`lab model --replay MODE`), so the model itself stays
//!   pure and the I3 scans stay the checker's.
//! - [`suite`]: the whole test suite in parallel (`./run.sh test`): its
//!   groups (test binaries, slices of the cases, the book's chapters), each
//!   in an environment of its own, the longest first, with progress and a
//!   table of the slowest at the end.
//! - [`notebook`]: the built book served by the lab (`./run.sh serve`),
//!   each case, a short chaos run, the model, a `try` exercise or a small
//!   bench runnable from its page, its transcript streamed as it is printed.
//! - [`facts`]: the book's numbers and names (counts of cases, variants and
//!   mutations, the case titles, measured figures) computed from the tables
//!   above and from the evidence, written as small include files under
//!   `evidence/26/facts/` (`lab facts`), so the prose never types them.
//!
//! The command line:
//! - [`cli`]: `lab`'s arguments (clap derives), turned into the library's
//!   requests, and the plumbing commands (cluster, etcd, psql, diff);
//!   `main.rs` only dispatches.

pub mod error;
#[cfg(test)]
pub mod test_support;
pub mod vocabulary;
pub mod arg_values;
pub mod paths;
pub mod result_data;
pub mod safe_dir;
pub mod interrupt;
pub mod poll;
pub mod stream;
pub mod latch;
pub mod stats;
pub mod sysinfo;
pub mod owner;
pub mod events;
pub mod params;
pub mod hosts;
pub mod etcd_client;
pub mod cluster;
pub mod db;
pub mod fault;
pub mod lease;
pub mod etcd_lease;
pub mod renewer;
pub mod resource;
pub mod publish;
pub mod object;
pub mod holder;
pub mod call_log;
pub mod holder_guard;
pub mod report_files;
pub mod history;
pub mod chaos;
pub mod queue;
pub mod transcript;
pub mod evidence;
pub mod timeline;
pub mod lease_stores;
pub mod cases;
pub mod bench;
pub mod mutants;
pub mod model;
pub mod replay;
pub mod suite;
pub mod notebook;
pub mod facts;
pub mod cli;

pub use error::{Error, Result};
