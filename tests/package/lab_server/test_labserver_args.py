# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""inferlab.lab.server.args: SGLang's flags and defaults, the lab knobs, and what SGLang would refuse."""

from __future__ import annotations

import json
import logging

import pytest

from inferlab import __version__
from inferlab.lab.server import args as labargs
from inferlab.lab.server.server import main


def parse(model_dir, *flags):
    return labargs.parse_args(["--model-path", str(model_dir), *flags])


def resolve(model_dir, *flags):
    return labargs.resolve(parse(model_dir, *flags))


def exits_2(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        labargs.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_sglang_defaults(model_dir):
    cfg = resolve(model_dir)
    a = cfg.args
    assert (a.host, a.port, a.tp_size, a.nnodes, a.node_rank, a.dist_init_addr) == ("127.0.0.1", 30000, 1, 1, 0, None)
    assert (a.kv_cache_dtype, a.log_level, a.quantization, a.mem_fraction_static) == ("auto", "info", None, None)
    assert cfg.served_model_name == str(model_dir)
    assert cfg.context_length == 32768
    assert cfg.speculative is None and not cfg.tp
    assert (a.lab_step_time, a.lab_prefill_time_per_token, a.lab_spec_step_factor) == (0.004, 2e-6, 1.3)
    assert (a.lab_fault, a.lab_rank_timeout, a.lab_spec_accept_seed) == ("none", 60.0, 0)
    assert cfg.cache_budget_tokens == 4 * 32768


@pytest.mark.parametrize("argv, message", [
    (["--model-pa", "/m"], "unrecognized arguments: --model-pa"),            # abbreviation
    (["--model-path", "/m", "--tp", "2"], "unrecognized arguments: --tp"),   # abbreviation of --tp-size
    (["--model-path", "/m", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--model-path", "/m", "--cuda-graph-max-bs", "8"], "unrecognized arguments: --cuda-graph-max-bs"),
    (["--port", "1"], "the following arguments are required: --model-path"),
    (["--model-path", "/m", "--port", "x"], "argument --port: invalid int value"),
    (["--model-path", "/m", "--kv-cache-dtype", "fp16"], "argument --kv-cache-dtype: invalid choice"),
    (["--model-path", "/m", "--lab-fault", "crash"], "argument --lab-fault: invalid choice"),
    (["--model-path", "/m", "--lab-step-time", "-1"], "must be >= 0"),
    (["--model-path", "/m", "--context-length", "1.5Ki"], "Decimals are not allowed"),
    (["--model-path", "/m", "--context-length", "32 k"], "Invalid integer value"),
    (["--model-path", "/m", "--log-level", "loud"], "argument --log-level: invalid choice"),
])
def test_malformed_command_lines_exit_2(argv, message, capsys):
    assert message in exits_2(argv, capsys)


def test_aliases_and_accepted_flags(model_dir):
    cfg = labargs.resolve(labargs.parse_args([
        "--model", str(model_dir), "--tensor-parallel-size", "2", "--nnodes", "2", "--node-rank", "1",
        "--nccl-init-addr", "169.254.177.1:50000", "--quantization", "fp8", "--kv-cache-dtype", "fp8_e4m3",
        "--mem-fraction-static", "0.85", "--chunked-prefill-size", "4096", "--cuda-graph-max-bs-decode", "16",
        "--disable-flashinfer-autotune", "--disable-cuda-graph", "--api-key", "secret", "--log-level", "WARNING"]))
    assert cfg.tp and cfg.rank == 1 and cfg.dist_init == ("169.254.177.1", 50000)
    reported = labargs.server_args_dict(cfg)
    assert reported["quantization"] == "fp8" and reported["kv_cache_dtype"] == "fp8_e4m3"
    assert reported["mem_fraction_static"] == 0.85 and reported["chunked_prefill_size"] == 4096
    assert reported["cuda_graph_max_bs_decode"] == 16 and reported["disable_cuda_graph"] is True
    assert reported["api_key"] == "<redacted>"
    assert any("'--disable-cuda-graph' is deprecated" in w for w in cfg.warnings)


@pytest.mark.parametrize("value, expected", [("32768", 32768), ("32k", 32000), ("25.6k", 25600), ("32Ki", 32768),
                                             ("1Mi", 1048576)])
def test_context_length_sizes(value, expected):
    assert labargs.human_readable_int(value) == expected


def test_context_length_longer_than_the_model_is_refused(model_dir, monkeypatch):
    monkeypatch.delenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", raising=False)
    refused = r"User-specified context_length \(65536\) is greater than the derived context_length \(32768\)"
    with pytest.raises(labargs.ConfigError, match=refused):
        resolve(model_dir, "--context-length", "64Ki")
    assert resolve(model_dir, "--context-length", "4k").context_length == 4000
    monkeypatch.setenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1")
    cfg = resolve(model_dir, "--context-length", "64Ki")
    assert cfg.context_length == 65536 and "greater than the derived" in cfg.warnings[0]


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
    (json.dumps({"hidden_size": 896, "num_hidden_layers": 24}), "max_position_embeddings must be a positive integer"),
    (json.dumps({"hidden_size": "896", "num_hidden_layers": 24, "max_position_embeddings": 1}),
     "hidden_size must be a positive integer"),
    (json.dumps({"hidden_size": 896, "num_hidden_layers": True, "max_position_embeddings": 1}),
     "num_hidden_layers must be a positive integer"),
])
def test_model_directory_problems(tmp_path, content, message):
    if content is not None:
        (tmp_path / "config.json").write_text(content)
    with pytest.raises(labargs.ConfigError, match=message):
        resolve(tmp_path)
    with pytest.raises(labargs.ConfigError, match="is not a local directory"):
        resolve(tmp_path / "missing")


@pytest.mark.parametrize("flags, expected", [
    (["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
      "--speculative-num-draft-tokens", "4"], ("EAGLE", 3, 1, 4)),
    (["--speculative-algorithm", "nextn"], ("EAGLE", 3, 1, 4)),
    (["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5"], ("EAGLE3", 5, 1, 6)),
    (["--speculative-algorithm", "STANDALONE"], ("STANDALONE", 3, 1, 4)),
    (["--speculative-algorithm", "NGRAM", "--speculative-num-steps", "2", "--speculative-eagle-topk", "4",
      "--speculative-num-draft-tokens", "8"], ("NGRAM", 2, 4, 8)),
])
def test_speculative_settings(model_dir, flags, expected):
    spec = resolve(model_dir, *flags).speculative
    assert (spec.algorithm, spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == expected


def test_draft_tokens_are_adjusted_like_sglang(model_dir):
    cfg = resolve(model_dir, "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                  "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "5")
    assert cfg.speculative.num_draft_tokens == 4
    assert cfg.warnings == ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                            "speculative_eagle_topk == 1",)


@pytest.mark.parametrize("flags, message", [
    (["--speculative-algorithm", "MTP"], "Unknown speculative algorithm name: MTP"),
    (["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1"], "need --speculative-num-steps"),
    (["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "0"], "must be >= 1"),
    (["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"],
     "--speculative-num-draft-tokens must be >= 2"),
    (["--tp-size", "2"], "--tp-size 2 across --nnodes 2"),
    (["--tp-size", "4", "--nnodes", "4"], "--tp-size 2 across --nnodes 2"),
    (["--tp-size", "2", "--nnodes", "2"], "--dist-init-addr HOST:PORT is required"),
    (["--tp-size", "2", "--nnodes", "2", "--dist-init-addr", "10.0.0.1"], "must be HOST:PORT"),
    (["--tp-size", "2", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:99999"], "must be HOST:PORT"),
    (["--tp-size", "2", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "h:1"], "--node-rank must be"),
])
def test_what_sglang_would_refuse(model_dir, flags, message):
    with pytest.raises(labargs.ConfigError, match=message):
        resolve(model_dir, *flags)


def test_refusals_exit_1_with_sglang_style_line(model_dir, capsys):
    try:
        assert main(["--model-path", str(model_dir), "--speculative-algorithm", "MTP"]) == 1
        assert "ValueError: Unknown speculative algorithm name: MTP" in capsys.readouterr().err
    finally:
        logging.getLogger("inferlab.lab.server").handlers.clear()   # main() logged to this test's captured stderr


@pytest.mark.parametrize("config, expected", [
    ({"hidden_size": 896, "num_hidden_layers": 24}, 896 * 2 * 2 * 24 * 8),   # the lab model: 672 KiB
    ({"hidden_size": 64, "num_hidden_layers": 2}, 64 * 1024),                # floor
    ({"hidden_size": 5120, "num_hidden_layers": 64}, 1024 * 1024),           # ceiling
])
def test_derived_allreduce_bytes(config, expected):
    assert labargs.derived_allreduce_bytes(config) == expected


def test_allreduce_bytes_flag_wins(model_dir):
    assert resolve(model_dir).allreduce_bytes == 688128
    assert resolve(model_dir, "--lab-allreduce-bytes", "4096").allreduce_bytes == 4096


def test_print_versions(capsys):
    assert main(["--print-versions"]) == 0
    expected = {"sglang": "0.5.23-lab", "torch": None, "cuda": None, "nccl": None,
                "server": f"inferlab.lab.server {__version__}"}
    assert json.loads(capsys.readouterr().out) == expected
