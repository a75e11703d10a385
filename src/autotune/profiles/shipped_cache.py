"""A derived cache of the parsed shipped YAML.

Plain data in JSON, so a cold start neither parses YAML nor imports PyYAML.

``autotune plan`` reads ~50 catalog files (``profiles/gpus``, ``profiles/models``), the op counts and the shipped
calibration on every start. Parsing them, even with PyYAML's C loader, costs about 20 ms and importing PyYAML as
much again; ``json.loads`` of the same data takes a few. The first run parses the YAML and writes what it parsed
as JSON to :func:`cache_dir`; later runs read it back when the source files are unchanged. The cache holds data
only (mappings, lists, strings, numbers, booleans, null): nothing in it is code or a pickled object, and pydantic
still validates every entry after it is read.

- Key: the SHA-256 of every source file's name and text (:func:`source_digest`), stored in the cache file; any
  change to a shipped file (an upgrade, an edit in a source checkout) gives another digest and a rebuild.
- Written only when JSON holds the parsed data exactly (``json.loads(json.dumps(data)) == data``: a YAML date,
  a non-string key or a NaN would not survive, so such data is never cached), with
  :func:`autotune.fileio.write_atomic` (a reader sees the old file or the new one, never half of one).
- A cache file that is unreadable, not JSON, of another format or for other sources is ignored and rebuilt;
  a cache directory that cannot be created or written is skipped (the catalog is parsed as before).

Where it lives, first match wins: ``$AUTOTUNE_CACHE_DIR`` (tests point it at a temporary directory);
``$XDG_CACHE_HOME/autotune`` when that is an absolute path (XDG Base Directory Specification);
``~/.cache/autotune``. Deleting the directory is always safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.fileio import write_atomic
from autotune.profiles.user_config import user_dir

CACHE_DIR_ENV = "AUTOTUNE_CACHE_DIR"
CACHE_FORMAT = 1
"""Version of the cache file's layout; a file of another format is ignored and rebuilt."""
MAX_CACHE_BYTES = 16 * 1024 * 1024
"""A larger cache file is ignored unread (the shipped catalog's is about 100 KB)."""


def cache_dir() -> Path:
    """The user cache directory (see the module docstring); it need not exist."""
    return user_dir(CACHE_DIR_ENV, "XDG_CACHE_HOME", ".cache")


def source_digest(sources: Sequence[tuple[str, str]]) -> str:
    """SHA-256 (hex) of ``(name, text)`` pairs in order: the cache key of the data parsed from them."""
    digest = hashlib.sha256()
    for name, text in sources:
        for part in (name, text):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


def parsed_sources(kind: str, sources: Sequence[tuple[str, str]], parse: Callable[[str, str], Any]) -> list[Any]:
    """``[parse(name, text) for name, text in sources]``, cached per ``kind``.

    Read from the cache file of ``kind`` when it was written for exactly these sources, else parsed and cached.

    Args:
        kind: the cache file's name (``catalog-<kind>.json``), e.g. ``"gpus"``.
        sources: ``(file name, text)`` of every source file, in a fixed order.
        parse: turns one file's text into plain data (mappings, lists, strings, numbers, booleans, None).

    Raises:
        Whatever ``parse`` raises (nothing is cached then).
    """
    try:
        path = cache_dir() / f"catalog-{kind}.json"
    except RuntimeError:  # no home directory to be found (HOME unset, no passwd entry): no cache
        return [parse(name, text) for name, text in sources]
    digest = source_digest(sources)
    cached = _read(path, digest, len(sources))
    if cached is not None:
        return cached
    parsed = [parse(name, text) for name, text in sources]
    _write(path, digest, parsed)
    return parsed


def load_shipped_yaml(kind: str, name: str, text: str) -> Any:
    """The YAML data of one shipped file (``yamlio.safe_load(text, shipped=True)``), through the cache of ``kind``.

    Raises:
        yaml.YAMLError: the text is not valid YAML (nothing is cached).
    """
    return parsed_sources(kind, [(name, text)], _parse_shipped)[0]


def _parse_shipped(name: str, text: str) -> Any:
    from autotune import yamlio  # PyYAML is imported only when something must be parsed

    return yamlio.safe_load(text, shipped=True)


def _read(path: Path, digest: str, count: int) -> list[Any] | None:
    """The cached data when ``path`` is a cache file of this format for ``digest`` with ``count`` entries."""
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return None
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    data = document.get("data")
    if document.get("format") != CACHE_FORMAT or document.get("sources_sha256") != digest:
        return None
    if not isinstance(data, list) or len(data) != count:
        return None
    return data


def _write(path: Path, digest: str, parsed: list[Any]) -> None:
    """Cache ``parsed`` under ``digest`` when JSON holds it exactly; any failure leaves the cache alone."""
    try:
        text = json.dumps({"format": CACHE_FORMAT, "sources_sha256": digest, "data": parsed}, allow_nan=False)
    except (TypeError, ValueError):  # a date, bytes, a NaN ...: not plain JSON data
        return
    if json.loads(text)["data"] != parsed:  # e.g. an integer key would come back as a string
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, overwrite=True, what="catalog cache")
    except (OSError, AutotuneError):  # read-only home, full disk ...: the cache is only an optimisation
        return
