# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang 0.5.23 itself judges what plugins/plugin_utils/_sglang_launch.py builds and checks.

Runs only in the venv tests/contract/setup_venv.sh builds (see README.md beside this file): sglang 0.5.23 without its
GPU stack, torch 2.13.0 from the CPU wheel, a triton stub. Elsewhere it skips and says how to run it.

- Every argv of the shared table (tests/unit/fixtures/sglang/specs.json) goes through
  sglang.srt.server_args.prepare_server_args, exactly as `python -m sglang.launch_server` parses its command line, and
  the parsed fields must equal the spec (fields the spec leaves unset must be at SGLang's own default).
- Again with the parser's allow_abbrev forced off, so no flag works only as an abbreviation.
- The choice lists and the speculative algorithm names are SGLang's own.
- For a grid of speculative settings, SGLang's speculative resolution keeps every setting spec_problems accepts,
  and changes or rejects the ones it reports.
"""

import argparse
import importlib
import importlib.util
import itertools
import json
import os
import re
import sys
import types
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = REPO_ROOT / "plugins" / "plugin_utils" / "_sglang_launch.py"
TABLE = json.loads((REPO_ROOT / "tests" / "unit" / "fixtures" / "sglang" / "specs.json").read_text())
CASES = {case["name"]: case for case in TABLE["cases"]}
SKIP_MARKER = Path(sys.prefix) / "inferlab-contract-skip.txt"
STAMP = Path(sys.prefix) / "inferlab-contract.stamp"


def _require_contract_venv():
    if SKIP_MARKER.exists():
        # CI's image has the CPU torch wheel: without it the contract is not checked, and CI must not pass
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the SGLang contract test cannot skip: " + SKIP_MARKER.read_text().strip(),
                        pytrace=False)
        pytest.skip(SKIP_MARKER.read_text().strip(), allow_module_level=True)
    if not STAMP.exists():
        pytest.skip("the SGLang contract test runs in its own venv: bash tests/contract/setup_venv.sh "
                    ".cache/sglang-contract-venv && .cache/sglang-contract-venv/bin/pytest -q tests/contract",
                    allow_module_level=True)


_require_contract_venv()
# In the contract venv sglang must import: a failure here is a broken venv, not a reason to skip.
sglang = importlib.import_module("sglang")
server_args = importlib.import_module("sglang.srt.server_args")
arg_utils = importlib.import_module("sglang.srt.arg_groups.arg_utils")
overrides = importlib.import_module("sglang.srt.arg_groups.overrides")
speculative_hook = importlib.import_module("sglang.srt.arg_groups.speculative_hook")
spec_info = importlib.import_module("sglang.srt.speculative.spec_info")
spec_registry = importlib.import_module("sglang.srt.speculative.spec_registry")
network = importlib.import_module("sglang.srt.utils.network")
msgspec = importlib.import_module("msgspec")


def _load_launch():
    """The module_utils file by path: this venv has no ansible, and the file needs none."""
    loader_spec = importlib.util.spec_from_file_location("_sglang_launch", MODULE)
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return module


launch = _load_launch()
REAL_PARSER = argparse.ArgumentParser
DEFAULTS = {field.name: field.default for field in msgspec.structs.fields(server_args.ServerArgs)}

# Spec keys (dotted for nested ones) and the ServerArgs fields they set.
SPEC_TO_FIELDS = {
    "model_path": ["model_path"], "served_model_name": ["served_model_name"], "tp_size": ["tp_size"],
    "nnodes": ["nnodes"], "node_rank": ["node_rank"], "dist_init_addr": ["dist_init_addr"], "host": ["host"],
    "port": ["port"], "context_length": ["context_length"], "quantization": ["quantization"],
    "kv_cache_dtype": ["kv_cache_dtype"], "mem_fraction_static": ["mem_fraction_static"],
    "chunked_prefill_size": ["chunked_prefill_size"], "max_running_requests": ["max_running_requests"],
    "cuda_graph.disable": ["disable_decode_cuda_graph", "disable_prefill_cuda_graph"],
    "cuda_graph.max_bs": ["cuda_graph_max_bs_decode"],
    "disable_flashinfer_autotune": ["disable_flashinfer_autotune"],
    "speculative.algorithm": ["speculative_algorithm"], "speculative.num_steps": ["speculative_num_steps"],
    "speculative.eagle_topk": ["speculative_eagle_topk"],
    "speculative.num_draft_tokens": ["speculative_num_draft_tokens"],
    "speculative.draft_model_path": ["speculative_draft_model_path"],
    "enable_metrics": ["enable_metrics"], "enable_cache_report": ["enable_cache_report"],
}
# What the table's extra_args set, per case.
EXTRA_FIELDS = {
    "every_option": {"log_level": "warning"},
    "extra_args": {"log_level": "warning", "trust_remote_code": True, "watchdog_timeout": 600.0},
}


def spec_value(spec, dotted):
    value = spec
    for key in dotted.split("."):
        value = (value or {}).get(key)
    return value


def expected_fields(spec):
    """ServerArgs fields as the spec sets them; a field the spec leaves unset (None, false) stays SGLang's default."""
    expected = {}
    for dotted, fields in SPEC_TO_FIELDS.items():
        value = spec_value(spec, dotted)
        for field in fields:
            expected[field] = DEFAULTS[field] if value is None or value is False else value
    return expected


def parser():
    """A parser as prepare_server_args builds it (ServerArgs.add_cli_args registers every flag)."""
    built = REAL_PARSER(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(built)
    return built


def forbid_abbreviations(monkeypatch):
    """Make prepare_server_args build its parser with allow_abbrev=False; returns the parsers it makes.

    prepare_server_args builds `argparse.ArgumentParser(prog="sglang serve")` itself and fills it with
    ServerArgs.add_cli_args, so the hook is the `argparse` name in sglang.srt.server_args: it gets a copy of the
    module whose ArgumentParser forces allow_abbrev=False, until the test ends (argparse itself stays as it is).
    """
    made = []

    class NoAbbreviations(REAL_PARSER):
        def __init__(self, *args, **kwargs):
            kwargs["allow_abbrev"] = False
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(server_args, "argparse", types.SimpleNamespace(**dict(vars(argparse),
                                                                              ArgumentParser=NoAbbreviations)))
    return made


def flags_of(argv):
    return [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]


# --- the environment itself ----------------------------------------------------------------------------------------

def test_versions():
    assert sglang.__version__ == launch.SGLANG_VERSION == "0.5.23"
    assert importlib.import_module("torch").__version__ == "2.13.0+cpu"
    assert importlib.import_module("triton").__version__ == "0.0.0+inferlab.stub"


# --- the table's command lines -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_argv_parses_to_the_spec(name):
    case = CASES[name]
    argv = launch.launch_argv(case["spec"])
    assert argv == case["argv"]
    parsed = server_args.prepare_server_args(argv[len(case["spec"]["launcher"]):])
    expected = dict(expected_fields(case["spec"]), **EXTRA_FIELDS.get(name, {}))
    assert {field: getattr(parsed, field) for field in expected} == expected


def test_every_extra_args_case_has_expectations():
    assert {name for name, case in CASES.items() if case["spec"].get("extra_args")} == set(EXTRA_FIELDS)


@pytest.mark.parametrize("name", list(CASES))
def test_no_flag_relies_on_an_abbreviation(name, monkeypatch):
    case = CASES[name]
    args = case["argv"][len(case["spec"]["launcher"]):]
    loose = server_args.prepare_server_args(args)
    made = forbid_abbreviations(monkeypatch)
    strict = server_args.prepare_server_args(args)
    assert [parser_.allow_abbrev for parser_ in made] == [False]
    assert msgspec.structs.asdict(strict) == msgspec.structs.asdict(loose)


def test_abbreviations_do_fail_without_allow_abbrev(monkeypatch, capsys):
    """The control: what SGLang's own parser accepts only as a prefix fails once the hook is in place."""
    assert server_args.prepare_server_args(["--model-path", "/m", "--tp", "2"]).tp_size == 2
    forbid_abbreviations(monkeypatch)
    with pytest.raises(SystemExit):
        server_args.prepare_server_args(["--model-path", "/m", "--tp", "2"])
    assert "unrecognized arguments: --tp" in capsys.readouterr().err


def test_own_flags_are_sglang_flags_and_not_deprecated():
    actions = parser()._option_string_actions
    for flag in launch.OWN_FLAGS:
        assert flag in actions, flag
        assert not type(actions[flag]).__name__.startswith("Deprecated"), flag
    emitted = {flag for case in TABLE["cases"] for flag in flags_of(case["argv"])}
    assert set(launch.OWN_FLAGS) <= emitted


def test_overriding_flags_set_what_we_set():
    actions = parser()._option_string_actions
    assert set(launch.OVERRIDING_FLAGS) <= set(actions)
    for alias in ("--model", "--tensor-parallel-size", "--nccl-init-addr", "--speculative-draft-model"):
        assert actions[alias].dest == actions[launch.OVERRIDING_FLAGS[alias]].dest
    # Every other spelling of a field we set is listed.
    ours = {actions[flag].dest for flag in launch.OWN_FLAGS}
    spellings = {option for option, action in actions.items() if action.dest in ours and option.startswith("--")}
    assert spellings <= set(launch.OWN_FLAGS) | set(launch.OVERRIDING_FLAGS)


def test_secret_flags_are_sglangs():
    actions = parser()._option_string_actions
    secret_dests = {action.dest for action in actions.values()
                    if re.search(r"api_key|password|^watermark_config$", action.dest)}
    assert secret_dests == {actions[flag].dest for flag in launch.SECRET_FLAGS}
    assert not secret_dests & {actions[flag].dest for flag in launch.OWN_FLAGS}


# --- choice lists ---------------------------------------------------------------------------------------------------

def test_quantization_choices_are_sglangs():
    assert launch.QUANTIZATION_CHOICES == tuple(server_args.QUANTIZATION_CHOICES)
    assert launch.QUANTIZATION_CHOICES == tuple(parser()._option_string_actions["--quantization"].choices)


def test_kv_cache_dtype_choices_are_sglangs():
    assert launch.KV_CACHE_DTYPE_CHOICES == tuple(parser()._option_string_actions["--kv-cache-dtype"].choices)


@pytest.mark.parametrize(("flag", "value"), [
    ("--quantization", "nvfp4"), ("--quantization", "int3"), ("--kv-cache-dtype", "fp8")])
def test_sglang_rejects_what_spec_problems_reports(flag, value, capsys):
    key = flag[2:].replace("-", "_")
    spec = dict(CASES["replica"]["spec"], **{key: value})
    assert [problem["field"] for problem in launch.spec_problems(spec)] == [key]
    with pytest.raises(SystemExit):
        server_args.prepare_server_args(["--model-path", "/m", flag, value])
    assert f"argument {flag}: invalid choice: '{value}'" in capsys.readouterr().err


def test_speculative_algorithms_are_sglangs():
    algorithm = spec_info.SpeculativeAlgorithm
    names = {member.name for member in algorithm} | set(spec_registry._RESERVED_ALIASES)
    assert set(launch.SPECULATIVE_ALGORITHMS) == names
    assert algorithm.from_string("NEXTN") is algorithm.EAGLE
    for name in launch.SPECULATIVE_ALGORITHMS:
        algorithm.from_string(name)
        algorithm.from_string(name.lower())


@pytest.mark.parametrize("name", ["MTP", "MEDUSA", "EAGLE2", "LOOKAHEAD", "NEXT_N"])
def test_sglang_rejects_the_algorithms_spec_problems_rejects(name):
    with pytest.raises(ValueError, match=f"Unknown speculative algorithm name: {name}"):
        spec_info.SpeculativeAlgorithm.from_string(name)
    spec = dict(CASES["tp2_nextn_rank0"]["spec"], speculative=dict(CASES["tp2_nextn_rank0"]["spec"]["speculative"],
                                                                   algorithm=name))
    [problem] = launch.spec_problems(spec)
    assert problem["message"].startswith(f"SGLang 0.5.23 rejects --speculative-algorithm {name} ")


@pytest.mark.parametrize("text", ["169.254.177.1:50000", "[fd00::1]:50000", "lab-a:50000", "169.254.177.1",
                                  "fd00::1:50000", "[fd00::1]50000", "[fd00::1", ":50000", "lab-a:", "lab-a:port"])
def test_dist_init_addr_reading_agrees_with_sglang(text):
    ours = launch.split_host_port(text)
    try:
        theirs = network.NetworkAddress.parse(text)
    except ValueError:
        theirs = None
    assert ours == (None if theirs is None else (theirs.host, theirs.port))


# --- speculative resolution ----------------------------------------------------------------------------------------

# Fields the speculative hook may declare without changing what was asked: the alias it resolves (checked against
# from_string below), the draft MoE runner and draft revision it fills in, the page size the pipeline sets before it.
RESOLVED_WITHOUT_CHANGE = {"speculative_algorithm", "speculative_moe_runner_backend",
                           "speculative_draft_model_revision", "page_size"}
SPECULATIVE_FIELDS = {"num_steps": "speculative_num_steps", "eagle_topk": "speculative_eagle_topk",
                      "num_draft_tokens": "speculative_num_draft_tokens"}


@pytest.fixture
def speculative_resolution(monkeypatch):
    """SGLang's own speculative resolution of a parsed command line, without a GPU or a model.

    ServerArgs.resolve_once runs the whole pipeline, which reads the model and the GPU; the speculative settings are
    decided by one step of it, handle_speculative_decoding (sglang/srt/arg_groups/pipeline.py), run here with the
    state the pipeline sets up before it: the raw-input snapshot, an empty declaration list and the page-size
    default. Two readers of the checkpoint are replaced, both import transformers (not in this venv):
    - model_config_of: the EAGLE handling only reads hf_config.architectures; a Qwen3 architecture stands in, one
      that is not on SGLang's lists of architectures with built-in draft layers or special parameters;
    - _handle_iquest_q1_mtp_draft: it returns False for every architecture but IQuestQ1ForCausalLM;
    and the draft checkpoint is not opened: _resolve_speculative_algorithm_alias reads the draft's config only to
    detect a Gemma 4 assistant draft, so it is called with no draft path.
    Returns resolve(argv) -> (resolved {field: value}, declared field names), or raises what SGLang raises.
    """
    model_config = types.SimpleNamespace(hf_config=types.SimpleNamespace(architectures=["Qwen3ForCausalLM"]))
    monkeypatch.setattr(speculative_hook, "model_config_of", lambda _server_args: model_config)
    monkeypatch.setattr(speculative_hook, "_handle_iquest_q1_mtp_draft", lambda _server_args: False)
    resolve_alias = speculative_hook._resolve_speculative_algorithm_alias
    monkeypatch.setattr(speculative_hook, "_resolve_speculative_algorithm_alias",
                        lambda algorithm, _draft_path, **kwargs: resolve_alias(algorithm, None, **kwargs))

    # One parser for the whole grid: prepare_server_args builds a new one per call (most of its time), and the
    # table tests above already prove it parses like this.
    shared = parser()

    def resolve(argv):
        record = server_args.ServerArgs.from_cli_args(shared.parse_args(argv))
        record._raw_input = {field.name: getattr(record, field.name)
                             for field in arg_utils.record_fields(type(record))}
        record._resolved_overrides = []
        overrides.run_post_process_pass(record, overrides._page_size_default)
        speculative_hook.handle_speculative_decoding(record)
        declared = {field for _source, fields in record._resolved_overrides for field in fields}
        fields = ["speculative_algorithm", "max_running_requests", *SPECULATIVE_FIELDS.values()]
        return {field: overrides.resolution_result(record, field) for field in fields}, declared

    return resolve


def speculative_grid():
    """Settings around the EAGLE family's rules, plus unset values and a lower-case name."""
    for algorithm, steps, topk, draft in itertools.product(
            ["NEXTN", "EAGLE", "EAGLE3", "STANDALONE"], [1, 2, 3, 5], [1, 2, 4], [2, 3, 4, 5, 6, 8, 13, 40]):
        yield {"algorithm": algorithm, "num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft}
    for steps, topk, draft in itertools.product([None, 3], [None, 1], [None, 4]):
        yield {"algorithm": "NEXTN", "num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft}
    yield {"algorithm": "nextn", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}


def test_speculative_settings_spec_problems_accepts_are_kept(speculative_resolution):
    base = CASES["tp2_nextn_rank0"]
    accepted = changed = 0
    settings = [(speculative, 48) for speculative in speculative_grid()]
    settings += [(speculative, None) for speculative in speculative_grid() if speculative["algorithm"] == "NEXTN"]
    for speculative, max_running in settings:
        if speculative["algorithm"] in launch.NEEDS_DRAFT_MODEL:
            speculative = dict(speculative, draft_model_path="/models/draft")
        spec = dict(base["spec"], speculative=speculative, max_running_requests=max_running)
        problems = launch.spec_problems(spec, dict(TABLE["ring"], host=base["ring_host"]))
        argv = launch.launch_argv(spec)[len(spec["launcher"]):]
        try:
            resolved, declared = speculative_resolution(argv)
        except (AssertionError, TypeError, ValueError) as exc:
            assert problems, f"SGLang refused {speculative} ({type(exc).__name__}: {exc}); spec_problems found nothing"
            changed += 1
            continue
        alias = spec_info.SpeculativeAlgorithm.from_string(speculative["algorithm"]).name
        kept = (resolved["speculative_algorithm"] == alias
                and resolved["max_running_requests"] == max_running
                and all(resolved[field] == speculative[key] for key, field in SPECULATIVE_FIELDS.items())
                and declared <= RESOLVED_WITHOUT_CHANGE)
        if not problems:
            assert kept, f"spec_problems accepted {speculative}, max_running_requests {max_running}; SGLang " \
                         f"resolved {resolved}, declared {sorted(declared)}"
            accepted += 1
        if not kept:
            changed += 1
        messages = " ".join(problem["message"] for problem in problems)
        if "silently changes num_draft_tokens" in messages:
            assert resolved["speculative_num_draft_tokens"] == speculative["num_steps"] + 1
        if "silently caps max_running_requests" in messages:
            assert resolved["max_running_requests"] == launch.SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS
    # Both sides of the rule were exercised.
    assert accepted >= 100 and changed >= 100, (accepted, changed)


def test_reference_setting_is_kept_and_its_neighbour_changed(speculative_resolution):
    """NEXTN 3/1/4 (the reference experiment) stays as it is; 3/1/5 becomes 3/1/4, as spec_problems says."""
    spec = CASES["tp2_nextn_rank0"]["spec"]
    resolved, declared = speculative_resolution(CASES["tp2_nextn_rank0"]["argv"][len(spec["launcher"]):])
    assert resolved == {"speculative_algorithm": "EAGLE", "max_running_requests": 48, "speculative_num_steps": 3,
                        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert declared <= RESOLVED_WITHOUT_CHANGE
    wrong = dict(spec, speculative=dict(spec["speculative"], num_draft_tokens=5), max_running_requests=None)
    resolved, declared = speculative_resolution(launch.launch_argv(wrong)[len(spec["launcher"]):])
    assert resolved["speculative_num_draft_tokens"] == 4 and resolved["max_running_requests"] == 48
    assert {"speculative_num_draft_tokens", "max_running_requests"} <= declared
    assert [problem["field"] for problem in launch.spec_problems(wrong)] == [
        "speculative.num_draft_tokens", "max_running_requests"]
