#!/usr/bin/env bash
# Run `ansible-test sanity` or `ansible-test units` on the collection's working tree, without network access to
# the Ansible project's file host.
#
#   bash tests/ansible_test/run.sh sanity [extra ansible-test sanity options, e.g. --test validate-modules]
#   bash tests/ansible_test/run.sh units [extra ansible-test units options]
#
# `units` runs the collection's tests (tests/unit/) the way ansible-test runs them: each in its context (modules,
# module_utils, controller), through Ansible's collection loader. The package's tests (tests/package/) are not the
# collection's; `make unit` runs them with pytest.
#
# 1. ansible-test only runs from a directory whose path ends in ansible_collections/NS/NAME, and it
#    resolves symlinks, so the working tree as git sees it (tracked + untracked-not-ignored files,
#    uncommitted changes included) is copied to
#    tests/output/.ansible-test-tree/ansible_collections/NS/NAME. The copy gets its own empty git
#    repository: ansible-test lists a collection's files with `git ls-files` from the nearest .git
#    upwards, and without one it would find this checkout's .git, in which tests/output is ignored.
# 2. ansible-test bootstraps pip into each test venv with get-pip.py from ci-files.testing.ansible.com
#    unless ~/.ansible/test/cache/get_pip_<pip version>.py exists. We put tests/ansible_test/get_pip_offline.py
#    there (ensurepip's bundled pip + pip install from the configured index). A cached script that is
#    not ours (no marker line) is left alone.
# 3. ansible-test COMMAND --venv --python X.Y runs in the copy; its status is ours.
#    The log (tests/output/.ansible-test-tree/COMMAND.log) and results (the copy's tests/output/) stay until the next run.
set -euo pipefail
COMMAND=${1:-}
case $COMMAND in
  sanity | units) shift ;;
  *) echo "ansible-test: expected 'sanity' or 'units' as the first argument, found '$COMMAND'" >&2; exit 2 ;;
esac
trap 'echo "$COMMAND: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT"

if [[ -d $ROOT/.venv/bin ]]; then
  PATH=$ROOT/.venv/bin:$PATH
fi
for tool in ansible-test python git tar flock; do
  command -v "$tool" >/dev/null || { echo "$COMMAND: '$tool' not found (run 'make bootstrap')" >&2; exit 2; }
done

# Ansible settings of the checkout (collections_path = .collections, ...) must not leak into the run:
# ansible-test points Ansible at the copy itself.
unset ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS

read -r NAMESPACE NAME PYVER PIP_VERSION < <(python - <<'EOF'
import sys
import types

import yaml
from ansible_test._internal.python_requirements import get_venv_packages

with open("galaxy.yml", encoding="utf-8") as f:
    galaxy = yaml.safe_load(f)
pyver = "%d.%d" % sys.version_info[:2]
print(galaxy["namespace"], galaxy["name"], pyver, get_venv_packages(types.SimpleNamespace(version=pyver))["pip"])
EOF
)
: "${NAMESPACE:?could not read galaxy.yml}" "${PIP_VERSION:?could not read the pip version ansible-test wants}"

# One run at a time: the copy and ansible-test's venv cache (~/.ansible/test/venv) are shared.
mkdir -p "$HOME/.ansible/test/cache"
exec 9>"$HOME/.ansible/test/inferlab-ansible-test.lock"
if ! flock -n 9; then
  echo "$COMMAND: another ansible-test run holds $HOME/.ansible/test/inferlab-ansible-test.lock; waiting" >&2
  flock 9
fi

start=$SECONDS

# --- 1. copy of the working tree -------------------------------------------------------------------
TREE=$ROOT/tests/output/.ansible-test-tree
COPY=$TREE/ansible_collections/$NAMESPACE/$NAME
mkdir -p "$COPY/tests"
# Start from an empty copy each time, but keep its git repository and tests/output/: ansible-test
# keeps the controller venv it delegates to there (tests/output/.tmp/delegation), ~5 s to rebuild.
find "$COPY" -mindepth 1 -maxdepth 1 ! -name .git ! -name tests -exec rm -rf {} +
find "$COPY/tests" -mindepth 1 -maxdepth 1 ! -name output -exec rm -rf {} +
# Tracked files deleted in the working tree are still listed by --cached: skip what is gone.
git -c core.quotePath=false ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do
      if [[ $f != tests/output/* ]] && [[ -e $f || -L $f ]]; then
        printf '%s\0' "$f"
      fi
    done \
  | tar -C "$ROOT" --null --no-recursion -T - -cf - \
  | tar -C "$COPY" -xf -
[[ -d $COPY/.git ]] || git -C "$COPY" -c init.defaultBranch=main init -q
printf '/tests/output/\n' >"$COPY/.git/info/exclude"
echo "$COMMAND: copied $(git -C "$COPY" ls-files -co --exclude-standard | wc -l) files to $COPY"

# --- 2. offline pip bootstrap -----------------------------------------------------------------------
MARKER='# inferlab-offline-get-pip'
OURS=$ROOT/tests/ansible_test/get_pip_offline.py
CACHED=$HOME/.ansible/test/cache/get_pip_${PIP_VERSION//./_}.py
first_line=
if [[ -e $CACHED ]]; then
  IFS= read -r first_line <"$CACHED" || true
fi
if [[ ! -e $CACHED ]] || { [[ $first_line == "$MARKER"* ]] && ! cmp -s "$OURS" "$CACHED"; }; then
  cp "$OURS" "$CACHED.inferlab.tmp"
  mv -f "$CACHED.inferlab.tmp" "$CACHED"
  echo "$COMMAND: installed offline pip bootstrap as $CACHED"
elif [[ $first_line != "$MARKER"* ]]; then
  echo "$COMMAND: using the existing pip bootstrap $CACHED (not ours, left alone)"
fi

# --- 3. ansible-test COMMAND ------------------------------------------------------------------------
LOG=$TREE/$COMMAND.log
cd "$COPY"
echo "$COMMAND: ansible-test $COMMAND --venv --python $PYVER --color no $*"
rc=0
ansible-test "$COMMAND" --venv --python "$PYVER" --color no "$@" 2>&1 | tee "$LOG" || rc=${PIPESTATUS[0]}

if [[ $COMMAND == sanity ]]; then
  ran=$(sed -nE 's/^Running sanity test "([^"]+)".*/\1/p' "$LOG" | tr '\n' ' ')
  echo "sanity: tests run: ${ran:-none}"
  if grep -qE '^WARNING: (Skipping sanity test|Required program)' "$LOG"; then
    echo "sanity: skipped or incomplete:"
    grep -E '^WARNING: (Skipping sanity test|Required program)' "$LOG" | sed 's/^/  /'
  fi
fi
echo "$COMMAND: exit status $rc after $((SECONDS - start)) s; log ${LOG#"$ROOT"/}, results ${COPY#"$ROOT"/}/tests/output/"
exit "$rc"
