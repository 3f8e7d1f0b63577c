"""A run's configuration fingerprint: what its record says ran, one component at a time, so that `inferlab compare`
can name every difference between two runs and withhold a verdict across more than the one layer they declare.

Changing one layer at a time needs knowing that only one changed; a record's declared layers (`compare`'s
`declared_layers`) only say what the operator meant to change. The fingerprint is what was there: per ring host (its
verification, `verification.<host>`) the kernel, the firmware (DMI, the Thunderbolt host router's NVM, an Ethernet
NIC's firmware), the link's driver and its parameters, the GPU driver and the link's settings (MTU, offloads); per
served mode compared, each rank's engine versions, launch command line and environment, and the model's files. Each
component belongs to one fingerprint layer (`LAYERS`); a declared layer explains the fingerprint layers it changes
(`EXPLAINS`: a runtime change changes the engine and the launch, a driver change the link's driver). A difference no
declared difference explains means the runs differ in more than their declared layer.

Pure functions over parsed records (`compare` has checked their shape).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

KERNEL, FIRMWARE, LINK_DRIVER, GPU_DRIVER, LINK_SETTINGS = "kernel", "firmware", "link driver", "gpu driver", "link"
ENGINE, LAUNCH, MODEL = "engine", "launch", "model"
LAYERS = (KERNEL, FIRMWARE, LINK_DRIVER, GPU_DRIVER, LINK_SETTINGS, ENGINE, LAUNCH, MODEL)
# Declared layer (compare.declared_layers: the hosts' seams, the served modes' layers, inferlab_layer_<name>) -> the
# fingerprint layers a change of it changes. A declared layer named like a fingerprint layer (`-e
# inferlab_layer_kernel=6.8.12`, `inferlab_layer_link_driver`) explains that one.
EXPLAINS = {
    "runtime": (ENGINE, LAUNCH),
    "speculation": (LAUNCH,),
    "rpc": (LAUNCH,),
    "driver": (LINK_DRIVER,),
    "driver_layer": (LINK_DRIVER,),
}
DMI_FIELDS = ("bios_vendor", "bios_version", "board_vendor", "board_name", "product_name")
ROUTER_FIELDS = ("pci_id", "generation", "nvm_version")
NIC_FIRMWARE = ("firmware_version",)
NIC_DRIVER = ("driver", "driver_version")
# Where a run writes, not what it runs: one directory per run and mode.
PER_RUN_ENVIRONMENT = ("NCCL_INSPECTOR_DUMP_DIR",)


@dataclass(frozen=True)
class Difference:
    component: str
    layer: str
    a: str | None  # None: the component is not in A's record
    b: str | None
    explained_by: str | None  # the declared layer that explains it; None: not explained

    @property
    def one_sided(self) -> bool:
        """Only one record has the component (a record from before it was recorded): listed, never counted."""
        return self.a is None or self.b is None


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _put(found: dict, component: str, layer: str, value) -> None:
    text = _text(value)
    if text is not None:
        found[component] = (layer, text)


def _host_components(found: dict, host: str, state: dict) -> None:
    identity = state.get("identity") or {}
    _put(found, f"{host}: kernel", KERNEL, state.get("kernel_release") or identity.get("kernel_release"))
    for field in DMI_FIELDS:
        _put(found, f"{host}: firmware {field}", FIRMWARE, (identity.get("firmware") or {}).get(field))
    router = identity.get("host_router") or {}
    for field in ROUTER_FIELDS:
        _put(found, f"{host}: Thunderbolt host router {field}", FIRMWARE, router.get(field))
    module = state.get("tbnet_module") or identity.get("driver") or {}
    if module.get("loaded"):
        _put(found, f"{host}: thunderbolt_net srcversion", LINK_DRIVER, module.get("srcversion"))
        for name, value in sorted((module.get("parameters") or {}).items()):
            _put(found, f"{host}: thunderbolt_net {name}", LINK_DRIVER, value)
    link = state.get("link") or {}
    for field in NIC_DRIVER:
        _put(found, f"{host}: NIC {field}", LINK_DRIVER, link.get(field))
    for field in NIC_FIRMWARE:
        _put(found, f"{host}: NIC {field}", FIRMWARE, link.get(field))
    _put(found, f"{host}: link MTU", LINK_SETTINGS, link.get("mtu"))
    for name, value in sorted((link.get("offloads") or {}).items()):
        _put(found, f"{host}: link offload {name}", LINK_SETTINGS, value)
    _put(found, f"{host}: GPU driver", GPU_DRIVER, state.get("driver_version"))


def _mode_components(found: dict, label: str, result: dict) -> None:
    engine = result.get("engine") or {}
    _put(found, f"{label}: engine {engine.get('name') or ''}".rstrip(), ENGINE, engine.get("version"))
    for host, rank in sorted((result.get("ranks") or {}).items()):
        where = f"{label} on {host}"
        for name, value in sorted((rank.get("versions") or {}).items()):
            _put(found, f"{where}: {name} version", ENGINE, value)
        argv = rank.get("argv")
        _put(found, f"{where}: launch command", LAUNCH, " ".join(argv) if isinstance(argv, list) else argv)
        for name, value in sorted((rank.get("environment") or {}).items()):
            if name in PER_RUN_ENVIRONMENT:
                continue
            _put(found, f"{where}: environment {name}", LAUNCH, value)
        for path, entry in sorted((rank.get("model") or {}).items()):
            entry = entry if isinstance(entry, dict) else {}
            _put(found, f"{where}: model file {path}", MODEL,
                 f"{entry.get('size')} B" + (f", sha256 {entry['sha256']}" if entry.get("sha256") else ""))


def fingerprint(record: dict, modes: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Component -> (fingerprint layer, value) of one run. ``modes``: the run's served modes being compared -> the
    label both sides share (``nextn``, or ``nextn -> nextn_candidate`` for two modes of one run), so that the two
    sides' components meet by name."""
    found: dict[str, tuple[str, str]] = {}
    for section in ("hosts", "verification"):
        for host, state in sorted((record.get(section) or {}).items()):
            if isinstance(state, dict):
                _host_components(found, host, state)
    serving = record.get("serving") or {}
    for mode, label in modes.items():
        if isinstance(serving.get(mode), dict):
            _mode_components(found, label, serving[mode])
    return found


def explaining(layer: str, changed: dict[str, tuple[str | None, str | None]]) -> str | None:
    """The declared layer, among those that differ (``changed``), that explains a difference in ``layer``."""
    for name in sorted(changed):
        if layer in EXPLAINS.get(name, ()) or name.replace("_", " ") == layer:
            return name
    return None


def differences(a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]],
                changed: dict[str, tuple[str | None, str | None]]) -> list[Difference]:
    """Every component whose value differs, or that one side has and the other not, each with the declared layer
    that explains it (None: none does)."""
    found = []
    for component in sorted(set(a) | set(b)):
        layer_a, value_a = a.get(component, (None, None))
        layer_b, value_b = b.get(component, (None, None))
        if value_a != value_b:
            layer = layer_a or layer_b
            found.append(Difference(component, layer, value_a, value_b, explaining(layer, changed)))
    return found


def describe(found: list[Difference], shown: int = 5) -> str:
    """`component (A -> B)`, the first ``shown`` of them, and how many more."""
    text = "; ".join(f"{d.component} ({d.a if d.a is not None else 'not recorded'} -> "
                     f"{d.b if d.b is not None else 'not recorded'})" for d in found[:shown])
    return text + (f"; and {len(found) - shown} more" if len(found) > shown else "")
