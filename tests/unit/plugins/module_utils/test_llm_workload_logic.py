# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The batch logic of the workload client (_llm_workload): option checks, the failure line and arrivals by rate. Its
parts have their own tests (test_workload_prompts.py, test_workload_stream.py, test_workload_stats.py); the HTTP
paths are tested through the module against a scripted server (tests/unit/plugins/modules/test_llm_workload.py)."""

import threading
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _llm_workload as workload
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stream import new_record


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "burst", "model": "m"}, "kind must be one of single_stream, concurrent, repeated_prefix, "
                                          "long_context, got 'burst'"),
        ({"kind": "single_stream", "api": "grpc", "model": "m"}, "api must be one of openai_chat, sglang_generate"),
        ({"kind": "single_stream"}, "model is required with api=openai_chat"),
        ({"kind": "single_stream", "model": "m", "requests": 0, "concurrency": 0},
         "requests must be at least 1, got 0; concurrency must be at least 1, got 0"),
        ({"kind": "single_stream", "model": "m", "output_tokens": 0}, "output_tokens must be at least 1, got 0"),
        ({"kind": "single_stream", "model": "m", "first_token_timeout_s": 0},
         "first_token_timeout_s must be a finite number more than 0, got 0"),
        ({"kind": "single_stream", "model": "m", "total_timeout_s": float("inf")},
         "total_timeout_s must be a finite number more than 0, got inf"),
        ({"kind": "single_stream", "model": "m", "first_token_timeout_s": float("nan")},
         "first_token_timeout_s must be a finite number more than 0, got nan"),
        ({"kind": "concurrent", "model": "m", "requests": 10**6, "concurrency": 10**6},
         "requests must be at most 100000, got 1000000; concurrency must be at most 1024, got 1000000"),
        ({"kind": "concurrent", "model": "m", "requests": 2, "concurrency": 4},
         "concurrency (4) must not exceed requests (2)"),
        ({"kind": "single_stream", "model": "m", "requests": 4, "concurrency": 2},
         "kind=single_stream sends one request at a time: concurrency must be 1, got 2"),
        ({"kind": "long_context", "model": "m"}, "kind=long_context needs prompt_tokens"),
        ({"kind": "long_context", "model": "m", "prompt_tokens": 10, "requests": 2},
         "kind=long_context sends one request: requests must be 1, got 2"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 3}, "kind=repeated_prefix needs prefix_tokens"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 1, "prefix_tokens": 8},
         "kind=repeated_prefix needs requests >= 2"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 3, "prefix_tokens": 8, "prompt_tokens": 8},
         "prompt_tokens is the whole prompt and must exceed prefix_tokens (8), got 8"),
        ({"kind": "concurrent", "model": "m", "prefix_tokens": 8},
         "prefix_tokens applies to kind=repeated_prefix only, got it with kind=concurrent"),
        ({"kind": "single_stream", "model": "m", "extra_body": {"stream": False}},
         "extra_body must not turn stream off (got stream=False)"),
        ({"kind": "single_stream", "model": "m", "extra_body": ["stream"]}, "extra_body must be a dict, got list"),
    ],
)
def test_check_options_refuses(options, message):
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options(**options)
    assert message in str(caught.value)


def test_goodput_targets_must_be_positive_seconds():
    with pytest.raises(workload.WorkloadError, match=r"goodput_ttft_s must be a finite number of seconds more than 0, "
                                                     r"got 0; goodput_tpot_s .* got inf"):
        workload.check_options("single_stream", model="m", goodput_ttft_s=0, goodput_tpot_s=float("inf"))


def test_check_options_accepts():
    workload.check_options("single_stream", model="m")
    workload.check_options("concurrent", api="sglang_generate", requests=6, concurrency=6)
    workload.check_options("repeated_prefix", model="m", requests=4, concurrency=3, prefix_tokens=100)
    workload.check_options("long_context", model="m", prompt_tokens=200000, extra_body={"stream": True})


# --- failures ---------------------------------------------------------------------------------------------------

def test_failure_summary():
    records = []
    for index, kind in enumerate(["hang", None, "http", "http", "timeout", "malformed"]):
        rec = new_record(index, 8, [])
        if kind:
            rec["error"] = {"kind": kind, "message": f"{kind} happened", "body": "x" * 400 if kind == "http" else None}
        else:
            rec["ok"] = True
        records.append(rec)
    line = workload.failure_summary({"records": records})
    assert line.startswith("#0 hang: hang happened; #2 http: http happened (body: xxx")
    assert "#3 http" in line and line.endswith("; and 2 more")
    assert "x" * 300 + "... (cut at 300 characters))" in line


# --- arrivals by rate -------------------------------------------------------------------------------------------

def test_arrivals_are_seeded_gamma_gaps_of_the_stated_mean():
    offsets = workload.arrival_offsets(4000, 8.0, 1.0, seed=3)
    assert offsets == workload.arrival_offsets(4000, 8.0, 1.0, seed=3) and offsets[0] == 0.0
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 8.0, rel=0.05)
    # Poisson: the gaps' spread equals their mean; burstiness 4 makes them four times as even (variance / 4)
    variance = sum((g - 0.125) ** 2 for g in gaps) / len(gaps)
    assert variance == pytest.approx(0.125 ** 2, rel=0.15)
    even_offsets = workload.arrival_offsets(4000, 8.0, 4.0, seed=3)
    even = [b - a for a, b in zip(even_offsets, even_offsets[1:], strict=False)]
    assert sum((g - 0.125) ** 2 for g in even) / len(even) == pytest.approx(0.125 ** 2 / 4, rel=0.15)


def test_requests_start_on_schedule_with_at_most_concurrency_in_flight():
    """A fake clock that moves only when the dispatcher sleeps: due every 0.25 s with 2 slots, it sleeps 0.25 s
    before each later request, and never has more than 2 running, whatever the threads' timing."""
    now, sleeps = [0.0], []
    running, most, started = [0], [0], []
    lock = threading.Lock()
    finish = {index: threading.Event() for index in range(4)}

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    def run_one(index):
        with lock:
            started.append(index)
            running[0] += 1
            most[0] = max(most[0], running[0])
        finish[index].wait(10)
        with lock:
            running[0] -= 1

    def release_each_once_started():
        for index in range(4):
            while True:  # wait for the condition: this request is running
                with lock:
                    if index in started:
                        break
                time.sleep(0.001)
            finish[index].set()

    releaser = threading.Thread(target=release_each_once_started)
    releaser.start()
    workload._at_rate(run_one, [0, 1, 2, 3], [0.0, 0.25, 0.5, 0.75], 2, clock=lambda: now[0], sleep=sleep)
    releaser.join()
    assert sleeps == pytest.approx([0.25, 0.25, 0.25])
    assert most[0] <= 2 and sorted(started) == [0, 1, 2, 3]


def test_a_rate_is_for_concurrent_batches_and_must_be_positive():
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options("single_stream", model="m", request_rate=2.0)
    assert "request_rate paces kind=concurrent only, got it with kind=single_stream" in str(caught.value)
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options("concurrent", model="m", requests=4, concurrency=2, request_rate=0.0,
                               burstiness=float("nan"))
    assert "request_rate must be a finite number more than 0, got 0.0" in str(caught.value)
    assert "burstiness must be a finite number more than 0, got nan" in str(caught.value)
