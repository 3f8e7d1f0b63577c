"""The commands roles/sglang_tp runs to read a rank's versions and the end of its log, rendered by Ansible's own
templating from the role's vars/main.yml, for each process manager.

Under docker and podman the ranks run the image's Python, not the host's: the versions come from a throwaway
container of the rank image. docker keeps a container's log itself (log_path is not used), so the log checks read
`docker logs`; podman writes the log where asked, like the process and systemd managers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

VARS = Path(__file__).resolve().parents[2] / "roles" / "sglang_tp" / "vars" / "main.yml"
IMAGE = "lmsysorg/sglang:v0.5.6"
LOG = "/var/lib/inferlab/logs/sglang-run-baseline-rank0.log"


def render(expression, manager, image=IMAGE):
    role_vars = {key: trust_as_template(value) if isinstance(value, str) else value
                 for key, value in yaml.safe_load(VARS.read_text()).items()}
    variables = {**role_vars, "sglang_tp_process_manager": manager, "sglang_tp_container_image": image,
                 "__sglang_tp_process": "sglang-baseline-rank0", "__sglang_tp_log": LOG}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


@pytest.mark.parametrize("manager", ["process", "systemd"])
def test_host_ranks_read_the_hosts_python_and_the_log_file(manager):
    version = render("{{ __sglang_tp_version_command }}", manager)
    assert version[:2] == ["python3", "-c"] and len(version) == 3
    assert "torch.cuda.nccl.version()" in version[2]
    assert render("{{ __sglang_tp_log_tail_command }}", manager) == ["tail", "-n", "20000", LOG]


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_ranks_read_the_images_python(engine):
    version = render("{{ __sglang_tp_version_command }}", engine)
    # engine flags, then the image, then the entrypoint's arguments: the script is the same one the host runs
    assert version[:8] == [engine, "run", "--rm", "--network", "none", "--entrypoint", "python3", IMAGE]
    assert version[8:] == render("{{ __sglang_tp_version_command }}", "process")[1:]


def test_docker_ranks_log_is_read_with_docker_logs():
    assert render("{{ __sglang_tp_log_tail_command }}", "docker") == [
        "docker", "logs", "--tail", "20000", "sglang-baseline-rank0"]


def test_podman_ranks_log_is_the_file_it_writes():
    assert render("{{ __sglang_tp_log_tail_command }}", "podman") == ["tail", "-n", "20000", LOG]
