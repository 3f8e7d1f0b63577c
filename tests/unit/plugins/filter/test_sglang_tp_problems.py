# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang_tp_problems: the sglang_tp preflight's judgements, the plan's, a ring host's and the ring's, each message as
the role words it (the negative scenario and the site dry run assert their phrases), a good plan and host passing,
and input of the wrong shape refused naming the key."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import sglang_tp_problems as module
from ansible_collections.inferlab.distributed.plugins.filter.sglang_tp_problems import sglang_tp_problems

REPO_ROOT = Path(__file__).resolve().parents[4]
SPECS = {case["name"]: case for case in
         json.loads((REPO_ROOT / "tests" / "unit" / "fixtures" / "sglang" / "specs.json").read_text())["cases"]}
# the role's own table of which variable sets each field of a rank spec
VARIABLE_FOR = yaml.safe_load((REPO_ROOT / "roles" / "sglang_tp" / "vars" / "main.yml").read_text())[
    "__sglang_tp_variable_for"]
VERSIONS = {"sglang": "0.5.23", "torch": "2.9.0", "cuda": "12.8", "nccl": "2.27.3"}
FILES = {"config.json": {"size": 654, "sha256": "ab" * 32}, "model.safetensors": {"size": 4096, "sha256": None}}


def plan(**changes):
    good = {"modes": ["baseline", "nextn"], "sweep_concurrency": [1, 4], "sweep_requests_per_slot": 2,
            "sweep_request_rate": None, "sweep_burstiness": 1.0, "min_sglang_version": "",
            "nextn_min_sglang_version": "0.5.21", "variable_for": VARIABLE_FOR}
    good.update(changes)
    return good


def read(**changes):
    """What sglang_rank_info read on a good host."""
    good = {
        "model": {"path": "/models/qwen", "exists": True, "directory": True, "files": copy.deepcopy(FILES),
                  "unreadable": {}},
        "config": {"path": "/models/qwen/config.json", "parsed": {"max_position_embeddings": 40960}, "error": None},
        "link": {"interface": "thunderbolt0", "present": True, "error": None},
        "listeners": None,
        "versions": {"rc": 0, "parsed": dict(VERSIONS), "error": None},
    }
    good.update(changes)
    return good


def host(read_changes=None, **changes):
    """Ring host lab-a (rank 0), with the fixture's TP2 rank specs for both modes."""
    good = {"name": "lab-a", "rank": 0, "process_manager": "process", "container_image": "",
            "specs": {"baseline": copy.deepcopy(SPECS["tp2_rank0"]["spec"]),
                      "nextn": copy.deepcopy(SPECS["tp2_nextn_rank0"]["spec"])},
            "ring": {"hosts": ["lab-a", "lab-b"], "host": "lab-a",
                     "link_addresses": {"lab-a": "169.254.177.1", "lab-b": "169.254.177.2"}},
            "model_path": "/models/qwen", "context_length": None, "link_interface": "thunderbolt0", "port": 30000,
            "dist_init_addr": "169.254.177.1:50000", "read": read(**(read_changes or {})),
            "rank0": {"name": "lab-a", "listeners": {"ports": [30000, 50000], "lines": []}}}
    good.update(changes)
    return good


def ring(reads=None, hosts=("lab-a", "lab-b"), checks=None):
    """The ring as the role passes it: each ring host in the play, its read and its own check's result."""
    reads = {name: read() for name in hosts} if reads is None else reads
    return {"hosts": list(hosts), "reads": reads,
            "checks": {name: {"changed": False, "skipped": True, "results": []} for name in reads}
            if checks is None else checks}


def test_registered():
    assert module.FilterModule().filters() == {"sglang_tp_problems": sglang_tp_problems}


def test_a_good_plan_host_and_ring_pass():
    assert sglang_tp_problems(plan()) == []
    assert sglang_tp_problems(plan(), host=host()) == []
    assert sglang_tp_problems(plan(), ring=ring()) == []


# --- the plan ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("modes", [[], ["nextn", "baseline"], ["baseline", "baseline"], ["baseline", "mtp"],
                                   "baseline"])
def test_modes_not_baseline_before_speculation(modes):
    assert sglang_tp_problems(plan(modes=modes)) == [
        "Stop if the serving plan is not baseline before speculation: expected sglang_tp_modes to be a list of "
        f"distinct modes from [baseline, nextn] with baseline first, found {modes}; set sglang_tp_modes"]


@pytest.mark.parametrize("modes", [["baseline"], ["nextn"], ["baseline", "nextn"]])
def test_modes_in_order_pass(modes):
    assert sglang_tp_problems(plan(modes=modes)) == []


@pytest.mark.parametrize(("levels", "per_slot", "found"), [
    ([0, 2], 2, "[0, 2] and 2"),
    ([2, 2], 2, "[2, 2] and 2"),
    ([1, 2], 0, "[1, 2] and 0"),
    (["x"], 2, "['x'] and 2"),  # Jinja's int reads what is not a number as 0
    ("4", 2, "4 and 2"),  # not a list
])
def test_a_sweep_that_cannot_run(levels, per_slot, found):
    assert sglang_tp_problems(plan(sweep_concurrency=levels, sweep_requests_per_slot=per_slot)) == [
        "Stop if the concurrency sweep cannot run: expected distinct levels of at least 1 and at least 1 request per "
        f"slot, found levels {found} per slot; set inferlab_sweep_concurrency (sglang_tp_sweep_concurrency) or "
        "inferlab_sweep_requests_per_slot"]


def test_levels_given_as_text_are_read_as_numbers():
    assert sglang_tp_problems(plan(sweep_concurrency=["1", "4"], sweep_requests_per_slot="2")) == []


@pytest.mark.parametrize(("rate", "burstiness", "found"), [
    (0, 1.0, "0 and 1.0"), (-2.5, 1.0, "-2.5 and 1.0"), ("fast", 1.0, "fast and 1.0"),
    (None, 0, " and 0"),  # a template shows None as nothing
])
def test_a_rate_or_burstiness_that_is_not_positive(rate, burstiness, found):
    assert sglang_tp_problems(plan(sweep_request_rate=rate, sweep_burstiness=burstiness)) == [
        "Stop if the concurrency sweep cannot run: expected a request rate above 0 a second (or none: every request "
        f"of a batch at once) and a burstiness above 0, found {found}; set inferlab_sweep_request_rate or "
        "inferlab_sweep_burstiness"]


def test_every_plan_problem_at_once():
    assert len(sglang_tp_problems(plan(modes=[], sweep_concurrency=[0], sweep_burstiness=0))) == 3


# --- one ring host -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("manager", ["docker", "podman"])
def test_a_container_without_an_image(manager):
    assert sglang_tp_problems(plan(), host=host(process_manager=manager)) == [
        "Stop if the ranks' container has no image: expected sglang_tp_container_image (an image reference such as "
        f"lmsysorg/sglang:v0.5.6) with sglang_tp_process_manager {manager}, found none; set sglang_tp_container_image"]
    assert sglang_tp_problems(plan(), host=host(process_manager=manager, container_image="lmsysorg/sglang:v0.5.6")) \
        == []


def test_launch_settings_name_the_variable_once_for_both_modes():
    """A problem both modes' specs share is said once; each names the variable that sets its field."""
    specs = host()["specs"]
    for spec in specs.values():
        spec["tp_size"] = 3
    specs["nextn"]["speculative"]["num_draft_tokens"] = 5
    problems = sglang_tp_problems(plan(), host=host(specs=specs))
    assert len(problems) == 1
    assert problems[0].startswith("Stop before launch on lab-a (rank 0): tp_size ")
    assert problems[0].count("set sglang_tp_size)") == 1
    assert "num_draft_tokens" in problems[0] and problems[0].endswith("; set sglang_tp_speculative)")
    assert "); " in problems[0]  # the two problems, joined


def test_a_quantization_that_is_a_kv_cache_dtype():
    specs = host()["specs"]
    specs["baseline"]["quantization"] = "nvfp4"
    problems = sglang_tp_problems(plan(), host=host(specs={"baseline": specs["baseline"]}))
    assert problems[0].startswith("Stop before launch on lab-a (rank 0): ")
    assert "it is a KV-cache dtype" in problems[0] and "; set sglang_tp_quantization)" in problems[0]


def test_a_value_not_given_reads_as_nothing_as_the_template_showed_it():
    spec = dict(SPECS["tp2_rank0"]["spec"])
    del spec["dist_init_addr"]
    assert sglang_tp_problems(plan(), host=host(specs={"baseline": spec})) == [
        "Stop before launch on lab-a (rank 0): dist_init_addr is required with nnodes > 1: every rank meets rank 0 "
        "there (expected HOST:PORT on rank 0's direct-link address, found ; set sglang_tp_dist_init_addr "
        "(sglang_tp_dist_init_port))"]


def test_a_field_without_a_variable_names_the_field():
    problems = module._launch_problems(plan(variable_for={}), host=host(specs={"b": dict(
        SPECS["tp2_rank0"]["spec"], tp_size=3)}))
    assert problems[0].endswith("; set tp_size)")


@pytest.mark.parametrize(("exists", "found"), [(False, "nothing"), (True, "a file")])
def test_a_missing_model_directory(exists, found):
    problems = sglang_tp_problems(plan(), host=host(read_changes={
        "model": {"path": "/models/qwen", "exists": exists, "directory": False, "files": {}, "unreadable": {}},
        "config": {"path": "/models/qwen/config.json", "parsed": None,
                   "error": "File not found: /models/qwen/config.json"}}))
    assert problems == [
        f"Stop if the model is missing on lab-a: expected a directory at /models/qwen, found {found}; set "
        "sglang_tp_model_path (inferlab_model_path) or copy the model there",
        "Stop if the model directory is not a model on lab-a: expected a JSON config.json in /models/qwen, found File "
        "not found: /models/qwen/config.json; set sglang_tp_model_path (inferlab_model_path)",
        "Stop if the context length is unknown: the long-context step needs sglang_tp_context_length or "
        "max_position_embeddings in /models/qwen/config.json, found neither; set sglang_tp_context_length"]


def test_a_config_that_is_not_a_json_object():
    problems = sglang_tp_problems(plan(), host=host(context_length=4096, read_changes={
        "config": {"path": "/models/qwen/config.json", "parsed": None, "error": None}}))
    assert problems == [
        "Stop if the model directory is not a model on lab-a: expected a JSON config.json in /models/qwen, found a "
        "file that is not a JSON object; set sglang_tp_model_path (inferlab_model_path)"]


@pytest.mark.parametrize(("context_length", "config", "ok"), [
    (None, {}, False), (None, {"max_position_embeddings": "long"}, False),
    (None, {"max_position_embeddings": 8192}, True),
    (2048, {}, True), ("2048", {}, True), (0, {}, False), (None, {"max_position_embeddings": True}, False)])
def test_the_context_length_from_the_variable_or_the_config(context_length, config, ok):
    problems = sglang_tp_problems(plan(), host=host(context_length=context_length, read_changes={
        "config": {"path": "/models/qwen/config.json", "parsed": config, "error": None}}))
    assert problems == ([] if ok else [
        "Stop if the context length is unknown: the long-context step needs sglang_tp_context_length or "
        "max_position_embeddings in /models/qwen/config.json, found neither; set sglang_tp_context_length"])


@pytest.mark.parametrize(("error", "found"), [('Device "tb9" does not exist.', 'Device "tb9" does not exist.'),
                                              ("", "no such interface"), (None, "no such interface")])
def test_a_missing_nccl_interface(error, found):
    problems = sglang_tp_problems(plan(), host=host(link_interface="tb9", read_changes={
        "link": {"interface": "tb9", "present": False, "error": error}}))
    assert problems == [
        "Stop if NCCL's interface is missing on lab-a: expected interface tb9 (NCCL_SOCKET_IFNAME==tb9), found "
        f"{found}; set inferlab_link_interface or bring the link up"]


def test_a_busy_port_on_rank_0_is_every_hosts_problem():
    lines = ["LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*", "LISTEN 0 5 [::]:30000 [::]:*"]
    lab_b = host(name="lab-b", rank=1, rank0={"name": "lab-a", "listeners": {"ports": [30000, 50000], "lines": lines}})
    lab_b["ring"]["host"] = "lab-b"
    lab_b["specs"] = {"baseline": SPECS["tp2_rank1"]["spec"]}
    assert sglang_tp_problems(plan(), host=lab_b) == [
        "Stop if a port is busy on lab-a (rank 0): expected ports 30000 (HTTP) and 50000 (rendezvous) free, found "
        "listeners: LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* | LISTEN 0 5 [::]:30000 [::]:*; set sglang_tp_port or "
        "sglang_tp_dist_init_port"]


def test_rank_0_not_read_is_no_port_problem():
    assert sglang_tp_problems(plan(), host=host(rank0={"name": "lab-a", "listeners": None})) == []


@pytest.mark.parametrize(("versions", "found"), [
    ({"rc": 1, "parsed": None, "error": "python3 exited 1: ModuleNotFoundError: No module named 'sglang'"},
     "python3 exited 1: ModuleNotFoundError: No module named 'sglang'"),
    ({"rc": 0, "parsed": None, "error": "python3 printed no JSON object: hello"},
     "python3 printed no JSON object: hello"),
    (None, "no command")])
def test_versions_that_cannot_be_read(versions, found):
    assert sglang_tp_problems(plan(), host=host(read_changes={"versions": versions})) == [
        "Stop if the versions cannot be read on lab-a: expected sglang_tp_version_command to print one JSON object of "
        f"the versions the ranks run (sglang, torch, cuda, nccl), found {found}; install SGLang where the ranks run, "
        "or set sglang_tp_version_command (inferlab_sglang_version_command)"]


def test_every_host_problem_at_once_in_the_checks_order():
    specs = host()["specs"]
    specs["baseline"]["tp_size"] = 3
    problems = sglang_tp_problems(plan(), host=host(
        process_manager="docker", specs={"baseline": specs["baseline"]}, read_changes={
            "model": {"path": "/x", "exists": False, "directory": False, "files": {}, "unreadable": {}},
            "config": {"path": "/x/config.json", "parsed": None, "error": "File not found: /x/config.json"},
            "link": {"interface": "tb9", "present": False, "error": "no"},
            "versions": {"rc": 1, "parsed": None, "error": "failed"}},
        rank0={"name": "lab-a", "listeners": {"ports": [1], "lines": ["LISTEN"]}}))
    assert [problem.split(":", maxsplit=1)[0] for problem in problems] == [
        "Stop if the ranks' container has no image", "Stop before launch on lab-a (rank 0)",
        "Stop if the model is missing on lab-a", "Stop if the model directory is not a model on lab-a",
        "Stop if the context length is unknown", "Stop if NCCL's interface is missing on lab-a",
        "Stop if a port is busy on lab-a (rank 0)", "Stop if the versions cannot be read on lab-a"]


# --- the ring ------------------------------------------------------------------------------------------------------

def test_a_host_not_in_the_play_stops_the_others_before_any_comparison():
    reads = {"lab-a": read()}
    assert sglang_tp_problems(plan(), ring=ring(reads=reads, hosts=["lab-a", "lab-b", "lab-c"])) == [
        "Stop before launch: every ring host holds a rank and must pass its checks, found lab-b, lab-c failed or left "
        "out of this play (see their errors above; do not --limit a serving run)"]


def test_a_host_whose_own_check_failed_in_a_callers_rescue_stops_the_others():
    """A rescue keeps the host in the play (ansible_play_hosts); its check's registered result says it failed."""
    checks = {"lab-a": {"failed": True, "results": [{"failed": True, "msg": "Stop if the model is missing on lab-a"}]},
              "lab-b": {"changed": False, "skipped": True, "results": []}}
    assert sglang_tp_problems(plan(), ring=ring(checks=checks)) == [
        "Stop before launch: every ring host holds a rank and must pass its checks, found lab-a failed or left out of "
        "this play (see their errors above; do not --limit a serving run)"]


def test_a_host_whose_read_failed_or_never_ran_did_not_pass():
    reads = {"lab-a": {"failed": True, "msg": "Failed to find required executable \"ss\""}, "lab-b": read()}
    assert "found lab-a failed or left out" in sglang_tp_problems(plan(), ring=ring(reads=reads))[0]
    reads = {"lab-a": None, "lab-b": read()}
    checks = {"lab-a": None, "lab-b": None}  # never ran: no check either
    assert "found lab-a failed or left out" in sglang_tp_problems(plan(), ring=ring(reads=reads, checks=checks))[0]


def test_a_check_that_noted_its_problems_in_a_site_dry_run_passed():
    """In a site dry run the checks note their problems and go on: the ranks are still compared."""
    checks = {name: {"changed": False, "results": [{"failed": False, "preflight_problem": {"host": name}}]}
              for name in ("lab-a", "lab-b")}
    other = read(versions={"rc": 0, "parsed": dict(VERSIONS, torch="2.8.0"), "error": None})
    problems = sglang_tp_problems(plan(), ring=ring(reads={"lab-a": read(), "lab-b": other}, checks=checks))
    assert problems[0].startswith("Stop before launch: every rank must run the same software")


def test_ranks_that_differ_in_versions_and_files():
    other = read(versions={"rc": 0, "parsed": dict(VERSIONS, torch="2.8.0"), "error": None})
    other["model"]["files"]["config.json"]["sha256"] = "cd" * 32
    problems = sglang_tp_problems(plan(), ring=ring(reads={"lab-a": read(), "lab-b": other}))
    assert len(problems) == 1
    assert problems[0].startswith("Stop before launch: every rank must run the same software and the same model, "
                                  "found lab-b has torch 2.8.0 where lab-a has 2.9.0; ")
    assert "config.json" in problems[0]
    assert problems[0].endswith("; install the same versions and copy the same model to every ring host (lab-a, "
                                "lab-b), or set sglang_tp_min_sglang_version")


def test_a_minimum_sglang_version():
    problems = sglang_tp_problems(plan(min_sglang_version="0.6.0"), ring=ring())
    assert problems == [
        "Stop before launch: every rank must run the same software and the same model, found lab-a runs SGLang "
        "0.5.23, older than the required 0.6.0; lab-b runs SGLang 0.5.23, older than the required 0.6.0; install the "
        "same versions and copy the same model to every ring host (lab-a, lab-b), or set sglang_tp_min_sglang_version"]


def test_nextn_on_an_sglang_without_the_merged_autotune_caches():
    old = read(versions={"rc": 0, "parsed": dict(VERSIONS, sglang="0.5.20"), "error": None})
    problems = sglang_tp_problems(plan(), ring=ring(reads={"lab-a": old, "lab-b": copy.deepcopy(old)}))
    assert problems == [
        "Stop before launch: mode nextn needs SGLang 0.5.21 or later, found lab-a runs SGLang 0.5.20, lab-b runs "
        "SGLang 0.5.20. Before it, the draft worker's FlashInfer autotune drops the target's tuned tactics (upstream "
        "commit fc5a979f merges the caches across speculative workers), which breaks NEXTN. "
        "Install SGLang 0.5.21 or later, leave nextn out of sglang_tp_modes, or set "
        "sglang_tp_nextn_min_sglang_version to \"\" for a build that carries the fix"]


@pytest.mark.parametrize("changes", [{"modes": ["baseline"]}, {"nextn_min_sglang_version": ""}])
def test_nextn_minimum_only_when_nextn_is_planned_and_a_minimum_set(changes):
    old = read(versions={"rc": 0, "parsed": dict(VERSIONS, sglang="0.5.20"), "error": None})
    assert sglang_tp_problems(plan(**changes), ring=ring(reads={"lab-a": old, "lab-b": copy.deepcopy(old)})) == []


def test_a_version_nextn_cannot_read_is_refused():
    unknown = read(versions={"rc": 0, "parsed": dict(VERSIONS, sglang="main-fc5a979"), "error": None})
    problems = sglang_tp_problems(plan(), ring=ring(reads={"lab-a": unknown, "lab-b": copy.deepcopy(unknown)}))
    assert problems[0].startswith("Stop before launch: mode nextn needs SGLang 0.5.21 or later, found lab-a runs "
                                  "SGLang main-fc5a979, lab-b runs SGLang main-fc5a979. ")


def test_a_host_whose_versions_could_not_be_read_is_left_out_of_the_comparisons():
    """Its own check named it (a site dry run goes on past it); a failed read, as registered, is no version."""
    unread = read(versions={"rc": 1, "parsed": None, "error": "failed"})
    assert sglang_tp_problems(plan(), ring=ring(reads={"lab-a": read(), "lab-b": unread})) == []
    assert sglang_tp_problems(plan(), ring=ring(reads={"lab-a": read(versions=None), "lab-b": unread})) == []


# --- input of the wrong shape ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (["modes"], {}, "the plan must be a dict, found str"),
    ([{"modes": []}], {}, "the plan has no sweep_concurrency, sweep_requests_per_slot"),
    ([plan()], {"host": host(), "ring": ring()}, "give host or ring, not both"),
    ([plan()], {"host": {"name": "lab-a"}}, "host has no rank, process_manager"),
    ([plan()], {"host": host(read={"failed": True})}, "host.read has no model, config, link, versions"),
    ([plan()], {"host": host(read_changes={"link": "up"})}, "host.read.link must be a dict, found str"),
    ([plan()], {"host": host(rank0={"name": "lab-a"})}, "host.rank0 has no listeners"),
    ([plan()], {"host": host(rank0={"name": "lab-a", "listeners": []})}, "host.rank0.listeners must be a dict"),
    ([plan()], {"host": host(read_changes={"versions": "0.5.23"})}, "host.read.versions must be a dict"),
    ([plan()], {"host": host(specs=[])}, "host.specs must be a dict, found list"),
    ([plan()], {"host": host(specs={"baseline": {"launcher": "python3"}})}, "malformed SGLang rank spec: "),
    ([plan(variable_for=None)], {"host": host(specs={"b": dict(SPECS["tp2_rank0"]["spec"], tp_size=3)})},
     "plan.variable_for must be a dict"),
    ([plan()], {"ring": {"hosts": ["lab-a"]}}, "ring has no reads, checks"),
    ([plan()], {"ring": {"hosts": "lab-a", "reads": {}, "checks": {}}}, "ring.hosts must be a list, found str"),
    ([plan()], {"ring": {"hosts": ["lab-a"], "reads": [], "checks": {}}}, "ring.reads must be a dict, found list"),
    ([plan()], {"ring": {"hosts": ["lab-a"], "reads": {"lab-a": "ok"}, "checks": {}}},
     "a ring host's read must be a dict, found str"),
    ([plan()], {"ring": ring(checks={"lab-a": "ok", "lab-b": None})}, "a ring host's check must be a dict"),
    ([plan()], {"ring": ring(reads={"lab-a": read(versions="0.5.23"), "lab-b": read()})},
     "ring.reads[lab-a].versions must be a dict"),
    ([plan()], {"ring": ring(reads={"lab-a": read(model={"exists": True}), "lab-b": read()})},
     "ring.reads[lab-a].model has no files"),
    ([plan()], {"ring": ring(reads={"lab-a": read(versions={"parsed": "0.5.23"}), "lab-b": read()})}, None),
])
def test_input_of_the_wrong_shape_names_the_key(args, kwargs, message):
    if message is None:  # a version that is not an object is no version: left out, not an error
        assert sglang_tp_problems(*args, **kwargs) == []
        return
    with pytest.raises(AnsibleFilterError, match="^sglang_tp_problems: ") as error:
        sglang_tp_problems(*args, **kwargs)
    assert message in str(error.value)


def test_ansible_types_are_accepted():
    class Tagged(str):
        """Stands for the str subclasses Ansible hands to filters."""

    tagged = host(name=Tagged("lab-a"), model_path=Tagged("/models/qwen"))
    tagged["specs"] = {Tagged("baseline"): tagged["specs"]["baseline"]}
    assert sglang_tp_problems(plan(modes=(Tagged("baseline"),)), host=tagged) == []
