# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gateway config filters on the lab's LiteLLM config and on malformed configs."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.gateway import FilterModule

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateway"
FILTERS = FilterModule().filters()
roles = FILTERS["gateway_config_roles"]
with_fallback = FILTERS["gateway_config_with_fallback"]


def fixture(name):
    return (FIXTURES / name).read_text()


def test_roles_of_the_lab_config():
    assert roles(fixture("litellm-lab.yaml")) == {
        "models": ["small", "large"],
        "backends": {"small": ["http://169.254.77.1:8100/v1"], "large": ["http://169.254.77.1:8200/v1"]},
        "fallbacks": {},
        "context_window_fallbacks": {"small": ["large"]},
        "content_policy_fallbacks": {},
    }


def test_roles_read_router_settings_and_list_a_role_once():
    summary = roles(fixture("litellm-router-settings.yaml"))
    assert summary["models"] == ["small", "large", "embed"]
    assert summary["backends"]["small"] == ["http://10.0.0.5:8100/v1", "http://10.0.0.6:8100/v1"]
    assert summary["fallbacks"] == {"embed": ["large"]}
    assert summary["content_policy_fallbacks"] == {"small": ["large"]}


def test_with_fallback_adds_one_entry_and_keeps_everything_else():
    text = fixture("litellm-lab.yaml")
    new = yaml.safe_load(with_fallback(text, "small", "large"))
    old = yaml.safe_load(text)
    assert new["litellm_settings"]["fallbacks"] == [{"small": ["large"]}]
    assert new["litellm_settings"]["context_window_fallbacks"] == [{"small": ["large"]}]
    del new["litellm_settings"]["fallbacks"]
    assert new == old


def test_with_fallback_appends_to_the_operators_other_fallbacks():
    new = yaml.safe_load(with_fallback(fixture("litellm-router-settings.yaml"), "small", "large"))
    assert new["litellm_settings"] == {"fallbacks": [{"small": ["large"]}]}
    assert new["router_settings"]["fallbacks"] == [{"embed": ["large"]}]
    assert roles(yaml.safe_dump(new))["fallbacks"] == {"embed": ["large"], "small": ["large"]}


@pytest.mark.parametrize(("public", "target", "message"), [
    ("tiny", "large", r"model role\(s\) tiny not in the config's model_list \(it has small, large\)"),
    ("small", "huge", r"model role\(s\) huge not in"),
    ("small", "small", "must be another role than the public one"),
])
def test_with_fallback_refuses_missing_or_same_roles(public, target, message):
    with pytest.raises(AnsibleFilterError, match=message):
        with_fallback(fixture("litellm-lab.yaml"), public, target)


def test_with_fallback_refuses_an_existing_general_fallback_for_the_public_role():
    text = fixture("litellm-router-settings.yaml")
    with pytest.raises(AnsibleFilterError, match="already has a general fallback for embed -> large"):
        with_fallback(text, "embed", "small")


@pytest.mark.parametrize(("text", "message"), [
    ("model_list: [", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping at the top level, found list"),
    ("general_settings: {}\n", "expected a non-empty model_list"),
    ("model_list:\n  - litellm_params: {}\n", r"model_list\[0\] has no model_name"),
    ("model_list: [{model_name: a}]\nlitellm_settings: [1]\n", "litellm_settings must be a mapping"),
    ("model_list: [{model_name: a}]\nrouter_settings: {fallbacks: {a: b}}\n",
     "router_settings.fallbacks must be a list"),
    ("model_list: [{model_name: a}]\nlitellm_settings: {fallbacks: [a]}\n", "entry that is not a mapping"),
])
def test_malformed_configs_are_refused_with_the_reason(text, message):
    with pytest.raises(AnsibleFilterError, match=message):
        roles(text)


def test_unknown_gateway_kind_names_the_variable():
    with pytest.raises(AnsibleFilterError, match="unknown gateway kind 'envoy'.*inferlab_gateway_kind"):
        roles(fixture("litellm-lab.yaml"), "envoy")


with_roles = FILTERS["gateway_config_with_roles"]
SOLO_B = {"name": "solo-lab-b", "model": "lab-qwen-small", "api_base": "http://169.254.77.6:30100/v1"}


def test_with_roles_appends_deployments_and_keeps_everything_else():
    text = fixture("litellm-lab.yaml")
    solo_a = {**SOLO_B, "name": "solo-lab-a", "api_base": "http://169.254.77.2:30100/v1"}
    new_text = with_roles(text, [solo_a, SOLO_B])
    new, old = yaml.safe_load(new_text), yaml.safe_load(text)
    assert new["model_list"][-2:] == [
        {"model_name": "solo-lab-a", "litellm_params": {"model": "openai/lab-qwen-small",
                                                        "api_base": "http://169.254.77.2:30100/v1", "api_key": "none"}},
        {"model_name": "solo-lab-b", "litellm_params": {"model": "openai/lab-qwen-small",
                                                        "api_base": "http://169.254.77.6:30100/v1", "api_key": "none"}}]
    new["model_list"] = new["model_list"][:-2]
    assert new == old
    summary = roles(new_text)
    assert summary["models"] == ["small", "large", "solo-lab-a", "solo-lab-b"]
    assert summary["backends"]["solo-lab-b"] == ["http://169.254.77.6:30100/v1"]
    assert summary["context_window_fallbacks"] == {"small": ["large"]}


@pytest.mark.parametrize(("added", "message"), [
    ([], r"expected a non-empty list of roles to add, found \[\]"),
    ("solo-lab-b", r"expected a non-empty list of roles to add"),
    ([{"name": "solo-lab-b", "model": "m"}], r"roles\[0\] must be \{name, model, api_base\}"),
    ([{**SOLO_B, "port": 1}], r"roles\[0\] must be \{name, model, api_base\}"),
    ([{**SOLO_B, "api_base": ""}], r"roles\[0\].api_base must be a non-empty string"),
    ([{**SOLO_B, "model": 7}], r"roles\[0\].model must be a non-empty string"),
    ([{**SOLO_B, "name": "small"}], r"the config already has a model role small"),
    ([SOLO_B, SOLO_B], r"the config already has a model role solo-lab-b"),
])
def test_with_roles_refuses(added, message):
    with pytest.raises(AnsibleFilterError, match=r"gateway_config_with_roles: " + message):
        with_roles(fixture("litellm-lab.yaml"), added)


def test_with_roles_refuses_a_malformed_config():
    with pytest.raises(AnsibleFilterError, match="expected a non-empty model_list"):
        with_roles("model_list: []\n", [SOLO_B])
