"""`inferlab query RUN EXPR` and `inferlab runs list --where EXPR`: JMESPath (https://jmespath.org) over a run's
record.json, so that a scheduler or a person can pull one figure out of a run without writing Python.

The record is read as every reader reads it (record.read): UTF-8 JSON, bounded, valid against record.schema.json;
a run directory copied from elsewhere may hold anything. Truth is JMESPath's
own, as in its `&&`, `||` and filters: false, null, "", [] and {} are false; everything else, 0 included, is true.
"""

from __future__ import annotations

import json
from pathlib import Path

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath.parser import ParsedResult

from inferlab.record import record, runs

RECORD_FILE = record.RECORD_FILE
RECORD_WRITER = "`inferlab run` writes it when the run ends"
# jmespath's own prefixes, which the one-line message replaces with its own
JMESPATH_PREFIXES = ("invalid jmespath expression: ", "bad jmespath expression: ")


class QueryError(Exception):
    """A run, record or expression a query cannot use; the message is one line for the person or the scheduler."""


def compile_expression(text: str) -> ParsedResult:
    try:
        return jmespath.compile(text)
    except jmespath_errors.JMESPathError as exc:
        raise QueryError(f"invalid JMESPath expression {text!r}: {one_line(exc)}") from None


def one_line(exc: jmespath_errors.JMESPathError) -> str:
    """jmespath's message without the expression and caret lines it appends (the caller names the expression)."""
    message = str(exc).splitlines()[0].strip()
    if message.lower().startswith(JMESPATH_PREFIXES):
        message = message.split(": ", 1)[1]
    message = message.removesuffix(":").removesuffix(", for expression").strip()
    if isinstance(exc, jmespath_errors.ParseError) and "column" not in message and exc.lex_position is not None:
        message += f" at column {exc.lex_position}"
    return message


def evaluate(expression: ParsedResult, record: dict, source: Path):
    """The expression's value over one record; an error names the expression and the record (`source`)."""
    try:
        return expression.search(record)
    # jmespath 1.1.0 lets Python's TypeError out of an ordering comparison between a string and a number
    except (jmespath_errors.JMESPathError, TypeError) as exc:
        raise QueryError(f"cannot evaluate {expression.expression!r} over {source}: {exc}") from None


def is_true(value) -> bool:
    """JMESPath's truth (the spec's, and jmespath's TreeInterpreter): 0 is true, unlike Python's."""
    return not (value is None or value is False or value in ("", [], {}))


def render(value, raw: bool = False) -> str:
    """The value as JSON; with `raw` a string is printed bare (no quotes, no escapes), like `jq -r`."""
    if raw and isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True)


def record_path(run: Path) -> Path:
    """record.json of a run directory, or `run` itself when it names the file."""
    return run if run.name == RECORD_FILE and not run.is_dir() else run / RECORD_FILE


def load_record(run: Path) -> dict:
    """The record of a run directory (or of its record.json), read and validated by record.read."""
    target = record_path(run)
    if not target.parent.is_dir():
        raise QueryError(f"no run directory {target.parent}")
    if not target.is_file():
        raise QueryError(f"{target.parent} has no {RECORD_FILE}{status_note(target.parent)}: {RECORD_WRITER}")
    try:
        return record.read(target)
    except record.RecordError as exc:
        raise QueryError(record.one_line(exc)) from None


def status_note(run_dir: Path) -> str:
    """` (status: running)` for a run directory, as `inferlab runs list` describes it; empty for another folder."""
    if not runs.is_run_dir(run_dir):
        return " (and is not named like a run directory)"
    return f" (status: {runs.describe(run_dir).status})"


def query(run: Path, text: str) -> object:
    """`inferlab query`: the value of the expression `text` over the record of `run`."""
    expression = compile_expression(text)
    return evaluate(expression, load_record(run), record_path(run))


def select_runs(found: list[runs.RunDir], text: str) -> tuple[list[runs.RunDir], list[runs.RunDir], list[runs.RunDir]]:
    """`inferlab runs list --where`: (runs whose record makes the expression true, runs without record.json, runs
    whose record.json is unreadable), each in the order given. A run without a record is left out, never matched:
    the expression has nothing to look at."""
    expression = compile_expression(text)
    matched, without_record, unreadable = [], [], []
    for run in found:
        path = record_path(run.path)
        if not path.is_file():
            without_record.append(run)
            continue
        try:
            data = load_record(run.path)
        except QueryError:
            unreadable.append(run)
            continue
        if is_true(evaluate(expression, data, path)):
            matched.append(run)
    return matched, without_record, unreadable


def describe_selection(text: str, total: int, matched: int, without_record: int, unreadable: int) -> str:
    """The one line `runs list --where` prints on stderr: how many runs matched and how many were left out."""
    line = f"{matched} of {total} runs match --where {text!r}"
    left_out = []
    if without_record:
        left_out.append(f"{without_record} without {RECORD_FILE} ({RECORD_WRITER})")
    if unreadable:
        left_out.append(f"{unreadable} whose {RECORD_FILE} cannot be read (runs list shows why)")
    return line + (f"; left out {' and '.join(left_out)}" if left_out else "")
