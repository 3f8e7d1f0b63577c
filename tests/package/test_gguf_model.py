"""The lab's model writer (inferlab.lab.gguf_model): deterministic from its seed, read back whole with llama.cpp's own
reader (the gguf package), the draft partly the target, the manifest kept and a damaged file rewritten, and a bad
shape refused with every reason."""

import json

import numpy as np
import pytest
from gguf import GGUFReader

from inferlab.lab import gguf_model
from inferlab.lab.gguf_model import Shape, ensure_models, write_models

TINY = Shape(layers=3, draft_layers=1, width=16, heads=2, kv_heads=1, ffn=32, context=256, seed=5)


def tensors(path):
    return {tensor.name: np.array(tensor.data) for tensor in GGUFReader(str(path)).tensors}


def test_the_same_shape_and_seed_write_the_same_bytes_and_another_seed_does_not(tmp_path):
    first = write_models(tmp_path / "a", TINY)
    second = write_models(tmp_path / "b", TINY)
    other = write_models(tmp_path / "c", Shape(**{**TINY.__dict__, "seed": 6}))
    assert first == second
    assert (tmp_path / "a" / "model.gguf").read_bytes() == (tmp_path / "b" / "model.gguf").read_bytes()
    assert other["files"]["model.gguf"]["sha256"] != first["files"]["model.gguf"]["sha256"]
    assert json.loads((tmp_path / "a" / "manifest.json").read_text()) == first


def test_the_files_read_back_with_llama_cpps_reader_and_the_draft_is_the_targets_first_blocks(tmp_path):
    write_models(tmp_path, TINY)
    reader = GGUFReader(str(tmp_path / "model.gguf"))
    assert bytes(reader.fields["general.architecture"].parts[-1]).decode() == "llama"
    assert int(reader.fields["llama.block_count"].parts[-1][0]) == 3
    assert int(reader.fields["llama.attention.head_count_kv"].parts[-1][0]) == 1
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == gguf_model.VOCAB_SIZE
    target, draft = tensors(tmp_path / "model.gguf"), tensors(tmp_path / "draft.gguf")
    assert target["token_embd.weight"].shape == (gguf_model.VOCAB_SIZE, 16)
    assert target["blk.0.attn_k.weight"].shape == (8, 16)  # one KV head of 8
    assert set(draft) == {name for name in target if not name.startswith(("blk.1.", "blk.2."))}
    for name, array in draft.items():
        assert np.array_equal(array, target[name]), name


def test_only_the_blocks_past_the_draft_are_scaled_by_tail_scale(tmp_path):
    write_models(tmp_path / "full", Shape(**{**TINY.__dict__, "tail_scale": 1.0}))
    write_models(tmp_path / "tail", TINY)
    full, tail = tensors(tmp_path / "full" / "model.gguf"), tensors(tmp_path / "tail" / "model.gguf")
    assert np.array_equal(full["blk.0.ffn_down.weight"], tail["blk.0.ffn_down.weight"])
    assert np.allclose(full["blk.2.ffn_down.weight"] * TINY.tail_scale, tail["blk.2.ffn_down.weight"])
    assert np.array_equal(full["blk.2.ffn_up.weight"], tail["blk.2.ffn_up.weight"])


def test_ensure_keeps_matching_files_and_rewrites_a_damaged_one(tmp_path):
    manifest = ensure_models(tmp_path, TINY)
    model = tmp_path / "model.gguf"
    before = model.stat().st_mtime_ns
    assert ensure_models(tmp_path, TINY) == manifest
    assert model.stat().st_mtime_ns == before
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    assert ensure_models(tmp_path, TINY) == manifest
    assert model.read_bytes()[-1] != data[-1]


def test_a_bad_shape_is_refused_with_every_reason_and_writes_nothing(tmp_path, capsys):
    code = gguf_model.main([str(tmp_path / "out"), "--width", "30", "--heads", "4", "--draft-layers", "8",
                            "--tail-scale", "2"])
    assert code == 2
    assert capsys.readouterr().err == (
        "error: the model's shape is not valid: width (30) must be a multiple of heads (4); heads (4) must be a "
        "multiple of kv_heads (8); draft_layers (8) must be fewer than layers (8); tail_scale must be within [0, 1], "
        "found 2.0\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("field", ["layers", "width", "context"])
def test_a_size_below_one_is_refused(field):
    assert Shape(**{**TINY.__dict__, field: 0}).problems() == [f"{field} must be at least 1, found 0"]
