# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The scheduler: one engine thread runs steps over every running request (continuous batching).

A step is either a prefill of every waiting request (time proportional to their uncached prompt tokens; it yields
each request's first token) or a decode step that gives every running request one token, or, with speculative
decoding, a verify step that accepts 1..num_steps+1 tokens per request (seeded draws) and costs
``--lab-spec-step-factor`` decode steps. In TP mode every step ends with a real exchange over the TP link
(``tp.Link``), so a slow or lossy link makes every step longer.

Handlers talk to the engine through a request's ``queue``: the engine puts the number of tokens produced so far
after each step, then ``DONE``; or the error that ended everything (the TP peer is gone). The answer itself is
decided when the request is made (the generator is deterministic), so a step only moves counters.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
import traceback
from collections import deque
from queue import SimpleQueue

from inferlab.lab.server.args import ALLREDUCE_BATCH
from inferlab.lab.server.tp import KIND_DECODE, KIND_PREFILL, DistBackendError, PeerLeft

DONE = None
DECODE_LOG_INTERVAL = 40
IDLE_POLL_S = 0.2
PREFILL_EXCHANGE_MAX_STEPS = 4

log = logging.getLogger("inferlab.lab.server")


class EngineError(RuntimeError):
    """The engine cannot serve any more (its TP peer is gone); handlers answer 500."""


class Request:
    """One generation: the prompt's tokens, the answer decided up front, and the engine's progress through it."""

    __slots__ = ("rid", "prompt_tokens", "pieces", "output_ids", "finish", "stream", "log_metrics", "queue",
                 "arrival", "cached_tokens", "produced", "verify_ct", "first_token_time", "last_emit",
                 "finish_time", "aborted")

    def __init__(self, rid: str, prompt_tokens: list, pieces: list[str], output_ids: list[int], finish: dict, *,
                 stream: bool, log_metrics: bool = True):
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.pieces = pieces
        self.output_ids = output_ids
        self.finish = finish
        self.stream = stream
        self.log_metrics = log_metrics
        self.queue: SimpleQueue = SimpleQueue()
        self.arrival = time.perf_counter()
        self.cached_tokens = 0
        self.produced = 0
        self.verify_ct = 0
        self.first_token_time: float | None = None
        self.last_emit = 0.0
        self.finish_time: float | None = None
        self.aborted = False

    @property
    def max_new(self) -> int:
        return len(self.pieces)


def kill_if_due(steps: int, limit: int | None) -> None:
    """``--lab-kill-after-steps``: a rank that dies in the middle of a run, by SIGKILL (no goodbye, no cleanup)."""
    if limit is not None and steps >= limit:
        log.warning("--lab-kill-after-steps %d: killing this rank (SIGKILL)", limit)
        os.kill(os.getpid(), signal.SIGKILL)


def _sleep_until(deadline: float) -> None:
    """Sleep out the step's compute time; a zero-length step still yields the GIL to the HTTP threads."""
    time.sleep(max(0.0, deadline - time.perf_counter()))


class Engine:
    def __init__(self, cfg, metrics, cache, link=None):
        args = cfg.args
        self.step_time = args.lab_step_time
        self.prefill_time_per_token = args.lab_prefill_time_per_token
        self.spec = cfg.speculative
        self.spec_step_factor = args.lab_spec_step_factor
        self.allreduce_bytes = cfg.allreduce_bytes
        self.max_running = args.max_running_requests
        self.kill_after_steps = args.lab_kill_after_steps
        self.metrics = metrics
        self.cache = cache
        self.link = link
        self.on_fatal = None  # set by the server: called with clean=True|False when the engine dies
        self.failed: EngineError | None = None
        self.failed_requests = 0
        self.last_gen_throughput = 0.0
        self._rng = random.Random(args.lab_spec_accept_seed)
        self._cv = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._active = 0
        self._hanging = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._spec_accepted = 0
        self._spec_verifies = 0
        self._decode_steps = 0
        self._window_start = time.perf_counter()
        self._window_tokens = 0

    # ---- control, from other threads
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def hang(self) -> None:
        """``--lab-fault hang``: accept requests, never run another step (liveness checks go on)."""
        with self._cv:
            self._hanging = True

    def stop(self) -> int:
        """Finish the current step and stop (SIGTERM); unfinished requests get an error. Returns how many."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        return self._fail_pending(EngineError("the server is shutting down"))

    def submit(self, req: Request) -> None:
        with self._cv:
            if self.failed is not None:
                raise EngineError(str(self.failed))
            self._waiting.append(req)
            self._active += 1
            self._cv.notify()

    @staticmethod
    def abort(req: Request) -> None:
        """The client went away: the engine drops the request at its next step."""
        req.aborted = True

    def flush_cache(self) -> bool:
        """Empty the prefix cache, unless requests are queued or running (SGLang refuses then too)."""
        with self._cv:
            if self._active:
                log.warning("Cache not flushed because there are pending requests. #queue-req: %d, "
                            "#running-req: %d", len(self._waiting), self._active - len(self._waiting))
                return False
            self.cache.clear()
        log.info("Cache flushed successfully!")
        return True

    def load(self) -> tuple[int, int]:
        """``(running, queued)`` requests."""
        with self._cv:
            return self._active - len(self._waiting), len(self._waiting)

    def prefill_exchange_bytes(self, uncached: int) -> int:
        """A prefill's all-reduce: one decode step's volume per ``ALLREDUCE_BATCH`` uncached tokens, 1 to 4 steps."""
        per_token = self.allreduce_bytes // ALLREDUCE_BATCH
        return min(max(uncached, ALLREDUCE_BATCH) * per_token, PREFILL_EXCHANGE_MAX_STEPS * self.allreduce_bytes)

    def avg_spec_accept_length(self) -> float | None:
        """Tokens accepted per verify step since start (SGLang's ``avg_spec_accept_length``); None before any."""
        return self._spec_accepted / self._spec_verifies if self._spec_verifies else None

    # ---- the engine thread
    def _run(self) -> None:
        try:
            while True:
                with self._cv:
                    while (self._hanging or not (self._waiting or self._running)) and not self._stopping:
                        self._cv.wait(IDLE_POLL_S if self.link else None)
                        if self.link is not None:
                            self.link.check_alive()
                    if self._stopping:
                        return
                    room = len(self._waiting) if self.max_running is None else self.max_running - len(self._running)
                    new = [self._waiting.popleft() for _admitted in range(max(0, min(room, len(self._waiting))))]
                if new:
                    self._prefill(new)
                else:
                    self._decode()
        except PeerLeft as exc:
            log.info("%s; the TP group is gone, stopping", exc)
            self._fail(EngineError(str(exc)), clean=True)
        except DistBackendError as exc:
            log.error("Scheduler hit an exception: %s", traceback.format_exc())
            self._fail(EngineError(str(exc).splitlines()[0]), clean=False)
        except Exception as exc:  # noqa: BLE001 - like SGLang's scheduler: any crash takes the server down
            log.error("Scheduler hit an exception: %s", traceback.format_exc())
            self._fail(EngineError(f"scheduler crashed: {exc}"), clean=False)

    def _fail(self, error: EngineError, clean: bool) -> None:
        """The engine died: close the TP link at once (the peer is waiting for it), fail every request."""
        if self.link is not None:
            self.link.close()
        self.failed_requests = self._fail_pending(error)
        if self.on_fatal is not None:
            self.on_fatal(clean)

    def _fail_pending(self, error: EngineError) -> int:
        """Refuse new requests with ``error`` and hand it to every queued or running one."""
        with self._cv:
            self.failed = error
            pending = [*self._waiting, *self._running]
            self._waiting.clear()
            self._running = []
            self._active = 0
        for req in pending:
            req.queue.put(error)
        return len(pending)

    def _emit(self, req: Request, tokens: int, now: float) -> None:
        req.produced += tokens
        req.last_emit = now
        req.queue.put(req.produced)

    def _finish(self, req: Request, now: float) -> None:
        req.finish_time = now
        if req.aborted:
            req.finish = {"type": "abort", "message": "the client closed the connection"}
        output_tokens = [piece.lstrip() for piece in req.pieces[:req.produced]]
        self.cache.insert([*req.prompt_tokens, *output_tokens])
        if req.log_metrics:
            self.metrics.observe_finished(
                streaming=req.stream, prompt_tokens=len(req.prompt_tokens), completion_tokens=req.produced,
                cached_tokens=req.cached_tokens, e2e_latency=now - req.arrival,
                ttft=None if req.first_token_time is None else req.first_token_time - req.arrival,
                spec_verify_ct=req.verify_ct)
        with self._cv:
            self._active -= 1
        req.queue.put(DONE)

    def _prefill(self, new: list[Request]) -> None:
        start = time.perf_counter()
        batch = []
        uncached = cached = 0
        for req in new:
            if req.aborted:
                self._finish(req, start)
                continue
            length = len(req.prompt_tokens)
            req.cached_tokens = min(self.cache.match(req.prompt_tokens), max(length - 1, 0))
            cached += req.cached_tokens
            uncached += length - req.cached_tokens
            self.cache.insert(req.prompt_tokens)
            batch.append(req)
        if not batch:
            return
        _sleep_until(start + uncached * self.prefill_time_per_token)
        if self.link is not None:
            self.link.exchange(KIND_PREFILL, self.prefill_exchange_bytes(uncached))
        now = time.perf_counter()
        for req in batch:
            req.first_token_time = now
            self._emit(req, min(1, req.max_new), now)
            if req.produced >= req.max_new:
                self._finish(req, now)
            else:
                self._running.append(req)
        running, queued = self.load()
        self.metrics.set_gauges(cache_hit_rate=cached / (cached + uncached) if cached + uncached else 0.0,
                                num_running_reqs=running, num_queue_reqs=queued)
        log.info("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, #running-req: %d, "
                 "#queue-req: %d", len(batch), uncached, cached, running, queued)

    def _decode(self) -> None:
        start = time.perf_counter()
        if not self._window_tokens:
            self._window_start = start  # a throughput window never spans idle time
        spec = self.spec
        _sleep_until(start + self.step_time * (self.spec_step_factor if spec else 1.0))
        if self.link is not None:
            self.link.exchange(KIND_DECODE, self.allreduce_bytes)
        now = time.perf_counter()
        still = []
        step_tokens = 0
        for req in self._running:
            if req.aborted:
                self._finish(req, now)
                continue
            tokens = 1
            if spec is not None:
                tokens = min(self._rng.randint(1, spec.num_steps + 1), req.max_new - req.produced)
                req.verify_ct += 1
                self._spec_verifies += 1
                self._spec_accepted += tokens
            step_tokens += tokens
            if req.log_metrics:
                self.metrics.observe_inter_token(now - req.last_emit, tokens)
            self._emit(req, tokens, now)
            if req.produced >= req.max_new:
                self._finish(req, now)
            else:
                still.append(req)
        self._running = still
        self._decode_steps += 1
        kill_if_due(self._decode_steps, self.kill_after_steps)
        self._window_tokens += step_tokens
        if self._decode_steps % DECODE_LOG_INTERVAL == 0 or not still:
            self._log_decode(now)

    def _log_decode(self, now: float) -> None:
        elapsed = now - self._window_start
        if elapsed > 0:
            self.last_gen_throughput = self._window_tokens / elapsed
        self._window_tokens = 0
        running, queued = self.load()
        accept = self.avg_spec_accept_length()
        self.metrics.set_gauges(gen_throughput=self.last_gen_throughput, num_running_reqs=running,
                                num_queue_reqs=queued, spec_accept_length=accept or 0.0)
        spec = f", accept len: {accept:.2f}" if accept is not None else ""
        log.info("Decode batch, #running-req: %d, gen throughput (token/s): %.2f%s, #queue-req: %d",
                 running, self.last_gen_throughput, spec, queued)
