#!/usr/bin/env bash
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Fetch what tests/kernel/check_patch.sh needs, from the Debian archive apt already uses, into a cache directory,
# without installing anything (`apt-get download` + `dpkg-deb -x`; nothing touches /boot, /usr/src or /lib/modules):
#
#   bash tests/kernel/fetch_sources.sh [CACHE_DIR]        (default .cache/kernel, relative to the current directory)
#
# Kernel lines: 6.1 (Debian 12's own kernel, meta package linux-headers-amd64) and 6.12 (the newer line Debian 12
# carries, meta package linux-headers-6.12-amd64). Every version of the meta package that apt lists (apt-cache
# madison: today 6.1.192-3 from bookworm-security and 6.1.176-1 from the bookworm point release, and one 6.12) is a
# "source" of its own; the ABI is derived at run time from what that meta version depends on, never hard-coded
# (the meta packages follow security updates). Per source VERSION:
#   - headers: the ABI package (linux-headers-ABI), its -common package and its linux-kbuild package, all of that
#     version, extracted together into CACHE_DIR/KVER/VERSION/root (their relative symlinks resolve there; each
#     version gets its own root because linux-kbuild-6.1 has the same paths in every 6.1 upload); build against
#     CACHE_DIR/KVER/VERSION/root/usr/src/linux-headers-ABI;
#   - source: linux-source-KVER of exactly that version; out of its tarball (streamed, never written to disk) only
#     the top-level Makefile (for the version), drivers/net/thunderbolt* and scripts/checkpatch.pl,
#     scripts/spelling.txt, scripts/const_structs.checkpatch are extracted, into CACHE_DIR/KVER/VERSION/src.
# Why every version: the driver's TX E2E history differs between uploads (Debian's changelog: the stable backport
# of "net: thunderbolt: Enable end-to-end flow control also in transmit" arrived in 6.1.153-1 and its revert in
# 6.1.187-1), so the older point-release source is a real tree of the other history.
# The .deb files stay in CACHE_DIR/debs (shared with tests/kernel/build_guest.sh); each extraction leaves a stamp
# naming the .deb files it came from, so a second run against the same archive state downloads and extracts nothing
# (it still asks apt-cache for the current versions).
#
# stdout: one JSON object (format inferlab.kernel_sources/1): per source the line, version, suite, ABI, whether it
# is apt's candidate, the paths, the .deb files and the seconds spent. Progress and timings go to stderr.
# Exit 0 on success, 1 on any failure (with the reason on stderr).
set -Eeuo pipefail
trap 'echo "fetch_sources: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CACHE=${1:-.cache/kernel}
mkdir -p "$CACHE/debs"
CACHE=$(cd "$CACHE" && pwd -P)
DEBS=$CACHE/debs
# One fetch at a time per cache. tests/kernel/build_guest.sh shares the directory with its own lock and entries
# (debs/linux-image-*, image/, rootfs/, ...); this script writes only debs/linux-{headers,kbuild,source}-* and
# KVER/, and never clears anything else.
exec 9>"$CACHE/.fetch_sources.lock"
if ! flock -n 9; then
  echo "fetch_sources: another run holds $CACHE/.fetch_sources.lock; waiting" >&2
  flock 9
fi

for tool in apt-get apt-cache dpkg-deb tar xz flock python3; do
  command -v "$tool" >/dev/null || { echo "fetch_sources: '$tool' not found" >&2; exit 1; }
done

log() { echo "fetch_sources: $*" >&2; }
now() { date +%s.%N; }

# What apt lists is resolved again only when its lists or this script changed: the last answer is kept in
# CACHE/sources.resolved.json with a key made of both, and read back (every source's extraction stamps still there)
# instead of asking apt-cache again, which costs about 15 CPU-s for the three sources.
RESOLVED=$CACHE/sources.resolved.json
RESOLVED_KEY=$( { sha256sum < "$0"; ls -l --time-style=+%s /var/lib/apt/lists/ 2>/dev/null || true; } | sha256sum \
  | cut -d' ' -f1)
if python3 - "$RESOLVED" "$RESOLVED_KEY" "$CACHE" <<'EOF'
import json
import os
import sys

try:
    with open(sys.argv[1]) as handle:
        kept = json.load(handle)
except (OSError, ValueError):
    sys.exit(1)
sources = kept.get('sources') if isinstance(kept, dict) else None
if kept.get('key') != sys.argv[2] or kept.get('cache_dir') != sys.argv[3] or not sources or not all(
        os.path.isfile(os.path.join(path, '.inferlab-extracted')) for s in sources for path in s['stamped_dirs']):
    sys.exit(1)
print(json.dumps({**{k: v for k, v in kept.items() if k != 'key'}, 'resolved_from_cache': True}, indent=2))
EOF
then
  log "apt's lists and this script are unchanged since the last run: its sources ($RESOLVED)"
  exit 0
fi
elapsed() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$(now)"; }

# The Depends field of PKG at VERSION, one package name per line (version constraints and alternatives dropped).
depends_of() {
  apt-cache show --no-all-versions "$1=$2" | sed -n 's/^Depends: //p' | head -n 1 \
    | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*//' -e 's/[[:space:]]//g' | sed '/^$/d'
}

# apt-get download PKG=VERSION into $DEBS unless the file is there already; prints the .deb path.
download() {
  local pkg=$1 version=$2 arch file
  file=$(compgen -G "$DEBS/${pkg}_${version//:/%3a}_*.deb" | head -n 1 || true)
  if [[ -n $file && -s $file ]]; then
    echo "$file"
    return 0
  fi
  arch=$(apt-cache show --no-all-versions "$pkg=$version" | sed -n 's/^Architecture: //p' | head -n 1)
  [[ -n $arch ]] || { log "apt knows no $pkg=$version"; return 1; }
  file="$DEBS/${pkg}_${version//:/%3a}_${arch}.deb"
  if [[ ! -s $file ]]; then
    log "downloading $pkg=$version"
    (cd "$DEBS" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$version" >&2)
  fi
  [[ -s $file ]] || { log "apt-get download $pkg=$version did not leave $file"; return 1; }
  echo "$file"
}

SOURCES_JSON=()

# fetch_source KVER META VERSION SUITE CANDIDATE: one source (headers + driver) of one kernel line.
fetch_source() {
  local kver=$1 meta=$2 version=$3 suite=$4 is_candidate=$5
  local t0 t_dl t_hdr t_src abi_pkg abi common kbuild src_pkg f_abi f_common f_kbuild f_src stamp root src headers
  t0=$(now)
  abi_pkg=$(depends_of "$meta" "$version" | grep -E '^linux-headers-' | head -n 1)
  [[ -n $abi_pkg ]] || { log "$meta $version depends on no linux-headers-ABI package"; return 1; }
  abi=${abi_pkg#linux-headers-}
  common=$(depends_of "$abi_pkg" "$version" | grep -E '^linux-headers-.*-common$' | head -n 1)
  kbuild=$(depends_of "$abi_pkg" "$version" | grep -E '^linux-kbuild-' | head -n 1)
  [[ -n $common && -n $kbuild ]] || { log "$abi_pkg $version: no -common or linux-kbuild dependency"; return 1; }
  src_pkg=linux-source-$kver
  # The source of exactly the headers' version: the ABI's .config and the driver come from the same upload.
  if ! apt-cache show --no-all-versions "$src_pkg=$version" >/dev/null 2>&1; then
    log "$src_pkg has no version $version (the headers' version); apt lists: $(apt-cache madison "$src_pkg" \
      | awk -F'|' '{print $2}' | tr -d ' ' | tr '\n' ' ')"
    return 1
  fi
  log "$kver $version ($suite): $meta -> $abi_pkg (+ $common, $kbuild, $src_pkg)"
  f_abi=$(download "$abi_pkg" "$version")
  f_common=$(download "$common" "$version")
  f_kbuild=$(download "$kbuild" "$version")
  f_src=$(download "$src_pkg" "$version")
  t_dl=$(elapsed "$t0")

  t0=$(now)
  root=$CACHE/$kver/$version/root
  stamp=$root/.inferlab-extracted
  if [[ ! -f $stamp ]] || [[ $(cat "$stamp") != "$(basename -a "$f_abi" "$f_common" "$f_kbuild")" ]]; then
    log "$kver $version: extracting the headers into $root"
    rm -rf "$root"
    mkdir -p "$root"
    for deb in "$f_abi" "$f_common" "$f_kbuild"; do dpkg-deb -x "$deb" "$root"; done
    # The ABI directory's Makefile is one line, `include /usr/src/linux-headers-ABI-common/Makefile`: an absolute
    # path into the installed location. Point it at the extracted -common instead (the only absolute path the
    # out-of-tree build follows; scripts/ and tools/ are relative symlinks into usr/lib/linux-kbuild-*).
    sed -i "s|^include /usr/src/|include $root/usr/src/|" "$root/usr/src/linux-headers-$abi/Makefile"
    basename -a "$f_abi" "$f_common" "$f_kbuild" > "$stamp"
  fi
  headers=$root/usr/src/linux-headers-$abi
  if [[ ! -f $headers/.config || ! -x $headers/scripts/basic/fixdep ]] \
      || ! grep -qxF "include $root/usr/src/$common/Makefile" "$headers/Makefile"; then
    log "$headers is incomplete (.config, scripts/basic/fixdep or the relocated include missing)"
    return 1
  fi
  t_hdr=$(elapsed "$t0")

  t0=$(now)
  src=$CACHE/$kver/$version/src
  stamp=$src/.inferlab-extracted
  # the stamp names the .deb and what was taken from it (v2: the top-level Makefile too, for the kernel version)
  if [[ ! -f $stamp ]] || [[ $(cat "$stamp") != "$(basename "$f_src") v2" ]]; then
    log "$kver $version: extracting the driver, the Makefile and checkpatch from $(basename "$f_src")"
    rm -rf "$src" "$src.tmp"
    mkdir -p "$src.tmp"
    dpkg-deb --fsys-tarfile "$f_src" | tar -xOf - "./usr/src/linux-source-$kver.tar.xz" \
      | tar -xJf - -C "$src.tmp" --strip-components=1 --wildcards \
        "linux-source-$kver/Makefile" \
        "linux-source-$kver/drivers/net/thunderbolt*" \
        "linux-source-$kver/scripts/checkpatch.pl" \
        "linux-source-$kver/scripts/spelling.txt" \
        "linux-source-$kver/scripts/const_structs.checkpatch"
    echo "$(basename "$f_src") v2" > "$src.tmp/.inferlab-extracted"
    mv "$src.tmp" "$src"
  fi
  for f in Makefile scripts/checkpatch.pl scripts/spelling.txt scripts/const_structs.checkpatch; do
    [[ -s $src/$f ]] || { log "$src/$f missing after extraction"; return 1; }
  done
  t_src=$(elapsed "$t0")

  SOURCES_JSON+=("$(python3 - "$kver" "$meta" "$version" "$suite" "$is_candidate" "$abi" "$headers" "$src" \
    "$t_dl" "$t_hdr" "$t_src" "$f_abi" "$f_common" "$f_kbuild" "$f_src" <<'EOF'
import json
import os
import sys

kver, meta, version, suite, is_candidate, abi, headers, src, t_dl, t_hdr, t_src = sys.argv[1:12]
driver = sorted(os.path.relpath(os.path.join(top, name), src)
                for top, dirs, files in os.walk(os.path.join(src, 'drivers')) for name in files)
print(json.dumps({
    'line': kver, 'version': version, 'suite': suite, 'candidate': is_candidate == 'yes',
    'meta_package': meta, 'abi': abi, 'headers_dir': headers, 'source_dir': src, 'driver_files': driver,
    'checkpatch': os.path.join(src, 'scripts', 'checkpatch.pl'),
    # the directories whose .inferlab-extracted stamp says they are complete (the resolution's cache checks them)
    'stamped_dirs': [os.path.join(os.path.dirname(src), 'root'), src],
    'debs': [os.path.basename(path) for path in sys.argv[12:]],
    'seconds': {'download': float(t_dl), 'extract_headers': float(t_hdr), 'extract_source': float(t_src)},
}))
EOF
)")
  log "$kver $version: done (download ${t_dl}s, headers ${t_hdr}s, source ${t_src}s)"
}

# fetch_line KVER META: every version of META that apt lists (newest first).
fetch_line() {
  local kver=$1 meta=$2 candidate version suite seen=' '
  candidate=$(apt-cache policy "$meta" | sed -n 's/^ *Candidate: //p')
  if [[ -z $candidate || $candidate == '(none)' ]]; then
    log "apt knows no $meta (run apt-get update; without it there are no $kver headers to build against)"
    return 1
  fi
  while IFS='|' read -r _pkg version suite; do
    version=${version// /}
    suite=$(echo "$suite" | awk '{print $2}')
    [[ $seen == *" $version "* ]] && continue
    seen+="$version "
    if [[ $version != "$candidate" ]] && ! apt-cache show --no-all-versions "linux-source-$kver=$version" \
        >/dev/null 2>&1; then
      log "$kver $version ($suite): skipped, apt has no linux-source-$kver of that version"
      continue
    fi
    fetch_source "$kver" "$meta" "$version" "$suite" "$([[ $version == "$candidate" ]] && echo yes || echo no)"
  done < <(apt-cache madison "$meta")
}

T0=$(now)
fetch_line 6.1 linux-headers-amd64
fetch_line 6.12 linux-headers-6.12-amd64

python3 - "$CACHE" "$(elapsed "$T0")" "$RESOLVED" "$RESOLVED_KEY" "${SOURCES_JSON[@]}" <<'EOF'
import json
import os
import sys

result = {'format': 'inferlab.kernel_sources/1', 'cache_dir': sys.argv[1], 'seconds': float(sys.argv[2]),
          'sources': [json.loads(text) for text in sys.argv[5:]], 'resolved_from_cache': False}
tmp = sys.argv[3] + '.tmp'
with open(tmp, 'w') as handle:
    json.dump({**result, 'key': sys.argv[4]}, handle, indent=2)
os.replace(tmp, sys.argv[3])
print(json.dumps(result, indent=2))
EOF
