#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: llm_workload
short_description: Send one batch of real streamed requests to an SGLang server and measure it
version_added: 0.1.0
description:
  - Sends one batch of streamed requests over real HTTP to an SGLang server, to the lab's server that speaks its
    API, or to a gateway in front of one, and measures every request the way SGLang's C(bench_serving) does. Run it
    on the controller (C(delegate_to=localhost)); it uses the standard library only.
  - Per request it records the time to first token, the total latency, the server's own token counts (never a count
    of streamed chunks), the rates derived from them, the gaps between chunks, the HTTP status, chosen response
    headers, and any failure.
  - Per batch it reports the wall time from the first request sent to the last byte received, the aggregate output
    rate (OK requests' output tokens / wall time, a different figure from any request's rate), and the mean, median,
    p99, min and max of every per-request figure. RV(batch.definitions) gives the one-line formula of each.
  - A failure is recorded as a failure, never as a zero. A request that gets its status and headers but no token
    within O(first_token_timeout_s) fails with error kind C(hang) (a speculative-decoding TP server can hang while
    C(/health) answers 200); others are C(timeout), C(http) (non-200, with the body cut to 2 KB), C(not_a_stream),
    C(malformed), C(server_error) (an error event in the stream), C(no_usage), C(no_tokens) and C(connection).
  - The module reports C(changed=false) because it only sends requests, but O(flush_cache=true) empties the
    server's prefix cache, which later requests of anyone would have hit.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent and the cache is not flushed; the result says so and is skipped.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  url:
    description:
      - Base URL of the server, for example V(http://169.254.77.2:30000). Requests go to C(URL/v1/chat/completions)
        or C(URL/generate); the cache flush to C(URL/flush_cache); the server info to C(URL/get_server_info).
      - A trailing C(/v1) is accepted and dropped, so an OpenAI-compatible base URL works too.
    type: str
    required: true
  api:
    description:
      - V(openai_chat) streams C(/v1/chat/completions) with C(stream_options.include_usage), the API a gateway
        forwards. The body is plain OpenAI, so a real model may stop early at an end-of-sequence token; add
        C(ignore_eos) through O(extra_body) for SGLang's OpenAI API.
      - V(sglang_generate) streams SGLang's native C(/generate) with C(ignore_eos), whose C(meta_info) also gives
        C(cached_tokens) always and C(spec_verify_ct) with speculative decoding.
    type: str
    choices: [openai_chat, sglang_generate]
    default: openai_chat
  model:
    description:
      - The model name sent with V(openai_chat) (the served model name, or a gateway's model role). Required for it;
        not sent with V(sglang_generate).
    type: str
  api_key:
    description:
      - Sent as the bearer token of an C(Authorization) header when set.
    type: str
  api_key_file:
    description:
      - A file whose first line is the key, read on the host that runs the module, so the key never passes through
        Ansible's variables or output (a gateway's client key, mode C(0600)). Exclusive with O(api_key).
    type: path
  kind:
    description:
      - V(single_stream) sends O(requests) requests one after another, each with a prompt of its own.
      - V(concurrent) sends O(requests) requests, O(concurrency) at a time, each with a prompt of its own; the first
        O(concurrency) start together behind a barrier.
      - V(repeated_prefix) sends prompts made of one shared prefix of O(prefix_tokens) words and a unique suffix.
        Request 0 runs alone first and fills the prefix cache; the others then run O(concurrency) at a time and hit
        it. Needs O(requests) of at least 2.
      - V(long_context) sends one request of O(prompt_tokens) words. Its prompt is the shared prefix itself, so
        after a V(repeated_prefix) batch with the same O(seed) it reuses that batch's cached prefix; set
        O(flush_cache=true) for a cold prefill.
    type: str
    required: true
    choices: [single_stream, concurrent, repeated_prefix, long_context]
  requests:
    description:
      - How many requests the batch sends. V(1) for V(long_context).
    type: int
    default: 1
  concurrency:
    description:
      - How many requests run at a time; at most O(requests). V(1) for V(single_stream).
    type: int
    default: 1
  prompt_tokens:
    description:
      - The requested prompt length in words; a word is one token for the lab server and usually for a real
        tokenizer, but the chat template adds tokens, so records keep the server's count beside it.
      - Default V(128) for V(single_stream) and V(concurrent). Required for V(long_context). For V(repeated_prefix)
        it is the whole prompt, prefix included (default O(prefix_tokens) + 16).
    type: int
  prefix_tokens:
    description:
      - The length of the shared prefix of V(repeated_prefix), in words. Required for it, refused for other kinds.
    type: int
  output_tokens:
    description:
      - The number of tokens to generate (C(max_tokens) or C(max_new_tokens)).
    type: int
    default: 64
  flush_cache:
    description:
      - Empty the server's prefix cache (C(POST /flush_cache)) before the batch, so the batch is labelled C(cold).
      - When the server refuses (SGLang answers 400 while requests are running), the batch is not sent and the
        module fails with the server's reason.
    type: bool
    default: false
  flush_method:
    description:
      - How O(flush_cache) empties the cache. V(flush_cache) is SGLang's C(POST /flush_cache). V(slots) is
        llama-server's, C(GET /slots) then C(POST /slots/ID?action=erase) for every slot (llama-server allows it only
        when started with C(--slot-save-path), and answers 501 otherwise).
    type: str
    choices: [flush_cache, slots]
    default: flush_cache
  prompt_sizing:
    description:
      - V(words) makes a prompt of O(prompt_tokens) words (one token a word for the lab's emulator).
      - V(tokenizer) asks the server's C(POST /tokenize) (llama-server's) and sends the most words whose text has at
        most O(prompt_tokens) tokens (O(prefix_tokens) for the shared prefix); each record keeps the count found
        (C(content_tokens)) beside the one requested. A tokenizer that cannot be asked fails the batch before any
        request is sent.
    type: str
    choices: [words, tokenizer]
    default: words
  context_tokens:
    description:
      - The server's context length in tokens. When set, a batch whose longest prompt (the server's count with
        O(prompt_sizing=tokenizer), else the requested tokens) and O(output_tokens) exceed it is refused before any
        request is sent, with both numbers.
    type: int
  first_token_timeout_s:
    description:
      - A request with no generated token this many seconds after it was sent fails as C(hang). Connecting must
        also succeed within it. With O(prefill_floor_tokens_per_s), the margin added to each prompt's prefill.
    type: float
    default: 30
  prefill_floor_tokens_per_s:
    description:
      - The slowest prefill the server is expected to manage, in uncached prompt tokens a second (a real model
        about 1,000). Each request's first-token deadline is then O(first_token_timeout_s) plus the prefill of its
        prompt and of the prompts in flight with it at this rate, recorded as C(first_token_deadline_s) in each
        record and as C(first_token_deadline) in the batch. Unset, every request has O(first_token_timeout_s).
    type: float
  request_rate:
    description:
      - With O(kind=concurrent), send the requests at this many a second instead of all at once, the gaps between
        arrivals drawn (seeded by O(seed)) from a gamma distribution of mean 1 / O(request_rate) and shape
        O(burstiness), as SGLang's bench_serving and vLLM's bench serve draw them; at most O(concurrency) in flight,
        a request due while every slot is busy starting when one frees (their C(--max-concurrency)). The schedule
        is in RV(batch.arrival), each request's real start in its record.
    type: float
  burstiness:
    description:
      - The gamma shape of the gaps with O(request_rate) - V(1) a Poisson process; below 1 burstier, above 1 more
        even.
    type: float
    default: 1.0
  goodput_ttft_s:
    description:
      - A time-to-first-token target in seconds. The batch's RV(batch.goodput) counts the requests that finished OK
        with a TTFT at most this (and within O(goodput_tpot_s) when set too), as bench_serving's goodput does.
    type: float
  goodput_tpot_s:
    description:
      - A time-per-output-token target in seconds (the C(tpot_s) of RV(batch.ttft_s)'s list), counted as
        O(goodput_ttft_s) is.
    type: float
  total_timeout_s:
    description:
      - A request whose stream has not ended (with C(data) V([DONE])) this many seconds after it was sent fails as
        C(timeout).
    type: float
    default: 300
  seed:
    description:
      - Seeds the prompt words. The same seed sends the same prompts, so a second batch finds them cached unless
        O(flush_cache=true).
    type: int
    default: 0
  capture_headers:
    description:
      - Response headers recorded per request (missing ones as null), to show which backend answered.
    type: list
    elements: str
    default: [x-inferlab-host, x-litellm-model-api-base, x-litellm-model-group, x-litellm-attempted-fallbacks]
  extra_body:
    description:
      - Merged into each request body; nested dicts (such as C(sampling_params)) are merged key by key.
      - It may not set C(stream) to anything but V(true).
    type: dict
  fail_on_error:
    description:
      - Fail when any request failed, with a message quoting the first failures. The result carries the full
        RV(batch) either way.
    type: bool
    default: true
  record_path:
    description:
      - Also write RV(batch) as JSON to this file (its directory must exist), also when the module fails because
        requests failed.
    type: path
notes:
  - Formulas, also in RV(batch.definitions). Output token counts are the server's C(usage.completion_tokens) or
    C(meta_info.completion_tokens). C(output_tok_s) = output_tokens / latency_s. C(decode_tok_s) = (output_tokens -
    1) / (latency_s - ttft_s), which is 1 / C(tpot_s), and C(tpot_s) = (latency_s - ttft_s) / (output_tokens - 1)
    is bench_serving's TPOT. C(aggregate_output_tok_s) = the OK requests' output tokens / C(wall_s).
  - The reference experiment's 48.4 tok/s (512 tokens, TTFT 0.159 s, 10.73 s total) divided 512 tokens by the time
    after the first token; C(decode_tok_s) divides 511 and gives 48.3 tok/s.
  - Percentiles are numpy's default (linear interpolation), as bench_serving's are.
seealso:
  - name: SGLang bench_serving
    description: The benchmark whose metric definitions this module follows.
    link: https://docs.sglang.ai/developer_guide/bench_serving.html
"""

EXAMPLES = r"""
- name: Six concurrent streamed requests through the gateway, cache flushed first
  inferlab.distributed.llm_workload:
    url: http://169.254.77.2:30000
    model: qwen-27b
    kind: concurrent
    requests: 6
    concurrency: 6
    output_tokens: 256
    flush_cache: true
    record_path: "{{ inferlab_run_dir }}/workload_concurrent.json"
  delegate_to: localhost
  register: concurrent

- name: A repeated 120K prefix through SGLang's native API
  inferlab.distributed.llm_workload:
    url: http://169.254.77.2:30000
    api: sglang_generate
    kind: repeated_prefix
    requests: 4
    prefix_tokens: 120000
    output_tokens: 64
  delegate_to: localhost

- name: One request that must not hang, without failing the play
  inferlab.distributed.llm_workload:
    url: http://169.254.77.2:30000
    model: qwen-27b
    kind: single_stream
    output_tokens: 16
    first_token_timeout_s: 10
    fail_on_error: false
  delegate_to: localhost
  register: probe
"""

RETURN = r"""
msg:
  description: In check mode, that nothing was sent.
  returned: check mode
  type: str
  sample: check mode - no request sent and no cache flushed
cache_flushed:
  description: Whether the server's prefix cache was flushed before the batch (O(flush_cache=true) and accepted).
  returned: always
  type: bool
  sample: true
batch:
  description:
    - The batch. Figures are null when they have no value (no OK request, a rate of one token).
  returned: success, and on failure once requests were sent or the flush was refused
  type: dict
  contains:
    kind:
      description: O(kind).
      returned: success
      type: str
      sample: concurrent
    cache:
      description: V(cold) when the cache was flushed before the batch, else V(warm).
      returned: success
      type: str
      sample: cold
    error:
      description: Why the batch was not sent (the flush was refused), else null.
      returned: success
      type: str
      sample: null
    first_token_deadline:
      description:
        - The first-token deadlines used, C({margin_s, prefill_floor_tokens_per_s, prompts_in_flight, longest_s})
          - O(first_token_timeout_s), O(prefill_floor_tokens_per_s) (null without one), the prompts prefilled with
          each, and the longest deadline. Each record has its own C(first_token_deadline_s).
      returned: success, when requests were sent
      type: dict
      sample: {margin_s: 60, prefill_floor_tokens_per_s: 500, prompts_in_flight: 1, longest_s: 122.1}
    wall_s:
      description: From the first request sent to the last byte received (or the last failure), in seconds.
      returned: success
      type: float
      sample: 8.89
    ok:
      description: Requests that finished with their token counts.
      returned: success
      type: int
      sample: 6
    failed:
      description: Requests that failed.
      returned: success
      type: int
      sample: 0
    aggregate_output_tok_s:
      description: The OK requests' output tokens over RV(batch.wall_s).
      returned: success
      type: float
      sample: 172.9
    arrival:
      description:
        - With O(request_rate), the schedule the requests were started on, C({request_rate, burstiness, offsets_s})
          - each request's due time in seconds after the first.
      returned: success, with O(request_rate)
      type: dict
      sample: {request_rate: 2.0, burstiness: 1.0, offsets_s: [0.0, 0.31, 0.52, 1.4]}
    request_throughput_req_s:
      description: The OK requests over RV(batch.wall_s).
      returned: success
      type: float
      sample: 0.67
    total_token_throughput_tok_s:
      description: The OK requests' prompt and output tokens over RV(batch.wall_s) (bench_serving's total token
        throughput).
      returned: success
      type: float
      sample: 1210.4
    goodput:
      description:
        - C({ttft_s, tpot_s, requests, share, req_s}) - the targets (O(goodput_ttft_s), O(goodput_tpot_s)), the
          requests that finished OK within every one, their share of all requests sent, and their number over
          RV(batch.wall_s); null when no target was given.
      returned: success
      type: dict
      sample: {ttft_s: 0.5, tpot_s: 0.05, requests: 5, share: 0.83, req_s: 0.56}
    ttft_s:
      description:
        - Statistics of the time to first token over OK requests, C({n, mean, median, p90, p95, p99, std, min,
          max}) (std the population's); so are C(tpot_s), C(itl_s) (every gap between text chunks, pooled),
          C(itl_per_token_s) (each gap over the tokens its chunk carried, once per token, where the stream counts
          them, C(api=generate); n 0 on the chat stream), C(latency_s), C(output_tok_s) and C(decode_tok_s).
      returned: success
      type: dict
      sample: {n: 6, mean: 0.21, median: 0.2, p90: 0.28, p95: 0.3, p99: 0.31, std: 0.05, min: 0.16, max: 0.31}
    spec_accept_length:
      description:
        - C({value, source, note}). C(source) is V(meta_info) (mean over requests of completion_tokens /
          spec_verify_ct), V(server_info) (C(/get_server_info) after the batch) or null, with C(note) saying why.
      returned: success
      type: dict
      sample: {value: 2.6, source: meta_info, note: null}
    server:
      description:
        - The server's own figures, from the C(timings) a llama-server sends on each stream's last chunk, over the OK
          requests that carry them; null from servers that send none (SGLang, a gateway that drops them).
        - C({n, prompt_tokens, cached_tokens, predicted_tokens, prompt_tok_s, decode_tok_s, draft_tokens,
          accepted_tokens, acceptance_rate, client_over_server}); C(decode_tok_s) is statistics as for
          RV(batch.ttft_s) of each request's predicted_n / predicted_ms, the server's definition (all generated
          tokens over its generation time), not the client's C(decode_tok_s) of each record.
        - C(client_over_server) is statistics of each request's client decode rate over the server's in the
          client's definition, (predicted_n - 1) / predicted_ms; 1.0 when the two measurements agree.
      returned: success
      type: dict
      sample: {n: 3, prompt_tokens: 240, predicted_tokens: 72, prompt_tok_s: 752.5, acceptance_rate: 0.22}
    definitions:
      description: Each figure's name mapped to its one-line definition.
      returned: success
      type: dict
    records:
      description:
        - One per request, in request order, C({index, ok, status, error, start, end_offset_s,
          requested_prompt_tokens, prompt_tokens, cached_tokens, output_tokens, chunks, ttft_s, latency_s,
          output_tok_s, decode_tok_s, tpot_s, itl_s, itl_per_token_s, spec_accept_length, spec_verify_ct,
          server_timings, headers}).
        - C(server_timings) is the llama-server C(timings) of the request (C(cache_n), C(prompt_n), C(prompt_ms),
          C(prompt_per_second), C(predicted_n), C(predicted_ms), C(predicted_per_second), C(draft_n),
          C(draft_n_accepted)), or null.
        - C(start) is C({wall, offset_s}) (UTC time, and seconds since the batch began); C(error) is null or
          C({kind, message, body}).
      returned: success
      type: list
      elements: dict
"""

import json  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils._ledger_base import write_atomic  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._llm_workload import (  # noqa: E402
    APIS,
    DEFAULT_CAPTURE_HEADERS,
    FLUSH_METHODS,
    KINDS,
    PROMPT_SIZINGS,
    WorkloadError,
    failure_summary,
    run_batch,
)


class LlmWorkload:
    def __init__(self, module):
        self.module = module

    def run(self):
        params = self.module.params
        if self.module.check_mode:
            self.module.exit_json(changed=False, skipped=True, cache_flushed=False,
                                  msg="check mode - no request sent and no cache flushed")
        api_key = params['api_key']
        if params['api_key_file']:
            api_key = self.read_key(params['api_key_file'])
        try:
            batch = run_batch(
                params['url'], params['kind'], api=params['api'], model=params['model'], api_key=api_key,
                requests=params['requests'], concurrency=params['concurrency'], prompt_tokens=params['prompt_tokens'],
                prefix_tokens=params['prefix_tokens'], output_tokens=params['output_tokens'],
                flush=params['flush_cache'], first_token_timeout_s=params['first_token_timeout_s'],
                total_timeout_s=params['total_timeout_s'], seed=params['seed'],
                capture_headers=params['capture_headers'], extra_body=params['extra_body'],
                prompt_sizing=params['prompt_sizing'], context_tokens=params['context_tokens'],
                flush_method=params['flush_method'],
                prefill_floor_tokens_per_s=params['prefill_floor_tokens_per_s'],
                goodput_ttft_s=params['goodput_ttft_s'], goodput_tpot_s=params['goodput_tpot_s'],
                request_rate=params['request_rate'], burstiness=params['burstiness'])
        except WorkloadError as err:
            self.module.fail_json(msg=str(err), cache_flushed=False)
        if params['record_path']:
            self.write_record(params['record_path'], batch)
        if batch['error']:
            self.module.fail_json(msg=batch['error'], batch=batch, cache_flushed=False)
        if batch['failed'] and params['fail_on_error']:
            self.module.fail_json(
                msg="%d of %d requests failed (expected all %d to finish with their token counts): %s"
                    % (batch['failed'], batch['requests'], batch['requests'], failure_summary(batch)),
                batch=batch, cache_flushed=batch['cache_flushed'])
        self.module.exit_json(changed=False, batch=batch, cache_flushed=batch['cache_flushed'])

    def read_key(self, path):
        try:
            with open(path) as handle:
                key = handle.readline().strip()
        except OSError as err:
            self.module.fail_json(msg="could not read api_key_file %s: %s" % (path, err.strerror or err))
        if not key:
            self.module.fail_json(msg="api_key_file %s is empty: expected the key on its first line" % path)
        return key

    def write_record(self, path, batch):
        try:
            write_atomic(path, (json.dumps(batch, indent=1) + '\n').encode('utf-8'))
        except OSError as err:
            self.module.fail_json(msg="could not write record_path %s: %s" % (path, err), batch=batch,
                                  cache_flushed=batch['cache_flushed'])


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            api=dict(type='str', choices=list(APIS), default='openai_chat'),
            model=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            api_key_file=dict(type='path', no_log=False),
            kind=dict(type='str', required=True, choices=list(KINDS)),
            requests=dict(type='int', default=1),
            concurrency=dict(type='int', default=1),
            prompt_tokens=dict(type='int', no_log=False),
            prefix_tokens=dict(type='int', no_log=False),
            output_tokens=dict(type='int', default=64, no_log=False),
            flush_cache=dict(type='bool', default=False),
            flush_method=dict(type='str', choices=list(FLUSH_METHODS), default='flush_cache'),
            prompt_sizing=dict(type='str', choices=list(PROMPT_SIZINGS), default='words'),
            context_tokens=dict(type='int', no_log=False),
            first_token_timeout_s=dict(type='float', default=30.0, no_log=False),
            prefill_floor_tokens_per_s=dict(type='float', no_log=False),
            request_rate=dict(type='float'),
            burstiness=dict(type='float', default=1.0),
            goodput_ttft_s=dict(type='float'),
            goodput_tpot_s=dict(type='float'),
            total_timeout_s=dict(type='float', default=300.0),
            seed=dict(type='int', default=0),
            capture_headers=dict(type='list', elements='str', default=list(DEFAULT_CAPTURE_HEADERS)),
            extra_body=dict(type='dict'),
            fail_on_error=dict(type='bool', default=True),
            record_path=dict(type='path'),
        ),
        mutually_exclusive=[('api_key', 'api_key_file')],
        required_if=[
            ('api', 'openai_chat', ['model']),
            ('kind', 'long_context', ['prompt_tokens']),
            ('kind', 'repeated_prefix', ['prefix_tokens']),
        ],
        supports_check_mode=True,
    )


def main():
    LlmWorkload(build_module()).run()


if __name__ == '__main__':
    main()
