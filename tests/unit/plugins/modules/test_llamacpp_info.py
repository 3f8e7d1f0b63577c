# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llamacpp_info through main(), against stand-in programs that print what the real build printed
(tests/unit/fixtures/llamacpp: --version and --help of llama-server, --help of ggml-rpc-server, which prints its usage
on stderr), and against the same with RPC taken out, a missing RPC server, a program that hangs and one that fails."""

import os

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import llamacpp_info
from ansible_collections.inferlab.distributed.tests.unit.llamacpp_standins import program, standin_engine
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module


@pytest.fixture
def install(tmp_path):
    """A bin dir whose programs print the real captures."""
    return standin_engine(tmp_path)


def test_the_real_builds_output_reads_as_an_rpc_capable_install(install):
    failed, result = run_module(llamacpp_info.main, {"bin_dir": str(install)})
    assert not failed, result.get("msg", result)
    facts = result["llamacpp"]
    assert result["problems"] == []
    assert facts["version"] == {"version": "0.5.0-dev", "build": 1, "commit": "0c1e570"}
    assert facts["rpc"] is True
    for flag in ("--rpc", "-md", "--model-draft", "--spec-draft-n-max", "-ngl", "-c", "--ctx-size", "--metrics"):
        assert flag in facts["server_flags"], flag
    assert {"-H", "--host", "-p", "--port", "-t", "--threads"} <= set(facts["rpc_server_flags"])
    assert "draft-simple" in facts["spec_types"] and "draft-mtp" in facts["spec_types"]


def test_a_build_without_rpc_is_named_with_the_fix(install):
    help_text = install / "server_help.txt"
    help_text.write_text("".join(line for line in help_text.read_text().splitlines(True)
                                 if not line.startswith("--rpc")))
    os.remove(install / "ggml-rpc-server")
    failed, result = run_module(llamacpp_info.main, {"bin_dir": str(install), "fail_on_problems": True})
    assert failed
    assert result["llamacpp"]["rpc"] is False
    assert result["problems"] == [
        f"{install}/ggml-rpc-server is not there or not executable",
        f"{install}/llama-server --help lists no --rpc: the build lacks GGML_RPC=ON (rebuild with it, or point the "
        "role at another install)"]
    assert result["msg"] == "; ".join(result["problems"])


def test_an_older_build_than_required_is_refused(install):
    failed, result = run_module(llamacpp_info.main, {"bin_dir": str(install), "min_build": 8000})
    assert not failed
    assert result["problems"] == ["llama-server is build 1, older than the 8000 required"]


def test_a_program_that_hangs_is_bounded_and_named(tmp_path):
    program(tmp_path / "llama-server", "exec sleep 30\n")
    program(tmp_path / "ggml-rpc-server", "exit 3\n")
    failed, result = run_module(llamacpp_info.main, {"bin_dir": str(tmp_path), "timeout_s": 0.5})
    assert not failed
    assert result["problems"] == [f"{tmp_path}/llama-server --version did not answer within 0.5 s",
                                  f"{tmp_path}/ggml-rpc-server --help exited 3: "]
    assert result["llamacpp"]["version"] is None and result["llamacpp"]["rpc"] is False


def test_a_version_line_of_another_shape_is_quoted(tmp_path, install):
    program(install / "llama-server",
            'case "$1" in --version) echo "llama.cpp b4000" ;; --help) echo "--rpc X" ;; esac\n')
    failed, result = run_module(llamacpp_info.main, {"bin_dir": str(install)})
    assert result["problems"] == [f"{install}/llama-server --version printed no \"version: V (build N, commit C)\" "
                                  "line: 'llama.cpp b4000'"]
