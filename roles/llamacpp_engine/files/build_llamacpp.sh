#!/usr/bin/env bash
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Build llama.cpp's `llama-server` and `ggml-rpc-server` (GGML_RPC=ON) from a pinned, hash-checked source, once per
# source and build options, into a cache directory:
#
#   bash build_llamacpp.sh CACHE_DIR
#
# The source is the llama-cpp-python sdist from PyPI (it vendors the whole llama.cpp tree under vendor/llama.cpp),
# fetched with pip and checked against its sha256 before anything is extracted. Only the two targets are built,
# linked statically (BUILD_SHARED_LIBS=OFF), so the binaries need no LD_LIBRARY_PATH. The install goes to
# CACHE_DIR/llamacpp-<sha256 of the source, 16>-<options hash, 8>/bin, and is complete only once its
# build-info.json is there (written last): a second run with the same pins finds it and builds nothing.
#
# Settings (environment; the defaults are the project's pins, the one place they are written):
#   LLAMACPP_SDIST_VERSION  llama-cpp-python version (its sdist; default below)
#   LLAMACPP_SDIST_SHA256   the sdist's sha256 (default below); a mismatch stops before extraction
#   LLAMACPP_NATIVE         ON (default: tuned to this CPU; build on the host that runs it) or OFF (portable)
#   LLAMACPP_JOBS           parallel compile jobs (default: the CPUs)
#   LLAMACPP_FETCH_ONLY     1: fetch and check the sdist only, print {"sdist": PATH, "sha256": ...} and stop (the
#                           controller's half of a build on hosts that reach no package index)
#   LLAMACPP_OFFLINE        1: never fetch; the sdist must already be CACHE_DIR/llama_cpp_python-VERSION.tar.gz (copied
#                           there by the role), else exit 3 saying so. An install already cached needs no sdist.
#
# stdout: one JSON object, the install's build-info.json (bin_dir, version, sha256, options, build seconds, cached).
# Progress goes to stderr; the compiler's output to the install's build.log. Exit 0 on success, 3 when offline and
# the sdist is not there, 1 on any other failure (with the reason and the log's last lines on stderr).
set -Eeuo pipefail
trap 'echo "build_llamacpp: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

VERSION=${LLAMACPP_SDIST_VERSION:-0.3.36}
SHA256=${LLAMACPP_SDIST_SHA256:-832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e}
NATIVE=${LLAMACPP_NATIVE:-ON}
JOBS=${LLAMACPP_JOBS:-$(nproc)}
CACHE=${1:?usage: build_llamacpp.sh CACHE_DIR}

case $NATIVE in ON|OFF) ;; *) echo "build_llamacpp: LLAMACPP_NATIVE must be ON or OFF, found '$NATIVE'" >&2; exit 1 ;; esac
FETCH_ONLY=${LLAMACPP_FETCH_ONLY:-0}
tools="python3 sha256sum flock"
[ "$FETCH_ONLY" = 1 ] || tools="cmake c++ tar $tools"
for tool in $tools; do
  command -v "$tool" > /dev/null || { echo "build_llamacpp: '$tool' is not installed (Debian: cmake g++ python3-pip tar coreutils util-linux)" >&2; exit 1; }
done

# no download at configure time (the web UI prebuilt, curl, OpenSSL): the build reads the sdist and nothing else
OPTIONS=(-DGGML_RPC=ON -DGGML_NATIVE="$NATIVE" -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd -P)
options_hash=$(printf '%s\n' "${OPTIONS[@]}" | sha256sum | cut -c1-8)
PREFIX=$CACHE/llamacpp-${SHA256:0:16}-$options_hash
exec 9> "$CACHE/.build.lock"
flock 9  # one build per cache at a time: a second caller waits, then finds the install

if [ "$FETCH_ONLY" != 1 ] && [ -s "$PREFIX/build-info.json" ]; then
  python3 -c 'import json, sys; info = json.load(open(sys.argv[1])); info["cached"] = True; print(json.dumps(info))' \
    "$PREFIX/build-info.json"
  exit 0
fi

SDIST=$CACHE/llama_cpp_python-$VERSION.tar.gz
if [ ! -s "$SDIST" ] || ! echo "$SHA256  $SDIST" | sha256sum --check --status; then
  if [ "${LLAMACPP_OFFLINE:-0}" = 1 ]; then
    if [ ! -s "$SDIST" ]; then
      echo "build_llamacpp: not built yet, and offline: put the sdist at $SDIST first" >&2
      exit 3
    fi
  else
    echo "build_llamacpp: fetching llama-cpp-python $VERSION (sdist)" >&2
    rm -rf "$CACHE/download" && mkdir -p "$CACHE/download"
    python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$CACHE/download" "llama-cpp-python==$VERSION" >&2
    mv "$CACHE/download/llama_cpp_python-$VERSION.tar.gz" "$SDIST"
  fi
fi
found=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$found" != "$SHA256" ]; then
  echo "build_llamacpp: $SDIST has sha256 $found, expected $SHA256 (LLAMACPP_SDIST_SHA256): not extracted" >&2
  exit 1
fi
if [ "$FETCH_ONLY" = 1 ]; then
  printf '{"sdist": "%s", "sha256": "%s"}\n' "$SDIST" "$SHA256"
  exit 0
fi

rm -rf "$PREFIX" && mkdir -p "$PREFIX/bin"
started=$(date +%s)
echo "build_llamacpp: extracting vendor/llama.cpp and building llama-server and ggml-rpc-server ($JOBS jobs)" >&2
# the vendored tree and its git directory (a submodule's: vendor/llama.cpp/.git points at .git/modules/...), so that
# the build's version names its commit
src=$PREFIX/vendor/llama.cpp
tar -xzf "$SDIST" -C "$PREFIX" --strip-components=1 "llama_cpp_python-$VERSION/vendor/llama.cpp" \
  "llama_cpp_python-$VERSION/.git/modules/vendor/llama.cpp"
if ! { cmake -S "$src" -B "$PREFIX/build" "${OPTIONS[@]}" &&
       cmake --build "$PREFIX/build" -j "$JOBS" --target llama-server ggml-rpc-server; } > "$PREFIX/build.log" 2>&1; then
  echo "build_llamacpp: the build failed; the end of $PREFIX/build.log:" >&2
  tail -n 30 "$PREFIX/build.log" >&2
  exit 1
fi
cp "$PREFIX/build/bin/llama-server" "$PREFIX/build/bin/ggml-rpc-server" "$PREFIX/bin/"
version=$("$PREFIX/bin/llama-server" --version 2>&1 | grep -m1 '^version' || true)
rm -rf "$PREFIX/build" "$PREFIX/vendor" "$PREFIX/.git"
python3 - "$PREFIX" "$VERSION" "$SHA256" "$version" "$(( $(date +%s) - started ))" "${OPTIONS[@]}" <<'PY'
import json, os, sys
prefix, sdist_version, sha256, version, seconds, *options = sys.argv[1:]
info = {"bin_dir": os.path.join(prefix, "bin"), "source": "llama-cpp-python " + sdist_version + " (sdist, vendor/llama.cpp)",
        "sha256": sha256, "version": version, "cmake_options": options, "build_seconds": int(seconds), "cached": False}
with open(os.path.join(prefix, "build-info.json.partial"), "w") as handle:
    json.dump(info, handle, indent=2)
os.replace(os.path.join(prefix, "build-info.json.partial"), os.path.join(prefix, "build-info.json"))
print(json.dumps(info))
PY
