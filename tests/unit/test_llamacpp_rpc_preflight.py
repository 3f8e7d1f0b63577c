"""The llamacpp_rpc preflight in real ansible-playbook runs on two local hosts (lab-a the head, lab-b a member): an
engine of stand-ins that print the real build's captures, the writer's real GGUF fixtures, real sockets. A good ring
passes; a model cut short, a draft of another vocabulary, a member on every address, a secret in the extra flags, a
port in use and no engine at all are each refused before anything starts, naming the variable to set."""

import socket
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.tests.unit.llamacpp_standins import run_playbook, standin_engine

FIXTURES = Path(__file__).resolve().parent / "fixtures"

PLAYBOOK = """
- name: The preflight of a llama.cpp ring
  hosts: ring
  gather_facts: false
  tasks:
    - name: Check the ring
      ansible.builtin.include_role:
        name: inferlab.distributed.llamacpp_rpc
        tasks_from: preflight
"""


@pytest.fixture
def engine(tmp_path):
    return standin_engine(tmp_path / "bin")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(tmp_path, **variables):
    hosts = {"lab-a": {"ansible_host": "127.0.0.1", "inferlab_link_address": "127.0.0.1"},
             "lab-b": {"ansible_host": "127.0.0.1", "inferlab_link_address": "127.0.0.2"}}
    return run_playbook(tmp_path, PLAYBOOK, hosts, variables)


def ring(engine, **extra):
    return {"llamacpp_rpc_bin_dir": str(engine),
            "llamacpp_rpc_model_path": str(FIXTURES / "gguf" / "tiny-target.gguf"),
            "llamacpp_rpc_draft_model_path": str(FIXTURES / "gguf" / "tiny-draft.gguf"),
            "llamacpp_rpc_port": free_port(), "llamacpp_rpc_server_port": free_port(), **extra}


def test_a_good_ring_passes(tmp_path, engine):
    done = run(tmp_path, **ring(engine, llamacpp_rpc_architecture="llama"))
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_model_cut_short_is_refused_on_the_head(tmp_path, engine):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes((FIXTURES / "gguf" / "tiny-target.gguf").read_bytes()[:-100])
    done = run(tmp_path, **ring(engine, llamacpp_rpc_model_path=str(cut)))
    assert done.returncode != 0
    assert f"The model on lab-a cannot serve: {cut} is cut short: its tensors need" in done.stdout
    assert "Set llamacpp_rpc_model_path (inferlab_gguf_model_path) or llamacpp_rpc_draft_model_path" in done.stdout


def test_a_draft_of_another_vocabulary_is_refused(tmp_path, engine):
    other = tmp_path / "other.gguf"
    other.write_bytes((FIXTURES / "gguf" / "tiny-draft.gguf").read_bytes().replace(b"<0x41>", b"<0x7A>", 1))
    done = run(tmp_path, **ring(engine, llamacpp_rpc_draft_model_path=str(other)))
    assert done.returncode != 0
    assert "the draft's token list (sha256) is " in done.stdout


def test_a_member_on_every_address_is_refused_naming_the_variable(tmp_path, engine):
    variables = ring(engine)
    done = run(tmp_path, **variables, inferlab_link_address="0.0.0.0")
    assert done.returncode != 0
    assert "Stop before launch on lab-b, nothing started: host is '0.0.0.0', every address" in done.stdout
    assert "must never listen on an open network" in done.stdout
    assert "set inferlab_link_address (a member's ggml-rpc-server binds it)" in done.stdout


def test_a_secret_flag_is_refused_without_showing_it(tmp_path, engine):
    done = run(tmp_path, **ring(engine, llamacpp_rpc_extra_args=["--api-key", "s3cret-value"]))
    assert done.returncode != 0
    assert "extra_args carries --api-key" in done.stdout
    assert "set llamacpp_rpc_extra_args" in done.stdout


def test_a_port_in_use_is_refused_naming_the_variable(tmp_path, engine):
    variables = ring(engine)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", variables["llamacpp_rpc_server_port"]))
        holder.listen()
        done = run(tmp_path, **variables)
    assert done.returncode != 0
    assert (f"Stop before launch on lab-a, nothing started: port {variables['llamacpp_rpc_server_port']}, where its "
            "llama-server would listen on 127.0.0.1, is in use") in done.stdout
    assert "or set llamacpp_rpc_server_port" in done.stdout


def test_no_engine_named_is_refused_with_the_way_to_get_one(tmp_path, engine):
    variables = ring(engine)
    variables["llamacpp_rpc_bin_dir"] = ""
    done = run(tmp_path, **variables)
    assert done.returncode != 0
    assert "No llama.cpp engine on lab-a: set llamacpp_rpc_bin_dir (inferlab_llamacpp_bin_dir)" in done.stdout
