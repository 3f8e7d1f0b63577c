#!/usr/bin/env bash
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The real gates and a real build of the tx_e2e patches (roles/tbnet_candidate/files/) against Debian's kernel
# sources and headers, both layouts and both TX E2E histories:
#
#   bash tests/kernel/check_patch.sh [CACHE_DIR]        (default <repo>/.cache/kernel; KEEP_WORK=1 keeps the work dir)
#
# 1. tests/kernel/fetch_sources.sh CACHE_DIR fetches (or finds) every source: Debian 12's 6.1 uploads (today
#    6.1.192-3, rx_only, and the point release's 6.1.176-1, a real tx_always tree) and 6.12, each with its headers.
# 2. Cases: every real source as it is, plus a synthetic tree of the other history made from it (below). Per case:
#    - stage only the driver (drivers/net/thunderbolt.c, or drivers/net/thunderbolt/) in a temporary git repo and
#      commit it; plugins/module_utils/_tbnet_source.py tells the layout and history (the evidence lines of
#      tbnet_open() are logged) and names the patch; the patch of the other history must NOT apply;
#    - build the UNPATCHED driver: `make -C HEADERS M=DIR modules`, then modinfo: vermagic starts with the ABI,
#      no tx_e2e parameter;
#    - gates: `git apply --check`, `git apply`, `git diff --check`, `checkpatch.pl --strict --no-tree` run from the
#      source's own scripts/ with spelling.txt and const_structs.checkpatch beside it (refused when either is
#      missing: without spelling.txt checkpatch only warns on stderr and passes);
#    - build the patched driver the same way: vermagic, `parm: tx_e2e:... (bool)`, srcversion, build id, sha256,
#      no compiler warning the unpatched build did not have; the tree now reads as `patched`;
#    - behaviour: tbnet_open() of the unpatched and of the patched text, compiled in user space against stubs that
#      record the ring flags, run for all 8 combinations of e2e, the peer's TBNET_E2E and tx_e2e (flags_check).
#    Builds pass CONFIG_MODULE_SRCVERSION_ALL=y: Debian's config leaves it unset and the driver has no
#    MODULE_VERSION, so without it neither the distribution module nor ours has a srcversion. It only adds the
#    srcversion tag (modpost -a); the compiled code and vermagic are those of the distribution's config.
# 3. The synthetic other history, a documented edit of the real text (each replacement must match exactly once):
#    - rx_only -> tx_always applies upstream a8065af3346e ("net: thunderbolt: Enable end-to-end flow control also
#      in transmit"): the RX flags block (flags = RING_FLAG_FRAME; ... flags |= RING_FLAG_E2E;) moves above the TX
#      ring's allocation, which then passes `flags` instead of RING_FLAG_FRAME;
#    - tx_always -> rx_only is its revert (1881f2efbf7f).
#    Fidelity: where the archive has real trees of both histories for one layout (6.1), the synthetic tbnet_open()
#    made from each must equal the real tbnet_open() of the other, byte for byte.
# 4. Convergence: both patches of a layout must turn a tree and its synthetic twin into the same file: the
#    candidate is one driver whatever history it was applied to.
# 5. Negative gates, on the first rx_only case: trailing whitespace fails `git diff --check`; `static bool tx_e2e
#    = false;` fails checkpatch (ERROR); a misspelling fails checkpatch with spelling.txt, passes silently
#    without it, and the gate refuses to run without it.
# Needs git, make, gcc, perl, kmod (modinfo), binutils (readelf) and pahole (package dwarves: Debian's 6.12 headers
# ship vmlinux, so Kbuild generates BTF for every module with pahole, and no linux-headers package depends on it).
# stdout: one JSON object (format inferlab.kernel_patch_check/1, with the fetch summary); the log goes to stderr.
# Exit 0 when every case and check passed, 1 otherwise.
set -Eeuo pipefail
shopt -s inherit_errexit
trap 'echo "check_patch: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CACHE=${1:-$ROOT/.cache/kernel}
PATCHES=${TBNET_PATCH_DIR:-$ROOT/roles/tbnet_candidate/files}
DETECT=$ROOT/plugins/module_utils/_tbnet_source.py
export LC_ALL=C

for tool in git make gcc perl python3 modinfo readelf sha256sum; do
  command -v "$tool" >/dev/null || { echo "check_patch: '$tool' not found" >&2; exit 1; }
done
# Headers that ship vmlinux (Debian's 6.12 does; 6.1's does not) make Kbuild add BTF to every module with pahole,
# which no linux-headers package depends on: without it the build stops at "pahole: not found".
if ! command -v pahole >/dev/null; then
  echo "check_patch: 'pahole' not found: the 6.12 headers build BTF for modules (install the dwarves package:" \
    "apt-get install --no-install-recommends dwarves)" >&2
  exit 1
fi

log() { echo "check_patch: $*" >&2; }
now() { date +%s.%N; }
since() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$(now)"; }

W=$(mktemp -d "${TMPDIR:-/tmp}/tbnet-check.XXXXXX")
cleanup() {
  if [[ ${KEEP_WORK:-0} == 1 ]]; then
    log "work dir kept: $W"
  else
    rm -rf "$W"
  fi
}
trap cleanup EXIT

T_ALL=$(now)
T0=$(now)
bash "$ROOT/tests/kernel/fetch_sources.sh" "$CACHE" > "$W/sources.json"
T_FETCH=$(since "$T0")
log "sources fetched or found in ${T_FETCH}s"

# rec FILE KEY VALUE: one result line (KEY dotted for nesting); VALUE is a string, except for the keys the
# summary below reads as JSON (ok, synthetic, has_tx_e2e, compiler_warnings, seconds).
rec() { printf '%s\t%s\n' "$2" "$3" >> "$1"; }

# transform FILE upstream|revert: the synthetic other history, in place (see 3. above).
transform() {
  python3 - "$1" "$2" <<'EOF'
import sys

path, direction = sys.argv[1:]
RX_ONLY_TX = "\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE,\n\t\t\t\tRING_FLAG_FRAME);\n"
FLAGS = ("\tflags = RING_FLAG_FRAME;\n\t/* Only enable full E2E if the other end supports it too */\n"
         "\tif (tbnet_e2e && net->svc->prtcstns & TBNET_E2E)\n\t\tflags |= RING_FLAG_E2E;\n\n")
TX_ALWAYS_TX = "\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE, flags);\n"
MASKS = "\teof_mask = BIT(TBIP_PDF_FRAME_END);\n\n"
RX = "\tring = tb_ring_alloc_rx("
# (rx_only text, tx_always text) pairs: a8065af3346e turns the first into the second, its revert the reverse.
EDITS = [(RX_ONLY_TX, FLAGS + TX_ALWAYS_TX), (MASKS + FLAGS + RX, MASKS + RX)]
with open(path) as handle:
    text = handle.read()
for rx_only, tx_always in EDITS:
    old, new = (rx_only, tx_always) if direction == 'upstream' else (tx_always, rx_only)
    if text.count(old) != 1:
        sys.exit('transform %s: expected once, found %d times:\n%s' % (direction, text.count(old), old))
    text = text.replace(old, new)
with open(path, 'w') as handle:
    handle.write(text)
EOF
}

# evidence FILE: the lines of tbnet_open() that decide the history, with their line numbers.
evidence() {
  awk '/^static int tbnet_open\(/ {f = 1} f && /tb_ring_alloc_(tx|rx)|RING_FLAG_|flags =|tx_e2e/ {
         line = $0; gsub(/\t/, " ", line); gsub(/  +/, " ", line); printf "%s:%d:%s\n", FILENAME, NR, line}
       f && /^}/ {f = 0}' "$1"
  grep -n 'module_param.*tx_e2e' "$1" | sed "s|^|$1:|" || true
}

# build TREE DRIVER_REL OUT HEADERS RECORD PREFIX: out-of-tree build of the staged driver, modinfo into RECORD.
build() {
  local tree=$1 driver=$2 out=$3 headers=$4 record=$5 prefix=$6 t0 ko warnings
  t0=$(now)
  rm -rf "$out"
  mkdir -p "$out"
  if [[ $driver == */main.c ]]; then
    # split layout: the directory's own Makefile (obj-$(CONFIG_USB4_NET) := thunderbolt_net.o, main.o trace.o)
    cp -a "$tree/$(dirname "$driver")/." "$out/"
    rm -rf "$out/.git"
  else
    # single layout: drivers/net/Makefile's two lines for it
    cp -a "$tree/$driver" "$out/"
    printf 'obj-m := thunderbolt-net.o\nthunderbolt-net-y := thunderbolt.o\n' > "$out/Kbuild"
  fi
  if ! make -C "$headers" M="$out" CONFIG_USB4_NET=m CONFIG_MODULE_SRCVERSION_ALL=y modules > "$out.log" 2>&1; then
    log "build failed in $out:"
    cat "$out.log" >&2
    return 1
  fi
  ko=$(find "$out" -maxdepth 1 -name '*.ko' | head -n 1)
  [[ -n $ko ]] || { log "no .ko in $out"; return 1; }
  warnings=$(grep -c 'warning:' "$out.log" || true)
  rec "$record" "$prefix.seconds" "$(since "$t0")"
  rec "$record" "$prefix.ko" "$(basename "$ko")"
  rec "$record" "$prefix.sha256" "$(sha256sum "$ko" | cut -d' ' -f1)"
  rec "$record" "$prefix.vermagic" "$(modinfo -F vermagic "$ko")"
  rec "$record" "$prefix.srcversion" "$(modinfo -F srcversion "$ko")"
  rec "$record" "$prefix.build_id" "$(readelf -n "$ko" | awk '/Build ID:/ {print $3}')"
  rec "$record" "$prefix.parm" "$(modinfo -F parm "$ko" | tr '\n' ';' | sed 's/;$//')"
  rec "$record" "$prefix.compiler_warnings" "$warnings"
  echo "$ko"
}

# checkpatch PATCH SCRIPTS_DIR LOG: the checkpatch gate; refuses (rc 3) without spelling.txt / const_structs.
checkpatch() {
  local patch=$1 scripts=$2 out=$3 f
  for f in checkpatch.pl spelling.txt const_structs.checkpatch; do
    if [[ ! -s $scripts/$f ]]; then
      echo "refusing to run checkpatch: $scripts/$f is missing (without spelling.txt checkpatch passes" \
        "silently)" > "$out"
      return 3
    fi
  done
  perl "$scripts/checkpatch.pl" --strict --no-tree "$patch" > "$out" 2>&1
}

# flags_check BASE CANDIDATE HISTORY WORK: the ring flags tbnet_open() really passes, for every input.
# tbnet_open() is cut out of each driver text verbatim and compiled in user space (gcc) with stubs that record the
# flags given to tb_ring_alloc_tx() and tb_ring_alloc_rx(); it then runs for every e2e x peer-advertises-E2E x
# tx_e2e. The unpatched driver must match its detected history, the candidate the specification (TX E2E only when
# tx_e2e AND e2e AND the peer's TBNET_E2E; RX unchanged). Prints one JSON object; exit 1 on a mismatch.
flags_check() {
  python3 - "$@" <<'EOF'
import itertools
import json
import os
import re
import subprocess
import sys

base, candidate, history, work = sys.argv[1:]
PRELUDE = r"""
#include <stdbool.h>
#include <stdio.h>
typedef unsigned short u16;
#define BIT(n) (1U << (n))
#define RING_FLAG_FRAME BIT(1)
#define RING_FLAG_E2E BIT(2)
#define TBNET_E2E BIT(0)
#define TBNET_MATCH_FRAGS_ID BIT(1)
#define TBNET_64K_FRAMES BIT(2)
#define TBNET_RING_SIZE 256
#define TBIP_PDF_FRAME_START 1
#define TBIP_PDF_FRAME_END 2
#define ENOMEM 12
#define netdev_err(dev, ...) ((void)0)
struct tb_ring { int hop; };
struct tb_nhi { int unused; };
struct tb { struct tb_nhi *nhi; };
struct tb_xdomain { struct tb *tb; };
struct tb_service { unsigned int prtcstns; };
struct napi_struct { int unused; };
struct tbnet_ring { struct tb_ring *ring; };
struct tbnet { struct tb_xdomain *xd; struct tb_service *svc; struct tbnet_ring tx_ring, rx_ring;
               int local_transmit_path; struct napi_struct napi; };
struct net_device { struct tbnet *priv; };
static unsigned int got_tx, got_rx;
static struct tb_ring tx_ring_stub = { 3 }, rx_ring_stub = { 4 };
static void *netdev_priv(struct net_device *dev) { return dev->priv; }
static void netif_carrier_off(struct net_device *dev) { (void)dev; }
static struct tb_ring *tb_ring_alloc_tx(struct tb_nhi *nhi, int hop, int size, unsigned int flags)
{ (void)nhi; (void)hop; (void)size; got_tx = flags; return &tx_ring_stub; }
static struct tb_ring *tb_ring_alloc_rx(struct tb_nhi *nhi, int hop, int size, unsigned int flags, int e2e_tx_hop,
                                        u16 sof_mask, u16 eof_mask, void (*start_poll)(void *), void *data)
{ (void)nhi; (void)hop; (void)size; (void)e2e_tx_hop; (void)sof_mask; (void)eof_mask; (void)start_poll;
  (void)data; got_rx = flags; return &rx_ring_stub; }
static void tb_ring_free(struct tb_ring *ring) { (void)ring; }
static int tb_xdomain_alloc_out_hopid(struct tb_xdomain *xd, int hopid) { (void)xd; (void)hopid; return 8; }
static void tb_xdomain_release_out_hopid(struct tb_xdomain *xd, int hopid) { (void)xd; (void)hopid; }
static void tbnet_start_poll(void *data) { (void)data; }
static void napi_enable(struct napi_struct *napi) { (void)napi; }
static void start_login(struct tbnet *net) { (void)net; }
static bool tbnet_e2e, tx_e2e;
"""
MAIN = r"""
int main(void)
{
	struct tb_nhi nhi; struct tb tb = { &nhi }; struct tb_xdomain xd = { &tb }; struct tb_service svc;
	struct tbnet net = { 0 }; struct net_device dev = { &net };
	int e2e, peer, opt;

	net.xd = &xd;
	net.svc = &svc;
	for (e2e = 0; e2e < 2; e2e++)
		for (peer = 0; peer < 2; peer++)
			for (opt = 0; opt < 2; opt++) {
				tbnet_e2e = e2e;
				tx_e2e = opt;
				svc.prtcstns = TBNET_MATCH_FRAGS_ID | TBNET_64K_FRAMES | (peer ? TBNET_E2E : 0);
				got_tx = got_rx = 0xdead;
				if (tbnet_open(&dev))
					return 1;
				printf("%d %d %d %u %u\n", e2e, peer, opt, got_tx, got_rx);
			}
	return 0;
}
"""
FRAME, E2E = 1 << 1, 1 << 2


def table(path, name):
    with open(path) as handle:
        text = handle.read()
    found = re.search(r'^static int tbnet_open\(.*?^}\n', text, re.M | re.S)
    if not found:
        sys.exit('no tbnet_open() in %s' % path)
    src, exe = os.path.join(work, name + '.c'), os.path.join(work, name)
    with open(src, 'w') as handle:
        handle.write(PRELUDE + found.group(0) + MAIN)
    subprocess.run(['gcc', '-std=gnu11', '-Wall', '-Werror', '-Wno-unused-function', '-o', exe, src], check=True)
    rows = {}
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        e2e, peer, opt, tx, rx = (int(x) for x in line.split())
        rows[(e2e, peer, opt)] = (tx, rx)
    return rows


def spec(kind, e2e, peer, opt):
    rx = FRAME | (E2E if e2e and peer else 0)
    tx = {'rx_only': FRAME, 'tx_always': rx, 'candidate': FRAME | (E2E if opt and e2e and peer else 0)}[kind]
    return tx, rx


inputs = list(itertools.product((0, 1), repeat=3))
stock, cand = table(base, 'flags-stock'), table(candidate, 'flags-candidate')
names = {FRAME: 'FRAME', FRAME | E2E: 'FRAME|E2E'}
result = {
    'stock_matches_' + history: all(stock[i] == spec(history, *i) for i in inputs),
    'candidate_matches_spec': all(cand[i] == spec('candidate', *i) for i in inputs),
    'rx_unchanged': all(cand[i][1] == stock[i][1] for i in inputs),
    'tx_e2e_unset_equals_stock': all(cand[i] == stock[i] for i in inputs if not i[2]),
    'tx_e2e_set_equals_stock': all(cand[i] == stock[i] for i in inputs if i[2]),
    'table': ['e2e=%d peer_e2e=%d tx_e2e=%d: stock tx=%s rx=%s, candidate tx=%s rx=%s'
              % (i + tuple(names.get(v, hex(v)) for v in stock[i] + cand[i])) for i in inputs],
}
print(json.dumps(result))
sys.exit(0 if result['stock_matches_' + history] and result['candidate_matches_spec'] and result['rx_unchanged']
         else 1)
EOF
}

# other_history rx_only|tx_always
other_history() { [[ $1 == rx_only ]] && echo tx_always || echo rx_only; }

# check_case NAME SOURCE_DIR HEADERS ABI TRANSFORM(none|upstream|revert): runs in a subshell; result in NAME.rec
check_case() {
  local name=$1 src=$2 headers=$3 abi=$4 how=$5
  local dir=$W/$name record=$W/$name.rec tree t0 info layout driver history patch other ko_stock ko_cand
  tree=$dir/tree
  mkdir -p "$tree"
  rec "$record" name "$name"
  rec "$record" source_dir "$src"
  rec "$record" abi "$abi"
  rec "$record" synthetic "$([[ $how == none ]] && echo false || echo true)"
  rec "$record" transform "$how"
  t0=$(now)
  (cd "$src" && cp -a --parents drivers/net/thunderbolt* "$tree/")
  git -C "$tree" init -q
  git -C "$tree" config user.name 'inferlab developers'
  git -C "$tree" config user.email 'inferlab@invalid'
  if [[ $how != none ]]; then
    info=$(python3 "$DETECT" "$tree")
    driver=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["driver"])' "$info")
    transform "$tree/$driver" "$how"
  fi
  git -C "$tree" add -A
  git -C "$tree" commit -q -m "base: $name"
  rec "$record" seconds.stage "$(since "$t0")"

  info=$(python3 "$DETECT" "$tree")
  read -r layout driver history patch < <(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(
    d["layout"], d["driver"], d["history"], d["patch"])' "$info")
  rec "$record" layout "$layout"
  rec "$record" driver "$driver"
  rec "$record" history "$history"
  rec "$record" patch "$patch"
  log "[$name] layout $layout, history $history -> $patch; evidence:"
  evidence "$tree/$driver" | sed "s|^$tree/||" | tee "$dir.evidence" >&2

  other=tx_e2e-$layout-$(other_history "$history").patch
  if git -C "$tree" apply --check "$PATCHES/$other" 2> "$dir.other.log"; then
    log "[$name] the patch of the other history, $other, applies: the histories are not told apart"
    return 1
  fi
  rec "$record" other_patch_refused "$other: $(head -n 1 "$dir.other.log")"

  ko_stock=$(build "$tree" "$driver" "$dir/build-stock" "$headers" "$record" stock)
  modinfo -F vermagic "$ko_stock" | grep -q "^$abi " || { log "[$name] stock vermagic is not $abi"; return 1; }
  if modinfo -F parm "$ko_stock" | grep -q '^tx_e2e:'; then
    log "[$name] the UNPATCHED module has a tx_e2e parameter"
    return 1
  fi
  rec "$record" stock.has_tx_e2e false

  t0=$(now)
  git -C "$tree" apply --check "$PATCHES/$patch"
  rec "$record" gates.apply_check passed
  git -C "$tree" apply "$PATCHES/$patch"
  git -C "$tree" diff --check
  rec "$record" gates.diff_check passed
  if ! checkpatch "$PATCHES/$patch" "$src/scripts" "$dir.checkpatch.log"; then
    log "[$name] checkpatch gate failed:"
    cat "$dir.checkpatch.log" >&2
    return 1
  fi
  rec "$record" gates.checkpatch "$(grep '^total:' "$dir.checkpatch.log")"
  rec "$record" seconds.gates "$(since "$t0")"
  [[ $(python3 "$DETECT" "$tree" | python3 -c 'import json, sys; print(json.load(sys.stdin)["history"])') \
    == patched ]] || { log "[$name] the patched tree does not read as patched"; return 1; }
  rec "$record" patched_driver_sha256 "$(sha256sum "$tree/$driver" | cut -d' ' -f1)"

  ko_cand=$(build "$tree" "$driver" "$dir/build-candidate" "$headers" "$record" candidate)
  modinfo -F vermagic "$ko_cand" | grep -q "^$abi " || { log "[$name] candidate vermagic is not $abi"; return 1; }
  modinfo -F parm "$ko_cand" | grep -q '^tx_e2e:.*(bool)$' \
    || { log "[$name] the candidate has no bool tx_e2e parameter"; return 1; }
  rec "$record" candidate.has_tx_e2e true
  [[ -n $(modinfo -F srcversion "$ko_cand") ]] || { log "[$name] the candidate has no srcversion"; return 1; }
  if (( $(grep -c 'warning:' "$dir/build-candidate.log" || true) > $(grep -c 'warning:' "$dir/build-stock.log" \
      || true) )); then
    log "[$name] the patch adds compiler warnings:"
    grep 'warning:' "$dir/build-candidate.log" >&2
    return 1
  fi
  git -C "$tree" show "HEAD:$driver" > "$dir/base.c"
  mkdir -p "$dir/flags"
  if ! flags_check "$dir/base.c" "$tree/$driver" "$history" "$dir/flags" > "$dir.flags.json"; then
    log "[$name] the ring flags are not what they must be: $(cat "$dir.flags.json")"
    return 1
  fi
  log "[$name] passed: $(modinfo -F vermagic "$ko_cand"); $(modinfo -F parm "$ko_cand" | grep '^tx_e2e:')"
}

# unchanged BAD GOOD: true (and a log line) when the sed that should have made BAD found nothing to change.
unchanged() {
  if cmp -s "$1" "$2"; then
    log "[negative] $(basename "$1"): the edit did not apply to $(basename "$2")"
    return 0
  fi
  return 1
}

# negatives NAME: the gates refuse what they must, on the staged base of case NAME (an rx_only one).
negatives() {
  local name=$1 dir=$W/$1 record=$W/negatives.rec tree src patch bad scripts
  tree=$dir/neg-tree
  src=$(awk -F'\t' '$1 == "source_dir" {print $2}' "$W/$name.rec")
  patch=$(awk -F'\t' '$1 == "patch" {print $2}' "$W/$name.rec")
  git clone -q "$dir/tree" "$tree"
  git -C "$tree" config user.name 'inferlab developers'
  git -C "$tree" config user.email 'inferlab@invalid'

  bad=$dir/neg-whitespace.patch
  sed 's/^+static bool tx_e2e;$/+static bool tx_e2e;  /' "$PATCHES/$patch" > "$bad"
  unchanged "$bad" "$PATCHES/$patch" && return 1
  git -C "$tree" apply --whitespace=nowarn "$bad"
  if git -C "$tree" diff --check > "$dir.neg-ws.log" 2>&1; then
    log "[negative] trailing whitespace passed git diff --check"
    return 1
  fi
  rec "$record" trailing_whitespace "refused by git diff --check: $(head -n 1 "$dir.neg-ws.log")"
  git -C "$tree" checkout -q -- .

  bad=$dir/neg-static.patch
  sed 's/^+static bool tx_e2e;$/+static bool tx_e2e = false;/' "$PATCHES/$patch" > "$bad"
  unchanged "$bad" "$PATCHES/$patch" && return 1
  if checkpatch "$bad" "$src/scripts" "$dir.neg-static.log"; then
    log "[negative] an initialised static passed checkpatch"
    return 1
  fi
  rec "$record" checkpatch_error "refused: $(grep -m 1 '^ERROR' "$dir.neg-static.log")"

  bad=$dir/neg-typo.patch
  sed 's/some hosts never return Tx credits/some hosts never recieve Tx credits/' "$PATCHES/$patch" > "$bad"
  unchanged "$bad" "$PATCHES/$patch" && return 1
  if checkpatch "$bad" "$src/scripts" "$dir.neg-typo.log"; then
    log "[negative] a misspelling passed checkpatch with spelling.txt"
    return 1
  fi
  rec "$record" misspelling_with_spelling_txt "refused: $(grep -m 1 'WARNING' "$dir.neg-typo.log")"
  scripts=$dir/scripts-without-spelling
  mkdir -p "$scripts"
  cp "$src/scripts/checkpatch.pl" "$src/scripts/const_structs.checkpatch" "$scripts/"
  if perl "$scripts/checkpatch.pl" --strict --no-tree "$bad" > "$dir.neg-nospell.log" 2>&1; then
    rec "$record" misspelling_without_spelling_txt_raw_checkpatch "exit 0 (the silent pass): $(grep -m 1 \
      'spelling' "$dir.neg-nospell.log" || echo 'no mention of spelling.txt')"
  else
    rec "$record" misspelling_without_spelling_txt_raw_checkpatch "exit $?"
  fi
  local rc=0
  checkpatch "$bad" "$scripts" "$dir.neg-gate.log" || rc=$?
  if (( rc != 3 )); then
    log "[negative] the checkpatch gate ran without spelling.txt (rc $rc)"
    return 1
  fi
  rec "$record" missing_spelling_txt "refused: $(cat "$dir.neg-gate.log")"
}

# fidelity A_CASE B_CASE: the synthetic twin of real tree A has the real tbnet_open() of tree B.
fidelity() {
  python3 - "$W/$1/tree" "$W/$1-synthetic/tree" "$W/$2/tree" "$1" "$2" <<'EOF'
import json
import re
import subprocess
import sys

real_a, synth_a, real_b, name_a, name_b = sys.argv[1:]


def tbnet_open(tree):
    # the base commit (before the patch) of the staged driver
    files = subprocess.run(['git', '-C', tree, 'ls-files'], check=True, capture_output=True, text=True).stdout
    driver = [f for f in files.split() if f.endswith(('thunderbolt.c', 'thunderbolt/main.c'))][0]
    text = subprocess.run(['git', '-C', tree, 'show', 'HEAD:' + driver], check=True, capture_output=True,
                          text=True).stdout
    return re.search(r'^static int tbnet_open\(.*?^}\n', text, re.M | re.S).group(0)


same = tbnet_open(synth_a) == tbnet_open(real_b)
print(json.dumps({'synthetic': name_a + '-synthetic', 'real': name_b, 'tbnet_open_identical': same}))
sys.exit(0 if same else 1)
EOF
}

# One source's cases: the real tree, then its synthetic twin (which needs the real tree's history). Each case's
# result goes to its .rec file; the sources run two at a time (each case is one make at a time: one CPU).
check_source() {  # LINE VERSION ABI HEADERS SRC
  local line=$1 version=$2 abi=$3 headers=$4 src=$5 base how name transform_how real_history t0
  base="${line}-${version}"
  for how in none synthetic; do
    name=$base
    [[ $how == synthetic ]] && name=$base-synthetic
    transform_how=none
    if [[ $how == synthetic ]]; then
      real_history=$(awk -F'\t' '$1 == "history" {print $2}' "$W/$base.rec" 2>/dev/null || true)
      case $real_history in
        rx_only) transform_how=upstream ;;
        tx_always) transform_how=revert ;;
        *) log "[$name] skipped: the real tree's history is '${real_history:-unknown}'"; continue ;;
      esac
    fi
    echo "$name" > "$W/$base.$how.case"
    t0=$(now)
    # A subshell started with & and then waited for keeps errexit inside (in an `if` it would be off).
    (check_case "$name" "$src" "$headers" "$abi" "$transform_how") &
    if wait $!; then
      rec "$W/$name.rec" ok true
    else
      rec "$W/$name.rec" ok false
      log "[$name] FAILED"
    fi
    rec "$W/$name.rec" seconds.total "$(since "$t0")"
  done
  touch "$W/$base.done"  # not reached when the function itself broke: the source then fails below
}

SOURCES=()
while IFS=$'\t' read -r line version abi headers src; do
  SOURCES+=("${line}-${version}")
  while (( $(jobs -rp | wc -l) >= 2 )); do wait -n || true; done
  check_source "$line" "$version" "$abi" "$headers" "$src" &
done < <(python3 -c 'import json, sys
for s in json.load(open(sys.argv[1]))["sources"]:
    print("\t".join([s["line"], s["version"], s["abi"], s["headers_dir"], s["source_dir"]]))' "$W/sources.json")
wait
# the cases in the sources' order, each real tree before its twin; the failed ones from their records
CASES=()
FAILED=()
for base in "${SOURCES[@]}"; do
  [[ -f $W/$base.done ]] || { FAILED+=("source:$base"); log "[$base] FAILED: its cases did not run to the end"; }
  for how in none synthetic; do
    [[ -f $W/$base.$how.case ]] || continue
    name=$(cat "$W/$base.$how.case")
    CASES+=("$name")
    grep -qx $'ok\ttrue' "$W/$name.rec" || FAILED+=("$name")
  done
done

# Negative gates on the first rx_only real case.
NEG_CASE=
for c in "${CASES[@]}"; do
  if [[ $c != *-synthetic ]] && grep -qx $'history\trx_only' "$W/$c.rec" && grep -qx $'ok\ttrue' "$W/$c.rec"; then
    NEG_CASE=$c
    break
  fi
done
NEG_OK=false
if [[ -n $NEG_CASE ]]; then
  (negatives "$NEG_CASE") &
  wait $! && NEG_OK=true
fi
if [[ $NEG_OK == true ]]; then
  rec "$W/negatives.rec" ok true
else
  rec "$W/negatives.rec" ok false
  FAILED+=(negatives)
fi
rec "$W/negatives.rec" case "${NEG_CASE:-none}"

# Fidelity of the synthetic edit: pairs of real trees of one layout, opposite histories.
: > "$W/fidelity.jsonl"
for a in "${CASES[@]}"; do
  for b in "${CASES[@]}"; do
    [[ $a == *-synthetic || $b == *-synthetic || $a == "$b" ]] && continue
    [[ -f $W/$a-synthetic/tree/.git/HEAD ]] || continue
    la=$(awk -F'\t' '$1 == "layout" {print $2}' "$W/$a.rec"); lb=$(awk -F'\t' '$1 == "layout" {print $2}' "$W/$b.rec")
    ha=$(awk -F'\t' '$1 == "history" {print $2}' "$W/$a.rec"); hb=$(awk -F'\t' '$1 == "history" {print $2}' "$W/$b.rec")
    [[ $la == "$lb" && -n $ha && -n $hb && $ha != "$hb" ]] || continue
    if ! fidelity "$a" "$b" >> "$W/fidelity.jsonl"; then
      FAILED+=("fidelity:$a-synthetic=$b")
    fi
  done
done

TOOLCHAIN="gcc: $(gcc --version | head -n 1); pahole: $(pahole --version); $(git --version); perl: $(perl -e \
  'print $^V')"
INCOMPLETE_SOURCES="$(printf '%s\n' "${FAILED[@]}" | sed -n 's/^source://p')" \
python3 - "$W" "$T_FETCH" "$(since "$T_ALL")" "$TOOLCHAIN" "${CASES[@]}" > "$W/result.json" <<'EOF'
import json
import os
import sys

work, t_fetch, t_all, toolchain, cases = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                                          sys.argv[5:])


JSON_KEYS = ('ok', 'synthetic', 'has_tx_e2e', 'compiler_warnings')


def load(path):
    result = {}
    if not os.path.exists(path):
        return result
    with open(path) as handle:
        for line in handle:
            key, _sep, value = line.rstrip('\n').partition('\t')
            parts = key.split('.')
            if parts[-1] in JSON_KEYS or 'seconds' in parts:
                value = json.loads(value)
            node = result
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
    return result


records = []
for name in cases:
    record = load(os.path.join(work, name + '.rec'))
    evidence = os.path.join(work, name + '.evidence')
    if os.path.exists(evidence):
        with open(evidence) as handle:
            record['evidence'] = handle.read().splitlines()
    flags = os.path.join(work, name + '.flags.json')
    if os.path.exists(flags) and os.path.getsize(flags):
        with open(flags) as handle:
            record['ring_flags'] = json.load(handle)
    records.append(record)
convergence = {}
for record in records:
    if record.get('ok'):
        origin = record['name'][:-len('-synthetic')] if record['name'].endswith('-synthetic') else record['name']
        convergence.setdefault(origin, {})[record['name']] = record.get('patched_driver_sha256')
converged = {origin: len(set(shas.values())) == 1 and len(shas) == 2 for origin, shas in convergence.items()}
fidelity = []
with open(os.path.join(work, 'fidelity.jsonl')) as handle:
    fidelity = [json.loads(line) for line in handle if line.strip()]
negatives = load(os.path.join(work, 'negatives.rec'))
incomplete = os.environ.get('INCOMPLETE_SOURCES', '').split()  # a source whose cases did not run to the end
ok = (bool(records) and all(r.get('ok') for r in records) and all(converged.values())
      and all(f['tbnet_open_identical'] for f in fidelity) and negatives.get('ok') is True and not incomplete)
if not fidelity:
    fidelity = [{'note': 'not checked: the archive has no real trees of both histories for one layout'}]
with open(os.path.join(work, 'sources.json')) as handle:
    sources = json.load(handle)
print(json.dumps({'format': 'inferlab.kernel_patch_check/1', 'ok': ok, 'toolchain': toolchain,
                  'seconds': {'fetch': t_fetch, 'total': t_all},
                  'cases': records, 'convergence': {o: {'identical': converged[o], 'sha256': s}
                                                    for o, s in convergence.items()},
                  'fidelity': fidelity, 'negatives': negatives, 'sources': sources,
                  'incomplete_sources': incomplete}, indent=2))
EOF
cat "$W/result.json"
OK=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ok"])' "$W/result.json")
if [[ $OK != True ]]; then
  log "FAILED: ${FAILED[*]:-convergence or fidelity (see the JSON)}"
  exit 1
fi
log "all ${#CASES[@]} cases, the negative gates, fidelity and convergence passed in $(since "$T_ALL")s"
