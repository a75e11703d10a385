"""A MODEL as the user names it → its architecture (:class:`ModelSpec`) and the weights it names.

The one rule for what a MODEL may be, shared by ``autotune plan`` / ``estimate`` / ``trace`` (``cli/resolve.py``) and
the ``model`` column of a calibration CSV (:mod:`autotune.profiles.measurement_csv`): a catalog key or alias, a
Hugging Face repo id the catalog knows, a ``config.json``, a model directory holding one, or a ``.gguf`` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from autotune.profiles.catalog import model_weights_source, resolve_model_profile
from autotune.schemas.model import ModelSpec


class ModelSource(NamedTuple):
    """What a MODEL name resolves to."""

    spec: ModelSpec
    """The architecture: the catalog entry's shapes, or the ones read from the file."""
    weights: str
    """The weights it names: the absolute path of the model directory / ``.gguf`` file, else the repo id (or key)."""
    path: Path | None
    """The absolute path of the file or directory read, or None for a catalog name."""


def resolve_model_source(name: str, base_dir: Path | None = None) -> ModelSource:
    """Resolve a MODEL: a catalog key / alias / known repo id, a config.json, a model directory or a .gguf file.

    ``name`` is read as a path when it exists on disk or ends in ``.json`` / ``.gguf``; otherwise it is looked up in
    the catalog (which also knows Hugging Face repo ids such as ``meta-llama/Meta-Llama-3-8B``) for its shapes, and
    the weights are the ones the name names (:func:`autotune.profiles.catalog.model_weights_source`: an Instruct
    repo id trains the Instruct weights, not its base entry's). A relative path is taken relative to ``base_dir``
    when given (a CSV's folder), else to the working directory; ``~`` is expanded.

    Raises:
        UnknownNameError: not a path and not in the catalog (the message lists close names).
        ConfigError: the file or directory cannot be read as a model (one line naming the path).
    """
    path = Path(name).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.suffix == ".gguf":
        from autotune.profiles.gguf_reader import model_spec_from_gguf  # only where a .gguf is given

        resolved = path.resolve()
        return ModelSource(model_spec_from_gguf(path), str(resolved), resolved)
    if path.exists() or path.suffix == ".json":
        from autotune.profiles.hf_config import model_spec_from_config  # only where a config is given

        spec = model_spec_from_config(path)
        weights = (path.parent if path.suffix == ".json" else path).resolve()
        return ModelSource(spec, str(weights), path.resolve())
    spec = resolve_model_profile(name)
    return ModelSource(spec, model_weights_source(name, spec), None)
