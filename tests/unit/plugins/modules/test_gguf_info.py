# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gguf_info through main(): the writer's real files (tests/unit/fixtures/gguf), a wrong architecture, a draft that
is cut short, and fail_on_problems."""

from ansible_collections.inferlab.distributed.plugins.modules import gguf_info
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module

TARGET = str(FIXTURES / "gguf" / "tiny-target.gguf")
DRAFT = FIXTURES / "gguf" / "tiny-draft.gguf"


def test_a_target_and_its_draft_pass_and_report_their_shape():
    failed, result = run_module(gguf_info.main, {"path": TARGET, "draft_path": str(DRAFT), "architecture": "llama"})
    assert not failed, result.get("msg", result)
    assert result["changed"] is False
    assert result["problems"] == []
    assert result["gguf"]["metadata"]["llama.block_count"] == 2
    assert result["draft"]["metadata"]["llama.block_count"] == 1


def test_another_architecture_is_a_problem_naming_both():
    failed, result = run_module(gguf_info.main, {"path": TARGET, "architecture": "qwen3"})
    assert not failed
    assert result["problems"] == [f"{TARGET} has architecture llama, expected qwen3"]
    assert result["draft"] is None


def test_a_cut_draft_fails_with_fail_on_problems_and_the_message_names_it(tmp_path):
    cut = tmp_path / "draft.gguf"
    cut.write_bytes(DRAFT.read_bytes()[:-64])
    failed, result = run_module(gguf_info.main, {"path": TARGET, "draft_path": str(cut), "fail_on_problems": True})
    assert failed
    assert result["msg"].startswith(f"{cut} is cut short: its tensors need ")
    # a cut draft's vocabulary is not compared: its own problem is the reason
    assert len(result["problems"]) == 1
