"""Read the header of a ``.gguf`` file: metadata and tensor names (``struct`` only, tensor data never read).

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
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from autotune.errors import ConfigError

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
