"""inferlab compare and what the records say ran: every fingerprint component that differs between A and B is
named with the declared layer that explains it, and a verdict is withheld when something no declared layer explains
differs too, or when the runs of one side differ among themselves."""

import copy

from test_compare import RUNS_A5, RUNS_B5, repeated

from inferlab.analysis import compare, fingerprint, verdict_policy
from inferlab.report import compare_output

IDENTITY = {
    "format": "inferlab.host_identity/1", "kernel_release": "6.8.0-49-generic", "missing": [], "peer": None,
    "host_router": {"pci_id": "8086:5781", "generation": 4, "nvm_version": "21.0"},
    "driver": {"loaded": True, "srcversion": "A1B2C3", "parameters": {"e2e": "Y"}},
    "firmware": {"bios_vendor": "ASUS", "bios_version": "1601", "board_vendor": "ASUS", "board_name": "X870",
                 "product_name": "ws"},
}


def host_state(kernel="6.8.0-49-generic", bios="1601", gpu_driver="580.95.05", mtu=65520) -> dict:
    firmware = dict(IDENTITY["firmware"], bios_version=bios)
    return {"kernel_release": kernel, "identity": dict(IDENTITY, firmware=firmware),
            "tbnet_module": {"loaded": True, "srcversion": "A1B2C3", "parameters": {"e2e": "Y"}},
            "link": {"interface": "thunderbolt0", "mtu": mtu}, "driver_version": gpu_driver}


def ranks(speculative: bool) -> dict:
    argv = ["python3", "-m", "sglang.launch_server", "--tp-size", "2"] + (
        ["--speculative-algorithm", "NEXTN"] if speculative else [])
    return {host: {"rank": i, "argv": argv + ["--node-rank", str(i)], "log": f"logs/{host}/rank.log",
                   "environment": {"NCCL_SOCKET_IFNAME": "=thunderbolt0",
                                   "NCCL_INSPECTOR_DUMP_DIR": f"/var/lib/inferlab/logs/nccl-inspector-{i}"},
                   "versions": {"sglang": "0.5.23", "nccl": "2.30.3"},
                   "model": {"config.json": {"size": 1024, "sha256": "ab" * 32}}}
            for i, host in enumerate(("ws-a", "ws-b"))}


def with_configuration(group: list[dict], mode: str, speculative: bool, **state) -> list[dict]:
    for i, data in enumerate(group):
        data["verification"] = {"ws-a": host_state(**state), "ws-b": host_state()}
        data["serving"][mode]["ranks"] = ranks(speculative)
        data["serving"][mode]["ranks"]["ws-a"]["environment"]["NCCL_INSPECTOR_DUMP_DIR"] += f"-run{i}"
    return group


def five_a_side(**b_state):
    group_a = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), "baseline", False)
    group_b = with_configuration(repeated("serve_tp2_nextn.json", "nextn", RUNS_B5, "b"), "nextn", True, **b_state)
    return group_a, group_b


def test_a_run_s_fingerprint_reads_the_hosts_and_the_ranks():
    [data] = with_configuration([repeated("serve_tp2.json", "baseline", RUNS_A5[:1], "a")[0]], "baseline", False)
    found = fingerprint.fingerprint(data, {"baseline": "baseline"})
    assert found["ws-a: kernel"] == (fingerprint.KERNEL, "6.8.0-49-generic")
    assert found["ws-a: firmware bios_version"] == (fingerprint.FIRMWARE, "1601")
    assert found["ws-a: Thunderbolt host router nvm_version"] == (fingerprint.FIRMWARE, "21.0")
    assert found["ws-a: thunderbolt_net e2e"] == (fingerprint.LINK_DRIVER, "Y")
    assert found["ws-b: link MTU"] == (fingerprint.LINK_SETTINGS, "65520")
    assert found["ws-a: GPU driver"] == (fingerprint.GPU_DRIVER, "580.95.05")
    assert found["baseline on ws-b: sglang version"] == (fingerprint.ENGINE, "0.5.23")
    assert found["baseline on ws-b: launch command"][1].endswith("--tp-size 2 --node-rank 1")
    assert found["baseline on ws-a: model file config.json"] == (fingerprint.MODEL, "1024 B, sha256 " + "ab" * 32)
    # where a run writes is not what it runs
    assert not any("NCCL_INSPECTOR_DUMP_DIR" in component for component in found)


def test_the_declared_layer_explains_what_it_changes_and_the_verdict_stands():
    result = compare.compare(*five_a_side())
    assert result.changed_layer == "speculation"
    assert [(d.component, d.layer, d.explained_by) for d in result.fingerprint] == [
        ("baseline -> nextn on ws-a: launch command", "launch", "speculation"),
        ("baseline -> nextn on ws-b: launch command", "launch", "speculation")]
    assert next(v for v in result.verdicts if v.claim == "B is faster").verdict == verdict_policy.SUPPORTED
    text = compare_output.render_text(result)
    assert "| baseline -> nextn on ws-a: launch command | launch |" in text and "| speculation |" in text


def test_a_difference_no_declared_layer_explains_withholds_every_verdict():
    result = compare.compare(*five_a_side(kernel="6.11.0-9-generic"))
    kernel = next(d for d in result.fingerprint if d.component == "ws-a: kernel")
    assert (kernel.a, kernel.b, kernel.explained_by) == ("6.8.0-49-generic", "6.11.0-9-generic", None)
    for verdict in result.verdicts:
        assert verdict.verdict == verdict_policy.INCONCLUSIVE
        assert verdict.reason == ("A and B differ in more than the declared layer speculation: ws-a: kernel "
                                  "(6.8.0-49-generic -> 6.11.0-9-generic): no verdict across more than one layer")
    row = "| ws-a: kernel | kernel | 6.8.0-49-generic | 6.11.0-9-generic | **nothing** |"
    assert row in compare_output.render_text(result)
    differences = compare_output.as_json(result)["fingerprint"]["differences"]
    assert [d["explained_by"] for d in differences if d["component"] == "ws-a: kernel"] == [None]


def test_a_deliberate_change_declared_as_a_layer_is_explained():
    group_a = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), "baseline", False)
    group_b = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_B5, "b"), "baseline", False,
                                 bios="1804")
    for group, bios in ((group_a, "1601"), (group_b, "1804")):
        for data in group:
            data["run"]["extravars"] = {"inferlab_layer_firmware": bios}
    result = compare.compare(group_a, group_b)
    assert result.changed_layer == "firmware"
    [bios] = result.fingerprint
    assert (bios.component, bios.explained_by) == ("ws-a: firmware bios_version", "firmware")
    assert next(v for v in result.verdicts if v.claim == "B is faster").verdict == verdict_policy.SUPPORTED


def test_runs_of_one_side_that_differ_among_themselves_get_no_verdict():
    group_a, group_b = five_a_side()
    group_b[2]["verification"]["ws-b"]["driver_version"] = "575.64"
    result = compare.compare(group_a, group_b)
    faster = next(v for v in result.verdicts if v.claim == "B is faster")
    assert faster.verdict == verdict_policy.INCONCLUSIVE
    assert faster.reason == ("the runs of B are not one configuration: b-1 and b-3 differ in ws-b: GPU driver "
                             "(580.95.05 -> 575.64): no verdict across more than one layer")


def test_a_component_one_record_lacks_is_listed_and_noted_but_withholds_nothing():
    group_a, group_b = five_a_side()
    for data in group_a:
        for rank in data["serving"]["baseline"]["ranks"].values():
            del rank["model"]  # a record from before the model's files were recorded
    result = compare.compare(group_a, group_b)
    one_sided = [d for d in result.fingerprint if d.a is None]
    assert [d.component for d in one_sided] == ["baseline -> nextn on ws-a: model file config.json",
                                                "baseline -> nextn on ws-b: model file config.json"]
    assert "2 fingerprint component(s) recorded in one run only, so not checked (first: baseline -> nextn on ws-a: " \
           "model file config.json)" in result.notes
    assert next(v for v in result.verdicts if v.claim == "B is faster").verdict == verdict_policy.SUPPORTED
    assert "| (not recorded) |" in compare_output.render_text(result)


def test_an_a_a_pair_that_differs_in_what_ran_is_said_to_be_no_noise_floor():
    group_a = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), "baseline", False)
    group_b = with_configuration(copy.deepcopy(repeated("serve_tp2.json", "baseline", RUNS_B5, "b")), "baseline",
                                 False, mtu=9000)
    result = compare.compare(group_a, group_b)
    assert result.changed_layer is None
    for verdict in result.verdicts:
        assert verdict.verdict == verdict_policy.NO_VERDICT
        assert verdict.reason.startswith("A and B differ in more than no declared layer: ws-a: link MTU (65520 -> "
                                         "9000)")


def test_the_same_configuration_says_so():
    group_a = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), "baseline", False)
    group_b = with_configuration(repeated("serve_tp2.json", "baseline", RUNS_B5, "b"), "baseline", False)
    result = compare.compare(group_a, group_b)
    assert result.fingerprint == [] and result.fingerprint_components == 38  # 13 a host, 5 a rank, 2 kernels
    assert "A and B ran the same configuration: 38 components" in compare_output.render_text(result)
