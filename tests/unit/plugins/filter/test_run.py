"""The run_id filter: the one derivation of a run's id that every role's records and locks carry."""

import pytest

from ansible_collections.inferlab.distributed.plugins.filter.run import FilterModule, run_id


@pytest.mark.parametrize("run_dir, given, expected", [
    ("/srv/runs/20261204T101500Z-experiment", "", "20261204T101500Z-experiment"),
    ("/srv/runs/20261204T101500Z-experiment//", "", "20261204T101500Z-experiment"),
    # `inferlab run` passes the id: it wins over the directory's name (molecule's run directory is .../experiment)
    ("/root/.ansible/tmp/molecule.x.experiment/run/experiment", "experiment-dec33ea8", "experiment-dec33ea8"),
    ("", "", ""),
    (None, "", ""),
])
def test_the_given_id_wins_else_the_run_directorys_name(run_dir, given, expected):
    assert run_id(run_dir, given) == expected


def test_the_filter_is_registered():
    assert FilterModule().filters()["run_id"] is run_id
