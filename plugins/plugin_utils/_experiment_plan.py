# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The staged experiment's plan: which stages run, what each changes, and the one-layer rule.

Pure functions over plain data (the role's stage table and the operator's selection), used by the filters in
plugins/filter/experiment.py and by their unit tests. A plan is refused, with one sentence per problem, when:

- a selected stage is not a known stage, or is listed twice;
- a stage that needs another is selected without it (``requires``: the TP2 stages need the originals paused, the
  pause needs the fallback, the fallback needs the prober that watches the public route);
- a measured stage's control is not in the plan (a partial run must keep the control of what it measures);
- a measured stage changes more (or less) than exactly one declared layer against its control;
- a layer has a value outside its declared values.
"""

from __future__ import annotations

LAYERS = ('runtime', 'speculation', 'driver')


def _layers_of(stage, table):
    return (table.get(stage) or {}).get('layers') or {}


def plan_problems(selected, table, layer_values=None):
    """Sentences saying why the plan cannot run; empty when it can. ``table``: stage name -> {index, changes,
    opt_ins, measured, control, layers}; ``selected``: the stage names asked for (any order)."""
    problems = []
    if not isinstance(selected, (list, tuple)) or not all(isinstance(s, str) for s in selected):
        return ['experiment_stages must be a list of stage names, got %r' % (selected,)]
    unknown = [s for s in selected if s not in table]
    if unknown:
        problems.append('unknown stage(s) %s: the stages are %s' % (', '.join(unknown), ', '.join(ordered(table))))
    repeated = sorted({s for s in selected if selected.count(s) > 1})
    if repeated:
        problems.append('stage(s) listed twice: %s' % ', '.join(repeated))
    for stage in ordered(table):
        if stage not in selected:
            continue
        for needed in table[stage].get('requires') or []:
            if needed not in selected:
                problems.append('stage %s needs stage %s in the plan: add %s to experiment_stages'
                                % (stage, needed, needed))
        if not table[stage].get('measured'):
            continue
        control = table[stage].get('control')
        layers = _layers_of(stage, table)
        for layer, value in layers.items():
            if layer not in LAYERS:
                problems.append('stage %s declares an unknown layer %r (layers: %s)'
                                % (stage, layer, ', '.join(LAYERS)))
            elif layer_values and value not in layer_values.get(layer, [value]):
                allowed = ', '.join(layer_values[layer])
                problems.append('stage %s sets %s=%r, not one of %s' % (stage, layer, value, allowed))
        if control is None:
            continue
        if control not in selected:
            problems.append('stage %s is measured against %s, which is not in the plan: add %s to experiment_stages'
                            % (stage, control, control))
            continue
        changed = changed_layers(_layers_of(control, table), layers)
        if len(changed) != 1:
            problems.append('stage %s changes %d layers against its control %s (%s): a measured stage changes '
                            'exactly one' % (stage, len(changed), control,
                                             '; '.join('%s %s -> %s' % c for c in changed) or 'none'))
    return problems


def changed_layers(control_layers, layers):
    """``[(layer, control value, value)]`` for every declared layer that differs."""
    return [(layer, control_layers.get(layer), layers.get(layer)) for layer in LAYERS
            if control_layers.get(layer) != layers.get(layer)]


def ordered(table):
    """Stage names in their table order (``index``)."""
    return sorted(table, key=lambda name: table[name].get('index', 0))


def preview(selected, table):
    """The plan as a list, in run order: ``{index, stage, selected, always, changes, opt_ins, measured, control,
    layer, layer_change}`` (``layer``: the one layer a measured stage changes against its control, ``layer_change``
    like ``'speculation none -> nextn'``); stages marked ``always`` (the restore) run in every plan."""
    rows = []
    for stage in ordered(table):
        entry = table[stage]
        control = entry.get('control')
        changed = (changed_layers(_layers_of(control, table), _layers_of(stage, table))
                   if entry.get('measured') and control else [])
        rows.append({'index': entry.get('index'), 'stage': stage,
                     'selected': stage in selected or bool(entry.get('always')),
                     'always': bool(entry.get('always')), 'changes': entry.get('changes', ''),
                     'opt_ins': list(entry.get('opt_ins') or []), 'measured': bool(entry.get('measured')),
                     'control': control, 'layer': changed[0][0] if len(changed) == 1 else None,
                     'layer_change': '; '.join('%s %s -> %s' % c for c in changed) or None})
    return rows


def plan_line(row):
    """One line of the preview, for people."""
    text = '%2d %-20s %s: %s' % (row['index'], row['stage'], 'runs' if row['selected'] else 'skipped',
                                 row['changes'])
    if row['opt_ins']:
        text += '; needs ' + ', '.join(row['opt_ins'])
    if row['measured'] and row['control']:
        text += '; measured against %s (%s)' % (row['control'], row['layer_change'])
    elif row['measured']:
        text += '; measured (the control of what follows)'
    return text
