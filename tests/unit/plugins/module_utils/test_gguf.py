# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_gguf: the header reader on the writer's real files (tests/unit/fixtures/gguf/README.md) and on malformed copies
made from them, and the draft's vocabulary check."""

import json
import struct
from pathlib import Path

from ansible_collections.inferlab.distributed.plugins.module_utils._gguf import draft_problems, read_header

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gguf"
TARGET = FIXTURES / "tiny-target.gguf"
DRAFT = FIXTURES / "tiny-draft.gguf"


def copy_with(tmp_path, source, name, change):
    data = bytearray(source.read_bytes())
    data = change(data)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return str(path)


def test_the_target_is_read_whole_and_its_size_is_exactly_what_its_tensors_need():
    header = read_header(str(TARGET))
    manifest = json.loads((FIXTURES / "tiny-manifest.json").read_text())
    assert header["problems"] == []
    assert header["version"] == 3
    assert header["architecture"] == "llama"
    assert header["metadata"]["llama.block_count"] == 2
    assert header["metadata"]["llama.embedding_length"] == 16
    assert header["metadata"]["llama.context_length"] == 256
    assert header["metadata"]["general.name"] == "inferlab-lab-target"
    assert header["vocab"]["size"] == manifest["vocab_size"] == 259
    assert (header["vocab"]["bos"], header["vocab"]["eos"]) == (1, 2)
    # token_embd, output_norm, output and 9 a block
    assert header["tensors"] == 3 + 9 * 2
    assert header["bytes"] == header["data_bytes_expected"] == manifest["files"]["model.gguf"]["bytes"]


def test_the_draft_shares_the_targets_vocabulary():
    target, draft = read_header(str(TARGET)), read_header(str(DRAFT))
    assert draft["problems"] == []
    assert draft["metadata"]["llama.block_count"] == 1
    assert draft_problems(target, draft) == []


def test_a_draft_with_another_token_is_refused_and_says_what_differs(tmp_path):
    # <0x41> becomes <0x7A>: the same length, so only the token list's fingerprint can tell
    other = copy_with(tmp_path, DRAFT, "other.gguf", lambda data: data.replace(b"<0x41>", b"<0x7A>", 1))
    problems = draft_problems(read_header(str(TARGET)), read_header(other))
    assert len(problems) == 1
    assert problems[0].startswith("the draft's token list (sha256) is ")


def test_a_draft_with_another_eos_is_refused(tmp_path):
    def eos_3(data):
        key = b"tokenizer.ggml.eos_token_id"
        at = data.index(key) + len(key) + 4  # the value type (u32), then the value
        data[at:at + 4] = struct.pack("<I", 3)
        return data
    problems = draft_problems(read_header(str(TARGET)), read_header(copy_with(tmp_path, DRAFT, "eos.gguf", eos_3)))
    assert problems == ["the draft's EOS token id is 3, the target's 2"]


def test_a_file_cut_inside_its_tensors_is_cut_short_with_both_sizes(tmp_path):
    cut = copy_with(tmp_path, TARGET, "cut.gguf", lambda data: data[:-1000])
    header = read_header(cut)
    assert header["problems"] == [
        f"{cut} is cut short: its tensors need {TARGET.stat().st_size} bytes, the file has "
        f"{TARGET.stat().st_size - 1000} (a partial copy or download?)"]


def test_a_file_cut_inside_its_header_is_cut_short(tmp_path):
    cut = copy_with(tmp_path, TARGET, "head.gguf", lambda data: data[:300])
    (problem,) = read_header(cut)["problems"]
    assert problem == f"{cut} is cut short: the file ends inside its header (at byte 300)"


def test_a_file_that_is_not_gguf_says_what_its_start_was(tmp_path):
    text = tmp_path / "model.safetensors"
    text.write_bytes(b'{"__metadata__": {}}')
    (problem,) = read_header(str(text))["problems"]
    assert problem == (f"{text} is not a GGUF file this reader understands: expected the magic b'GGUF' at its start, "
                       "found b'{\"__'")


def test_an_unknown_version_is_named(tmp_path):
    other = copy_with(tmp_path, TARGET, "v9.gguf", lambda data: data[:4] + struct.pack("<I", 9) + data[8:])
    (problem,) = read_header(other)["problems"]
    assert problem.endswith("GGUF version 9 (versions 2 and 3 are read)")


def test_an_unknown_value_type_is_named_with_its_place(tmp_path):
    def bad_type(data):
        key = b"general.architecture"
        at = data.index(key) + len(key)
        data[at:at + 4] = struct.pack("<I", 77)
        return data
    (problem,) = read_header(copy_with(tmp_path, TARGET, "type.gguf", bad_type))["problems"]
    assert "unknown value type 77 at byte " in problem


def test_a_huge_string_length_is_refused_before_reading_it(tmp_path):
    def huge(data):
        data[24:32] = struct.pack("<Q", 1 << 40)  # the first key's length
        return data
    (problem,) = read_header(copy_with(tmp_path, TARGET, "huge.gguf", huge))["problems"]
    assert "a string of 1099511627776 bytes at byte 24" in problem


def test_a_missing_file_is_a_problem_not_an_exception(tmp_path):
    (problem,) = read_header(str(tmp_path / "absent.gguf"))["problems"]
    assert problem.startswith("cannot read %s: " % (tmp_path / "absent.gguf"))


def test_a_draft_without_a_vocabulary_is_named(tmp_path):
    no_vocab = {"path": "x.gguf", "vocab": None}
    assert draft_problems(read_header(str(TARGET)), no_vocab) == ["no vocabulary (tokenizer.ggml.tokens) in x.gguf"]
