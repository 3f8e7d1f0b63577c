"""gpu_launch_shortfalls: a launch refused before it starts when a GPU lacks its memory, with the numbers, the
variable and who holds the GPU; NVML facts from the recorded fixture snapshots, malformed ones included."""

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.gpu_memory import gpu_launch_shortfalls

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
MIB = 2 ** 20


def snapshot(name="rtx5090.json", **card):
    nvml = json.loads((FIXTURES / name).read_text())
    nvml["gpus"][0].update(card)
    return nvml


BUSY = {"memory_free_bytes": 3814 * MIB, "compute_processes": [
    {"pid": 4100, "name": "sglang::schedul", "used_memory_bytes": 27656 * MIB}]}


def test_an_idle_card_has_the_memory():
    assert gpu_launch_shortfalls(snapshot(), 30000) == []


def test_a_card_held_by_production_is_short_with_the_numbers_and_the_holder():
    assert gpu_launch_shortfalls(snapshot(**BUSY), 30000) == [
        "GPU 0 has 3814 MiB free, the launch needs 30000 MiB (inferlab_gpu_min_free_mib); held by "
        "sglang::schedul (pid 4100, 27656 MiB)"]


def test_the_need_is_the_static_fraction_of_the_card_when_the_launch_sets_one():
    assert gpu_launch_shortfalls(snapshot(**BUSY), 30000, mem_fraction_static=0.1) == []
    [short] = gpu_launch_shortfalls(snapshot(**BUSY), 1000, mem_fraction_static="0.5")
    assert short.startswith("GPU 0 has 3814 MiB free, the launch needs 16304 MiB (--mem-fraction-static 0.5 of "
                            "its 32607 MiB); held by sglang::schedul")


def test_a_gpu_the_host_lacks_is_short():
    assert gpu_launch_shortfalls(snapshot(), 100, gpu_count=2) == ["GPU 1 is not on the host (NVML lists [0])"]


def test_the_variable_named_is_the_callers():
    [short] = gpu_launch_shortfalls(snapshot(memory_free_bytes=0, compute_processes=[]), 10,
                                    variable="topology_solo_gpu_need_mib")
    assert "(topology_solo_gpu_need_mib); held by no process NVML lists" in short


@pytest.mark.parametrize(("nvml", "need", "fraction", "message"), [
    ([], 1, None, "expects nvml_info's nvml facts"),
    ({"gpus": None}, 1, None, "expects nvml_info's nvml facts"),
    ({"gpus": []}, "lots", None, "must be numbers"),
    ({"gpus": []}, 1, "most", "must be numbers"),
])
def test_malformed_input_is_refused(nvml, need, fraction, message):
    with pytest.raises(AnsibleFilterError, match=message):
        gpu_launch_shortfalls(nvml, need, mem_fraction_static=fraction)
