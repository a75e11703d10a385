"""A Hugging Face hub cache laid out as huggingface_hub does, for tests of launches of hub model ids."""

from __future__ import annotations

from pathlib import Path

CACHED_MODELS = ("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.2-1B")
"""The hub ids the tests' plans load (launcher fixtures; the catalog's llama3.2-1b), cached for every test."""


def add_cached_model(cache: Path, repo_id: str, revision: str = "0123abcd") -> Path:
    """Lay out ``repo_id`` in a hub cache (``models--ORG--NAME/snapshots/REV`` with ``refs/main``), with an
    empty weights file and a tokenizer file; returns the snapshot directory."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    (snapshot / "model.safetensors").write_bytes(b"")
    (snapshot / "tokenizer.json").write_text("{}")
    return snapshot
