# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab inference server: SGLang 0.5.23's HTTP API without a GPU, standard library only.

The netns lab cannot run SGLang, so it runs this: ``python3 -m inferlab.lab.server [sglang flags] [--lab-* flags]``
with ``PYTHONPATH`` pointing at the directory that holds ``inferlab/`` (nothing else of inferlab is imported). It is
each lab host's "original service" (replica mode) and the TP2 service under test (TP mode). Requests, tokens,
timing, prefix caching and the TP transport are real; only the model is a deterministic word-level generator
(``tokens``: a word or a punctuation mark is one token; the chat template is ``ROLE: CONTENT`` lines then
``assistant:``).

Modes:

- replica: ``--tp-size 1 --nnodes 1`` (the defaults), one process;
- TP: ``--tp-size 2 --nnodes 2 --node-rank 0|1 --dist-init-addr HOST:PORT``. Rank 0 listens there and serves HTTP;
  rank 1 connects from the interface NCCL's rules pick (``NCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``,
  ``NCCL_DEBUG=INFO`` for NCCL's log lines, with ``NCCL_DEBUG_SUBSYS`` including COLL one AllReduce line per
  exchange, ``NCCL_DEBUG_TIMESTAMP_LEVELS``/``_FORMAT``, ``NCCL_IB_DISABLE``) and opens no HTTP port. Every
  decode step both ranks exchange ``--lab-allreduce-bytes`` each way over that TCP connection (each prefill: that
  per 8 uncached tokens, one to four times), so a slow or lossy link lowers tokens/s. If the connection breaks, the
  surviving rank logs a traceback and NCCL's "remote process exited or there was a network error", fails
  in-flight requests with HTTP 500 and exits 1; SIGTERM is a clean exit 0 (the peer is told, and exits 0 too).

The engine batches continuously (one thread; each step serves every running request; a prefill is a step of its
own, ``--lab-prefill-time-per-token`` per uncached token). The prefix cache is token-level (page size 1), LRU,
bounded to 4x the context length; ``cached_tokens`` is the longest cached prefix of the prompt, at most its length
minus one (SGLang always computes the last token). Speculative decoding (EAGLE, EAGLE3, NEXTN = EAGLE, STANDALONE,
NGRAM): each verify step accepts 1..num_steps+1 tokens per request (uniform, seeded by ``--lab-spec-accept-seed``)
and costs ``--lab-spec-step-factor`` decode steps.

Lab knobs (defaults keep a lab run short):

- ``--lab-step-time S`` (0.004): decode step time; 0 for client-ceiling benchmarks;
- ``--lab-prefill-time-per-token S`` (2e-6);
- ``--lab-allreduce-bytes N``: default hidden_size x 2 bytes x 2 all-reduces x num_hidden_layers x 8 sequences,
  clamped to [64 KiB, 1 MiB]: 672 KiB for the lab model, with which the ``lossy`` link profile (tbf 1000 Mbit/s +
  pfifo 10) costs about 40% of tokens/s against a clean veth (measured; 16 or 64 KiB cost under 5%);
- ``--lab-spec-accept-seed N`` (0), ``--lab-spec-step-factor F`` (1.3);
- ``--lab-fault none|hang``: ``hang`` answers ``/health`` 200 and accepts requests but never produces a token
  (``/health_generate`` answers 503 after ``SGLANG_HEALTH_CHECK_TIMEOUT``, 20 s, as SGLang's would);
- ``--lab-kill-after-steps N``: the process kills itself with SIGKILL after N steps (rank 0: decode steps; rank 1:
  steps answered), a rank dying in the middle of a run;
- ``--lab-pidfile PATH``: written once serving (TP rank 0: after rank 1 joined; rank 1: once joined), removed on
  SIGTERM/SIGINT;
- ``--lab-ready-after S`` (0): seconds of loading after every start (TP mode: once the ranks joined) with the port
  open and every request answered 503, as a real model's weights take minutes; the pidfile is written when the load
  starts (a daemon's pidfile names it from its start), so a restart is seen at once and its serving only later;
- ``--lab-rank-timeout S`` (60): how long ranks wait for each other at start;
- ``--print-versions``: one JSON object (sglang, torch, cuda, nccl, server) on stdout, exit 0.

HTTP endpoints: ``/health``, ``/health_generate``, ``/get_model_info`` = ``/model_info``, ``/get_server_info`` =
``/server_info`` (server args, ``version``, ``internal_states[0]`` with ``last_gen_throughput``,
``avg_spec_accept_length`` once speculation verified something, and in TP mode ``lab_exchange``: interface,
addresses, steps, bytes sent and received), ``/v1/models``, ``/version``, ``/v1/chat/completions``, ``/generate``,
``/flush_cache``, ``/metrics`` (with ``--enable-metrics``). See ``api`` for the response shapes. Logs go to stderr.
"""
