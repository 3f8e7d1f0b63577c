# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Mitogen for Ansible's ``mitogen_linear`` strategy, without Mitogen's CPU pinning.

Mitogen pins the controller's processes to CPUs (``ansible_mitogen.affinity``). On a machine with two or three CPUs
it keeps CPU 0 for its multiplexer and pins the top-level ansible-playbook process, every task's worker process and
every process they start to CPU 1, whatever else runs there: on the 2-CPU machines this project runs on, the
controller's half of every task (the workers of both hosts, the callbacks, a local command) then waits for one CPU
while the other idles. Measured on such a machine: 150 controller-side tasks (``assert``) on two hosts took 20-22 s
pinned and 11-12 s unpinned, as long as ansible-core's ``linear`` (docs/PERFORMANCE.md). Everything else is
Mitogen's strategy unchanged; ``inferlab.run.strategy`` selects this plugin for ``mitogen``.
"""

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# The base policy assigns nothing: every process may run on any CPU, as without Mitogen. Replaced before the strategy
# starts its multiplexer and its workers, which look the policy up when they assign themselves.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):
    """``mitogen_linear``, unpinned."""
