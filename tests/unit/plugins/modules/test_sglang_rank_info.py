# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang_rank_info through main(): a model directory on disk (listed as ansible.builtin.find lists it), the real
`ip` on loopback and on an interface that does not exist, the real `ss` on a real listening socket, and version
commands that print, fail, print something else or do not exist; each missing or unreadable part an observation,
not a failure."""

import hashlib
import json
import os
import socket
import sys

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import sglang_rank_info
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

VERSIONS = {"sglang": "0.5.23", "torch": "2.9.0", "cuda": "12.8", "nccl": "2.27.3"}
CONFIG = {"max_position_embeddings": 40960, "hidden_size": 2048, "num_hidden_layers": 48, "torch_dtype": "bfloat16"}
MIB = 1024 * 1024


def print_versions(versions=None):
    return [sys.executable, "-c", f"print({json.dumps(versions or VERSIONS)!r})"]


@pytest.fixture
def model(tmp_path):
    """A model directory: config.json, a tokenizer, a weight file of exactly 1 MiB, a file in a subdirectory, a
    hidden file, a file in a hidden directory, a link to a file and a link to the subdirectory."""
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    (root / "tokenizer.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"w" * MIB)
    (root / "sub" / "extra.bin").write_bytes(b"e" * 10)
    (root / ".gitattributes").write_text("*.safetensors filter=lfs")
    (root / ".cache").mkdir()
    (root / ".cache" / "config.json.metadata").write_text("etag")
    (root / "tokenizer_link.json").symlink_to(root / "tokenizer.json")
    (root / "sub_link").symlink_to(root / "sub")
    return root


def run(model_path, **args):
    return run_module(sglang_rank_info.main, dict({"model_path": str(model_path), "link_interface": "lo"}, **args))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_model_directory_as_find_lists_it(model):
    failed, result = run(model, checksum_max_mb=1)
    assert not failed, result.get("msg", result)
    assert result["changed"] is False
    assert result["model"] == {
        "path": str(model), "exists": True, "directory": True, "unreadable": {},
        "files": {
            # a name that starts with a dot is left out, but not what is below a hidden directory; links are left out
            # and not followed
            ".cache/config.json.metadata": {"size": 4, "sha256": sha256(model / ".cache" / "config.json.metadata")},
            "config.json": {"size": len(json.dumps(CONFIG)), "sha256": sha256(model / "config.json")},
            "model.safetensors": {"size": MIB, "sha256": None},  # not smaller than checksum_max_mb
            "sub/extra.bin": {"size": 10, "sha256": sha256(model / "sub" / "extra.bin")},
            "tokenizer.json": {"size": 2, "sha256": sha256(model / "tokenizer.json")},
        }}
    assert list(result["model"]["files"]) == sorted(result["model"]["files"])
    assert result["config"] == {"path": str(model / "config.json"), "parsed": CONFIG, "error": None}


def test_no_checksum_at_0_mib(model):
    failed, result = run(model, checksum_max_mb=0)
    assert not failed
    assert {entry["sha256"] for entry in result["model"]["files"].values()} == {None}


def test_a_link_to_the_model_directory_is_followed(model, tmp_path):
    link = tmp_path / "current"
    link.symlink_to(model)
    failed, result = run(link)
    assert not failed
    assert result["model"]["directory"] is True
    assert "config.json" in result["model"]["files"]


def test_a_missing_model_is_an_observation(tmp_path):
    failed, result = run(tmp_path / "nonexistent")
    assert not failed, result.get("msg", result)
    assert result["model"] == {"path": str(tmp_path / "nonexistent"), "exists": False, "directory": False,
                               "files": {}, "unreadable": {}}
    assert result["config"] == {"path": str(tmp_path / "nonexistent" / "config.json"), "parsed": None,
                                "error": f"File not found: {tmp_path / 'nonexistent' / 'config.json'}"}


def test_a_file_where_the_model_should_be(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_text("GGUF")
    failed, result = run(path)
    assert not failed
    assert (result["model"]["exists"], result["model"]["directory"]) == (True, False)
    assert result["config"]["error"].startswith(f"File could not be read: {path}/config.json (")


@pytest.mark.parametrize(("content", "error"), [
    ("[1, 2]", "a file that is not a JSON object"),
    ("{not json", "a file that is not a JSON object (Expecting property name enclosed in double quotes: line 1 "
                  "column 2 (char 1))"),
    (b"\xff\xfe", "a file that is not a JSON object (not UTF-8 text)"),
])
def test_a_config_that_is_not_a_json_object(model, content, error):
    config = model / "config.json"
    config.write_bytes(content) if isinstance(content, bytes) else config.write_text(content)
    failed, result = run(model)
    assert not failed
    assert result["config"]["parsed"] is None
    assert result["config"]["error"] == error


def test_a_config_that_is_a_directory(model):
    (model / "config.json").unlink()
    (model / "config.json").mkdir()
    failed, result = run(model)
    assert not failed
    assert result["config"]["error"] == f"Source is a directory and must be a file: {model / 'config.json'}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 0000")
def test_an_unreadable_config_and_file(model):
    (model / "config.json").chmod(0)
    (model / "tokenizer.json").chmod(0)
    try:
        failed, result = run(model, checksum_max_mb=1)
    finally:
        (model / "config.json").chmod(0o644)
        (model / "tokenizer.json").chmod(0o644)
    assert not failed
    assert result["config"]["error"] == f"File is not readable: {model / 'config.json'}"
    assert result["model"]["files"]["tokenizer.json"] == {"size": 2, "sha256": None}
    assert str(model / "tokenizer.json") in result["model"]["unreadable"]


def test_the_interface_as_ip_finds_it(model):
    failed, result = run(model, link_interface="lo")
    assert not failed
    assert result["link"] == {"interface": "lo", "present": True, "error": None}
    failed, result = run(model, link_interface="tb9")
    assert not failed
    assert result["link"] == {"interface": "tb9", "present": False, "error": 'Device "tb9" does not exist.'}


def test_listeners_on_the_ports_asked_only(model):
    with socket.socket() as holder, socket.socket() as free:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        free.bind(("127.0.0.1", 0))  # bound, not listening: no listener
        busy_port, free_port = holder.getsockname()[1], free.getsockname()[1]
        failed, result = run(model, ports=[busy_port, free_port])
        assert not failed, result.get("msg", result)
        assert result["listeners"]["ports"] == [busy_port, free_port]
        assert len(result["listeners"]["lines"]) == 1
        assert f"127.0.0.1:{busy_port}" in result["listeners"]["lines"][0]
        failed, result = run(model, ports=[free_port])
        assert result["listeners"] == {"ports": [free_port], "lines": []}
        failed, result = run(model)
        assert result["listeners"] is None


def test_ss_that_fails_fails_the_module(model, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ss").write_text("#!/bin/sh\necho 'ss: bad filter' >&2\nexit 1\n")
    (bin_dir / "ss").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    failed, result = run(model, ports=[30000, 50000])
    assert failed
    assert result["msg"] == "ss could not list the listeners on ports 30000, 50000: ss: bad filter"
    assert result["cmd"][1:] == ["-Hltn", "( sport = :30000 or sport = :50000 )"]


def test_versions_as_the_command_prints_them(model):
    failed, result = run(model, versions_command=print_versions())
    assert not failed
    assert result["versions"] == {"rc": 0, "parsed": VERSIONS, "error": None}
    failed, result = run(model)
    assert result["versions"] is None


def test_the_version_command_runs_in_the_modules_environment(model, monkeypatch):
    """The role sets the ranks' environment on the task (environment:), which the module passes on."""
    monkeypatch.setenv("INFERLAB_TEST_SGLANG", "0.5.99")
    script = "import json, os; print(json.dumps({'sglang': os.environ['INFERLAB_TEST_SGLANG']}))"
    failed, result = run(model, versions_command=[sys.executable, "-c", script])
    assert not failed
    assert result["versions"]["parsed"] == {"sglang": "0.5.99"}


@pytest.mark.parametrize(("script", "rc", "error"), [
    ("import sys; sys.stderr.write('Traceback ...\\nModuleNotFoundError: No module named sglang\\n'); sys.exit(1)", 1,
     "exited 1: Traceback ... ModuleNotFoundError: No module named sglang"),
    ("print('Loading torch'); print('{}')", 0, "printed no JSON object: Loading torch {}"),
    ("print('[1, 2]')", 0, "printed no JSON object: [1, 2]"),
    ("pass", 0, "printed no JSON object: no output"),
])
def test_versions_that_cannot_be_read_are_an_observation(model, script, rc, error):
    failed, result = run(model, versions_command=[sys.executable, "-c", script])
    assert not failed, result.get("msg", result)
    assert result["versions"] == {"rc": rc, "parsed": None, "error": f"{sys.executable} {error}"}


def test_a_version_command_that_does_not_exist(model, tmp_path):
    missing = str(tmp_path / "no-python")
    failed, result = run(model, versions_command=[missing, "-c", "pass"])
    assert not failed, result.get("msg", result)
    assert result["versions"] == {"rc": None, "parsed": None,
                                  "error": f"could not run {missing}: No such file or directory"}


def test_check_mode_reads_the_same(model):
    failed, result = run(model, versions_command=print_versions(), _ansible_check_mode=True)
    assert not failed
    assert result["changed"] is False
    assert result["versions"]["parsed"] == VERSIONS
    assert "config.json" in result["model"]["files"]


@pytest.mark.parametrize(("args", "message"), [
    ({"link_interface": "lo"}, "missing required arguments: model_path"),
    ({"model_path": "/m"}, "missing required arguments: link_interface"),
    ({"model_path": "/m", "link_interface": "lo", "ports": ["http"]}, "ports"),
    ({"model_path": "/m", "link_interface": "lo", "checksum_max_mb": "big"}, "checksum_max_mb"),
])
def test_arguments_of_the_wrong_shape_are_refused(args, message):
    failed, result = run_module(sglang_rank_info.main, args)
    assert failed
    assert message in result["msg"]
