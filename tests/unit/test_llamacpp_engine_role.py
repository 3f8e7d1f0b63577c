"""The llamacpp_engine role in real ansible-playbook runs on local hosts: an install named by llamacpp_engine_bin_dir
is verified by what its programs print (stand-ins that print the real build's captured --version and --help,
tests/unit/fixtures/llamacpp), its facts kept; an install without RPC fails naming what is missing and the variable
to set; check mode verifies a named install and builds nothing."""

import json

from ansible_collections.inferlab.distributed.tests.unit.llamacpp_standins import (
    ENGINE_ROLE_PLAYBOOK,
    run_playbook,
    standin_engine,
)


def run(tmp_path, bin_dir, *options):
    variables = {"llamacpp_engine_bin_dir": str(bin_dir), "facts_file": str(tmp_path / "facts.json")}
    return run_playbook(tmp_path, ENGINE_ROLE_PLAYBOOK, {"lab-a": {}}, variables, *options)


def test_a_named_install_is_verified_and_its_facts_kept(tmp_path):
    done = run(tmp_path, standin_engine(tmp_path / "bin"))
    assert done.returncode == 0, done.stdout[-3000:]
    facts = json.loads((tmp_path / "facts.json").read_text())["info"]
    assert facts["version"] == {"version": "0.5.0-dev", "build": 1, "commit": "0c1e570"}
    assert facts["rpc"] is True and "draft-simple" in facts["spec_types"]


def test_an_install_without_rpc_fails_naming_it_and_the_variable(tmp_path):
    done = run(tmp_path, standin_engine(tmp_path / "bin", rpc=False))
    assert done.returncode != 0
    assert "The engine on lab-a cannot serve an RPC ring:" in done.stdout
    assert "--help lists no --rpc: the build lacks GGML_RPC=ON" in done.stdout
    assert "Set llamacpp_engine_bin_dir to an install built with GGML_RPC=ON" in done.stdout
    assert not (tmp_path / "facts.json").exists()


def test_check_mode_verifies_a_named_install(tmp_path):
    done = run(tmp_path, standin_engine(tmp_path / "bin"), "--check")
    assert done.returncode == 0, done.stdout[-3000:]
    assert json.loads((tmp_path / "facts.json").read_text())["info"]["rpc"] is True
