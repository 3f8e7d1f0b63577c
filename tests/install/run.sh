#!/usr/bin/env bash
# Install the package (a wheel, not editable) and the collection (the tarball ansible-galaxy builds) as a user would,
# into a fresh venv and a collection path of their own, and check that they work without this checkout.
#
#   bash tests/install/run.sh DIR              build, install, check the tarball, --version and query
#   bash tests/install/run.sh DIR INVENTORY    the same (once: DIR/.installed), then `inferlab run verify --check`
#                                              against the lab that INVENTORY names (molecule's verifiers call this)
#
# Everything it makes stays in DIR (the wheel and tarball in DIR/dist, the venv in DIR/venv, the collection in
# DIR/collections, run directories in DIR/runs). The commands under test run from DIR with this checkout's Ansible
# settings out of their environment (ANSIBLE_CONFIG, PYTHONPATH), so only what was installed can answer.
set -euo pipefail
trap 'echo "install: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
DIR=$(mkdir -p "$1" && cd "$1" && pwd -P)
INVENTORY=${2:+$(realpath "$2")}  # the commands under test run from DIR
VENV=$ROOT/.venv

# As a user's fresh shell would be: none of the caller's Ansible, molecule or Python settings (a molecule verifier
# calls this with its own ANSIBLE_* set), the fresh venv first on PATH, the collection where ansible-galaxy put it.
user_env() {
  env -i HOME="$HOME" LANG=C.UTF-8 PATH="$DIR/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" "$@"
}
installed() {
  (cd "$DIR" && user_env ANSIBLE_COLLECTIONS_PATH="$DIR/collections" INFERLAB_RUNS="$DIR/runs" "$@")
}

build_and_install() {
  rm -rf "$DIR/dist" "$DIR/venv" "$DIR/collections" "$DIR/runs" "$DIR/.installed"
  "$VENV/bin/python" -m pip wheel -q --no-deps --wheel-dir "$DIR/dist" "$ROOT"
  (cd "$ROOT" && env -u ANSIBLE_CONFIG "$VENV/bin/ansible-galaxy" collection build --output-path "$DIR/dist" .) >/dev/null
  local tarball wheel
  tarball=$(ls "$DIR"/dist/inferlab-distributed-*.tar.gz)
  wheel=$(ls "$DIR"/dist/inferlab-*.whl)

  # The tarball is the collection: its content, and nothing of the package, the tests or the build files.
  tar -tzf "$tarball" | sed 's|^\./||' > "$DIR/tarball.txt"
  for wanted in MANIFEST.json FILES.json meta/runtime.yml playbooks/experiment.yml docs/ARCHITECTURE.md \
      roles/ledger/tasks/install.yml plugins/modules/counter_window.py; do
    grep -qx "$wanted" "$DIR/tarball.txt" || { echo "install: $tarball lacks $wanted" >&2; exit 1; }
  done
  if grep -E '^(src|tests|molecule|inventory|\.ci|\.collections)(/|$)|^(Makefile|pyproject\.toml|ansible\.cfg|constraints.*\.txt)$' \
      "$DIR/tarball.txt"; then
    echo "install: $tarball holds files that are not the collection's (listed above): galaxy.yml build_ignore" >&2
    exit 1
  fi
  # The wheel carries the checkout's ansible.cfg (the package's link to it, as a file) and every module of the
  # package's subpackages.
  "$VENV/bin/python" - "$wheel" "$ROOT/src" <<'EOF'
import pathlib, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
modules = [p.relative_to(sys.argv[2]).as_posix() for p in pathlib.Path(sys.argv[2], "inferlab").rglob("*.py")]
missing = [n for n in ("inferlab/ansible.cfg", "inferlab/schemas/record.schema.json", *modules) if n not in names]
sys.exit(f"install: {sys.argv[1]} lacks {missing}" if missing else 0)
EOF

  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip install -q --no-compile -c "$ROOT/constraints.txt" "$wheel"
  installed ansible-galaxy collection install -p "$DIR/collections" "$tarball" >/dev/null

  # --version names both, read from the installed package's metadata and the installed collection's MANIFEST.json
  installed inferlab --version > "$DIR/version.txt"
  grep -qx "inferlab $(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml")" "$DIR/version.txt"
  grep -qx "inferlab.distributed $(sed -n 's/^version: //p' "$ROOT/galaxy.yml")" "$DIR/version.txt"
  # the package is the installed one, not this checkout's source
  installed python -c 'import inferlab, sys; sys.exit(0 if "/venv/lib/" in inferlab.__file__ else inferlab.__file__)'

  # query over a real record (a report fixture), found by name under INFERLAB_RUNS
  mkdir -p "$DIR/runs/fixture-experiment"
  cp "$ROOT/tests/unit/fixtures/report/experiment_kernel.json" "$DIR/runs/fixture-experiment/record.json"
  [[ $(installed inferlab query fixture-experiment run.status --raw) == successful ]]

  # without the collection, a run says where it looked and what to set, and changes nothing
  if out=$(cd "$DIR" && HOME=$DIR user_env ANSIBLE_COLLECTIONS_PATH="$DIR/nowhere" inferlab run verify --check 2>&1); then
    echo "install: inferlab run verify without a collection passed: $out" >&2
    exit 1
  fi
  grep -q "the inferlab.distributed collection was not found .*INFERLAB_COLLECTION" <<<"$out" \
    || { echo "install: unexpected message without a collection: $out" >&2; exit 1; }
  touch "$DIR/.installed"
}

exec 9>"$DIR.lock"
flock 9
if [[ -z $INVENTORY || ! -e $DIR/.installed ]]; then
  build_and_install
fi
if [[ -n $INVENTORY ]]; then
  installed inferlab run verify --check -i "$INVENTORY" --run-dir "$DIR/runs/verify-check-$(date -u +%Y%m%dT%H%M%S%N)"
fi
echo "install: passed ($DIR)"
