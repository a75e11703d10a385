"""Load and look up the GPU and model catalogs shipped as YAML in ``autotune/profiles``.

One YAML file per entry (``gpus/<key>.yaml`` validated by :class:`GpuSpec`, ``models/<key>.yaml``
validated by :class:`ModelSpec`); the file name is the key. Files are read once with
``yaml.safe_load`` through :mod:`importlib.resources` (so they work from a wheel) and cached per process;
the parsed files are also kept in a data-only JSON cache between runs (:mod:`autotune.profiles.shipped_cache`).

Name lookup is forgiving about spelling: case, spaces, underscores and hyphens are ignored
(``'RTX 4090'``, ``'rtx_4090'`` and ``'rtx4090'`` all match ``rtx-4090``). GPUs also match their
``aliases`` and, failing that, the name with a vendor word in front removed (``'NVIDIA A10G'``,
``'Tesla T4'``). Models also match their Hugging Face repo id (with or without the organisation),
the extra names in :data:`MODEL_ALIASES`, and, failing that, the name without an ``-instruct`` /
``-it`` / ``-chat`` / ``-hf`` suffix: fine-tuned variants share the base model's shapes.

A packaging problem (a file whose ``key`` differs from its file name, a file that fails validation,
two entries claiming the same name) raises :class:`ValueError` naming the file; a name the user typed
that is not in the catalog raises :class:`autotune.errors.UnknownNameError` with close names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from autotune.errors import UnknownNameError
from autotune.profiles.shipped_cache import parsed_sources
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.validation import format_validation_error

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

SpecT = TypeVar("SpecT", GpuSpec, ModelSpec)

PROFILE_SUFFIX = ".yaml"

FAMILY_REPRESENTATIVES = {
    "llama": "llama3-8b",
    "mistral": "mistral-7b",
    "qwen2": "qwen2.5-7b",
    "gemma": "gemma-7b",
    "gemma2": "gemma2-9b",
    "phi3": "phi3-mini",
}
"""One catalog model per catalog family (every ``model_type`` in profiles/models): the family's common
fine-tuning size. The trace-agreement matrix and the LoRA-target tests cover the catalog through these."""

AMBIGUOUS_GPU_NAMES: dict[str, tuple[str, str]] = {
    "a100": ("a100-80gb", "a100-80gb; use a100-40gb for the 40 GB card"),
    "h100": ("h100-80gb", "h100-80gb (SXM); use h100-pcie for the PCIe card"),
    "v100": ("v100-16gb", "v100-16gb (a plan that fits 16 GB fits 32 GB); use v100-32gb for the 32 GB card"),
}
"""Short GPU names that fit several entries: normalized name -> (key taken, note after "taken as").

a100 and h100 default to the 80 GB SXM parts; v100 defaults to the smaller card, the safe side.
"""

MODEL_ALIASES: dict[str, tuple[str, ...]] = {
    "llama-7b": ("decapoda-research/llama-7b-hf", "llama1-7b"),
    "llama-13b": ("decapoda-research/llama-13b-hf", "llama1-13b"),
    "llama-30b": ("decapoda-research/llama-30b-hf", "llama1-30b", "llama-33b", "llama1-33b"),
    "llama-65b": ("decapoda-research/llama-65b-hf", "llama1-65b"),
    "phi3-mini": ("phi3-mini-4k",),
    "phi3-medium": ("phi3-medium-4k",),
    "mistral-7b": ("mistral-7b-v0.1", "mistralai/Mistral-7B-Instruct-v0.1"),
    "mistral-7b-v0.3": ("mistralai/Mistral-7B-Instruct-v0.3",),
}
"""Model names users type that the key, the repo id and the suffix rule do not already cover.

Keys, ``hf_repo_id`` (with and without the organisation) and instruct/chat variants
(``Qwen2.5-7B-Instruct`` -> qwen2.5-7b) resolve without being listed here.
"""

_GPU_VENDOR_WORDS = ("nvidia", "amd", "geforce", "tesla", "radeon", "instinct")
_MODEL_VARIANT_SUFFIX = re.compile(r"[-_ ](instruct|it|chat|hf)$")


def normalize_name(name: str) -> str:
    """Lookup form of a name: lower case with spaces, underscores and hyphens removed.

    Dots and slashes are kept, so ``llama3.1-8b`` and ``llama3-18b`` stay different.
    """
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def load_profile_dir(directory: Traversable | Path, schema: type[SpecT], cache_kind: str | None = None) -> list[SpecT]:
    """Read and validate every ``*.yaml`` file of a directory, sorted by key.

    ``cache_kind`` names the derived cache of the parsed files (:mod:`autotune.profiles.shipped_cache`), for
    the shipped catalog: the YAML is parsed only when the files changed since the cache was written. Every
    entry is validated either way.

    Raises:
        ValueError: a file is not valid YAML, is not a mapping, fails ``schema`` validation, or has
            a ``key`` different from its file name (a packaging bug; the message names the file).
    """
    entries = sorted(
        (entry for entry in directory.iterdir() if entry.name.endswith(PROFILE_SUFFIX)), key=lambda item: item.name
    )
    sources = [(entry.name, entry.read_text(encoding="utf-8")) for entry in entries]
    if cache_kind is None:
        parsed = [_parse_profile(name, text) for name, text in sources]
    else:
        parsed = parsed_sources(cache_kind, sources, _parse_profile)
    specs: list[SpecT] = []
    for (name, _), data in zip(sources, parsed, strict=True):
        stem = name[: -len(PROFILE_SUFFIX)]
        if not isinstance(data, dict):
            raise ValueError(f"profile {name}: expected a mapping of fields, got {type(data).__name__}")
        try:
            spec = schema.model_validate(data)
        except ValidationError as error:
            raise ValueError(
                f"profile {name}: invalid {schema.__name__}: {format_validation_error(error, schema)}"
            ) from error
        if spec.key != stem:
            raise ValueError(f"profile {name}: key '{spec.key}' differs from the file name '{stem}'")
        specs.append(spec)
    return sorted(specs, key=lambda spec: spec.key)


def _parse_profile(name: str, text: str) -> Any:
    """The YAML data of one shipped profile file (C safe loader).

    Raises:
        ValueError: not valid YAML (the message names the file).
    """
    import yaml  # PyYAML only when a file must be parsed (a cache miss)

    from autotune import yamlio

    try:
        return yamlio.safe_load(text, shipped=True)
    except yaml.YAMLError as error:
        raise ValueError(f"profile {name}: not valid YAML: {error}") from error


def _build_index(names_by_key: Iterable[tuple[str, Iterable[str]]], kind: str) -> dict[str, str]:
    """Map the normalized form of every key and alias to its key; a name claimed twice is an error."""
    index: dict[str, str] = {}
    for key, names in names_by_key:
        for name in (key, *names):
            normalized = normalize_name(name)
            owner = index.setdefault(normalized, key)
            if owner != key:
                raise ValueError(f"{kind} catalog: name '{name}' of {key} is also a name of {owner}")
    return index


@functools.cache
def _gpu_catalog() -> tuple[dict[str, GpuSpec], dict[str, str]]:
    specs = load_profile_dir(resources.files("autotune.profiles") / "gpus", GpuSpec, cache_kind="gpus")
    by_key = {spec.key: spec for spec in specs}
    index = _build_index(((spec.key, spec.aliases) for spec in specs), "GPU")
    for short_name, (key, _) in AMBIGUOUS_GPU_NAMES.items():
        if key not in by_key:
            raise ValueError(f"GPU catalog: ambiguous name '{short_name}' points to missing key {key}")
        if normalize_name(short_name) in index:
            raise ValueError(f"GPU catalog: ambiguous name '{short_name}' is also an alias of an entry")
    return by_key, index


@functools.cache
def _model_catalog() -> tuple[dict[str, ModelSpec], dict[str, str]]:
    specs = load_profile_dir(resources.files("autotune.profiles") / "models", ModelSpec, cache_kind="models")
    by_key = {spec.key: spec for spec in specs}
    unknown = sorted(set(MODEL_ALIASES) - set(by_key))
    if unknown:
        raise ValueError(f"model catalog: MODEL_ALIASES names missing keys {unknown}")

    def names(spec: ModelSpec) -> list[str]:
        repo = [spec.hf_repo_id, spec.hf_repo_id.rsplit("/", 1)[-1]] if spec.hf_repo_id else []
        return [*repo, *MODEL_ALIASES.get(spec.key, ())]

    return by_key, _build_index(((spec.key, names(spec)) for spec in specs), "model")


def list_gpus() -> list[GpuSpec]:
    """Every GPU profile, sorted by key."""
    return list(_gpu_catalog()[0].values())


def current_gpus() -> list[GpuSpec]:
    """What ``autotune plan --gpu any`` plans: the profiles marked ``current`` (:attr:`GpuSpec.current`), by key."""
    return [spec for spec in list_gpus() if spec.current]


def list_models() -> list[ModelSpec]:
    """Every model profile, sorted by key."""
    return list(_model_catalog()[0].values())


def _unknown_name(
    kind: str, name: str, index: dict[str, str], hint: str, *, list_all: bool = False
) -> UnknownNameError:
    """One-line error with up to 3 catalog keys closest to ``name`` (difflib ratio over keys and aliases).

    With ``list_all`` (a short catalog: the GPUs), a name close to none of them gets every key instead.
    """
    import difflib  # only for a name not found

    matches = difflib.get_close_matches(normalize_name(name), list(index), n=10, cutoff=0.5)
    closest = list(dict.fromkeys(index[match] for match in matches))[:3]
    suggestion = f": closest are {', '.join(closest)}" if closest else ""
    if not closest and list_all:
        suggestion = f"; known {kind}s: {', '.join(sorted(set(index.values())))}"
    return UnknownNameError(f"unknown {kind} '{name}'{suggestion} ({hint})")


def resolve_gpu(name: str) -> tuple[GpuSpec, str | None]:
    """Find a GPU by key or alias, ignoring case, spaces, underscores and hyphens.

    Returns:
        The profile, and a one-line note when a short name fitted several cards and one was taken
        (see :data:`AMBIGUOUS_GPU_NAMES`, e.g. ``'a100'`` -> a100-80gb), else ``None``.

    Raises:
        UnknownNameError: no entry has that name; the message lists up to 3 close keys.
    """
    by_key, index = _gpu_catalog()
    normalized = normalize_name(name)
    if not normalized:
        raise UnknownNameError("empty GPU name (autotune gpus lists all)")
    candidates = [normalized]
    stripped = normalized
    while stripped.startswith(_GPU_VENDOR_WORDS):
        stripped = next(stripped[len(word) :] for word in _GPU_VENDOR_WORDS if stripped.startswith(word))
        candidates.append(stripped)
    for candidate in candidates:
        if candidate in index:
            return by_key[index[candidate]], None
        if candidate in AMBIGUOUS_GPU_NAMES:
            key, taken_as = AMBIGUOUS_GPU_NAMES[candidate]
            return by_key[key], f"'{name.strip()}' taken as {taken_as}"
    raise _unknown_name("GPU", name, index, "autotune gpus lists all", list_all=True)


def model_weights_source(name: str, spec: ModelSpec) -> str:
    """The weights a model ``name`` names, where ``spec`` (its catalog entry) gives only the shapes.

    The catalog resolves ``-instruct`` / ``-it`` / ``-chat`` variants to their base entry (same shapes), but the
    weights differ: ``meta-llama/Meta-Llama-3-8B-Instruct`` must train the Instruct checkpoint, not the base one.
    A repo id (``org/name``) is kept exactly as given; a name the entry lists (key, repo id, alias) means the
    entry's ``hf_repo_id``; a variant name without an organisation gets the entry's organisation
    (``Qwen2.5-7B-Instruct`` → ``Qwen/Qwen2.5-7B-Instruct``).
    """
    given = name.strip()
    if "/" in given:
        return given
    index = _model_catalog()[1]
    if index.get(normalize_name(given)) == spec.key or not spec.hf_repo_id:
        return spec.hf_repo_id or spec.key
    org, slash, _ = spec.hf_repo_id.rpartition("/")
    return f"{org}/{given}" if slash else given


def resolve_model_profile(name: str) -> ModelSpec:
    """Find a model by key, Hugging Face repo id or alias, ignoring case, spaces, underscores and hyphens.

    ``org/name`` also matches by ``name`` alone, and a trailing ``-instruct`` / ``-it`` / ``-chat`` /
    ``-hf`` is dropped when the full name is not found (those variants share the base model's shapes;
    Qwen2.5 instruct configs differ only in ``max_position_embeddings`` and ``rms_norm_eps``).

    Raises:
        UnknownNameError: no entry has that name; the message lists up to 3 close keys and says a
            path to a ``config.json`` is also accepted.
    """
    by_key, index = _model_catalog()
    if not normalize_name(name):
        raise UnknownNameError("empty model name (autotune models lists all, or give a path to a config.json)")
    candidates = [name.strip()]
    if "/" in candidates[0]:
        candidates.append(candidates[0].rsplit("/", 1)[-1])
    stem = candidates[-1].lower()
    while (match := _MODEL_VARIANT_SUFFIX.search(stem)) is not None:
        stem = stem[: match.start()]
        candidates.append(stem)
    for candidate in candidates:
        key = index.get(normalize_name(candidate))
        if key is not None:
            return by_key[key]
    raise _unknown_name("model", name, index, "autotune models lists all, or give a path to a config.json")
