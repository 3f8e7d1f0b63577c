#!/usr/bin/env bash
# Build the venv the SGLang contract test runs in (tests/contract/README.md):
#
#   bash tests/contract/setup_venv.sh VENV_DIR
#
# - pytest, always, so that the test can at least run and say why it skips;
# - sglang 0.5.23 with --no-deps, plus only the packages `sglang.srt.server_args` and its speculative handling import
#   (a full install pulls a multi-GB CUDA stack), every one pinned and installed with --no-deps, so pip never
#   resolves anything on its own;
# - torch 2.13.0 only from the CPU wheel on this disk (/opt/wheels). Without that wheel pip would fetch a CUDA build:
#   the script installs no torch and no sglang, writes VENV_DIR/inferlab-contract-skip.txt saying why, exits 0, and
#   the test skips with that text;
# - tests/contract/triton_stub on the venv's path (a .pth file): sglang imports triton unconditionally, and the real
#   one is about 1 GB of GPU compiler that parsing arguments never calls.
# A second run with the same pins finds VENV_DIR/inferlab-contract.stamp and only rewrites the .pth file.
set -euo pipefail
trap 'echo "setup_venv: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

VENV=${1:?usage: bash tests/contract/setup_venv.sh VENV_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
PYTHON=${PYTHON:-python3}
TORCH_VERSION=2.13.0
TORCH_WHEEL_GLOB="/opt/wheels/torch-${TORCH_VERSION}+cpu-cp311-cp311-*.whl"

# pytest as in the main venv (pyproject.toml), with its own dependencies.
TEST_PINS=(pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0 packaging==26.4 pygments==2.21.0)
# sglang, and what importing sglang.srt.server_args and running its speculative hook needs (found by importing it
# in an empty venv until nothing was missing).
SGLANG_PINS=(
  sglang==0.5.23
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-types==0.8.0 anyio==4.16.0 attrs==26.1.0
  certifi==2026.10.19.post1 charset-normalizer==3.5.3 frozenlist==1.8.0 idna==3.20 ipython==9.18.1
  msgspec==0.23.0 multidict==7.2.1 numpy==2.4.6 orjson==3.13.0 pillow==13.0.0 propcache==0.5.4 psutil==7.2.2
  pybase64==1.5.1 pydantic==2.14.4 pydantic-core==2.50.5 pyzmq==27.3.0 requests==2.34.2 starlette==1.10.0
  tqdm==4.70.1 traitlets==5.16.1 typing-extensions==4.16.0 typing-inspection==0.4.5 urllib3==2.8.0 yarl==1.25.1
)

start=$SECONDS
skip_reason=""
torch_wheel=""
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  skip_reason="the SGLang contract test needs CPython 3.11 (the torch and sglang wheels are cp311); $PYTHON is not"
else
  mapfile -t wheels < <(compgen -G "$TORCH_WHEEL_GLOB" | sort)
  if (( ${#wheels[@]} == 0 )); then
    skip_reason="no CPU torch ${TORCH_VERSION} wheel matches ${TORCH_WHEEL_GLOB}; without it pip would fetch a multi-GB CUDA build, so the SGLang contract test is skipped"
  else
    torch_wheel=${wheels[-1]}
  fi
fi

stamp_text=$(printf '%s\n' "python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo none)" \
  "torch ${torch_wheel:-absent}" "${TEST_PINS[@]}" "${SGLANG_PINS[@]}")
stamp=$VENV/inferlab-contract.stamp

write_pth() {
  local site
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$HERE/triton_stub" >"$site/inferlab-triton-stub.pth"
}

if [[ -f $stamp && $(<"$stamp") == "$stamp_text" ]]; then
  write_pth
  echo "setup_venv: $VENV is up to date ($((SECONDS - start)) s)"
  exit 0
fi

if [[ -e $VENV && ! -f $VENV/pyvenv.cfg && -n $(ls -A "$VENV") ]]; then
  echo "setup_venv: $VENV exists and is not a venv; refusing to clear it" >&2
  exit 2
fi
echo "setup_venv: building $VENV"
"$PYTHON" -m venv --clear "$VENV"
pip=("$VENV/bin/python" -m pip install --quiet --quiet --disable-pip-version-check --no-input --no-deps --only-binary=:all:)
"${pip[@]}" "${TEST_PINS[@]}"
if [[ -n $skip_reason ]]; then
  printf '%s\n' "$skip_reason" >"$VENV/inferlab-contract-skip.txt"
  echo "setup_venv: $skip_reason" >&2
else
  "${pip[@]}" "$torch_wheel" "${SGLANG_PINS[@]}"
fi
write_pth
printf '%s\n' "$stamp_text" >"$stamp"
echo "setup_venv: $VENV ready ($((SECONDS - start)) s)"
