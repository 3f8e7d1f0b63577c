"""What two runs declare apart: each run's declared layers (its hosts' seams, its served modes' layers, its
`inferlab_layer_<name>` extra vars), the served modes to pair, the transport the records name, and whether a run
started from a verified fresh start."""

from __future__ import annotations

from inferlab.analysis.record_input import CompareError, as_mapping

FRESH_SOURCES = ("lab_up", "restore")  # "untouched" (a first run on a host never changed) restarted nothing
LAYER_EXTRAVAR_PREFIX = "inferlab_layer_"


class LayersDiffer(CompareError):
    def __init__(self, layers: dict[str, tuple[str, str]]):
        self.layers = layers
        described = ", ".join(f"{name} ({a} -> {b})" for name, (a, b) in sorted(layers.items()))
        super().__init__(
            f"refusing to compare: the runs differ in {len(layers)} declared layers: {described}. Change one layer "
            "at a time, and compare two runs that differ in that layer only."
        )


def _joined(by_host: dict[str, str]) -> str:
    values = set(by_host.values())
    if len(values) == 1:
        return values.pop()
    return ", ".join(f"{host}={value}" for host, value in sorted(by_host.items()))


def declared_layers(record: dict, modes: list[str]) -> dict[str, str]:
    """Layer name -> value for one run. A host layer whose hosts disagree reads `host=value, ...`; served modes
    contribute the values of the modes being compared (`modes`)."""
    per_host: dict[str, dict[str, str]] = {}
    for section in ("hosts", "verification"):
        for host, entry in as_mapping(record.get(section), section).items():
            layers = as_mapping(as_mapping(entry, f"{section}.{host}").get("layers"), f"{section}.{host}.layers")
            for name, value in layers.items():
                per_host.setdefault(name, {}).setdefault(host, str(value))
    for host, test in as_mapping(record.get("link_tests"), "link_tests").items():
        value = as_mapping(test, f"link_tests.{host}").get("driver_layer")
        if value is not None:
            per_host.setdefault("driver_layer", {}).setdefault(host, str(value))
    layers = {name: _joined(by_host) for name, by_host in per_host.items()}
    serving = as_mapping(record.get("serving"), "serving")
    per_mode: dict[str, set[str]] = {}
    for mode in modes:
        mode_layers = as_mapping(as_mapping(serving[mode], f"serving.{mode}").get("layers"), f"serving.{mode}.layers")
        for name, value in mode_layers.items():
            per_mode.setdefault(name, set()).add(str(value))
    layers.update({name: ",".join(sorted(values)) for name, values in per_mode.items()})
    for key, value in as_mapping(record["run"].get("extravars"), "run.extravars").items():
        if key.startswith(LAYER_EXTRAVAR_PREFIX) and len(key) > len(LAYER_EXTRAVAR_PREFIX):
            layers[key[len(LAYER_EXTRAVAR_PREFIX) :]] = str(value)
    return layers


def pair_modes(record_a: dict, record_b: dict) -> list[tuple[str, str]]:
    """Served modes to compare: those both runs have by name; else, when each run served one mode, that pair."""
    modes_a, modes_b = list(record_a.get("serving") or {}), list(record_b.get("serving") or {})
    common = [mode for mode in modes_a if mode in modes_b]
    if common:
        return [(mode, mode) for mode in common]
    if len(modes_a) == 1 and len(modes_b) == 1:
        return [(modes_a[0], modes_b[0])]
    return []


def transport_label(records: list[dict]) -> str:
    """`emulated`, `kernel`, `mixed`, or `unknown` when no record says which driver layer carried the traffic."""
    labels = set()
    for data in records:
        for section in ("hosts", "verification"):
            for entry in (data.get(section) or {}).values():
                labels.add((entry.get("layers") or {}).get("driver_layer"))
        for test in (data.get("link_tests") or {}).values():
            labels.add(test.get("transport_label"))
        for ab in ((data.get("stages") or {}).get("link_ab") or {}).values():
            labels.add(ab.get("transport_label") if isinstance(ab, dict) else None)
    labels &= {"emulated", "kernel"}
    if len(labels) == 1:
        return labels.pop()
    return "mixed" if labels else "unknown"


def fresh_start(record: dict) -> tuple[bool, str]:
    """Whether the run started from a fresh start on every host, and why, naming each start's kind and time (see
    the module docstring)."""
    entries = (record.get("stages") or {}).get("fresh_start")
    if not entries or not isinstance(entries, dict):
        return False, ("has no stages.fresh_start in its record (the staged experiment's verify stage writes it), "
                       "so it counts as not fresh")
    stale = []
    for host, entry in sorted(entries.items()):
        entry = entry if isinstance(entry, dict) else {}
        if entry.get("verified") is not True:
            stale.append(f"{host} (not verified)")
        elif entry.get("from") == "untouched":
            stale.append(f"{host} (untouched: a first run on a host inferlab never changed restarted nothing)")
        elif entry.get("from") not in FRESH_SOURCES:
            stale.append(f"{host} (from {entry.get('from')!r})")
    if stale:
        return False, (f"stages.fresh_start does not show a verified fresh start ({' or '.join(FRESH_SOURCES)}) for "
                       f"{', '.join(stale)}")
    starts = ", ".join(f"{host} from a {entry['from']} at {entry.get('time', 'an unrecorded time')}"
                       for host, entry in sorted(entries.items()))
    return True, f"started from a verified fresh start: {starts}"
