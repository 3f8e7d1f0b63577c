"""The lab's model: a small llama-architecture GGUF with random weights, and a draft that is partly the target.

Written with the `gguf` package (llama.cpp's own writer). Every byte follows from the shape and the seed, so two
machines write the same files and the manifest's sha256 says so. The tokenizer is llama.cpp's `llama` (SentencePiece)
model with three control tokens and the 256 byte tokens: any text tokenizes (one token a byte), which is why prompts
are sized with the server's own `/tokenize`, never in words.

The draft shares the target's vocabulary, embeddings, output head and its first `draft_layers` blocks, so its guesses
are the target's partial computation: the target's later blocks, scaled by `tail_scale`, move the target's choice away
from the draft's some of the time. Speculative decoding then accepts some drafts and rejects others, for real; how
many is what the server's counters say, never a figure set here.

    python -m inferlab.lab.gguf_model OUT_DIR [--seed N] [--layers N] [--width N] [--context N] ...

writes OUT_DIR/model.gguf, OUT_DIR/draft.gguf and OUT_DIR/manifest.json, and prints the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

MODEL_FILE = "model.gguf"
DRAFT_FILE = "draft.gguf"
MANIFEST_FILE = "manifest.json"

# The tokenizer: <unk>, <s>, </s>, then one token per byte.
CONTROL_TOKENS = ("<unk>", "<s>", "</s>")
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
VOCAB_SIZE = len(CONTROL_TOKENS) + 256


@dataclass(frozen=True)
class Shape:
    """What the model looks like; every default is the lab's."""

    layers: int = 8
    width: int = 512
    heads: int = 8
    kv_heads: int = 8
    ffn: int = 1536
    context: int = 8192
    draft_layers: int = 2
    tail_scale: float = 0.35
    seed: int = 1

    def problems(self) -> list[str]:
        found = []
        for name in ("layers", "width", "heads", "kv_heads", "ffn", "context", "draft_layers"):
            if getattr(self, name) < 1:
                found.append(f"{name} must be at least 1, found {getattr(self, name)}")
        if found:
            return found
        if self.width % self.heads:
            found.append(f"width ({self.width}) must be a multiple of heads ({self.heads})")
        elif (self.width // self.heads) % 2:
            found.append(f"width / heads ({self.width // self.heads}) must be even (rotary embedding)")
        if self.heads % self.kv_heads:
            found.append(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.draft_layers >= self.layers:
            found.append(f"draft_layers ({self.draft_layers}) must be fewer than layers ({self.layers})")
        if not 0 <= self.tail_scale <= 1:
            found.append(f"tail_scale must be within [0, 1], found {self.tail_scale}")
        return found


def _tensors(shape: Shape):
    """The target's tensors, in file order: (name, float32 array). numpy is imported here, not at module load."""
    import numpy as np

    rng = np.random.default_rng(shape.seed)
    head_dim = shape.width // shape.heads
    kv_width = head_dim * shape.kv_heads

    def weight(rows: int, cols: int, scale: float = 1.0):
        # numpy's (rows, cols) is GGUF's ne = [cols, rows]: a matrix mapping cols inputs to rows outputs
        return (rng.standard_normal((rows, cols), dtype=np.float32) * (scale / np.sqrt(cols))).astype(np.float32)

    def norm():
        return np.ones(shape.width, dtype=np.float32)

    yield "token_embd.weight", rng.standard_normal((VOCAB_SIZE, shape.width), dtype=np.float32)
    for block in range(shape.layers):
        tail = shape.tail_scale if block >= shape.draft_layers else 1.0
        yield f"blk.{block}.attn_norm.weight", norm()
        yield f"blk.{block}.attn_q.weight", weight(shape.width, shape.width)
        yield f"blk.{block}.attn_k.weight", weight(kv_width, shape.width)
        yield f"blk.{block}.attn_v.weight", weight(kv_width, shape.width)
        yield f"blk.{block}.attn_output.weight", weight(shape.width, shape.width, tail)
        yield f"blk.{block}.ffn_norm.weight", norm()
        yield f"blk.{block}.ffn_gate.weight", weight(shape.ffn, shape.width)
        yield f"blk.{block}.ffn_up.weight", weight(shape.ffn, shape.width)
        yield f"blk.{block}.ffn_down.weight", weight(shape.width, shape.ffn, tail)
    yield "output_norm.weight", norm()
    yield "output.weight", weight(VOCAB_SIZE, shape.width, 4.0)


def _write(path: Path, shape: Shape, layers: int, name: str) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.width // shape.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    tokens = [t.encode() for t in CONTROL_TOKENS] + [f"<0x{b:02X}>".encode() for b in range(256)]
    kinds = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * VOCAB_SIZE)
    writer.add_token_types(kinds)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(True)
    for tensor_name, array in _tensors(shape):
        if tensor_name.startswith("blk."):
            if int(tensor_name.split(".")[1]) >= layers:
                continue
        writer.add_tensor(tensor_name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_models(out_dir: Path, shape: Shape) -> dict:
    """Write the target, the draft and the manifest into out_dir (replacing them); return the manifest."""
    problems = shape.problems()
    if problems:
        raise ValueError("the model's shape is not valid: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for file_name, layers, name in (
        (MODEL_FILE, shape.layers, "inferlab-lab-target"),
        (DRAFT_FILE, shape.draft_layers, "inferlab-lab-draft"),
    ):
        partial = out_dir / (file_name + ".partial")
        _write(partial, shape, layers, name)
        os.replace(partial, out_dir / file_name)
        files[file_name] = {
            "name": name,
            "layers": layers,
            "bytes": (out_dir / file_name).stat().st_size,
            "sha256": _sha256(out_dir / file_name),
        }
    manifest = {"architecture": "llama", "vocab_size": VOCAB_SIZE, "shape": asdict(shape), "files": files}
    partial = out_dir / (MANIFEST_FILE + ".partial")
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(partial, out_dir / MANIFEST_FILE)
    return manifest


def ensure_models(out_dir: Path, shape: Shape) -> dict:
    """The manifest of out_dir's models, written first unless a manifest of this shape is there and every file matches
    it (size, then sha256)."""
    try:
        manifest = json.loads((out_dir / MANIFEST_FILE).read_text())
        if manifest.get("shape") == asdict(shape) and all(
            (out_dir / name).stat().st_size == entry["bytes"] and _sha256(out_dir / name) == entry["sha256"]
            for name, entry in manifest["files"].items()
        ):
            return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return write_models(out_dir, shape)


def main(argv: list[str] | None = None) -> int:
    defaults = Shape()
    parser = argparse.ArgumentParser(prog="python -m inferlab.lab.gguf_model", description=__doc__.split("\n", 1)[0])
    parser.add_argument("out_dir", type=Path)
    for field, value in asdict(defaults).items():
        parser.add_argument("--" + field.replace("_", "-"), type=type(value), default=value)
    parser.add_argument("--force", action="store_true", help="write even when a matching manifest is there")
    args = parser.parse_args(argv)
    shape = Shape(**{field: getattr(args, field) for field in asdict(defaults)})
    try:
        manifest = (write_models if args.force else ensure_models)(args.out_dir, shape)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(manifest, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
