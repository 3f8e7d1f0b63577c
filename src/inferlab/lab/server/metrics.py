# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's Prometheus metrics, as ``GET /metrics`` shows them with ``--enable-metrics``.

Names, label sets and histogram buckets follow sglang 0.5.23 (``observability/metrics_collector.py``): request
counters carry ``model_name``, ``engine_type`` and ``is_streaming``; scheduler gauges carry ``model_name``,
``engine_type``, ``tp_rank``, ``pp_rank`` and ``moe_ep_rank``. The request counters move when a request finishes,
as SGLang's do, so ``sglang:generation_tokens_total`` is the exact sum of the ``completion_tokens`` reported to
clients (health checks and the start-up warm-up are not counted, like SGLang's ``log_metrics=False`` requests).
"""

from __future__ import annotations

import bisect
import threading

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
               0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
STREAMING = ("false", "true")


def _labels(pairs) -> str:
    def escape(value) -> str:
        return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{key}="{escape(value)}"' for key, value in pairs)


def _number(value) -> str:
    return repr(float(value)) if not isinstance(value, int) else f"{value}.0"


class Histogram:
    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += times
        self.sum += value * times
        self.count += times

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cumulative = 0
        for le, n in zip((*self.buckets, "+Inf"), self.counts, strict=True):
            cumulative += n
            bound = le if le == "+Inf" else _number(le)
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {_number(cumulative)}')
        out.append(f"{name}_sum{{{labels}}} {_number(self.sum)}")
        out.append(f"{name}_count{{{labels}}} {_number(self.count)}")
        return out


class Metrics:
    """Counters, gauges and histograms of one server; every method is thread-safe."""

    def __init__(self, model_name: str):
        self._lock = threading.Lock()
        self._request_labels = (("model_name", model_name), ("engine_type", "unified"))
        self._scheduler_labels = _labels((*self._request_labels, ("tp_rank", 0), ("pp_rank", 0),
                                          ("moe_ep_rank", 0)))
        self.prompt_tokens = dict.fromkeys(STREAMING, 0)
        self.generation_tokens = dict.fromkeys(STREAMING, 0)
        self.num_requests = dict.fromkeys(STREAMING, 0)
        self.cached_tokens = 0
        self.spec_verify_calls = 0
        self.ttft = {s: Histogram(TTFT_BUCKETS) for s in STREAMING}
        self.e2e = {s: Histogram(E2E_BUCKETS) for s in STREAMING}
        self.itl = Histogram(ITL_BUCKETS)
        self.gauges = {"num_running_reqs": 0, "num_queue_reqs": 0, "gen_throughput": 0.0, "cache_hit_rate": 0.0,
                       "spec_accept_length": 0.0}

    def observe_finished(self, *, streaming: bool, prompt_tokens: int, completion_tokens: int, cached_tokens: int,
                         e2e_latency: float, ttft: float | None, spec_verify_ct: int) -> None:
        key = STREAMING[streaming]
        with self._lock:
            self.prompt_tokens[key] += prompt_tokens
            self.generation_tokens[key] += completion_tokens
            self.num_requests[key] += 1
            self.cached_tokens += cached_tokens
            self.spec_verify_calls += spec_verify_ct
            self.e2e[key].observe(e2e_latency)
            if ttft is not None:
                self.ttft[key].observe(ttft)

    def observe_inter_token(self, interval: float, tokens: int) -> None:
        """One decode output of ``tokens`` tokens after ``interval`` seconds: each token took interval/tokens."""
        with self._lock:
            self.itl.observe(interval / tokens, tokens)

    def set_gauges(self, **values) -> None:
        with self._lock:
            self.gauges.update(values)

    def render(self) -> str:
        """The Prometheus text exposition format (0.0.4)."""
        with self._lock:
            out: list[str] = []

            def counter(name, doc, series):
                out.extend([f"# HELP {name} {doc}", f"# TYPE {name} counter"])
                out.extend(f"{name}{{{labels}}} {_number(value)}" for labels, value in series)

            def by_streaming(values):
                return [(_labels((*self._request_labels, ("is_streaming", s))), values[s]) for s in STREAMING]

            counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
                    by_streaming(self.prompt_tokens))
            counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                    by_streaming(self.generation_tokens))
            counter("sglang:num_requests_total", "Number of requests processed.", by_streaming(self.num_requests))
            counter("sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage).",
                    [(_labels((*self._request_labels, ("cache_source", "device"))), self.cached_tokens)])
            counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
                    [(_labels(self._request_labels), self.spec_verify_calls)])
            docs = {"num_running_reqs": "The number of running requests.",
                    "num_queue_reqs": "The number of requests in the waiting queue.",
                    "gen_throughput": "The generation throughput (token/s).",
                    "cache_hit_rate": "The prefix cache hit rate.",
                    "spec_accept_length": "Mean acceptance length of speculative decoding."}
            for gauge, doc in docs.items():
                name = f"sglang:{gauge}"
                out.extend([f"# HELP {name} {doc}", f"# TYPE {name} gauge",
                            f"{name}{{{self._scheduler_labels}}} {_number(self.gauges[gauge])}"])
            histograms = [
                ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                 [(_labels((*self._request_labels, ("is_streaming", s))), self.ttft[s]) for s in STREAMING]),
                ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                 [(_labels(self._request_labels), self.itl)]),
                ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                 [(_labels((*self._request_labels, ("is_streaming", s))), self.e2e[s]) for s in STREAMING]),
            ]
            for name, doc, series in histograms:
                out.extend([f"# HELP {name} {doc}", f"# TYPE {name} histogram"])
                for labels, histogram in series:
                    out.extend(histogram.lines(name, labels))
            return "\n".join(out) + "\n"
