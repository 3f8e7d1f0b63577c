"""The files the lab writes: the per-host hardware fixture (a file tree from a JSON spec) and ``lab.json``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from inferlab.lab.layout import HARDWARE_DAEMONS, LAB_JSON_FORMAT, LabError, gateway_daemons
from inferlab.lab.processes import read_pidfile

# The lab inference server (standard library only), which the hosts' own Python runs from <lab_dir>/lib
SERVER_PACKAGE = Path(__file__).resolve().parent / "server"


def server_package_spec(under: str) -> dict:
    """The lab inference server's package as ``write_tree`` files and dirs under ``under``: this installed package's
    own files, so that the lab role never reads the package's source tree by path."""
    package = SERVER_PACKAGE.parent.parent  # inferlab/
    sources = [package / "__init__.py", package / "lab" / "__init__.py", *sorted(SERVER_PACKAGE.glob("*.py"))]
    files = {f"{under}/{path.relative_to(package.parent)}": {"content": path.read_text(), "mode": "0644"}
             for path in sources}
    dirs = {under: "0755", f"{under}/inferlab": "0755", f"{under}/inferlab/lab": "0755",
            f"{under}/inferlab/lab/server": "0755"}
    return {"dirs": dirs, "files": files}


def write_tree(root: Path, spec: dict, check: bool = False) -> dict:
    """Converge ``root`` to ``spec`` and say what changed (``changes``: ``"file REL"``, ``"dir REL"`` ...).

    ``spec``: ``{"mode": ROOT_MODE, "dirs": {REL: MODE}, "files": {REL: CONTENT | {"content": C, "mode": M}},
    "links": {REL: TARGET}, "server_package": REL}``; modes are octal strings, files default to ``0644``;
    ``server_package`` adds the lab inference server's package under REL (``server_package_spec``). Files are
    rewritten only when their content differs, links only when their target differs. Nothing else under ``root`` is
    touched: later roles may add files there.
    """
    root = Path(root)
    changes: list[str] = []
    if spec.get("server_package"):
        package = server_package_spec(spec["server_package"])
        spec = dict(spec, dirs={**spec.get("dirs", {}), **package["dirs"]},
                    files={**spec.get("files", {}), **package["files"]})

    def rel(path: str) -> Path:
        parts = Path(path).parts
        if not parts or Path(path).is_absolute() or ".." in parts:
            raise LabError(f"write-tree: {path!r} is not a plain relative path under {root}")
        return root / path

    def ensure_dir(target: Path, mode: int, label: str) -> None:
        if not target.is_dir():
            changes.append(f"dir {label}")
            if not check:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(mode)
        elif (target.stat().st_mode & 0o7777) != mode:
            changes.append(f"mode {label}")
            if not check:
                target.chmod(mode)

    ensure_dir(root, int(str(spec.get("mode", "0755")), 8), ".")
    for path, mode in sorted(spec.get("dirs", {}).items()):
        ensure_dir(rel(path), int(str(mode), 8), path)
    for path, value in sorted(spec.get("files", {}).items()):
        target = rel(path)
        content, mode = (value["content"], value.get("mode", "0644")) if isinstance(value, dict) else (value, "0644")
        data, mode = content.encode(), int(str(mode), 8)
        try:
            same = not target.is_symlink() and target.read_bytes() == data
        except OSError:
            same = False
        if not same:
            changes.append(f"file {path}")
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink():
                    target.unlink()
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_bytes(data)
                tmp.chmod(mode)
                tmp.replace(target)
        elif (target.stat().st_mode & 0o7777) != mode:
            changes.append(f"mode {path}")
            if not check:
                target.chmod(mode)
    for path, link_target in sorted(spec.get("links", {}).items()):
        target = rel(path)
        if target.is_symlink() and os.readlink(target) == link_target:
            continue
        changes.append(f"link {path}")
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            target.symlink_to(link_target)
    return {"changed": bool(changes), "changes": changes}


def build_record(spec: dict, spec_digest: str, built_at: str) -> dict:
    """``lab.json``: the role's spec (what the inventory asked for) plus what was built (PIDs from the pidfiles)."""
    record = {"format": LAB_JSON_FORMAT, "status": "up", "built_at": built_at, "spec_digest": spec_digest, **spec}
    hosts = []
    for host in spec["hosts"]:
        host = json.loads(json.dumps(host))
        host["ssh"]["pid"] = read_pidfile(host["ssh"]["pidfile"])
        for svc in host.get("services", []):
            svc["pid"] = read_pidfile(svc["pidfile"])
        hosts.append(host)
    record["hosts"] = hosts
    if record.get("router"):
        record["router"] = {**record["router"], "pid": read_pidfile(record["router"]["pidfile"])}
    for key in HARDWARE_DAEMONS:
        if record.get(key):
            record[key] = {**record[key], "pid": read_pidfile(record[key]["pidfile"])}
    if record.get("gateway"):
        gateway = json.loads(json.dumps(record["gateway"]))
        for _key, _what, daemon, _url in gateway_daemons(gateway):
            daemon["pid"] = read_pidfile(daemon["pidfile"])
        record["gateway"] = gateway
    return record


def write_record(lab_dir: Path, payload: dict, check: bool = False) -> dict:
    """Write ``<lab_dir>/lab.json`` from ``{"spec", "spec_digest", "built_at"}`` when its content differs."""
    record = build_record(payload["spec"], payload["spec_digest"], payload["built_at"])
    missing = [h["name"] for h in record["hosts"] if not h["ssh"]["pid"]]
    missing += [s["name"] for h in record["hosts"] for s in h.get("services", []) if not s["pid"]]
    missing += ["the router"] if record.get("router") and not record["router"]["pid"] else []
    missing += [what for key, (_mark, what, _without) in HARDWARE_DAEMONS.items()
                if record.get(key) and not record[key]["pid"]]
    if record.get("gateway"):
        missing += [f"the gateway's {what}" for _key, what, daemon, _url in gateway_daemons(record["gateway"])
                    if not daemon["pid"]]
    if missing:
        raise LabError(f"no PID recorded for {', '.join(missing)}: the lab is not fully up")
    path = Path(lab_dir) / "lab.json"
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    try:
        same = path.read_text() == text
    except OSError:
        same = False
    if not same and not check:
        tmp = path.with_name(".lab.json.tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(path)
    return {"changed": not same, "path": str(path)}
