"""The sglang_tp preflight (roles/sglang_tp/tasks/preflight.yml) in real ansible-playbook runs on two local hosts
(lab-a rank 0, lab-b rank 1): a model directory on disk, the real `ip` (loopback as the direct link) and `ss` with
real sockets, and a version command per host. A good ring passes in check mode and keeps what the launch and the
record use; bad input is refused before anything starts with the phrases molecule's negative scenario and the site
dry run assert; mode nextn on an SGLang without the merged autotune caches is refused naming the fix and the ways
out; a host that failed its own checks inside a caller's rescue stops the other; and a site dry run notes every
problem, each once, and goes on."""

import json
import socket
import sys

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import run_playbook

# Each host's outcome in <out>/<host>.json: passed with what the launch uses, or the failed task's messages.
PLAYBOOK = """
- name: The TP ranks' preflight
  hosts: ring
  gather_facts: false
  tasks:
    - name: Check the plan and the ring, as a stage does inside its rescue
      block:
        - name: The preflight
          ansible.builtin.include_role:
            name: inferlab.distributed.sglang_tp
            tasks_from: preflight
            public: true
        - name: Keep what passed
          ansible.builtin.copy:
            content: >-
              {{ {'passed': true, 'specs': __sglang_tp_specs, 'versions': __sglang_tp_versions,
                  'identity': __sglang_tp_identity, 'context': __sglang_tp_model_context,
                  'shape': __sglang_tp_model_shape} | to_json }}
            dest: "{{ out }}/{{ inventory_hostname }}.json"
            mode: "0644"
          delegate_to: localhost
          check_mode: false
      rescue:
        - name: Keep what failed
          ansible.builtin.copy:
            content: >-
              {{ {'passed': false, 'task': ansible_failed_task.name,
                  'messages': (ansible_failed_result.results | default([ansible_failed_result]))
                              | selectattr('failed', 'defined') | selectattr('failed') | map(attribute='msg')
                              | map('string') | list} | to_json }}
            dest: "{{ out }}/{{ inventory_hostname }}.json"
            mode: "0644"
          delegate_to: localhost
          check_mode: false
"""
VERSIONS = {"sglang": "0.5.23", "torch": "2.9.0", "cuda": "12.8", "nccl": "2.27.3"}
CONFIG = {"max_position_embeddings": 4096, "hidden_size": 64, "num_hidden_layers": 2, "torch_dtype": "bfloat16"}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def print_versions(versions):
    return [sys.executable, "-c", f"print({json.dumps(versions)!r})"]


def run(tmp_path, *args, hosts=None, versions=None, **variables):
    """The playbook on lab-a and lab-b with a good model, free ports and each host's versions; returns the process
    and each host's outcome."""
    model = tmp_path / "model"
    if not model.exists():
        (model / "sub").mkdir(parents=True)
        (model / "config.json").write_text(json.dumps(CONFIG))
        (model / "sub" / "weights.bin").write_bytes(b"w" * 3000)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    versions = versions or {}
    ring = {}
    for name, address in (("lab-a", "127.0.0.1"), ("lab-b", "127.0.0.2")):
        ring[name] = {"ansible_host": "127.0.0.1", "ansible_python_interpreter": sys.executable,
                      "inferlab_link_address": address, "inferlab_link_interface": "lo", "inferlab_mgmt_interface": "",
                      "inferlab_model_path": str(model), "inferlab_state_dir": str(tmp_path / "state"),
                      "sglang_tp_version_command": print_versions(versions.get(name, VERSIONS))}
        ring[name].update((hosts or {}).get(name, {}))
    variables = {"inferlab_run_dir": str(tmp_path / "run"), "out": str(out), "sglang_tp_port": free_port(),
                 "sglang_tp_dist_init_port": free_port(), **variables}
    proc = run_playbook(tmp_path, PLAYBOOK, {"all": {"children": {"ring": {"hosts": ring}}}}, *args, **variables)
    outcome = {name: json.loads((out / f"{name}.json").read_text()) if (out / f"{name}.json").exists() else None
               for name in ring}
    return proc, outcome, variables


def messages(outcome):
    return " | ".join(outcome["messages"])


def test_a_good_ring_passes_in_check_mode_and_keeps_what_the_launch_uses(tmp_path):
    proc, outcome, variables = run(tmp_path, "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    for rank, name in enumerate(("lab-a", "lab-b")):
        assert outcome[name]["passed"], outcome[name]
        assert list(outcome[name]["specs"]) == ["baseline", "nextn"]
        assert outcome[name]["specs"]["nextn"]["node_rank"] == rank
        assert outcome[name]["specs"]["nextn"]["dist_init_addr"] == f"127.0.0.1:{variables['sglang_tp_dist_init_port']}"
        assert outcome[name]["versions"] == VERSIONS
        files = outcome[name]["identity"]["model"]
        assert outcome[name]["identity"]["versions"] == VERSIONS
        assert sorted(files) == ["config.json", "sub/weights.bin"]
        assert (files["config.json"]["size"], files["sub/weights.bin"]["size"]) == (len(json.dumps(CONFIG)), 3000)
        assert all(len(entry["sha256"]) == 64 for entry in files.values())  # both under 64 MiB
        assert outcome[name]["context"] == 4096
        assert outcome[name]["shape"] == {"hidden_size": 64, "num_hidden_layers": 2, "torch_dtype": "bfloat16"}


def test_bad_input_is_refused_on_every_host_naming_what_to_set(tmp_path):
    """Molecule negative's cases (tests_serve_preflight.yml) at once: each host lists every problem it has."""
    speculative = {"algorithm": "NEXTN", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 5}
    with socket.socket() as holder:
        port = free_port()
        holder.bind(("127.0.0.1", port))
        holder.listen()
        proc, outcome, _variables = run(tmp_path, sglang_tp_port=port, sglang_tp_speculative=speculative,
                                        sglang_tp_quantization="nvfp4", inferlab_link_interface="tb9")
    assert proc.returncode == 0, proc.stdout[-3000:]  # rescued
    for name, rank in (("lab-a", 0), ("lab-b", 1)):
        said = messages(outcome[name])
        assert not outcome[name]["passed"]
        assert outcome[name]["task"].startswith("Stop if this host cannot launch its rank")
        assert f"Stop before launch on {name} (rank {rank}): " in said
        for phrase in ("num_draft_tokens", "set sglang_tp_speculative", "it is a KV-cache dtype",
                       "set sglang_tp_quantization", f"Stop if NCCL's interface is missing on {name}",
                       "expected interface tb9", "set inferlab_link_interface",
                       f"Stop if a port is busy on lab-a (rank 0): expected ports {port} (HTTP)",
                       "set sglang_tp_port"):
            assert phrase in said, phrase
        assert len(outcome[name]["messages"]) == 3  # the launch settings, the interface, rank 0's port


def test_nextn_on_an_sglang_without_the_merged_autotune_caches_is_refused(tmp_path):
    old = dict(VERSIONS, sglang="0.5.20")
    proc, outcome, _variables = run(tmp_path, versions={"lab-a": VERSIONS, "lab-b": old})
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in ("lab-a", "lab-b"):
        said = messages(outcome[name])
        assert outcome[name]["task"] == ("Stop if a ring host did not pass its checks, or the ranks differ in versions "
                                         "or model files")
        assert ("Stop before launch: mode nextn needs SGLang 0.5.21 or later, found lab-b runs SGLang 0.5.20. Before "
                "it, the draft worker's FlashInfer autotune drops the target's tuned tactics (upstream commit fc5a979f "
                "merges the caches across speculative workers)") in said
        assert ("leave nextn out of sglang_tp_modes, or set sglang_tp_nextn_min_sglang_version to \"\" for a build "
                "that carries the fix") in said
        assert "Stop before launch: every rank must run the same software and the same model, found lab-b has " \
               "sglang 0.5.20 where lab-a has 0.5.23" in said


def test_a_host_that_failed_its_checks_in_a_callers_rescue_stops_the_other(tmp_path):
    proc, outcome, _variables = run(tmp_path, hosts={"lab-a": {"inferlab_model_path": "/nonexistent/model"}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert outcome["lab-a"]["messages"][0] == (
        "Stop if the model is missing on lab-a: expected a directory at /nonexistent/model, found nothing; set "
        "sglang_tp_model_path (inferlab_model_path) or copy the model there")
    assert outcome["lab-b"]["messages"] == [
        "Stop before launch: every ring host holds a rank and must pass its checks, found lab-a failed or left out of "
        "this play (see their errors above; do not --limit a serving run)"]


def test_a_site_dry_run_notes_every_problem_once_and_goes_on(tmp_path):
    """As tests_site_dry_run.yml plants them: a wrong model path on lab-a, rank 0's HTTP port in use."""
    with socket.socket() as holder:
        port = free_port()
        holder.bind(("127.0.0.1", port))
        holder.listen()
        proc, outcome, _variables = run(tmp_path, sglang_tp_port=port, inferlab_preflight_collect=True,
                                        hosts={"lab-a": {"inferlab_model_path": "/nonexistent/model"}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert outcome["lab-a"]["passed"] and outcome["lab-b"]["passed"]  # noted, and the play went on
    lines = (tmp_path / "run" / "preflight" / "problems.jsonl").read_text().splitlines()
    noted = [(problem["host"], problem["message"].split(":")[0]) for problem in map(json.loads, lines)]
    assert sorted(set(noted)) == sorted([
        ("lab-a", "Stop if the model is missing on lab-a"),
        ("lab-a", "Stop if the model directory is not a model on lab-a"),
        ("lab-a", "Stop if the context length is unknown"),
        ("lab-a", "Stop if a port is busy on lab-a (rank 0)"),
        ("lab-b", "Stop if a port is busy on lab-a (rank 0)"),  # the same check and message: the report says it once
        # the ranks are still compared: lab-a read no model files
        ("lab-a", "Stop before launch"), ("lab-b", "Stop before launch")])
    assert all(problem["message"].endswith(("or copy the model there", "(inferlab_model_path)",
                                            "set sglang_tp_context_length", "or sglang_tp_dist_init_port",
                                            "or set sglang_tp_min_sglang_version"))
               for problem in map(json.loads, lines))
