"""The command roles/sglang_tp runs to read a rank's versions, rendered by Ansible's own templating from the role's
vars/main.yml, for each process manager.

Under docker and podman the ranks run the image's Python, not the host's: the versions come from a throwaway
container of the rank image. (The end of a rank's log is read by managed_process state=status itself:
test_managed_process.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

VARS = Path(__file__).resolve().parents[2] / "roles" / "sglang_tp" / "vars" / "main.yml"
IMAGE = "lmsysorg/sglang:v0.5.6"


def render(expression, manager, image=IMAGE):
    role_vars = {key: trust_as_template(value) if isinstance(value, str) else value
                 for key, value in yaml.safe_load(VARS.read_text()).items()}
    variables = {**role_vars, "sglang_tp_process_manager": manager, "sglang_tp_container_image": image,
                 "__sglang_tp_process": "sglang-baseline-rank0"}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


@pytest.mark.parametrize("manager", ["process", "systemd"])
def test_host_ranks_read_the_hosts_python(manager):
    version = render("{{ __sglang_tp_version_command }}", manager)
    assert version[:2] == ["python3", "-c"] and len(version) == 3
    assert "torch.cuda.nccl.version()" in version[2]


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_ranks_read_the_images_python(engine):
    version = render("{{ __sglang_tp_version_command }}", engine)
    # engine flags, then the image, then the entrypoint's arguments: the script is the same one the host runs
    assert version[:8] == [engine, "run", "--rm", "--network", "none", "--entrypoint", "python3", IMAGE]
    assert version[8:] == render("{{ __sglang_tp_version_command }}", "process")[1:]
