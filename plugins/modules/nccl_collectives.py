#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_collectives
short_description: Count a rank's NCCL collectives in a time window, from its COLL log lines or NCCL Inspector's JSON
version_added: 0.1.0
description:
  - Reads on the host that wrote them the traces NCCL leaves of a TP rank's collectives, and summarizes those whose
    time falls in the window [O(window_start), O(window_end)) of this host's clock, per kind (AllReduce, AllGather,
    ...) and per rank process, with the bytes of each call.
  - NCCL Inspector's JSON (the profiler plugin, NCCL 2.28.3 and later, in its O(inspector_dir)) when it holds records;
    each is timed, so the summary has total, median and p99 time and the bandwidths. Otherwise the COLL lines of
    the rank's log (C(NCCL_DEBUG=INFO), C(NCCL_DEBUG_SUBSYS) with C(COLL)), one per call at enqueue time with no
    duration; they can be cut to the window only with their timestamps (NCCL 2.26.2 and later with
    C(NCCL_DEBUG_TIMESTAMP_LEVELS) including C(INFO)), and are counted as untimed otherwise.
  - A collective replayed inside a CUDA graph makes no API call and leaves no COLL line.
  - Lines that cannot be read are problems in the result, never a failure.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads files, in check mode as in a normal run.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  window_start:
    description: The window's start, in seconds since the epoch on this host's clock (a counter window's opening).
    type: float
    required: true
  window_end:
    description: The window's end, in seconds since the epoch on this host's clock; after O(window_start).
    type: float
    required: true
  log_path:
    description:
      - The rank's log, with NCCL's INFO lines. A missing file is read as empty.
    type: path
  inspector_dir:
    description:
      - NCCL Inspector's output directory (C(NCCL_INSPECTOR_DUMP_DIR)); every C(*.log) file in it is read. A missing
        directory is read as empty.
    type: path
  log_utc_offset_s:
    description:
      - The offset from UTC, in seconds east, of the clock that wrote the COLL lines' timestamps (NCCL prints local
        time). Default is this host's local time; set it when the rank ran in a container with another time zone.
    type: int
  max_problems:
    description:
      - How many unreadable lines to name in RV(collectives.problems); RV(collectives.problem_count) counts all.
    type: int
    default: 10
seealso:
  - name: NCCL environment variables
    description: NCCL_DEBUG, NCCL_DEBUG_SUBSYS and the timestamp settings.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

EXAMPLES = r"""
- name: Count the collectives of this host's rank in the ladder's counter window
  inferlab.distributed.nccl_collectives:
    log_path: /var/lib/inferlab/logs/sglang-run1-baseline-rank0.log
    window_start: "{{ counters_window_result.opened_wall }}"
    window_end: "{{ counters_window_result.closed_wall }}"
  register: collectives
"""

RETURN = r"""
collectives:
  description: The rank host's collectives in the window.
  returned: success
  type: dict
  contains:
    source:
      description: C(inspector), C(coll), or C(none) when neither trace holds a collective.
      type: str
      sample: coll
    records:
      description: Collectives counted in the window.
      type: int
      sample: 812
    untimed:
      description: COLL lines without a timestamp, which cannot be placed in the window and are not counted in it.
      type: int
      sample: 0
    outside:
      description: Collectives outside the window.
      type: int
      sample: 41
    collectives:
      description:
        - By kind, C(count) and C(bytes) over the host's ranks, and C(per_rank) by C(host:pid); Inspector records
          add C(time_us_total), C(time_us_median), C(time_us_p99), C(algobw_gbs_median), C(busbw_gbs_median) and,
          per rank, C(time_share) of the window.
      type: dict
      sample: {AllReduce: {count: 812, bytes: 558891008, per_rank: {"lab-a:4242": {count: 812, bytes: 558891008}}}}
    window:
      description: C(start) and C(end) as given.
      type: dict
    lines:
      description: Lines read.
      type: int
    problem_count:
      description: Lines that could not be read.
      type: int
    problems:
      description: The first O(max_problems) of them, C(line N - what - the line).
      type: list
      elements: str
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferlab.distributed.plugins.module_utils._nccl import NcclInputError, window_collectives


def _text(path):
    """The file's text, '' when it does not exist; bytes that are not UTF-8 are replaced, never fatal."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except FileNotFoundError:
        return ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            window_start=dict(type='float', required=True),
            window_end=dict(type='float', required=True),
            log_path=dict(type='path'),
            inspector_dir=dict(type='path'),
            log_utc_offset_s=dict(type='int'),
            max_problems=dict(type='int', default=10),
        ),
        required_one_of=[('log_path', 'inspector_dir')],
        supports_check_mode=True,
    )
    params = module.params
    try:
        inspector = [_text(path) for path in sorted(glob.glob(os.path.join(glob.escape(params['inspector_dir']),
                                                                           '*.log')))] \
            if params['inspector_dir'] else []
        coll = _text(params['log_path']) if params['log_path'] else None
        result = window_collectives(params['window_start'], params['window_end'], coll_text=coll,
                                    inspector_texts=inspector, utc_offset_s=params['log_utc_offset_s'],
                                    max_problems=params['max_problems'])
    except (NcclInputError, OSError) as error:
        module.fail_json(msg='Cannot read the NCCL traces: %s' % error)
    module.exit_json(changed=False, collectives=result)


if __name__ == '__main__':
    main()
