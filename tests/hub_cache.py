"""A Hugging Face hub cache laid out as huggingface_hub does, for tests of launches of hub model ids."""

from __future__ import annotations

from pathlib import Path

CACHED_MODELS = ("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.2-1B")
"""The hub ids the tests' plans load (launcher fixtures; the catalog's llama3.2-1b), cached for every test."""

CACHED_DATASETS = ("org/data", "d")
"""The hub dataset names the launcher tests launch with, prepared in the tests' ``datasets`` cache."""


def add_cached_dataset(cache: Path, repo_id: str) -> Path:
    """Lay out ``repo_id`` as ``datasets.load_dataset`` leaves a prepared hub dataset.

    ``ORG___name/CONFIG/VERSION/HASH``: the directory ``datasets.load.CachedDatasetModuleFactory`` looks for
    offline; returns that directory."""
    prepared = cache / "___".join(repo_id.split("/")) / "default" / "0.0.0" / "0123abcd"
    prepared.mkdir(parents=True)
    return prepared


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
