"""Every reader of record.json against damaged and hostile records: mutants of the golden records (the report and
compare fixtures, real records the writer produced), made deterministically from a seed. Each mutant must give a
clear error (record.RecordError, or the reader's own error that the CLI prints as a message) or a result, never
another exception: `runs list` and `runs prune`, `query` and `--where`, `matrix`, the report (its text, summary and
plot plan) and `compare`.

INFERLAB_FUZZ_MUTANTS=N runs N mutants per golden record (a longer search, by hand) instead of the few the suite
runs."""

import copy
import json
import os
import random
import shutil
import traceback

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab.analysis import compare, matrix, record_input, run_layers
from inferlab.plots import plots
from inferlab.record import query, record, runs
from inferlab.report import compare_output, report
from inferlab.report import matrix as matrix_text

GOLDEN = [
    *sorted((FIXTURE_ROOT / "report").glob("*.json")),
    *(FIXTURE_ROOT / "compare" / f"{name}.json" for name in ("serve_tp2", "serve_tp2_nextn", "link_lossy")),
]
SEED = 39
MUTANTS = int(os.environ.get("INFERLAB_FUZZ_MUTANTS", "25"))
RUN_NAME = "20261130T100000Z-experiment"
# Values of every JSON type, and the edges a reader might not expect of each.
ODD_VALUES = (None, True, False, 0, -1, 2**62, 0.5, -1e300, "", "x", "2026-11-30T10:00:00Z", [], [None], [0], ["x"],
              [{}], {}, {"x": 1}, {"": None})
# One expression that walks the record several ways: projections, a sort, a max_by and a filter.
QUERY = ("[run.status, serving.*.trials.figures.*.median, max_by(values(journal), &index).stage, "
         "restore && !contains(values(restore)[*].verified, `false`), sort(keys(@))]")
# What a reader may raise on a record it refuses: each is printed by the CLI as one message.
CLEAR_ERRORS = (record.RecordError, query.QueryError, record_input.CompareError, matrix.MatrixError)


def places(value, path=()):
    """Every path to a value inside `value` (dict keys and list indexes), `value` itself first."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += places(item, (*path, index))
    return found


def parent_of(data, path):
    for step in path[:-1]:
        data = data[step]
    return data


def mutate(golden: dict, rng: random.Random) -> tuple[str, dict]:
    """One mutant of `golden`: a value replaced by one of another shape, a key removed or added, a list emptied or
    an item repeated; returns what was done and the mutant."""
    data = copy.deepcopy(golden)
    path = rng.choice(places(data)[1:])
    parent, last = parent_of(data, path), path[-1]
    kind = rng.choice(("replace", "replace", "replace", "remove", "add", "repeat"))
    where = "/".join(map(str, path))
    if kind == "remove" and isinstance(parent, dict):
        del parent[last]
        return f"removed {where}", data
    if kind == "add" and isinstance(parent[last], dict):
        parent[last][rng.choice(("x", "", "run", "verified"))] = rng.choice(ODD_VALUES)
        return f"added a key to {where}", data
    if kind == "repeat" and isinstance(parent[last], list) and parent[last]:
        parent[last].append(copy.deepcopy(rng.choice(parent[last])))
        return f"repeated an item of {where}", data
    parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    return f"replaced {where} by {parent[last]!r}", data


def mutants(golden: dict, seed: int):
    """MUTANTS mutants of one golden record, the same ones on every run: (what was done, the mutant's bytes)."""
    rng = random.Random(seed)
    for n in range(MUTANTS):
        what, data = mutate(golden, rng)
        yield f"#{n}: {what}", json.dumps(data).encode()


# Bytes no writer produces, each once through every reader.
DAMAGED = [
    ("bad UTF-8", b'{"schema_version": 1, "run": "\xff"}'),
    ("a byte-order mark", b"\xef\xbb\xbf{}"),
    ("deep nesting", b'{"x": ' + b"[" * 200000 + b"]" * 200000 + b"}"),
    ("cut short", (FIXTURE_ROOT / "report" / "serve.json").read_bytes()[:8000]),
    ("a list", b"[]"),
    ("run a list", b'{"schema_version": 1, "run": []}'),
    ("NaN", b'{"schema_version": NaN}'),
    ("an integer of 5000 digits", b'{"schema_version": ' + b"9" * 5000 + b"}"),
    ("a lone surrogate", b'{"schema_version": "\\ud800"}'),
    ("empty", b""),
]


def read_by_every_reader(root, golden):
    """Run every reader over the run directory `root/RUN_NAME`; return the readers that gave a result."""
    run_dir = root / RUN_NAME
    answered = []

    def attempt(name, read):
        try:
            read()
        except CLEAR_ERRORS as exc:
            assert str(exc).strip(), f"{name}: an error without a message"
            return
        answered.append(name)

    def listed():
        found = runs.list_runs(root)
        runs.render_table(found)
        runs.select_prunable(found, keep=1)
        query.select_runs(found, "run.exit_code == `0`")  # --where

    attempt("runs list, prune, --where", listed)
    attempt("query", lambda: query.render(query.query(run_dir, QUERY)))
    attempt("matrix", lambda: [matrix_text.render_markdown(table) + matrix_text.render_csv(table)
                               for table in [matrix.build([root])]])

    def render_report():
        data = record.read(run_dir)
        report.render(data, plots.plan(data, run_dir), run_dir=run_dir)
        report.summary(data)

    attempt("report", render_report)

    def compared():
        data = record_input.load_record(run_dir)
        for a, b in ((golden, data), (data, golden)):
            try:
                result = compare.compare(a, b)
            except run_layers.LayersDiffer:
                continue
            compare_output.render_text(result)
            json.dumps(compare_output.as_json(result))
        for mode in data["serving"]:
            record_input.mode_view(data, mode)

    attempt("compare", compared)
    return answered


@pytest.fixture
def root(tmp_path):
    (tmp_path / RUN_NAME).mkdir()
    return tmp_path


def check(root, content: bytes, golden: dict, what: str) -> list[str]:
    (root / RUN_NAME / "record.json").write_bytes(content)
    try:
        return read_by_every_reader(root, golden)
    except Exception:  # noqa: BLE001 - the point: anything but a clear error is a crash, named with its mutant
        pytest.fail(f"{what}: a reader crashed:\n{traceback.format_exc()}")


@pytest.mark.parametrize(("what", "content"), DAMAGED, ids=[what for what, _content in DAMAGED])
def test_damaged_bytes_get_a_clear_error_from_every_reader(root, what, content):
    golden = json.loads((FIXTURE_ROOT / "compare" / "serve_tp2.json").read_text())
    # the listings list it with why, the others refuse it: none crashed
    assert check(root, content, golden, what) == ["runs list, prune, --where", "matrix"]
    [listed] = runs.list_runs(root)
    assert listed.record_problem
    [(_run, why)] = matrix.build([root]).apart
    assert why.startswith("unreadable: ")


@pytest.mark.parametrize("golden_path", GOLDEN, ids=[path.name for path in GOLDEN])
def test_every_mutant_of_a_golden_record_gets_a_clear_error_or_a_result(root, golden_path):
    golden = json.loads(golden_path.read_text())
    read = [("report" in check(root, content, golden, f"{golden_path.name} {what}"))
            for what, content in mutants(golden, SEED + GOLDEN.index(golden_path))]
    assert any(read) and not all(read)  # the mutants reach past the schema, and the schema refuses some


def test_the_golden_records_are_read_by_every_reader(root):
    for path in GOLDEN:
        golden = json.loads(path.read_text())
        shutil.copy(path, root / RUN_NAME / "record.json")
        assert "report" in check(root, path.read_bytes(), golden, path.name)
