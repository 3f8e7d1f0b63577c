# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line: a subset of ``sglang.launch_server``'s flags (sglang 0.5.23 names, types and defaults) plus the
``--lab-*`` knobs.

Two kinds of failure, as with SGLang: a malformed command line (unknown flag, abbreviation, bad type or choice,
missing ``--model-path``) is argparse's exit 2; a well-formed one SGLang would refuse while resolving its server args
(unknown speculative algorithm, no ``config.json``, context length beyond the model's) raises ``ConfigError``, which
the server logs as ``ValueError: ...`` and exits 1.

Differences from sglang 0.5.23 worth knowing: abbreviations are refused (SGLang's parser allows them, which makes
``--cuda-graph-max-bs`` an ambiguous-option error there; it is an unknown flag here, also exit 2); only tp-size 1 on
one node or tp-size 2 across two nodes is supported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

SGLANG_VERSION = "0.5.23-lab"
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
QUANTIZATION_CHOICES = (
    "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt", "modelopt_fp8",
    "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "w4afp8",
    "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors", "modelslim", "mxfp_w4a8", "quark",
    "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant", "humming",
)
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
MODEL_CONFIG_KEYS = ("hidden_size", "num_hidden_layers", "max_position_embeddings")
ALLREDUCE_BATCH = 8
ALLREDUCE_MIN_BYTES = 64 * 1024
ALLREDUCE_MAX_BYTES = 1024 * 1024
CACHE_BUDGET_CONTEXTS = 4


class ConfigError(ValueError):
    """A well-formed command line that SGLang would refuse while resolving its server args."""


def human_readable_int(value: str) -> int:
    """sglang's size parser: plain, SI (``200k``, ``25.6k``) or IEC (``128Ki``); suffixes are case-sensitive."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix.endswith("i"):
            if "." in number:
                raise argparse.ArgumentTypeError(f"Decimals are not allowed with IEC suffixes like '{suffix}'.")
            return int(number) * 2 ** (10 * ("KMGT".index(suffix[0]) + 1))
        return int(Decimal(number) * 10 ** (3 * ("kMGT".index(suffix) + 1)))
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes "
            "(1Ki, 1Mi). Suffixes are case-sensitive.") from None


def _non_negative_float(value: str) -> float:
    number = float(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return number


def _positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return number


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return number


class _DeprecatedStoreTrue(argparse.Action):
    """sglang's deprecated boolean spelling: still stores True, and says what replaced it."""

    def __init__(self, option_strings, dest, new_flag, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        namespace.deprecations.append(f"'{option_string}' is deprecated and will be removed in a future release. "
                                      f"Use '{self.new_flag}' instead.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m inferlab.lab.server", allow_abbrev=False,
        description="The embedded lab's stand-in for sglang.launch_server (sglang 0.5.23's HTTP API, no GPU).")
    parser.set_defaults(deprecations=[])
    sg = parser.add_argument_group("sglang server arguments (sglang 0.5.23 names, types and defaults)")
    sg.add_argument("--model-path", "--model", dest="model_path",
                    help="the model directory; only its config.json is read (required)")
    sg.add_argument("--served-model-name", help="the model name the API answers for (default: the model path)")
    sg.add_argument("--host", default="127.0.0.1", help="the HTTP server's address")
    sg.add_argument("--port", type=int, default=30000, help="the HTTP server's port")
    sg.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1,
                    help="tensor parallel size: 1, or 2 across --nnodes 2")
    sg.add_argument("--nnodes", type=int, default=1, help="the number of nodes")
    sg.add_argument("--node-rank", type=int, default=0, help="this node's rank")
    sg.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr",
                    help="HOST:PORT where rank 0 listens and rank 1 connects (TP mode)")
    sg.add_argument("--context-length", type=human_readable_int,
                    help="the context length (default: max_position_embeddings of config.json); 200k, 128Ki work")
    sg.add_argument("--quantization", choices=QUANTIZATION_CHOICES, metavar="METHOD",
                    help="accepted, reported, no effect (sglang's choices)")
    sg.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPE_CHOICES, default="auto", metavar="DTYPE",
                    help=f"one of {', '.join(KV_CACHE_DTYPE_CHOICES)}; accepted, reported, no effect")
    sg.add_argument("--mem-fraction-static", type=float, help="accepted, reported, no effect")
    sg.add_argument("--chunked-prefill-size", type=int, help="accepted, reported, no effect")
    sg.add_argument("--max-running-requests", type=_positive_int,
                    help="the most requests running at once; later ones queue (default: no limit)")
    sg.add_argument("--disable-cuda-graph", action=_DeprecatedStoreTrue,
                    new_flag="--cuda-graph-backend-{decode,prefill}=disabled",
                    help="deprecated in sglang 0.5.23; accepted, reported, no effect")
    sg.add_argument("--disable-decode-cuda-graph", action="store_true", help="accepted, reported, no effect")
    sg.add_argument("--disable-prefill-cuda-graph", action="store_true", help="accepted, reported, no effect")
    sg.add_argument("--cuda-graph-max-bs-decode", type=int, help="accepted, reported, no effect")
    sg.add_argument("--cuda-graph-max-bs-prefill", type=int, help="accepted, reported, no effect")
    sg.add_argument("--disable-flashinfer-autotune", action="store_true", help="accepted, reported, no effect")
    sg.add_argument("--trust-remote-code", action="store_true", help="accepted, reported, no effect")
    sg.add_argument("--enable-metrics", action="store_true", help="serve GET /metrics")
    sg.add_argument("--enable-cache-report", action="store_true",
                    help="report usage.prompt_tokens_details.cached_tokens in OpenAI responses")
    sg.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on everything but /health*, /metrics")
    sg.add_argument("--log-level", default="info", help=f"one of {', '.join(LOG_LEVELS)}")
    sg.add_argument("--speculative-algorithm", help=f"one of {', '.join(SPECULATIVE_ALGORITHMS)} (NEXTN = EAGLE)")
    sg.add_argument("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
                    help="accepted, reported, no effect")
    sg.add_argument("--speculative-num-steps", type=int, help="draft steps; a verify step accepts 1..steps+1 tokens")
    sg.add_argument("--speculative-eagle-topk", type=int, help="tokens sampled per draft step")
    sg.add_argument("--speculative-num-draft-tokens", type=int,
                    help="draft tokens verified per step (adjusted to steps+1 when topk is 1, as sglang does)")
    lab = parser.add_argument_group("lab knobs")
    lab.add_argument("--lab-step-time", type=_non_negative_float, default=0.004, metavar="S",
                     help="decode step time in seconds (0: no delay, for client-ceiling benchmarks)")
    lab.add_argument("--lab-prefill-time-per-token", type=_non_negative_float, default=2e-6, metavar="S",
                     help="prefill time per uncached prompt token, in seconds")
    lab.add_argument("--lab-allreduce-bytes", type=_positive_int, metavar="N",
                     help="TP mode: bytes each way per decode step (default: hidden_size x 2 x 2 x num_hidden_layers "
                          "x 8 from config.json, clamped to [64 KiB, 1 MiB]); a prefill exchanges that per 8 uncached "
                          "tokens, from 1 to 4 times")
    lab.add_argument("--lab-spec-accept-seed", type=int, default=0, metavar="N",
                     help="seed of the speculative accept-length draws")
    lab.add_argument("--lab-spec-step-factor", type=_positive_float, default=1.3, metavar="F",
                     help="a speculative verify step costs F decode steps")
    lab.add_argument("--lab-fault", choices=("none", "hang"), default="none",
                     help="hang: /health answers 200, requests are accepted, no token is ever produced")
    lab.add_argument("--lab-kill-after-steps", type=_positive_int, metavar="N",
                     help="kill this process with SIGKILL after N decode steps (a rank dying in the middle of a run)")
    lab.add_argument("--lab-pidfile", metavar="PATH",
                     help="written once serving (TP rank 0: once all ranks joined; with --lab-ready-after, when the "
                          "load starts), removed on SIGTERM/SIGINT")
    lab.add_argument("--lab-ready-after", type=_non_negative_float, default=0.0, metavar="S",
                     help="seconds of loading (HTTP 503, no token) before the warm-up, as a real model's weights and "
                          "CUDA graphs take minutes after every start; TP mode: once the ranks joined")
    lab.add_argument("--lab-rank-timeout", type=_positive_float, default=60.0, metavar="S",
                     help="TP mode: how long the ranks wait for each other at start")
    lab.add_argument("--lab-gpu-dir", metavar="DIR",
                     help="the host's emulated GPU (inferlab.lab.server.gpu): the server holds its memory there while "
                          "it runs (its static pool, --mem-fraction-static of the card, and its context) and refuses "
                          "to start, as PyTorch does, when the card has not that much free")
    lab.add_argument("--print-versions", action="store_true",
                     help="print the versions as one JSON object and exit")
    return parser


def parse_args(argv) -> argparse.Namespace:
    """The parsed command line; argparse's exit 2 on a malformed one."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.print_versions:
        return args
    if args.model_path is None:
        parser.error("the following arguments are required: --model-path/--model")
    if args.log_level.lower() not in LOG_LEVELS:
        parser.error(f"argument --log-level: invalid choice: '{args.log_level}' (choose from {', '.join(LOG_LEVELS)})")
    return args


@dataclass(frozen=True)
class Speculative:
    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int


@dataclass(frozen=True)
class LabConfig:
    """The resolved configuration: what the server runs with, and what it reports."""

    args: argparse.Namespace
    model_config: dict
    served_model_name: str
    context_length: int
    speculative: Speculative | None
    allreduce_bytes: int
    dist_init: tuple[str, int] | None
    warnings: tuple[str, ...]

    @property
    def tp(self) -> bool:
        return self.args.tp_size > 1

    @property
    def rank(self) -> int:
        return self.args.node_rank

    @property
    def cache_budget_tokens(self) -> int:
        return CACHE_BUDGET_CONTEXTS * self.context_length


def read_model_config(model_path: str) -> dict:
    directory = Path(model_path)
    if not directory.is_dir():
        raise ConfigError(f"--model-path {model_path} is not a local directory (the lab server reads the model's "
                          "config.json from it)")
    try:
        config = json.loads((directory / "config.json").read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {directory / 'config.json'}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{directory / 'config.json'} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{directory / 'config.json'} must hold a JSON object")
    for key in MODEL_CONFIG_KEYS:
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{directory / 'config.json'}: {key} must be a positive integer, got {value!r}")
    return config


def derived_allreduce_bytes(model_config: dict) -> int:
    """Bytes each way per decode step: one decode step's all-reduce volume at batch ``ALLREDUCE_BATCH``, clamped.

    hidden_size x 2 bytes (bf16) x 2 all-reduces per layer x num_hidden_layers x 8 sequences. Measured on a veth
    pair with the lab model (896 x 24 -> 672 KiB, 4 ms steps): the ``lossy`` profile (tbf 1000 Mbit/s + pfifo 10)
    costs about 40% of tokens/s against a clean veth; 16 KiB or 64 KiB per step cost under 5%, too little to see.
    """
    raw = model_config["hidden_size"] * 2 * 2 * model_config["num_hidden_layers"] * ALLREDUCE_BATCH
    return max(ALLREDUCE_MIN_BYTES, min(ALLREDUCE_MAX_BYTES, raw))


def _auto_speculative_params(algorithm: str, architectures) -> tuple[int, int, int]:
    """sglang's defaults when --speculative-num-steps is not given (``_auto_choose_speculative_params``)."""
    arch = (architectures or [""])[0]
    if algorithm != "STANDALONE" and arch in ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"):
        return 5, 4, 8
    return 3, 1, 4


def _resolve_speculative(args, model_config, warnings: list[str]) -> Speculative | None:
    if args.speculative_algorithm is None:
        return None
    name = args.speculative_algorithm.upper()
    if name not in SPECULATIVE_ALGORITHMS:
        raise ConfigError(f"Unknown speculative algorithm name: {args.speculative_algorithm}")
    algorithm = "EAGLE" if name == "NEXTN" else name
    steps, topk, draft = args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens
    if steps is None:
        if topk is not None or draft is not None:
            raise ConfigError("--speculative-eagle-topk and --speculative-num-draft-tokens need "
                              "--speculative-num-steps (sglang chooses all three or none)")
        steps, topk, draft = _auto_speculative_params(algorithm, model_config.get("architectures"))
    if steps < 1:
        raise ConfigError(f"--speculative-num-steps must be >= 1, got {steps}")
    topk = 1 if topk is None else topk
    if topk < 1:
        raise ConfigError(f"--speculative-eagle-topk must be >= 1, got {topk}")
    if topk == 1 and draft != steps + 1:
        warnings.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                        "speculative_eagle_topk == 1")
        draft = steps + 1
    if draft is None or draft < 2:
        raise ConfigError(f"--speculative-num-draft-tokens must be >= 2 with --speculative-eagle-topk {topk}")
    return Speculative(algorithm, steps, topk, draft)


def _split_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--dist-init-addr must be HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def resolve(args: argparse.Namespace) -> LabConfig:
    """Everything SGLang derives from the command line and the model's config.json (``ConfigError`` if it refuses)."""
    warnings = list(args.deprecations)
    model_config = read_model_config(args.model_path)
    derived_context = model_config["max_position_embeddings"]
    context_length = derived_context if args.context_length is None else args.context_length
    if context_length <= 0:
        raise ConfigError(f"--context-length must be positive, got {context_length}")
    if context_length > derived_context:
        message = (f"Warning: User-specified context_length ({context_length}) is greater than the derived "
                   f"context_length ({derived_context}). This may lead to incorrect model outputs or CUDA errors. "
                   "Note that the derived context_length may differ from max_position_embeddings in the model's "
                   "config.")
        if os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() not in ("1", "true", "yes"):
            raise ConfigError(f"{message} To allow overriding this maximum, set the env var "
                              "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
        warnings.append(message)
    if (args.tp_size, args.nnodes) not in ((1, 1), (2, 2)):
        raise ConfigError(f"the lab server runs --tp-size 1 on one node, or --tp-size 2 across --nnodes 2 (one rank "
                          f"per node); got --tp-size {args.tp_size} --nnodes {args.nnodes}")
    if not 0 <= args.node_rank < args.nnodes:
        raise ConfigError(f"--node-rank must be in [0, {args.nnodes - 1}], got {args.node_rank}")
    dist_init = None
    if args.nnodes > 1:
        if not args.dist_init_addr:
            raise ConfigError("--dist-init-addr HOST:PORT is required with --nnodes > 1")
        dist_init = _split_host_port(args.dist_init_addr)
    speculative = _resolve_speculative(args, model_config, warnings)
    return LabConfig(
        args=args, model_config=model_config,
        served_model_name=args.served_model_name or args.model_path,
        context_length=context_length, speculative=speculative,
        allreduce_bytes=args.lab_allreduce_bytes or derived_allreduce_bytes(model_config),
        dist_init=dist_init, warnings=tuple(warnings))


def server_args_dict(cfg: LabConfig) -> dict:
    """The resolved server args as ``/get_server_info`` reports them (sglang field names; the API key masked)."""
    a = cfg.args
    spec = cfg.speculative
    return {
        "model_path": a.model_path, "tokenizer_path": a.model_path, "served_model_name": cfg.served_model_name,
        "host": a.host, "port": a.port, "tp_size": a.tp_size, "dp_size": 1, "pp_size": 1, "nnodes": a.nnodes,
        "node_rank": a.node_rank, "dist_init_addr": a.dist_init_addr, "context_length": cfg.context_length,
        "page_size": 1, "quantization": a.quantization, "kv_cache_dtype": a.kv_cache_dtype,
        "mem_fraction_static": a.mem_fraction_static, "chunked_prefill_size": a.chunked_prefill_size,
        "max_running_requests": a.max_running_requests,
        "disable_cuda_graph": a.disable_cuda_graph, "disable_decode_cuda_graph": a.disable_decode_cuda_graph,
        "disable_prefill_cuda_graph": a.disable_prefill_cuda_graph,
        "cuda_graph_max_bs_decode": a.cuda_graph_max_bs_decode,
        "cuda_graph_max_bs_prefill": a.cuda_graph_max_bs_prefill,
        "disable_flashinfer_autotune": a.disable_flashinfer_autotune, "trust_remote_code": a.trust_remote_code,
        "enable_metrics": a.enable_metrics, "enable_cache_report": a.enable_cache_report,
        "api_key": None if a.api_key is None else "<redacted>", "log_level": a.log_level,
        "speculative_algorithm": spec.algorithm if spec else None,
        "speculative_draft_model_path": a.speculative_draft_model_path,
        "speculative_num_steps": spec.num_steps if spec else None,
        "speculative_eagle_topk": spec.eagle_topk if spec else None,
        "speculative_num_draft_tokens": spec.num_draft_tokens if spec else None,
        "lab_step_time": a.lab_step_time, "lab_prefill_time_per_token": a.lab_prefill_time_per_token,
        "lab_allreduce_bytes": cfg.allreduce_bytes, "lab_spec_accept_seed": a.lab_spec_accept_seed,
        "lab_spec_step_factor": a.lab_spec_step_factor, "lab_fault": a.lab_fault,
        "lab_kill_after_steps": a.lab_kill_after_steps, "lab_ready_after": a.lab_ready_after,
        "lab_rank_timeout": a.lab_rank_timeout, "lab_prefix_cache_budget_tokens": cfg.cache_budget_tokens,
    }
