"""The interruption driver's points (tests/interrupt/interrupt.py): a stage, a delay into it, the dead man's
switch, and the plan a point's run gets."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "interrupt" / "interrupt.py"


@pytest.fixture(name="interrupt", scope="module")
def fixture_interrupt():
    spec = importlib.util.spec_from_file_location("inferlab_interrupt", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, expected", [
    ("pause", {"point": "pause", "stage": "pause", "delay_s": 0.0, "deadman": False, "stages": None}),
    ("tp2_nextn+4", {"point": "tp2_nextn+4", "stage": "tp2_nextn", "delay_s": 4.0, "deadman": False,
                     "stages": None}),
    ("deadman:tp2_baseline+2.5@verify,pause,tp2_baseline",
     {"point": "deadman:tp2_baseline+2.5", "stage": "tp2_baseline", "delay_s": 2.5, "deadman": True,
      "stages": ["verify", "pause", "tp2_baseline"]}),
    ("pause@verify,known_good,prober,fallback,pause",
     {"point": "pause", "stage": "pause", "delay_s": 0.0, "deadman": False,
      "stages": ["verify", "known_good", "prober", "fallback", "pause"]}),
])
def test_a_point_names_its_stage_delay_switch_and_plan(interrupt, text, expected):
    assert interrupt.parse_point(text) == expected


def test_a_malformed_delay_is_refused(interrupt):
    with pytest.raises(ValueError):
        interrupt.parse_point("tp2_nextn+soon")
