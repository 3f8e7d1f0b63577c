import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.topology_plan import topology_plan

PLANS = [
    # (ring hosts, topologies, ring, solo, quarantined, ring_of_one, changed)
    (["a", "b"], {}, ["a", "b"], [], [], None, False),
    (["a", "b"], {"a": "ring", "b": "ring"}, ["a", "b"], [], [], None, False),
    (["a", "b"], {"a": None, "b": "ring"}, ["a", "b"], [], [], None, False),
    # the quarantine's case: B quarantined leaves A alone, and a ring of one serves solo
    (["a", "b"], {"b": "solo"}, [], ["a", "b"], ["b"], "a", True),
    (["a", "b"], {"a": "solo", "b": "solo"}, [], ["a", "b"], ["a", "b"], None, True),
    (["a", "b", "c"], {"b": "solo"}, ["a", "c"], ["b"], ["b"], None, True),
    (["a", "b", "c"], {"a": "solo"}, ["b", "c"], ["a"], ["a"], None, True),
    (["a"], {}, [], ["a"], [], "a", False),
]


@pytest.mark.parametrize("hosts, topologies, ring, solo, quarantined, ring_of_one, changed", PLANS)
def test_plan(hosts, topologies, ring, solo, quarantined, ring_of_one, changed):
    assert topology_plan(hosts, topologies) == {"ring": ring, "solo": solo, "quarantined": quarantined,
                                                "ring_of_one": ring_of_one, "changed": changed}


def test_solo_hosts_keep_inventory_order():
    assert topology_plan(["c", "a", "b"], {"b": "solo", "c": "solo"})["solo"] == ["c", "a", "b"]


@pytest.mark.parametrize("value", ["Solo", "tp1", "", 1, True])
def test_unknown_topology_names_the_host_and_the_variable(value):
    with pytest.raises(AnsibleFilterError, match=r"b has inferlab_topology .*expected one of ring, solo \(set "
                                                 r"inferlab_topology on that host\)"):
        topology_plan(["a", "b"], {"b": value})


@pytest.mark.parametrize("hosts", [[], None, "a,b"])
def test_no_ring_hosts(hosts):
    with pytest.raises(AnsibleFilterError, match="put the TP hosts in the inventory group ring"):
        topology_plan(hosts, {})


def test_topologies_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match=r"expected topologies as \{host: ring\|solo\}"):
        topology_plan(["a", "b"], ["solo"])
