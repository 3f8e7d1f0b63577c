"""`inferlab matrix`: runs grouped by what their ring hosts ran on, the compatibility matrix.

A run's identity is what each of its hosts ran on (record `hosts.<host>.identity`, read at verification through the
sysfs seam by plugins/module_utils/_identity.py), each host reduced to FIELDS; runs whose hosts give the same set
form one row, whatever the hosts are called. Per row: the runs behind it, each stage's outcome over them (the stage
journal), the link test's verdicts, and the candidate driver against the stock one (the served modes
`nextn_candidate` against `nextn`) as `inferlab compare` reads the row's runs: one run gives the difference and no
verdict, repeated whole runs a verdict. A run whose record has no identity for every host (a record from before
identities were read, a playbook that does not verify) is listed apart, never guessed into a row.

report/matrix.py prints the matrix (Markdown, CSV) and plots/matrix.py draws it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from inferlab.analysis import compare, record_input
from inferlab.record import runs

# What tells two hosts' hardware, firmware and software apart, in the order the matrix shows it: a column name and
# where it is in an identity. The driver is the one the host runs at verification: the distribution's.
FIELDS = (
    ("host router", ("host_router", "pci_id")),
    ("generation", ("host_router", "generation")),
    ("NVM", ("host_router", "nvm_version")),
    ("peer", ("peer", "id")),
    ("link rx", ("peer", "rx")),
    ("link tx", ("peer", "tx")),
    ("NIC", ("nic", "pci_id")),
    ("NIC driver", ("nic", "driver")),
    ("NIC firmware", ("nic", "firmware_version")),
    ("link speed", ("nic", "speed")),
    ("kernel", ("kernel_release",)),
    ("stock driver", ("driver", "srcversion")),
    ("board", ("firmware", "board")),
    ("BIOS", ("firmware", "bios_version")),
)
# The fields of one link kind: an Ethernet host (its identity has a `nic`) has no host router or Thunderbolt peer, a
# Thunderbolt host no NIC. A column no host of the matrix has is left out; a row without it reads NOT_APPLICABLE.
KIND_FIELDS = {"thunderbolt": {"host router", "generation", "NVM", "peer", "link rx", "link tx"},
               "ethernet": {"NIC", "NIC driver", "NIC firmware", "link speed"}}
NOT_APPLICABLE = "n/a"
STOCK_MODE, CANDIDATE_MODE = "nextn", "nextn_candidate"
CANDIDATE_FIGURE = "aggregate_output_tok_s"
# a journal entry's status as the matrix says it; a stage with no entry was not run
OUTCOMES = {"ok": "passed", "failed": "failed", "running": "stopped"}
NOT_RUN = "not run"


class MatrixError(Exception):
    """Nothing to aggregate (no run found under what was given)."""


@dataclass
class Candidate:
    """The candidate's aggregate output tok/s against the stock driver's over a row's runs."""

    runs: int
    stock: float | None  # median of A (one value per trial, or per run)
    candidate: float | None
    difference: float | None  # median of B - median of A
    interval: tuple[float, float] | None  # the Hodges-Lehmann shift's interval, where one reaches 95 %
    verdict: str
    reason: str


@dataclass
class Row:
    label: str
    identity: dict[str, str]
    runs: list[str]
    stages: dict[str, str]
    link: str
    candidate: Candidate | None
    records: list[dict] = field(default_factory=list, repr=False)


@dataclass
class Matrix:
    rows: list[Row]
    stages: list[str]
    apart: list[tuple[str, str]]  # (run, why it is in no row)


def _value(identity: dict, path: tuple[str, ...]):
    if path == ("peer", "rx") or path == ("peer", "tx"):
        peer = identity.get("peer") or {}
        speed, lanes = peer.get(f"{path[1]}_speed_gbps"), peer.get(f"{path[1]}_lanes")
        return None if speed is None or lanes is None else f"{lanes} x {speed:g} Gb/s"
    if path == ("nic", "speed"):
        speed = (identity.get("nic") or {}).get("speed_mbps")
        return None if speed is None else f"{speed / 1000:g} Gb/s"
    if path == ("firmware", "board"):
        firmware = identity.get("firmware") or {}
        return " ".join(v for v in (firmware.get("board_vendor"), firmware.get("board_name")) if v) or None
    value = identity
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return None if value is None else str(value)


def link_kind(identity: dict) -> str:
    return "ethernet" if isinstance(identity.get("nic"), dict) else "thunderbolt"


def host_key(identity: dict) -> tuple:
    """A host's identity reduced to FIELDS (None where it was missing), and its link kind last."""
    return (*(_value(identity, path) for _name, path in FIELDS), link_kind(identity))


def run_key(record: dict) -> tuple | None:
    """The run's identity: its hosts' keys, sorted (host names do not count); None unless every host has one."""
    hosts = record.get("hosts") or {}
    identities = [h.get("identity") for h in hosts.values() if isinstance(h, dict)]
    if not identities or not all(isinstance(i, dict) for i in identities):
        return None
    return tuple(sorted((host_key(i) for i in identities), key=lambda k: tuple((v is None, v or "") for v in k)))


def _cells(key: tuple) -> dict[str, str]:
    """The row's value of each field its hosts have (a field of the other link kind is left out)."""
    kinds = {host[-1] for host in key}
    foreign = set().union(*(fields for kind, fields in KIND_FIELDS.items() if kind not in kinds))
    cells = {}
    for column, (name, _path) in enumerate(FIELDS):
        if name in foreign:
            continue
        values = [host[column] for host in key]
        shown = [v if v is not None else "missing" for v in values]
        cells[name] = shown[0] if len(set(shown)) == 1 else " / ".join(shown)
    return cells


def _outcomes(records: list[dict], stages: list[str]) -> dict[str, str]:
    result = {}
    for stage in stages:
        seen = Counter()
        for record in records:
            entry = (record.get("journal") or {}).get(stage)
            status = entry.get("status") if isinstance(entry, dict) else None
            seen[OUTCOMES.get(status, NOT_RUN if status is None else str(status))] += 1
        if len(seen) == 1:
            result[stage] = next(iter(seen))
        else:
            order = [*OUTCOMES.values(), NOT_RUN]
            counted = sorted(seen.items(), key=lambda i: (-i[1], order.index(i[0]) if i[0] in order else len(order)))
            result[stage] = ", ".join(f"{n} {outcome}" for outcome, n in counted)
    return result


def _link(records: list[dict]) -> str:
    seen = Counter()
    for record in records:
        for test in (record.get("link_tests") or {}).values():
            verdicts = (test or {}).get("verdicts") or {}
            text = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(verdicts.items()) if v)
            if text:
                seen[text] += 1
    if not seen:
        return "no link test"
    return " | ".join(text if n == len(records) else f"{text} ({n} of {len(records)})" for text, n in seen.items())


def _figure_name(record: dict) -> str | None:
    trials = ((record.get("serving") or {}).get(STOCK_MODE) or {}).get("trials") or {}
    figure = (trials.get("figures") or {}).get(CANDIDATE_FIGURE) or {}
    return f"{figure.get('definition', CANDIDATE_FIGURE)} (one value per trial)" if figure else None


def candidate_against_stock(records: list[dict]) -> Candidate | None:
    """The candidate's aggregate output tok/s against the stock driver's, by compare over the runs that served both
    modes with measured trials; None when no run did."""
    both = [r for r in records if {STOCK_MODE, CANDIDATE_MODE} <= set(r.get("serving") or {}) and _figure_name(r)]
    if not both:
        return None
    name = _figure_name(both[0])
    try:
        stock = [record_input.mode_view(r, STOCK_MODE) for r in both]
        candidate = [record_input.mode_view(r, CANDIDATE_MODE) for r in both]
        result = compare.compare(stock if len(both) > 1 else stock[0], candidate if len(both) > 1 else candidate[0])
    except record_input.CompareError as exc:
        return Candidate(len(both), None, None, None, None, "not compared", str(exc))
    row = next((r for r in result.rows if r.name == name and r.section.endswith("measured trials")), None)
    speed = next(v for v in result.verdicts if v.claim == "B is faster")
    if row is None:
        return Candidate(len(both), None, None, None, None, speed.verdict, speed.reason)
    interval = row.interval
    bounds = (interval.low, interval.high) if interval and interval.low is not None else None
    return Candidate(len(both), row.a.median, row.b.median, row.difference, bounds, speed.verdict, speed.reason)


def expand(paths: list[Path]) -> list[Path]:
    """Run directories: each path given, or each run directory under a path that is a runs root (a directory without
    a record.json that holds run directories). A path that is neither is kept, and reported as unreadable."""
    found = []
    for path in paths:
        under = [] if (path / "record.json").is_file() or not path.is_dir() else runs.list_runs(path)
        found += [r.path for r in under] or [path]
    return found


def build(paths: list[Path]) -> Matrix:
    run_dirs = expand(paths)
    if not any((path / "record.json").is_file() or path.name == "record.json" for path in run_dirs):
        raise MatrixError(f"no run with a record.json in or under {', '.join(str(p) for p in paths)}")
    groups: dict[tuple, list[dict]] = {}
    apart = []
    for path in run_dirs:
        try:
            record = record_input.load_record(path)
        except record_input.CompareError as exc:
            apart.append((str(path), f"unreadable: {exc}"))
            continue
        key = run_key(record)
        if key is None:
            apart.append((record["run"]["id"], "no identity for every host (record.json hosts.<host>.identity)"))
            continue
        groups.setdefault(key, []).append(record)
    stages = sorted({s for rs in groups.values() for r in rs for s in (r.get("journal") or {})},
                    key=lambda s: min(_index(r, s) for rs in groups.values() for r in rs))
    rows = []
    for n, (key, records) in enumerate(sorted(groups.items(), key=lambda kv: (-len(kv[1]), str(kv[0]))), 1):
        rows.append(Row(f"C{n}", _cells(key), [r["run"]["id"] for r in records], _outcomes(records, stages),
                        _link(records), candidate_against_stock(records), records))
    return Matrix(rows, stages, apart)


def _index(record: dict, stage: str) -> float:
    entry = (record.get("journal") or {}).get(stage)
    index = entry.get("index") if isinstance(entry, dict) else None
    return index if isinstance(index, (int, float)) else float("inf")


def shown_fields(matrix: Matrix) -> list[str]:
    """The columns: the fields some row has, in FIELDS order."""
    return [name for name, _path in FIELDS if any(name in r.identity for r in matrix.rows)]
