"""Build a :class:`~autotune.schemas.ModelSpec` from the header of a ``.gguf`` file (``struct`` only).

Format: the GGUF specification (ggml repository, ``docs/gguf.md``), versions 2 and 3, which share
one layout (version 1 had 32-bit counts and string lengths and is rejected)::

    header      magic b"GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count
    kv pair     string key, u32 value_type, value
    string      u64 byte length, UTF-8 bytes (no terminator)
    array       u32 element_type, u64 count, count elements (arrays may nest)
    tensor info string name, u32 n_dims, n_dims × u64 dims, u32 ggml_type, u64 offset
    value types 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array,
                10 u64, 11 i64, 12 f64

Numbers are little-endian, or big-endian in files written for big-endian hosts, which gguf-py's
``GGUFReader`` recognises by a version whose low 16 bits read as zero; we do the same. Only the
metadata and the tensor-info list are read, incrementally from the file handle: tensor data is
never touched, and ``tokenizer.*`` arrays (the vocabulary can hold 150k strings) are skipped,
keeping only their length.

Mapping (key names as written by llama.cpp's ``convert_hf_to_gguf.py``): ``<arch>.embedding_length``
→ hidden_size, ``feed_forward_length`` → intermediate_size, ``block_count`` → num_hidden_layers,
``attention.head_count`` / ``head_count_kv`` → heads / KV heads, ``attention.key_length`` →
head_dim, ``context_length`` → max_position_embeddings, ``vocab_size`` (else the length of
``tokenizer.ggml.tokens``) → vocab_size. Absent optional keys take llama.cpp's defaults
(``llama-model.cpp``: n_head_kv = n_head, head_dim = n_embd / n_head), which differ from some
transformers config-class defaults. Tied embeddings = no ``output.weight`` tensor (the rule of
transformers' ``load_gguf_checkpoint``); biases come from the tensor names (``blk.0.attn_q.bias``).
The module layout of each family is then that of :mod:`autotune.profiles.hf_config`: the metadata
is translated into config.json keys and handed to the same family functions.

Architectures: llama (Mixtral when ``llama.expert_count`` > 1, as llama.cpp writes it), mistral,
qwen2, gemma, gemma2, phi3. Any other ``general.architecture`` with the required keys is counted
as a Llama-style block whose gated/fused/bias/LayerNorm layout is read from the tensor names,
with notes in ``ModelSpec.approximations``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from pydantic import ValidationError

from autotune.errors import ConfigError
from autotune.profiles.hf_config import _FAMILIES, _Config, _generic
from autotune.schemas.model import ModelSpec
from autotune.validation import format_validation_error

GGUF_MAGIC: Final[bytes] = b"GGUF"
SUPPORTED_VERSIONS: Final[tuple[int, ...]] = (2, 3)

_STRING: Final[int] = 8
_ARRAY: Final[int] = 9
_SCALAR_FORMATS: Final[dict[int, str]] = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
"""struct format of each fixed-size value type (u8 i8 u16 i16 u32 i32 f32 bool u64 i64 f64)."""
_MAX_KEPT_ARRAY_LENGTH: Final[int] = 4096
"""Arrays longer than this (or under ``tokenizer.``) are skipped; per-layer values are far shorter."""
_MAX_ARRAY_DEPTH: Final[int] = 8
_CHUNK_BYTES: Final[int] = 1 << 20

GGUF_ARCH_TO_MODEL_TYPE: Final[dict[str, str]] = {
    arch: arch for arch in ("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3")
}
"""``general.architecture`` → config.json ``model_type`` of the exact families."""


@dataclass(frozen=True)
class GgufArray:
    """An array value: element type code, length, and the elements when they were kept.

    ``values`` is None for arrays that were skipped (``tokenizer.*``, longer than
    :data:`_MAX_KEPT_ARRAY_LENGTH`, or arrays of arrays).
    """

    element_type: int
    length: int
    values: tuple[Any, ...] | None


@dataclass(frozen=True)
class GgufHeader:
    """What precedes the tensor data of a GGUF file: version, metadata and tensor names (in order)."""

    version: int
    metadata: dict[str, Any]
    tensor_names: tuple[str, ...]


class _TruncatedError(Exception):
    """The file ended before the header did."""


class _FormatError(Exception):
    """A structural problem inside the header (message without the path)."""


class _Stream:
    """Little reader over a binary file: buffered reads, relative skips, end-of-file checks."""

    def __init__(self, handle: IO[bytes], size_bytes: int, endian: str) -> None:
        self._handle = handle
        self._remaining = size_bytes  # bytes of the file not yet consumed
        self._buf = b""
        self._off = 0
        self.endian = endian

    def read(self, n: int) -> bytes:
        if n > self._remaining:
            raise _TruncatedError
        end = self._off + n
        if end > len(self._buf):
            self._buf = self._buf[self._off :] + self._handle.read(max(n, _CHUNK_BYTES))
            self._off, end = 0, n
        data = self._buf[self._off : end]
        self._off = end
        self._remaining -= n
        return data

    def skip(self, n: int) -> None:
        if n > self._remaining:
            raise _TruncatedError
        buffered = len(self._buf) - self._off
        if n <= buffered:
            self._off += n
        else:
            self._handle.seek(n - buffered, os.SEEK_CUR)
            self._buf, self._off = b"", 0
        self._remaining -= n

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(self.endian + fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.read(self.unpack("Q")).decode("utf-8")

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` strings; the common case (inside the buffer) avoids method calls."""
        length = struct.Struct(self.endian + "Q")
        for _ in range(count):
            buf, off = self._buf, self._off
            if off + 8 <= len(buf):
                end = off + 8 + length.unpack_from(buf, off)[0]
                if end <= len(buf) and end - off <= self._remaining:
                    self._off = end
                    self._remaining -= end - off
                    continue
            self.skip(length.unpack(self.read(8))[0])


def _read_value(stream: _Stream, value_type: int, key: str, depth: int = 0) -> Any:
    if value_type in _SCALAR_FORMATS:
        return stream.unpack(_SCALAR_FORMATS[value_type])
    if value_type == _STRING:
        return stream.string()
    if value_type != _ARRAY:
        raise _FormatError(f"key {key!r} has unknown value type {value_type}")
    if depth >= _MAX_ARRAY_DEPTH:
        raise _FormatError(f"key {key!r} nests arrays deeper than {_MAX_ARRAY_DEPTH} levels")
    element_type = stream.unpack("I")
    length = stream.unpack("Q")
    keep = element_type != _ARRAY and length <= _MAX_KEPT_ARRAY_LENGTH and not key.startswith("tokenizer.")
    if keep:
        values = tuple(_read_value(stream, element_type, key, depth + 1) for _ in range(length))
        return GgufArray(element_type, length, values)
    if element_type in _SCALAR_FORMATS:
        stream.skip(length * struct.calcsize(_SCALAR_FORMATS[element_type]))
    elif element_type == _STRING:
        stream.skip_strings(length)
    else:
        for _ in range(length):
            _read_value(stream, element_type, key, depth + 1)  # nested arrays: read to skip
    return GgufArray(element_type, length, None)


def _read_header(stream: _Stream) -> GgufHeader:
    version = stream.unpack("I")
    if version & 0xFFFF == 0:  # gguf-py's test: a big-endian file read as little-endian
        stream.endian = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise _FormatError(f"unsupported GGUF version {version} (supported: {supported})")
    tensor_count = stream.unpack("Q")
    kv_count = stream.unpack("Q")
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = stream.string()
        metadata[key] = _read_value(stream, stream.unpack("I"), key)
    names = []
    for _ in range(tensor_count):
        names.append(stream.string())
        stream.skip(8 * stream.unpack("I") + 4 + 8)  # dims, ggml type, data offset
    return GgufHeader(version=version, metadata=metadata, tensor_names=tuple(names))


def read_gguf_header(path: str | Path) -> GgufHeader:
    """Read the metadata and tensor names of a GGUF file (never its tensor data).

    Reads incrementally: cost is proportional to the header (a few MB for a large vocabulary),
    not to the file size.

    Raises:
        ConfigError: missing file, a directory, unreadable file, bad magic (not a GGUF file),
            unsupported version, truncated header, invalid UTF-8 or unknown value types. One line
            naming the file.
    """
    given = Path(path).expanduser()
    if not given.exists():
        raise ConfigError(f"{given}: no such file (expected a .gguf file)")
    if not given.is_file():
        raise ConfigError(f"{given.resolve()}: not a file (expected a .gguf file)")
    gguf_path = given.resolve()
    try:
        with gguf_path.open("rb") as handle:
            size_bytes = os.fstat(handle.fileno()).st_size
            stream = _Stream(handle, size_bytes, "<")
            magic = stream.read(min(len(GGUF_MAGIC), size_bytes))
            if magic != GGUF_MAGIC:
                raise ConfigError(f"{gguf_path}: not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
            return _read_header(stream)
    except OSError as exc:
        raise ConfigError(f"{gguf_path}: cannot read file ({exc})") from exc
    except (_TruncatedError, struct.error):  # struct.error: the file shrank while being read
        raise ConfigError(f"{gguf_path}: truncated GGUF file (ends inside the header)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{gguf_path}: invalid UTF-8 in a GGUF string ({exc.reason})") from None
    except _FormatError as exc:
        raise ConfigError(f"{gguf_path}: {exc}") from None


# --- metadata → ModelSpec -------------------------------------------------------------------------

_QKV_BIASES: Final[frozenset[str]] = frozenset({"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias"})
_MLP_BIASES: Final[frozenset[str]] = frozenset(
    f"ffn_{proj}{exps}.bias" for proj in ("gate", "up", "down") for exps in ("", "_exps")
)
_GENERIC_TOP_COUNTED: Final[frozenset[str]] = frozenset(
    {"token_embd.weight", "output.weight", "output_norm.weight", "output_norm.bias"}
)
_GENERIC_BLOCK_COUNTED: Final[frozenset[str]] = frozenset(
    {f"{module}.{kind}" for kind in ("weight", "bias") for module in ("attn_norm", "ffn_norm")}
    | {f"attn_{proj}.{kind}" for kind in ("weight", "bias") for proj in ("q", "k", "v", "qkv", "output")}
    | {
        f"ffn_{proj}{exps}.{kind}"
        for kind in ("weight", "bias")
        for proj in ("gate", "up", "down")
        for exps in ("", "_exps")
    }
    | {"ffn_gate_inp.weight"}
)
"""Tensor names (outside blocks / inside blocks without ``blk.N.``) the generic Llama-style count covers."""


class _Metadata:
    """Typed access to ``<arch>.*`` keys of one GGUF header; every problem is a one-line ConfigError."""

    def __init__(self, header: GgufHeader, path: Path, arch: str) -> None:
        self.header = header
        self.path = path
        self.arch = arch
        self.block_tensors = frozenset(
            name.split(".", 2)[2] for name in header.tensor_names if name.startswith("blk.") and name.count(".") >= 2
        )

    def error(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: {problem}")

    def _int(self, key: str) -> int | None:
        value = self.header.metadata.get(key)
        if value is None:
            return None
        if isinstance(value, GgufArray) and value.values:  # per-layer values (one per block)
            if len(set(value.values)) != 1:
                raise self.error(f"key {key!r} varies across layers ({list(value.values)}): not supported")
            value = value.values[0]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"key {key!r} must be an integer, got {value!r}")
        if value <= 0:
            raise self.error(f"key {key!r} must be positive, got {value}")
        return value

    def req_int(self, name: str) -> int:
        value = self._int(f"{self.arch}.{name}")
        if value is None:
            raise self.error(f"missing required key '{self.arch}.{name}'")
        return value

    def opt_int(self, name: str) -> int | None:
        return self._int(f"{self.arch}.{name}")

    def opt_float(self, name: str) -> float | None:
        key = f"{self.arch}.{name}"
        value = self.header.metadata.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"key {key!r} must be a number, got {value!r}")
        return float(value)

    def vocab_size(self) -> int:
        value = self.opt_int("vocab_size")
        if value is not None:
            return value
        tokens = self.header.metadata.get("tokenizer.ggml.tokens")
        if isinstance(tokens, GgufArray) and tokens.length > 0:
            return tokens.length
        raise self.error(f"missing '{self.arch}.vocab_size' and 'tokenizer.ggml.tokens' (vocabulary size)")

    def has_block_tensor(self, names: frozenset[str] | set[str]) -> bool:
        return not self.block_tensors.isdisjoint(names)


def _config_keys(meta: _Metadata) -> dict[str, Any]:
    """config.json-style keys (hf_config's vocabulary) from the GGUF metadata and tensor names."""
    hidden = meta.req_int("embedding_length")
    heads = meta.req_int("attention.head_count")
    raw: dict[str, Any] = {
        "hidden_size": hidden,
        "intermediate_size": meta.req_int("feed_forward_length"),
        "num_hidden_layers": meta.req_int("block_count"),
        "num_attention_heads": heads,
        # llama.cpp defaults (llama-model.cpp), not the transformers config-class ones:
        "num_key_value_heads": meta.opt_int("attention.head_count_kv") or heads,
        "head_dim": meta.opt_int("attention.key_length") or hidden // heads,
        "vocab_size": meta.vocab_size(),
        "tie_word_embeddings": "output.weight" not in meta.header.tensor_names,
        "attention_bias": meta.has_block_tensor(_QKV_BIASES | {"attn_output.bias"}),
        "mlp_bias": meta.has_block_tensor(_MLP_BIASES),
    }
    context = meta.opt_int("context_length")
    if context is not None:
        raw["max_position_embeddings"] = context
    softcap = meta.opt_float("final_logit_softcapping")
    if softcap is not None:
        raw["final_logit_softcapping"] = softcap
    experts = meta.opt_int("expert_count")
    if experts is not None and experts > 1:
        raw["num_local_experts"] = experts
        raw["num_experts_per_tok"] = meta.opt_int("expert_used_count") or 1
    return raw


def _generic_fields(meta: _Metadata, cfg: _Config) -> dict[str, Any]:
    """Llama-style count (hf_config's generic family) with the layout read from the tensor names."""
    blocks = meta.block_tensors
    fields = _generic(cfg) | {
        "mlp_gated": bool(blocks & {"ffn_gate.weight", "ffn_gate_exps.weight"}),
        "fused_qkv": "attn_qkv.weight" in blocks,
        "attention_bias": meta.has_block_tensor(_QKV_BIASES),
        "o_proj_bias": "attn_output.bias" in blocks,
        "norm_has_bias": "attn_norm.bias" in blocks,
    }
    notes = [
        f"GGUF architecture {meta.arch!r} is not a known family: counted as a Llama-style block "
        "(2 norms per block; gated MLP, fused qkv, biases and LayerNorm biases read from the tensor names)",
        f"decoder_layer_class {fields['decoder_layer_class']} guessed from general.architecture",
    ]
    if cfg.has("num_local_experts"):
        fields["num_experts"] = cfg.raw["num_local_experts"]
        fields["num_experts_per_token"] = cfg.raw["num_experts_per_tok"]
        fields["intermediate_size"] = meta.opt_int("expert_feed_forward_length") or fields["intermediate_size"]
        notes.append("MoE: all experts held in memory; each token assumed to use expert_used_count experts")
    top = sorted(n for n in meta.header.tensor_names if not n.startswith("blk.") and n not in _GENERIC_TOP_COUNTED)
    uncounted = top + sorted(f"blk.N.{n}" for n in meta.block_tensors - _GENERIC_BLOCK_COUNTED)
    if uncounted:
        notes.append(f"tensors not counted: {', '.join(uncounted)}")
    if not cfg.has("max_position_embeddings"):
        notes.append(f"no '{meta.arch}.context_length' in file; assumed {fields['max_position_embeddings']}")
    return fields | {"approximations": notes}


def _model_type(arch: str, cfg: _Config) -> str | None:
    """config.json model_type of an exact family (Mixtral is llama with experts in llama.cpp)."""
    if arch == "llama" and cfg.has("num_local_experts"):
        return "mixtral"
    return GGUF_ARCH_TO_MODEL_TYPE.get(arch)


def model_spec_from_gguf(path: str | Path) -> ModelSpec:
    """Read the architecture of a ``.gguf`` file into a :class:`ModelSpec` (header only, no numpy/torch).

    ``key`` is the file stem, ``source`` the absolute path, ``hf_repo_id`` None, ``params_published``
    the file's ``general.size_label`` and ``notes`` its ``general.name``. Key mapping, defaults and
    families are described in the module docstring.

    Raises:
        ConfigError: everything :func:`read_gguf_header` raises, plus a missing
            ``general.architecture`` or required ``<arch>.*`` key, a non-integer/non-positive size,
            per-layer values that differ between layers, or shapes that do not form a valid model.
            One line naming the file.
    """
    header = read_gguf_header(path)
    gguf_path = Path(path).expanduser().resolve()
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ConfigError(f"{gguf_path}: missing or empty 'general.architecture'")
    meta = _Metadata(header, gguf_path, arch)
    raw = _config_keys(meta)
    cfg = _Config(raw, gguf_path)
    model_type = _model_type(arch, cfg)
    cfg.raw["model_type"] = model_type or arch
    if model_type is None:
        model_type, fields = arch, _generic_fields(meta, cfg)
    else:
        fields = _FAMILIES[model_type](cfg)
        if not cfg.has("max_position_embeddings"):
            note = f"no '{arch}.context_length' in file; assumed {fields['max_position_embeddings']}"
            fields["approximations"] = [*fields.get("approximations", []), note]
    size_label = header.metadata.get("general.size_label")
    name = header.metadata.get("general.name")
    try:
        return ModelSpec(
            key=gguf_path.stem,
            hf_repo_id=None,
            model_type=model_type,
            source=str(gguf_path),
            params_published=size_label if isinstance(size_label, str) else None,
            notes=name if isinstance(name, str) else "",
            **fields,
        )
    except ValidationError as exc:
        raise ConfigError(f"{gguf_path}: not a valid model ({format_validation_error(exc, ModelSpec)})") from exc
