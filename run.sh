#!/usr/bin/env bash
# The one entry point of the lease + fencing lab. `./run.sh help` lists the commands.
set -euo pipefail
cd "$(dirname "$0")"

# Every checkout builds into its own target/, whatever the reader's
# environment says: with a CARGO_TARGET_DIR (or CARGO_BUILD_TARGET_DIR)
# pointing elsewhere, `cargo build` would put the lab there and every
# command here would miss it, and the copies the tests build (each checkout
# copy of the book's commands) would all build into one folder. The builds
# that want another folder (the book's tools, the queue crates, s3probe, a
# mutant's scratch copy) name it; the lab's builds here (and accept's test
# build) also say --target-dir target, which outranks a build.target-dir in
# cargo's config.
unset CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR
LAB=target/debug/lab
MDBOOK_VERSION=0.5.4
MERMAID_VERSION=0.17.1

usage() {
  cat <<'EOF'
usage: ./run.sh [command]

  (no command)       build, run F1-F34, write the whole transcript to target/lab/output.txt;
                     exit 0 only if failed=0 (compare: diff evidence/26/output.txt
                     target/lab/output.txt)
  F1 … F34 [flags]   run some cases; each case's transcript is saved for `diff`
                     flags: --mode MODE (F4/F5: fenced-scope|fenced-scope-cte|fenced-scope-shared|
                                    fenced-row|unfenced|check-then-write|version-cas|claim-first;
                                    F6/F7: fenced-scope|fenced-scope-cte|fenced-scope-shared)
                            --pause-before-check (F4/F5)   --threads N (F3)
  diff F4 [FILE]     compare F4's last transcript (or FILE) with evidence/26/F4.snap
  timeline F4        draw the last run of a case: holdings, pauses, writes on one axis
  history RUN        a run's whole history as one offline page (a lane per holder
                     incarnation, every call from call to return, the faults, the floor,
                     the checker's findings; filter and zoom), drawn again from its JSON
                     lines: RUN is F4, F12-unfenced, chaos-fenced-row, … or a .jsonl path.
                     Every chaos run and every case whose holders made calls (F4, F5,
                     F10-F12, F15, F16) writes its own as it ends, in target/lab/history/
  chaos [--seed S] [--holders K] [--duration D] [--mode M|all] [--out FILE] [--trace]
                     the chaos run: K holders (default 8) under a nemesis whose faults
                     come from the seed (default 1), D per mode (default 120s), one
                     mode or every mode (default); prints the history checker's table
                     (--out evidence/26/chaos.md: the table the book includes, and
                     each mode's history in evidence/26/history/; without it, the
                     histories go to target/lab/history/)
  queue-chaos [--seed S] [--workers N] [--duration D] [--switch fixed|BUG,…|all] [--out FILE]
                     the bug zoo's job queue under a nemesis seeded by S (default 1):
                     N workers (default 4), D per switch (default 20s), the fixed
                     queue and each bug in turn (BUG is a bug's name, e.g.
                     token-given-back; all: fixed, then Z1-Z9); prints the harm each
                     let through, counted from the database's record and the
                     nemesis's list of the claims it disturbed (--out
                     evidence/26/chaos-queue.md: the table the book includes)
  queues [--seed S] [--jobs N] [--workers W] [--crate graphile|apalis|all] [--fence none|token|both] [--out FILE]
                     real job-queue crates (graphile_worker 0.14.1, apalis-postgres 1.0.0),
                     unmodified, under a nemesis seeded by S (default 1): N jobs (default
                     and at least 6), W worker processes (default 3; more jobs may need
                     more, and the run says so), the server restarted once every
                     worker has claimed a job, then one job in two paused past the
                     crate's timeout, killed, or its connection delayed past the
                     timeout; each job's handler writes a side effect
                     unfenced, then fenced by a token from the crate's claim; prints the
                     harm each let through, counted from the database (--out
                     evidence/26/queues.md: the table the book includes). Builds the
                     workspace member queues/ first (the first build takes minutes)
  model [--out FILE] [--holders N] [--mutants] [--replay MODE [--store S]] [--explore [MODE]]
                     the model checker: every interleaving of the lease and each
                     resource mode on each lease store (one server, sync or async
                     standby), the verdicts and shortest counterexamples as a table
                     (--out evidence/26/model.md: the table the book includes, and a
                     chart per counterexample beside it); --mutants: the model
                     against the mutations (evidence/26/model-mutants.md);
                     --replay MODE: MODE's counterexample against the real cluster,
                     and the same schedule fenced; --explore: stateright's Explorer
                     on 127.0.0.1 (a free port, printed); --holders 3 (up to 4):
                     the table with more holders, symmetry-reduced and checked
                     again without (evidence/26/model-3.md), by an optimised
                     build (the first build takes a few minutes)
  stress F11 [--runs N] [--mode MODE]
                     run a case N times (default 20), in MODE a locked variant: passes,
                     failures, the slowest run
  try [NAME]         the "break it" exercises: list them, or break one guard in a
                     scratch copy, run the case that catches it, see what failed
  mutants [NAME…]    break every guard in turn; each must be caught by a case line
                     (--accept re-locks the broken transcripts in evidence/26/try/)
  bench [--seconds N] [--runs K] [--writers LIST] [--scopes LIST] [--out FILE] [--redraw]
                     what fencing costs: writes/s and p50/p99 latency per resource mode
                     (1, 4, 16, 64 writers on 1, 16, 1000, 10000 scopes, or the counts
                     LIST names, e.g. --writers 1,16), each with its spread over the
                     runs, and contended acquires/s on PostgreSQL and on etcd; writes
                     target/lab/bench.md (the book's: --out evidence/26/bench.md),
                     bench.csv and a figure per scope count beside it (about 25
                     minutes with the defaults); --redraw only draws the figures
                     again from the CSV beside FILE
  test [GROUP…]      the whole test suite (what CI runs), its groups in parallel, with
                     progress and the slowest groups at the end; installs what it needs;
                     GROUP narrows it to the groups whose name contains it
  lock               re-lock the full run: run F1-F34 and write evidence/26/output.txt,
                     its JSON, timelines and histories, then the facts read from them
                     (not under CI)
  accept             re-lock the evidence snapshots from a fresh run: cases, variants
                     and the mutants' broken runs (not under CI)
  book               build the book into target/book (installs the pinned mdbook first)
  serve              the notebook: build the book and serve it from the lab on
                     127.0.0.1 (a free port and a token, printed), each case
                     runnable from its page; --live: mdBook's live reload on
                     http://127.0.0.1:3000 instead, for authors
  list               the cases and what each shows
  cluster start|stop|status|restart-immediate|reset|forget|log
                     the lab's PostgreSQL cluster b3-26 (no TCP port: its Unix socket
                     in target/lab/b3-26/server/socket); `forget` stops it and
                     removes its folders, for a clone about to go
  etcd start|stop|status
                     the lab's etcd cluster etcd-26 (three members, no TCP port: Unix
                     sockets m1:26431, m2:26432, m3:26433 in target/lab/etcd-26); a run
                     of F16 starts it from empty data, and ends it
  facts [--check]    write the book's counts, case titles and measured figures
                     (evidence/26/facts/) from the code and the evidence; --check
                     only names the stale files (exit 1)
  lease-stores       time one acquire on each lease store (one PostgreSQL, with an async
                     and a sync standby, etcd); writes target/lab/lease-stores.md
                     (the book's: --out evidence/26/lease-stores.md)
  s3-probe [--writers W] [--rounds R] [--out FILE.json]
                     race conditional PUTs on a real S3-compatible server (s3s-fs,
                     in-process over a Unix socket): W writers (default 4) in R rounds
                     (default 200) of If-Match and of If-None-Match, on s3s-fs as
                     published and on the same server behind one lock (the control:
                     one winner a round); prints a table (the evidence: --out
                     evidence/26/s3-probe.json > evidence/26/s3-probe.md). A cargo
                     project of its own (s3probe/): the first build takes minutes
  psql [lease26|res26] [-- psql args]
                     psql on a running cluster (start it first: ./run.sh cluster start)
  help               this text

Every run starts the cluster if it is not running and stops it again at the
end (Ctrl-C included); a cluster started with `cluster start` stays up.
Installs what is missing when run as root with apt-get: PostgreSQL, libfaketime
(F13), etcd-server (F16, F19, `etcd`, `lease-stores`), Chromium (`test`), a font that
covers Chinese (fonts-wqy-microhei: `book`, `serve`, `test`), iproute2 and
nftables (the network hosts of F15, F17-F19 and `chaos`). No case needs root: as
any other account the lab makes the hosts inside a user namespace of its own.
EOF
}

die() { echo "run.sh: $*" >&2; exit 3; }

ensure_rust() {
  command -v cargo >/dev/null 2>&1 ||
    die "cargo not found: install Rust (stable) with rustup, https://rustup.rs"
}

# PostgreSQL's server binaries, version 15 or newer. The lab itself looks
# for them (LAB_PG_BIN, PATH, /usr/lib/postgresql/*/bin) and says what it
# found: one search, in one place. Run as root with apt-get, this installs
# them when they are missing; otherwise the lab's message says what to do.
ensure_postgres() {
  build
  "$LAB" server-bin >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: PostgreSQL server not found; installing it with apt-get (about a minute)…" >&2
    # Debian's packaging would otherwise create and start a system cluster on
    # port 5432; the lab makes its own and wants nothing else running.
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
      mkdir -p /etc/postgresql-common
      echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q -o Dpkg::Options::=--force-confold postgresql postgresql-client >/dev/null
  fi
  "$LAB" server-bin >/dev/null || exit 3
}

# Installs one pinned tool with cargo into $1 (.tools or .tools/serve).
# Both tools share one target folder (mdbook-mermaid reuses mdbook's crates),
# and the release profile is turned down: the tools still build this book
# in well under a second, and a cold install takes about a third of the time.
# cargo prints its own progress (a bar on a terminal, a line per crate otherwise).
cargo_install_tool() {
  local root=$1; shift
  CARGO_TARGET_DIR="$PWD/target/tools-build" \
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
  CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_DEBUG=false \
  CARGO_PROFILE_RELEASE_INCREMENTAL=false \
    cargo install --locked --root "$root" "$@"
}

# A folder of this account's own for built tools, shared by its checkouts:
# $HOME/.cache/lease-fencing-lab/tools. Each folder on the way is made 0700
# if missing and used only if it is a real folder (not a link), owned by
# this account and writable by nobody else: no other account can have
# placed it or anything in it. Prints the folder; fails if it cannot be used.
tool_cache() {
  local dir="${HOME:-}" part
  [ -n "$dir" ] || return 1
  for part in "" .cache lease-fencing-lab tools; do
    dir="${dir%/}${part:+/$part}"
    [ -e "$dir" ] || mkdir -m 700 "$dir" 2>/dev/null || return 1
    [ -d "$dir" ] && [ ! -L "$dir" ] || return 1
    [ "$(stat -c %u "$dir")" = "$(id -u)" ] || return 1
    [ $(( 0$(stat -c %a "$dir") & 022 )) = 0 ] || return 1
  done
  echo "$dir"
}

# Installs the tool NAME into .tools/bin: copied from the account's tool
# cache when it holds one answering `--version` with WANT (a file of this
# account's, writable by nobody else), else built with `cargo install ARGS…`
# and then kept in the cache for the next checkout. A new clone thus builds
# the book's tools once per machine, not once per clone (two minutes on a
# busy 2-core machine).
install_book_tool() {
  local name=$1 want=$2 key=$3; shift 3
  local cache cached
  if cache=$(tool_cache); then
    cached="$cache/$key"
    if [ -f "$cached" ] && [ ! -L "$cached" ] && [ "$(stat -c %u "$cached")" = "$(id -u)" ] \
       && [ $(( 0$(stat -c %a "$cached") & 022 )) = 0 ] && [ "$("$cached" --version 2>/dev/null)" = "$want" ]; then
      mkdir -p .tools/bin && cp "$cached" ".tools/bin/$name.partial" && mv ".tools/bin/$name.partial" ".tools/bin/$name"
      echo "run.sh: $want copied from $cache (built there by an earlier checkout)" >&2
      return 0
    fi
  fi
  echo "run.sh: installing $want into .tools/ (once per machine; about a minute)…" >&2
  cargo_install_tool .tools "$@"
  if [ -n "${cache:-}" ]; then
    # Written under a name of its own, then renamed: whole or not at all.
    cp ".tools/bin/$name" "$cache/$key.partial.$$" && chmod 0755 "$cache/$key.partial.$$" && mv "$cache/$key.partial.$$" "$cache/$key" \
      || rm -f "$cache/$key.partial.$$"
  fi
}

# Builds the book into target/book, failing on any warning mdBook logs.
build_book() {
  ensure_book_tools; ensure_cjk_font "reading the book"
  log=$(mdbook build 2>&1) || { echo "$log" >&2; die "mdbook build failed"; }
  # mdBook logs a missing include as an error and still exits 0: read its log.
  # The one known harmless line: mdbook-mermaid 0.17.1 was built against mdbook 0.5.0.
  problems=$(echo "$log" | grep -iE "warn|error" | grep -v "preprocessor was built against version" || true)
  [ -z "$problems" ] || { echo "$problems" >&2; die "mdbook build printed warnings or errors"; }
}

# The pinned mdbook (with only the search feature: `book` needs no server)
# and mdbook-mermaid, in a project-local .tools/ folder, and mermaid.js
# (bundled in mdbook-mermaid) for diagrams that render offline.
ensure_book_tools() {
  ensure_rust
  export PATH="$PWD/.tools/bin:$PATH"
  if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    install_book_tool mdbook "mdbook v$MDBOOK_VERSION" "mdbook-$MDBOOK_VERSION-search" \
      --version "=$MDBOOK_VERSION" --no-default-features --features search mdbook
  fi
  if [ "$(mdbook-mermaid --version 2>/dev/null)" != "mdbook-mermaid $MERMAID_VERSION" ]; then
    install_book_tool mdbook-mermaid "mdbook-mermaid $MERMAID_VERSION" "mdbook-mermaid-$MERMAID_VERSION" \
      --version "=$MERMAID_VERSION" mdbook-mermaid
  fi
  if [ ! -s target/mermaid/mermaid.min.js ] || [ .tools/bin/mdbook-mermaid -nt target/mermaid/mermaid.min.js ]; then
    local scratch=target/mermaid-scratch
    rm -rf "$scratch" && mkdir -p "$scratch" target/mermaid && touch "$scratch/book.toml"
    mdbook-mermaid install "$scratch" >/dev/null 2>&1
    cp "$scratch/mermaid.min.js" "$scratch/mermaid-init.js" target/mermaid/
    rm -rf "$scratch"
  fi
}

# `serve` needs mdbook's web server and file watcher: a second build of the
# same pinned version, with its default features, installed the first time
# `serve` is used.
ensure_serve_tool() {
  ensure_book_tools
  if [ "$(.tools/serve/bin/mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    echo "run.sh: installing mdbook $MDBOOK_VERSION with its server into .tools/serve/ (once)…" >&2
    cargo_install_tool .tools/serve --version "=$MDBOOK_VERSION" mdbook
  fi
}

# libfaketime, through which F13 runs a holder with a slow clock and the
# server with a clock that jumps (LD_PRELOAD into those processes only; the
# machine's clock is never touched). Installed like PostgreSQL; without it
# F13 fails and says what to install.
ensure_faketime_for() {
  if "$LAB" needs faketime "$@"; then ensure_faketime; fi
}
ensure_faketime() {
  ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing libfaketime for F13's clock faults (once)…" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q libfaketime >/dev/null
  fi
}

# Chromium, for the book test's rendered-diagram check: installed when it is
# missing and this is root with apt-get; otherwise the reader is told what to
# install, and under CI its absence is a failure.
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing chromium for the book's rendered-diagram check (once; about a minute)…" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q chromium >/dev/null
    return 0
  fi
  if [ "${CI:-}" = true ]; then
    die "chromium is missing and cannot be installed here (not root, or no apt-get); the book test needs it: apt-get install chromium"
  fi
  echo "run.sh: NOTE: chromium is not installed, so the rendered-diagram check will NOT run (as root: apt-get install chromium)" >&2
}

# A font that covers Chinese. The book is Chinese; a browser on a machine
# without such a font draws every Chinese character as an empty box, and
# nothing else fails: mdbook builds, the pages load, the text is in the DOM.
# `fc-list :lang=zh` (fontconfig, which Chromium and the desktop's browsers
# use on Linux) names the fonts that cover Chinese. Run as root with apt-get,
# this installs fonts-wqy-microhei: 1.6 MB to download, 5 MB installed, and it
# draws every character of the book (the visual test checks each one), where
# fonts-noto-cjk, the other obvious choice, is 57 MB to download and 91 MB
# installed. $1 says what needs it; $2 is `required` when a missing font must
# fail (the test suite under CI), else only a loud note.
CJK_FONT_PACKAGE=fonts-wqy-microhei
has_cjk_font() {
  command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family 2>/dev/null)" ]
}
ensure_cjk_font() {
  has_cjk_font && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: no font covering Chinese (fc-list :lang=zh is empty); installing $CJK_FONT_PACKAGE for $1 (once; 1.6 MB)…" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q fontconfig "$CJK_FONT_PACKAGE" >/dev/null
    has_cjk_font || die "installed $CJK_FONT_PACKAGE, but fc-list :lang=zh still names no font"
    return 0
  fi
  local what
  if command -v fc-list >/dev/null 2>&1; then
    what="no font on this machine covers Chinese (fc-list :lang=zh names none)"
  else
    what="fc-list (package fontconfig) is missing, so no font covering Chinese can be found"
  fi
  if [ "${2:-}" = required ] && [ "${CI:-}" = true ]; then
    die "$what, and it cannot be installed here (not root, or no apt-get); the visual test needs one: apt-get install fontconfig $CJK_FONT_PACKAGE"
  fi
  echo "run.sh: NOTE: $what: a browser on this machine draws every Chinese character of the book as an empty box. Install one: apt-get install fontconfig $CJK_FONT_PACKAGE (or fonts-noto-cjk)" >&2
}

# etcd 3.4 or newer, for F16 and `./run.sh etcd`, and for the etcd
# backend's tests (lab/tests/etcd.rs): each starts a three-member cluster on
# loopback. Debian's etcd-server would start a system etcd (2379/2380) as it
# installs: a policy-rc.d that denies service starts, in place for the install
# only (removed on every way out, Ctrl-C included), keeps it from running,
# and the service the package enables is disabled again: the lab runs its
# own members, never a system etcd. LAB_ETCD_BIN names a binary of the
# reader's own.
ensure_etcd() {
  [ -n "${LAB_ETCD_BIN:-}" ] && return 0
  command -v etcd >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing etcd-server for F16 and the etcd tests (once)…" >&2
    local policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
      trap 'rm -f /usr/sbin/policy-rc.d; exit 130' INT
      trap 'rm -f /usr/sbin/policy-rc.d; exit 143' TERM
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
    fi
    export DEBIAN_FRONTEND=noninteractive
    local ok=0
    { apt-get update -q >/dev/null && apt-get install -y -q etcd-server >/dev/null; } || ok=$?
    if trap -p EXIT | grep -q policy-rc.d; then
      rm -f "$policy"
      trap - EXIT INT TERM
    fi
    [ "$ok" = 0 ] || die "installing etcd-server failed"
    # Enabled by the package for the next boot: disabled, with its init script.
    if command -v systemctl >/dev/null 2>&1; then systemctl disable etcd.service >/dev/null 2>&1 || true; fi
    if command -v update-rc.d >/dev/null 2>&1; then update-rc.d etcd disable >/dev/null 2>&1 || true; fi
    return 0
  fi
  die "etcd is missing: F16 and the etcd tests need etcd 3.4 or newer (Debian: apt-get install etcd-server; or set LAB_ETCD_BIN)"
}

# etcd only when a case the run names needs it (F16, F19, or all of them:
# no case named, `all`, or flags only). The case table says which
# (`lab needs`, built by ensure_postgres): `./run.sh F4` never asks for it.
ensure_etcd_for() {
  if "$LAB" needs etcd "$@"; then ensure_etcd; fi
}

# The network hosts of the partition cases (F17-F19) and of the chaos run
# (F15, `chaos`): each holder and server in a Linux network namespace of
# its own, plugged into a virtual switch, cut apart by nftables rules in
# the switch. They need `ip` (iproute2) and `nft` (nftables), installed
# like the packages above when this is root with apt-get; otherwise the
# lab itself says what is missing when a case needs them. Debian puts
# `nft` in /usr/sbin, which an ordinary account's PATH does not name:
# looked for there (and in /sbin) too, as the lab does.
has_program() {
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]
}
ensure_hosts() {
  has_program ip && has_program nft && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing iproute2 and nftables for the partition cases' network hosts (once)…" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q iproute2 nftables >/dev/null
    return 0
  fi
  echo "run.sh: NOTE: \`ip\` or \`nft\` is missing: F15, F17-F19 and the chaos run need them (as root: apt-get install iproute2 nftables)" >&2
}

# The hosts only when a case the run names needs them (F15, F17-F19, or all).
ensure_hosts_for() {
  if "$LAB" needs hosts "$@"; then ensure_hosts; fi
}

build() {
  ensure_rust
  # --target-dir: also past a build.target-dir in the reader's cargo config.
  cargo build --bins --quiet --target-dir target
}

# Safety net under the lab's own cleanup: if this script's run leaves the
# cluster running although it was not running before (the lab was killed
# with SIGKILL, say), stop it on the way out — unless another run is using
# it right now (--if-idle checks the cluster's run lock).
guard_cluster() {
  if ! "$LAB" cluster status >/dev/null 2>&1; then
    trap '"$LAB" cluster status >/dev/null 2>&1 && "$LAB" cluster stop --if-idle >/dev/null 2>&1; true' EXIT
  fi
}

cmd=${1:-all}
case "$cmd" in
  all)
    [ $# -le 1 ] || { usage >&2; exit 2; }
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts; guard_cluster
    # The reader's run: never the locked evidence (that is `lock`).
    "$LAB" run all --out target/lab/output.txt
    ;;
  lock)
    [ $# -le 1 ] || { usage >&2; exit 2; }
    [ "${CI:-}" != true ] || die "lock re-locks the evidence and is not for CI"
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts; guard_cluster
    "$LAB" run all --out evidence/26/output.txt
    # Some of the book's measured figures are read from output.json: keep
    # evidence/26/facts/ in step with the run that was just written.
    "$LAB" facts >/dev/null
    echo "run.sh: the full run re-locked (output.txt, output.json, timelines, histories, facts); review with git diff evidence/26/"
    ;;
  [Ff][0-9]*)
    ensure_postgres; ensure_faketime_for "$@"; ensure_etcd_for "$@"; ensure_hosts_for "$@"; guard_cluster
    "$LAB" run "$@"
    ;;
  help|-h|--help)
    usage
    ;;
  -*)
    # Flags without a case (after -h and --help above): run them against
    # every case.
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts; guard_cluster
    "$LAB" run all "$@"
    ;;
  test)
    shift
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts; ensure_chromium; ensure_cjk_font "the book's visual test" required; ensure_book_tools; guard_cluster
    [ -s evidence/26/output.txt ] || die "evidence/26/output.txt is missing (the book includes it): lock it with ./run.sh lock"
    # Compare only: a case that differs from its evidence fails with the
    # diff and writes nothing into evidence/ (insta would leave a
    # .snap.new beside the lock); re-locking is ./run.sh accept.
    export INSTA_UPDATE="${INSTA_UPDATE:-no}"
    # The groups in parallel, with progress and the slowest at the end;
    # a group's name narrows it (`./run.sh test cases`, `./run.sh test "book 07"`).
    "$LAB" suite "$@"
    ;;
  book)
    build_book
    echo "run.sh: the book is at $PWD/target/book/index.html"
    ;;
  serve)
    if [ "${2:-}" = "--live" ]; then
      # For authors: mdBook's own server, which rebuilds on every save.
      ensure_serve_tool; ensure_cjk_font "reading the book"
      echo "run.sh: serving the book with live reload on http://127.0.0.1:3000 (Ctrl-C to stop)" >&2
      exec .tools/serve/bin/mdbook serve -n 127.0.0.1 -p 3000
    fi
    [ $# -le 1 ] || die "serve takes no arguments but --live (see ./run.sh help)"
    # The notebook: the built book, served by the lab, each case runnable
    # from its page. It prints its address (with its token) once bound.
    # What the cases need, as for ./run.sh: a cell runs any of them.
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts
    build; build_book
    exec "$LAB" notebook --book target/book
    ;;
  bench)
    shift
    # --redraw measures nothing: it draws the figures again from the CSV.
    case " $* " in *" --redraw "*) build; exec "$LAB" bench "$@" ;; esac
    # An optimised client: a debug build's own CPU time, spent on the same
    # two cores as the server's, would blur the differences being measured.
    # The test suite alone sets LAB_BENCH_CLIENT=debug: it judges the
    # table's shape, never the figures, and the debug client is built
    # already, where the release build costs minutes of a busy machine.
    client=${LAB_BENCH_CLIENT:-release}
    [ "$client" = release ] || [ "$client" = debug ] || die "LAB_BENCH_CLIENT is release (the default) or debug, not '$client'"
    # etcd: the contended acquires are measured on it too, beside PostgreSQL.
    ensure_postgres; ensure_etcd; guard_cluster
    if [ "$client" = debug ]; then
      build; "$LAB" bench "$@"
    else
      cargo build --release --quiet --bin lab --target-dir target; target/release/lab bench "$@"
    fi
    ;;
  accept)
    [ "${CI:-}" != true ] || die "accept re-locks the evidence and is not for CI"
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts; guard_cluster
    INSTA_UPDATE=always cargo test --quiet --test cases --target-dir target
    "$LAB" mutants --accept
    echo "run.sh: snapshots re-locked (cases, variants, broken runs); review with git diff evidence/26/"
    ;;
  chaos)
    shift
    ensure_postgres; ensure_hosts; guard_cluster
    "$LAB" chaos "$@"
    ;;
  queue-chaos)
    shift
    ensure_postgres; guard_cluster
    "$LAB" queue-chaos "$@"
    ;;
  queues)
    shift
    ensure_rust
    ensure_postgres; guard_cluster
    # The crates under test in a target folder of their own: their build
    # never holds the lock on target/ that every other command takes. No
    # debug information in that folder (CARGO_PROFILE_DEV_DEBUG=0): its
    # 255 units from scratch took 157 s of processor with the workspace's
    # line tables and 117 s without, and a worker's error reaches the lab
    # as its message (a panic still names its file and line).
    echo "run.sh: building lab-queues (queues/: the crates under test; the first build takes a few minutes)…" >&2
    CARGO_TARGET_DIR="$PWD/target/queues" CARGO_PROFILE_DEV_DEBUG=0 cargo build --quiet -p lab-queues
    "$LAB" queues "$@"
    ;;
  model)
    shift
    # Only a replay needs the cluster; the checker itself is pure.
    if printf '%s\n' "$@" | grep -qx -- '--replay'; then
      ensure_postgres; guard_cluster
    elif printf '%s\n' "$@" | grep -A1 -x -- '--holders' | grep -qx '[34]'; then
      # Three holders search millions of states: the lab's own code
      # unoptimised (the debug build) takes about five times as long.
      # (Any other value is the debug build's to judge and refuse.)
      ensure_rust
      echo "run.sh: building an optimised lab for the larger model (the first build takes a few minutes)…" >&2
      cargo build --release --quiet --bin lab --target-dir target
      exec target/release/lab model "$@"
    else
      build
    fi
    "$LAB" model "$@"
    ;;
  stress)
    shift
    ensure_postgres; ensure_faketime_for "${1:-}"; ensure_etcd_for "${1:-}"; ensure_hosts_for "${1:-}"; guard_cluster
    "$LAB" stress "$@"
    ;;
  mutants)
    shift
    # A mutant its own case misses runs every case, F16 included.
    ensure_postgres; ensure_faketime; ensure_etcd; ensure_hosts
    "$LAB" mutants "$@"
    ;;
  try)
    shift
    ensure_postgres
    # An exercise needs what the case that catches it needs (the list's
    # third column is that case): etcd for F16 and F19, the hosts for the
    # partition cases, libfaketime for F13.
    if [ $# -gt 0 ]; then
      catcher=$("$LAB" try | awk -v n="$1" '$1 == n && $3 ~ /^F[0-9]+$/ { print $3 }')
      if [ -n "$catcher" ]; then
        ensure_faketime_for "$catcher"; ensure_etcd_for "$catcher"; ensure_hosts_for "$catcher"
      fi
    fi
    "$LAB" try "$@"
    ;;
  timeline)
    build
    "$LAB" "$@"
    ;;
  diff|list|psql|facts|history)
    build
    "$LAB" "$@"
    ;;
  cluster)
    ensure_postgres
    "$LAB" "$@"
    ;;
  etcd)
    build; ensure_etcd
    "$LAB" "$@"
    ;;
  lease-stores)
    ensure_postgres; ensure_etcd; guard_cluster
    "$LAB" "$@"
    ;;
  s3-probe)
    shift
    ensure_rust
    echo "run.sh: building s3probe (a cargo project of its own; the first build takes a few minutes)…" >&2
    CARGO_TARGET_DIR="$PWD/target/s3probe" cargo build --release --quiet --manifest-path s3probe/Cargo.toml
    # A private folder of this run's own for the probe's server (its data
    # and its Unix socket): mktemp makes it 0700 under a name nobody can
    # guess, and it goes on every way out, Ctrl-C included.
    mkdir -p target
    probe_dir=$(mktemp -d -p target s3-probe.XXXXXXXX)
    trap 'rm -rf "$probe_dir"' EXIT
    trap 'rm -rf "$probe_dir"; exit 130' INT
    trap 'rm -rf "$probe_dir"; exit 143' TERM
    target/s3probe/release/s3probe --dir "$probe_dir" "$@"
    ;;
  *)
    echo "run.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2
    ;;
esac
