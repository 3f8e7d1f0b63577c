# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import persistence_differences as plugin
from ansible_collections.inferlab.distributed.plugins.filter.persistence_differences import persistence_differences
from ansible_collections.inferlab.distributed.plugins.module_utils._persistence import snapshot
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.test_persistence import (
    persistence_root,
)

RELEASE = '6.1.0-57-amd64'
INITRD = f'boot/initrd.img-{RELEASE}'
TREE = f'lib/modules/{RELEASE}'


def short(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12] + '\u2026'


def test_registered():
    assert plugin.FilterModule().filters() == {'persistence_differences': persistence_differences}


def test_sidecar_documentation_names_the_filter():
    doc = yaml.safe_load((Path(plugin.__file__).with_suffix('.yml')).read_text(encoding='utf-8'))
    assert doc['DOCUMENTATION']['name'] == 'persistence_differences'
    assert set(doc) == {'DOCUMENTATION', 'EXAMPLES', 'RETURN'}


def test_nothing_persisted(tmp_path):
    root = persistence_root('debian12', tmp_path / 'root')
    assert persistence_differences(snapshot(str(root)), {'snapshot': snapshot(str(root)), 'changed': False}) == {
        'differences': [], 'problems': [],
        'taint': {'before': 0, 'after': 0, 'note': 'kernel taint 0, unchanged (not tainted)'}}


def test_the_sentences_of_the_brief(tmp_path):
    root = persistence_root('debian12', tmp_path / 'root')
    old_initrd = short(root / INITRD)
    before = snapshot(str(root))
    (root / 'etc/modprobe.d/inferlab.conf').write_text('options thunderbolt_net tx_e2e=1\n')
    (root / INITRD).write_bytes(os.urandom(4096))
    (root / TREE / 'updates').mkdir()
    (root / TREE / 'updates/thunderbolt-net.ko').write_bytes(os.urandom(800))
    (root / 'proc/sys/kernel/tainted').write_text('12288\n')
    after = snapshot(str(root))
    assert persistence_differences(before, after) == {
        'differences': [
            f'{INITRD} changed (sha256 {old_initrd} -> {short(root / INITRD)})',
            'etc/modprobe.d/inferlab.conf was added',
            f'{TREE}: 1 file more (updates/thunderbolt-net.ko)',
        ],
        'taint': {'before': 0, 'after': 12288,
                  'note': 'kernel taint 0 -> 12288 (OE: an out-of-tree unsigned module was loaded)'},
        'problems': [],
    }


@pytest.mark.parametrize('before, message', [
    ('not a snapshot', "persistence_differences: the before snapshot must be a dict (persistence_snapshot's "
                       "snapshot), got str"),
    ({'format': 'other'}, "persistence_differences: the before snapshot has format 'other', expected "
                          "'inferlab.persistence/1'"),
])
def test_bad_input_is_a_filter_error(tmp_path, before, message):
    root = persistence_root('debian12', tmp_path / 'root')
    with pytest.raises(AnsibleFilterError) as err:
        persistence_differences(before, snapshot(str(root)))
    assert str(err.value) == message
