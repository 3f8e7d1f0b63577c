"""Tests of the counter_snapshot module through main(): the real loopback counters, a Thunderbolt fixture tree and a
recorded NVML snapshot, read in one call, and its failures."""

from ansible_collections.inferlab.distributed.plugins.modules import counter_snapshot
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module, sysfs_tree


def run(**args):
    return run_module(counter_snapshot.main, args)


def test_one_call_reads_counters_link_and_gpus(tmp_path):
    tbnet_root = sysfs_tree("tb_peer", tmp_path / "sys")
    failed, result = run(interfaces=["lo", "lo"], tbnet_sysfs_root=str(tbnet_root),
                         procfs_root=str(FIXTURES / "proc"), nvml_snapshot=str(FIXTURES / "nvml" / "h200.json"))
    assert not failed, result
    assert result["changed"] is False
    assert list(result["counters"]["interfaces"]) == ["lo"]
    assert "rx_bytes" in result["counters"]["interfaces"]["lo"]["statistics"]
    assert result["counters"]["tcp"] and result["counters"]["tcp_ext"]
    assert result["missing"] == []
    assert "thunderbolt0" in result["tbnet"]["interfaces"]
    assert result["nvml"]["gpus"][0]["name"]


def test_a_missing_interface_fails_at_the_opening_and_is_listed_at_the_closing(tmp_path):
    tbnet_root = str(sysfs_tree("tb_peer", tmp_path / "sys"))
    nvml = str(FIXTURES / "nvml" / "h200.json")
    failed, result = run(interfaces=["lo", "thunderbolt9"], tbnet_sysfs_root=tbnet_root, nvml_snapshot=nvml)
    assert failed and "thunderbolt9" in result["msg"] and result["missing"] == ["thunderbolt9"]
    failed, result = run(interfaces=["lo", "thunderbolt9"], fail_on_missing=False, tbnet_sysfs_root=tbnet_root,
                         nvml_snapshot=nvml)
    assert not failed and result["missing"] == ["thunderbolt9"]


def test_a_malformed_nvml_snapshot_fails_with_its_path(tmp_path):
    bad = tmp_path / "nvml.json"
    bad.write_text("{not json")
    failed, result = run(interfaces=["lo"], tbnet_sysfs_root=str(sysfs_tree("tb_peer", tmp_path / "sys")),
                         nvml_snapshot=str(bad))
    assert failed and str(bad) in result["msg"]
