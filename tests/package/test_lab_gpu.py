"""The lab's GPU daemon (src/inferlab/lab/gpu_daemon.py): the configs it refuses, and one poll's render of a host whose
server was killed. The claims themselves are tests/package/lab_server/test_labserver_gpu.py's."""

from __future__ import annotations

import json

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab.lab import gpu_daemon as lab_gpu
from inferlab.lab.server import gpu

DEVICE = FIXTURE_ROOT / "nvml" / "rtx5090.json"


@pytest.fixture(name="gpu_dir")
def fixture_gpu_dir(tmp_path):
    gpu_dir = tmp_path / "gpu"
    (gpu_dir / "claims").mkdir(parents=True)
    (gpu_dir / "device.json").write_text(DEVICE.read_text())
    return gpu_dir


@pytest.mark.parametrize(
    "config, message",
    [
        ({"gpu_dirs": [], "poll_s": 0.25}, "gpu_dirs must be a non-empty list"),
        ({"gpu_dirs": "x", "poll_s": 0.25}, "gpu_dirs must be a non-empty list"),
        ({"gpu_dirs": ["/nonexistent/gpu"], "poll_s": 0.25}, "no device.json and claims/ in /nonexistent/gpu"),
        ({"poll_s": 0.25}, "gpu_dirs must be"),
    ],
)
def test_read_config_refuses_what_it_cannot_act_on(tmp_path, config, message):
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(config))
    with pytest.raises(lab_gpu.GpuConfigError, match=message):
        lab_gpu.read_config(path)


@pytest.mark.parametrize("poll_s", [0, -1, "1"])
def test_read_config_refuses_a_poll_that_is_not_positive(tmp_path, gpu_dir, poll_s):
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"gpu_dirs": [str(gpu_dir)], "poll_s": poll_s}))
    with pytest.raises(lab_gpu.GpuConfigError, match="poll_s must be a positive number"):
        lab_gpu.read_config(path)


def test_read_config_refuses_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "gpu.json"
    path.write_text("{")
    with pytest.raises(lab_gpu.GpuConfigError, match="cannot read"):
        lab_gpu.read_config(path)


def test_describe_names_each_card_and_who_holds_it(gpu_dir):
    (gpu_dir / "claims" / "1.json").write_text(json.dumps(
        {"pid": 1, "start_time": gpu.start_time(1), "gpu": 0, "used_memory_bytes": 2 * gpu.GIB}))
    assert gpu.refresh(gpu_dir) is True
    name = gpu.process_name(1)
    assert lab_gpu.describe(str(gpu_dir)) == f"GPU 0 {1024 + 2048} MiB used by 1 {name}"
