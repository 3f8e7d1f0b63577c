# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The staged experiment's plan: the role's real stage table, the one-layer rule, requirements and the preview."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.filter import experiment
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _experiment_plan

ROLE_VARS = Path(__file__).resolve().parents[4] / 'roles' / 'experiment' / 'vars' / 'main.yml'
ROLE_DEFAULTS = ROLE_VARS.parents[1] / 'defaults' / 'main.yml'
TABLE = yaml.safe_load(ROLE_VARS.read_text())['__experiment_stage_table']
LAYER_VALUES = yaml.safe_load(ROLE_VARS.read_text())['__experiment_layer_values']
DEFAULT_STAGES = yaml.safe_load(ROLE_DEFAULTS.read_text())['experiment_stages']


def with_override(stage, **changes):
    table = {name: dict(entry) for name, entry in TABLE.items()}
    table[stage].update(changes)
    return table


def test_the_default_plan_runs():
    assert _experiment_plan.plan_problems(DEFAULT_STAGES, TABLE, LAYER_VALUES) == []


def test_each_measured_stage_changes_one_layer_in_the_default_table():
    rows = {row['stage']: row for row in _experiment_plan.preview(DEFAULT_STAGES, TABLE)}
    assert rows['control']['layer'] is None and rows['control']['measured']
    assert (rows['tp2_baseline']['layer'], rows['tp2_baseline']['layer_change']) == (
        'runtime', 'runtime original -> sglang_tp')
    assert rows['tp2_nextn']['layer_change'] == 'speculation none -> nextn'
    assert rows['tp2_nextn_candidate']['layer_change'] == 'driver stock -> candidate'
    assert rows['link_ab']['selected'] and rows['restore']['selected'] and rows['restore']['always']
    assert not rows['rpc_baseline']['selected'] and not rows['rpc_baseline_candidate']['selected']
    assert [row['index'] for row in rows.values()] == list(range(1, 17))


def test_the_real_engines_stages_change_the_runtime_then_the_driver():
    stages = DEFAULT_STAGES + ['rpc_baseline', 'rpc_baseline_candidate']
    assert _experiment_plan.plan_problems(stages, TABLE, LAYER_VALUES) == []
    rows = {row['stage']: row for row in _experiment_plan.preview(stages, TABLE)}
    assert rows['rpc_baseline']['layer_change'] == 'runtime sglang_tp -> llamacpp_rpc'
    assert rows['rpc_baseline_candidate']['layer_change'] == 'driver stock -> candidate'
    assert _experiment_plan.plan_problems(['verify', 'rpc_baseline_candidate'], TABLE, LAYER_VALUES) == [
        'stage rpc_baseline_candidate needs stage pause in the plan: add pause to experiment_stages',
        'stage rpc_baseline_candidate is measured against rpc_baseline, which is not in the plan: add rpc_baseline '
        'to experiment_stages']


def test_a_plan_changing_two_layers_is_refused_naming_them():
    table = with_override('tp2_nextn_candidate', control='tp2_baseline')
    assert _experiment_plan.plan_problems(DEFAULT_STAGES, table, LAYER_VALUES) == [
        'stage tp2_nextn_candidate changes 2 layers against its control tp2_baseline (speculation none -> nextn; '
        'driver stock -> candidate): a measured stage changes exactly one']


def test_a_measured_stage_without_a_change_is_refused():
    table = with_override('tp2_nextn', layers={'runtime': 'sglang_tp', 'speculation': 'none', 'driver': 'stock'})
    assert _experiment_plan.plan_problems(DEFAULT_STAGES, table, LAYER_VALUES) == [
        'stage tp2_nextn changes 0 layers against its control tp2_baseline (none): a measured stage changes '
        'exactly one',
        'stage tp2_nextn_candidate changes 2 layers against its control tp2_nextn (speculation none -> nextn; '
        'driver stock -> candidate): a measured stage changes exactly one']


@pytest.mark.parametrize('stages, problem', [
    (['verify', 'tp2_nextn'], 'stage tp2_nextn needs stage pause in the plan: add pause to experiment_stages'),
    (['verify', 'prober', 'fallback', 'pause', 'tp2_nextn'],
     'stage tp2_nextn is measured against tp2_baseline, which is not in the plan: add tp2_baseline to '
     'experiment_stages'),
    (['verify', 'verfy'], 'unknown stage(s) verfy: the stages are verify, link_test, known_good, control, prober, '
                          'fallback, pause, tp2_baseline, tp2_nextn, rpc_baseline, candidate_build, link_ab, '
                          'tp2_nextn_candidate, rpc_baseline_candidate, restore, prober_stop'),
    (['verify', 'verify'], 'stage(s) listed twice: verify'),
])
def test_partial_plans(stages, problem):
    assert problem in _experiment_plan.plan_problems(stages, TABLE, LAYER_VALUES)


def test_partial_plans_that_keep_their_controls_run():
    assert _experiment_plan.plan_problems(['verify', 'link_test'], TABLE, LAYER_VALUES) == []
    assert _experiment_plan.plan_problems(['control', 'prober', 'fallback', 'pause', 'tp2_baseline'], TABLE,
                                          LAYER_VALUES) == []


@pytest.mark.parametrize('selected', ['verify', [1, 2], None])
def test_a_malformed_selection(selected):
    assert _experiment_plan.plan_problems(selected, TABLE) == [
        f'experiment_stages must be a list of stage names, got {selected!r}']


def test_an_unknown_layer_value_is_refused():
    table = with_override('tp2_nextn', layers={'runtime': 'sglang_tp', 'speculation': 'eagle3', 'driver': 'stock'})
    problems = _experiment_plan.plan_problems(DEFAULT_STAGES, table, LAYER_VALUES)
    assert "stage tp2_nextn sets speculation='eagle3', not one of none, nextn" in problems


def test_the_filters_and_the_plan_line():
    assert experiment.FilterModule().filters()['experiment_plan_problems'](DEFAULT_STAGES, TABLE) == []
    rows = experiment.experiment_plan(DEFAULT_STAGES, TABLE)
    lines = [experiment.experiment_plan_line(row) for row in rows]
    assert lines[8] == (' 9 tp2_nextn            runs: starts SGLang TP with NEXTN, then stops it (ledger); needs '
                        'inferlab_allow_pause_production; measured against tp2_baseline (speculation none -> nextn)')
    assert lines[9].startswith('10 rpc_baseline         skipped: ')
    assert lines[11].startswith('12 link_ab              runs: swaps the driver back and forth')
