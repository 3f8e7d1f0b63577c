# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a GGUF file's header (llama.cpp's model format) without loading it, and compare a draft's vocabulary with its
target's.

The layout (GGUF versions 2 and 3, little-endian): the magic ``GGUF``, the version (u32), the tensor count and the
metadata count (u64 each); the metadata, each a key (u64 length + UTF-8 bytes), a value type (u32) and the value;
then each tensor's name, dimension count (u32), dimensions (u64 each), type (u32) and offset (u64) into the data
section, which starts at the next multiple of ``general.alignment`` (32 when absent). The data section must hold every
tensor: a file cut short (a partial download or copy) is found here by its size, never by llama.cpp failing to load.

The vocabulary is fingerprinted (sha256 over the token strings and types, in order) rather than returned: a real
model's list has 100K-250K entries.

Nothing here raises on a bad file: what cannot be read is a problem string in the result. Standard library only,
Python 3.8+ syntax: this file runs on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import struct

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# a header larger than this is not read (a real model's header with a 256K vocabulary is a few MB)
MAX_HEADER_BYTES = 256 * 1024 * 1024
MAX_STRING_BYTES = 16 * 1024 * 1024

# value types: (name, struct format) for the fixed-size ones
_SCALARS = {
    0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"), 4: ("uint32", "<I"),
    5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"), 10: ("uint64", "<Q"), 11: ("int64", "<q"),
    12: ("float64", "<d"),
}
_STRING, _ARRAY = 8, 9

# ggml tensor types: name, elements per block, bytes per block (ggml.c's type traits), for the size check
TENSOR_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    30: ("BF16", 1, 2),
}

# metadata returned as they are (per architecture keys are read as ARCH.<suffix>)
_GENERAL_KEYS = ("general.architecture", "general.name", "general.file_type", "general.alignment",
                 "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                 "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id")
_ARCH_SUFFIXES = ("context_length", "embedding_length", "block_count", "feed_forward_length",
                  "attention.head_count", "attention.head_count_kv")


class _Truncated(Exception):
    pass


class _Malformed(Exception):
    pass


class _Reader:
    def __init__(self, handle):
        self.handle = handle
        self.position = 0

    def take(self, size):
        if self.position + size > MAX_HEADER_BYTES:
            raise _Malformed("the header is larger than %d bytes" % MAX_HEADER_BYTES)
        data = self.handle.read(size)
        if len(data) < size:
            raise _Truncated("the file ends inside its header (at byte %d)" % (self.position + len(data)))
        self.position += size
        return data

    def scalar(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        size = self.scalar("<Q")
        if size > MAX_STRING_BYTES:
            raise _Malformed("a string of %d bytes at byte %d" % (size, self.position - 8))
        return self.take(size).decode("utf-8", "replace")

    def value(self, value_type, digest=None):
        """One value; an array's items are hashed into digest (when given) instead of kept when it is long."""
        if value_type in _SCALARS:
            return self.scalar(_SCALARS[value_type][1])
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            item_type = self.scalar("<I")
            count = self.scalar("<Q")
            if item_type == _ARRAY:
                raise _Malformed("nested arrays are not read")
            items = []
            for _index in range(count):
                item = self.value(item_type)
                if digest is not None:
                    digest.update(repr(item).encode("utf-8"))
                    digest.update(b"\0")
                elif len(items) < 64:
                    items.append(item)
            return {"array_of": _type_name(item_type), "count": count, "head": items}
        raise _Malformed("unknown value type %d at byte %d" % (value_type, self.position - 4))


def _type_name(value_type):
    if value_type in _SCALARS:
        return _SCALARS[value_type][0]
    return {_STRING: "string", _ARRAY: "array"}.get(value_type, "type %d" % value_type)


def read_header(path):
    """What a GGUF file says of itself, and its problems: {"path", "version", "metadata", "architecture", "vocab",
    "tensors", "bytes", "data_bytes_expected", "problems"}. A file that cannot be opened is a problem too."""
    result = {"path": path, "version": None, "metadata": {}, "architecture": None, "vocab": None, "tensors": 0,
              "bytes": None, "data_bytes_expected": None, "problems": []}
    try:
        with open(path, "rb") as handle:
            _read_into(handle, result)
            handle.seek(0, 2)
            result["bytes"] = handle.tell()
    except (IOError, OSError) as error:
        result["problems"].append("cannot read %s: %s" % (path, error.strerror or error))
        return result
    except _Truncated as error:
        result["problems"].append("%s is cut short: %s" % (path, error))
        return result
    except _Malformed as error:
        result["problems"].append("%s is not a GGUF file this reader understands: %s" % (path, error))
        return result
    if result["data_bytes_expected"] is not None and result["bytes"] < result["data_bytes_expected"]:
        result["problems"].append(
            "%s is cut short: its tensors need %s bytes, the file has %s (a partial copy or download?)"
            % (path, result["data_bytes_expected"], result["bytes"]))
    return result


def _read_into(handle, result):
    reader = _Reader(handle)
    magic = handle.read(4)
    reader.position = len(magic)
    if magic != MAGIC:
        raise _Malformed("expected the magic %r at its start, found %r" % (MAGIC, magic))
    result["version"] = version = reader.scalar("<I")
    if version not in (2, 3):
        raise _Malformed("GGUF version %d (versions 2 and 3 are read)" % version)
    tensor_count = reader.scalar("<Q")
    metadata_count = reader.scalar("<Q")
    vocab_digest = hashlib.sha256()
    types_digest = hashlib.sha256()
    raw = {}
    for _index in range(metadata_count):
        key = reader.string()
        value_type = reader.scalar("<I")
        digest = {"tokenizer.ggml.tokens": vocab_digest, "tokenizer.ggml.token_type": types_digest}.get(key)
        raw[key] = reader.value(value_type, digest)
    architecture = raw.get("general.architecture")
    result["architecture"] = architecture if isinstance(architecture, str) else None
    metadata = dict((key, raw[key]) for key in _GENERAL_KEYS if key in raw)
    for suffix in _ARCH_SUFFIXES:
        key = "%s.%s" % (result["architecture"], suffix)
        if key in raw:
            metadata[key] = raw[key]
    result["metadata"] = metadata
    tokens = raw.get("tokenizer.ggml.tokens")
    if isinstance(tokens, dict):
        result["vocab"] = {"size": tokens["count"], "model": raw.get("tokenizer.ggml.model"),
                           "tokens_sha256": vocab_digest.hexdigest(),
                           "types_sha256": types_digest.hexdigest() if "tokenizer.ggml.token_type" in raw else None,
                           "bos": raw.get("tokenizer.ggml.bos_token_id"),
                           "eos": raw.get("tokenizer.ggml.eos_token_id")}
    alignment = raw.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise _Malformed("general.alignment must be a power of two, found %r" % (alignment,))
    data_end = 0
    unknown_types = set()
    for _index in range(tensor_count):
        name = reader.string()
        dims = [reader.scalar("<Q") for _dim in range(reader.scalar("<I"))]
        tensor_type = reader.scalar("<I")
        offset = reader.scalar("<Q")
        if tensor_type not in TENSOR_TYPES:
            unknown_types.add(tensor_type)
            continue
        block, block_bytes = TENSOR_TYPES[tensor_type][1:]
        elements = 1
        for dim in dims:
            elements *= dim
        if elements % block:
            raise _Malformed("tensor %s has %d elements, not a whole number of %d-element blocks"
                             % (name, elements, block))
        data_end = max(data_end, offset + elements // block * block_bytes)
    result["tensors"] = tensor_count
    data_start = (reader.position + alignment - 1) // alignment * alignment
    if unknown_types:
        result["problems"].append("tensor types %s are not known to this reader: the file's size was not checked"
                                  % sorted(unknown_types))
    else:
        result["data_bytes_expected"] = data_start + data_end
    if not tensor_count:
        result["problems"].append("%s holds no tensors" % result["path"])


def draft_problems(target, draft):
    """Why draft cannot serve as target's draft model (llama.cpp refuses a draft whose vocabulary differs): a list of
    sentences, empty when they match. Both are read_header results."""
    problems = []
    if target["vocab"] is None or draft["vocab"] is None:
        missing = [item["path"] for item in (target, draft) if item["vocab"] is None]
        return ["no vocabulary (tokenizer.ggml.tokens) in %s" % ", ".join(missing)]
    for field, what in (("model", "tokenizer model"), ("size", "vocabulary size"), ("bos", "BOS token id"),
                        ("eos", "EOS token id"), ("tokens_sha256", "token list (sha256)"),
                        ("types_sha256", "token types (sha256)")):
        if target["vocab"][field] != draft["vocab"][field]:
            problems.append("the draft's %s is %s, the target's %s"
                            % (what, draft["vocab"][field], target["vocab"][field]))
    return problems
