"""Model files a test writes: a config.json the catalog does not have, and a tiny complete .gguf."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LLAMA_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "llama3.2-1b" / "config.json"
"""The Llama 3.2 1B config.json fixture (16 layers)."""

GGUF_LAYERS = 2
"""Decoder layers of :func:`tiny_gguf`'s model."""


def config_with_layers(folder: Path, layers: int) -> Path:
    """``folder`` (created) holding the fixture's config.json with ``layers`` layers: shapes no catalog entry has."""
    folder.mkdir(parents=True)
    config: dict[str, Any] = json.loads(LLAMA_CONFIG.read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}), encoding="utf-8")
    return folder


def tiny_gguf(path: Path) -> Path:
    """A complete :data:`GGUF_LAYERS`-layer Llama .gguf at ``path``, written with gguf-py (the GGUF reader's tests)."""
    from tests.unit.profiles.test_gguf_reader import LAYERS, decoder_tensors, llama_hparams, write_gguf

    assert LAYERS == GGUF_LAYERS
    return write_gguf(path, "llama", llama_hparams(), decoder_tensors())
