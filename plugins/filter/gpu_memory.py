# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a server launch needs of a host's GPUs, against what NVML says is free now: ``gpu_launch_shortfalls``.

Its DOCUMENTATION, EXAMPLES and RETURN are in plugins/filter/gpu_launch_shortfalls.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain

MIB = 2 ** 20


def gpu_launch_shortfalls(nvml, need_mib, mem_fraction_static=None, gpu_count=1, variable='inferlab_gpu_min_free_mib'):
    """One sentence per GPU (index below ``gpu_count``) that has less free memory than the launch needs; [] when
    every one has enough. The need is ``mem_fraction_static`` of the GPU's total when it is set (SGLang sizes its
    static pool so), else ``need_mib``."""
    nvml = plain(nvml)
    if not isinstance(nvml, dict) or not isinstance(nvml.get('gpus'), list):
        raise AnsibleFilterError("gpu_launch_shortfalls expects nvml_info's nvml facts (a dict with gpus), got %r"
                                 % (type(nvml).__name__,))
    try:
        need_mib, gpu_count = int(need_mib), int(gpu_count)
        fraction = None if mem_fraction_static in (None, '') else float(mem_fraction_static)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpu_launch_shortfalls: need_mib, gpu_count and mem_fraction_static must be "
                                 "numbers: %s" % exc) from exc
    cards = {g.get('index'): g for g in nvml['gpus']}
    shortfalls = []
    for index in range(gpu_count):
        card = cards.get(index)
        if card is None:
            shortfalls.append("GPU %d is not on the host (NVML lists %s)" % (index, sorted(cards)))
            continue
        total_mib = int(card.get('memory_total_bytes') or 0) // MIB
        free_mib = int(card.get('memory_free_bytes') or 0) // MIB
        if fraction is not None:
            need, why = int(math.ceil(fraction * total_mib)), '--mem-fraction-static %s of its %d MiB' % (
                fraction, total_mib)
        else:
            need, why = need_mib, variable
        if free_mib >= need:
            continue
        holders = ', '.join('%s (pid %s, %d MiB)' % (p.get('name'), p.get('pid'),
                                                     int(p.get('used_memory_bytes') or 0) // MIB)
                            for p in card.get('compute_processes') or []) or 'no process NVML lists'
        shortfalls.append("GPU %d has %d MiB free, the launch needs %d MiB (%s); held by %s"
                          % (index, free_mib, need, why, holders))
    return shortfalls


class FilterModule(object):
    def filters(self):
        return {'gpu_launch_shortfalls': gpu_launch_shortfalls}
