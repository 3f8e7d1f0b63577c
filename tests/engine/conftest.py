"""The engine's tests: the llama.cpp build of `make engine` (its build-info in .cache/engine.json, or the directory in
INFERLAB_ENGINE_BIN_DIR), the lab's model written once per session, and servers started on loopback
(local_servers.py)."""

import json
import os
from pathlib import Path

import pytest
from local_servers import Servers

from inferlab.lab.gguf_model import Shape, ensure_models

ROOT = Path(__file__).resolve().parents[2]


def engine_bin_dir():
    if os.environ.get("INFERLAB_ENGINE_BIN_DIR"):
        return Path(os.environ["INFERLAB_ENGINE_BIN_DIR"])
    info = ROOT / ".cache" / "engine.json"
    return Path(json.loads(info.read_text())["bin_dir"]) if info.exists() else None


@pytest.fixture(scope="session")
def bin_dir():
    found = engine_bin_dir()
    if found is None or not (found / "llama-server").exists():
        message = "no llama.cpp build: run `make engine` (or set INFERLAB_ENGINE_BIN_DIR)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    ensure_models(out, Shape())
    return out


@pytest.fixture
def servers(bin_dir, tmp_path):
    started = Servers(bin_dir, tmp_path)
    yield started
    started.stop()
