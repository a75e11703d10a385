"""Checks a launch runs before anything is written (``autotune launch``, also with ``--dry-run``).

A launch that fails in the training core after the run directory exists leaves that directory behind; these
checks catch the common first-launch mistakes before it is created, each as one line naming the fix:

- the dataset: a local file exists, is a readable file of a supported type, and every row holds what the
  format needs, streamed line by line (:func:`autotune.schemas.dataset_rows.check_dataset_file`: invalid UTF-8,
  broken JSON, wrong types and all-empty data name the line); a hub dataset is in the local ``datasets`` cache, or
  else the hub is allowed and reachable (:func:`check_hub_dataset`, the model's rule);
- the model: a local directory holds weights *and* a tokenizer (a directory with only ``config.json`` can be
  planned but not launched); a ``.gguf`` file exists; a hub id is in the local Hugging Face cache with weights
  and a tokenizer, or else the hub is allowed (``HF_HUB_OFFLINE`` unset) and reachable (:func:`check_hub_model`:
  a TCP connection, nothing downloaded), so that an offline launch fails at once, not after the download's
  retries;
- the environment: the training stack the plan needs is installed (found on the path, not imported), and,
  for a launch on this machine without ``--cpu``, torch sees a GPU (:func:`check_gpu_visible`, a subprocess
  so that the CLI itself never imports torch);
- a leftover build lock of torch's C++ extensions (:func:`extension_build_locks`): DeepSpeed builds its CPU
  ops (``cpu_adam`` for ZeRO offload, ``deepspeed_shm_comm`` on the CPU) on first use under one lock file per op,
  and a build that was killed leaves the file behind, so that every later launch waits on it forever with no
  output. Found locks are a warning, never deleted: another launch may be building right now.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from autotune.errors import ConfigError, InvalidRequestError
from autotune.schemas.dataset_format import DATASET_LOADERS
from autotune.schemas.dataset_rows import check_dataset_file
from autotune.schemas.plan import PlanFile
from autotune.schemas.trainer_options import TRACKER_PACKAGES
from autotune.schemas.training_stack import installed_versions, untested_stack_allowed, untested_stack_error
from autotune.yamlio import check_regular_file

WEIGHT_PATTERNS: Final[tuple[str, ...]] = ("*.safetensors", "pytorch_model*.bin", "model*.bin", "adapter_model.bin")
"""Weight files transformers' and peft's ``from_pretrained`` read from a model or adapter directory: safetensors (one
file, an adapter, or the shards of an index) and the pickled ``pytorch_model*.bin`` / ``adapter_model.bin`` of older
saves. A Trainer checkpoint's ``optimizer.pt`` / ``training_args.bin`` are not weights. The one rule for "this folder
holds weights" (:func:`has_weights`: launch pre-flight, hub cache, ``autotune export``)."""

TOKENIZER_FILES: Final[tuple[str, ...]] = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")
"""Files that hold a tokenizer's vocabulary (fast ``tokenizer.json``, sentencepiece, or GPT-2 style BPE)."""

TRAINING_STACK: Final[tuple[str, ...]] = ("torch", "transformers", "peft", "accelerate", "datasets")
"""Packages every run imports (``pip install -e ".[train]"``)."""

GPU_PROBE_TIMEOUT_S: Final[float] = 120.0
"""How long the ``torch.cuda.is_available()`` probe may take (importing torch cold can take tens of seconds)."""

_NO_GPU_EXIT: Final[int] = 3


def _is_local(dataset: str) -> bool:
    path = Path(dataset).expanduser()
    return path.exists() or dataset.startswith(("/", ".", "~")) or path.suffix.lower() in DATASET_LOADERS


def check_dataset(dataset: str, dataset_format: str, *, hub: bool = True) -> None:
    """A local dataset exists, is a readable regular file of a supported type, and every row holds what it needs.

    A FIFO, a device (a link to ``/dev/zero``), a directory or a dangling link is refused before one byte is read
    (:func:`autotune.yamlio.check_regular_file`); rows are read at most ``yamlio.MAX_LINE_BYTES`` long.

    Rows are streamed: :func:`~autotune.schemas.dataset_rows.check_dataset_file`. A hub dataset name is
    :func:`check_hub_dataset`'s, unless ``hub`` is False (the run's nodes download it, not this machine).

    Raises:
        ConfigError: one line naming the file and what is wrong (the line, or the columns found and expected).
    """
    if not _is_local(dataset):
        if hub:
            check_hub_dataset(dataset)
        return
    path = Path(dataset).expanduser()
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"dataset file {dataset} not found (nothing was written)")
    check_regular_file(path, "dataset")  # a FIFO, a device, a directory: refused before anything reads it
    if path.suffix.lower() not in DATASET_LOADERS:
        raise ConfigError(
            f"dataset {dataset}: unsupported file type {path.suffix!r} (use .jsonl, .json, .parquet or .txt)"
        )
    check_dataset_file(path, dataset_format, str(path))


def check_model(plan: PlanFile, *, hub: bool = True) -> None:
    """The plan's weights can be loaded: a local directory has weights and a tokenizer; a .gguf file exists.

    A hub id is :func:`check_hub_model`'s, unless ``hub`` is False (the run's nodes download it, not this machine).

    Raises:
        ConfigError: one line; a directory with a ``config.json`` but no weights is called out as plannable
            but not launchable.
    """
    source = plan.model_source
    path = Path(source).expanduser()
    if path.suffix == ".gguf" or (path.is_file() and path.suffix == ".gguf"):
        if not path.is_file():
            raise ConfigError(f"model file {source} not found")
        return
    if not path.is_dir():
        if _looks_like_path(source):
            raise ConfigError(f"model directory {source} not found")
        if hub:
            check_hub_model(source)
        return
    if not has_weights(path):
        raise ConfigError(
            f"model directory {source} has no weights (*.safetensors or pytorch_model*.bin): a config-only "
            "directory can be planned but not launched; put the weights next to its config.json"
        )
    if not has_tokenizer(path):
        raise ConfigError(
            f"model directory {source} has weights but no tokenizer ({', '.join(TOKENIZER_FILES)}): "
            "copy the tokenizer files of the model next to the weights"
        )


def has_weights(path: Path) -> bool:
    """True when the directory ``path`` holds weights (a file matching :data:`WEIGHT_PATTERNS`)."""
    return any(next(path.glob(pattern), None) is not None for pattern in WEIGHT_PATTERNS)


def has_tokenizer(path: Path) -> bool:
    """True when the directory ``path`` holds a tokenizer (one of :data:`TOKENIZER_FILES`)."""
    return any((path / name).is_file() for name in TOKENIZER_FILES)


def _looks_like_path(source: str) -> bool:
    """A model source written as a path (absolute, relative or home), not a hub id ``org/name``."""
    return source.startswith(("/", "./", "../", "~")) or source in (".", "..") or source.count("/") > 1


_TRUE_VALUES: Final[frozenset[str]] = frozenset({"1", "on", "yes", "true"})
"""What huggingface_hub's ``constants._is_true`` reads as true in ``HF_HUB_OFFLINE`` (huggingface_hub 0.3x)."""

HUB_PROBE_TIMEOUT_S: Final[float] = 5.0
"""How long :func:`hub_reachable` waits for a TCP connection to the hub (a reachable hub answers in well under
a second; an unreachable one would make transformers retry for about a minute)."""


PROXY_VARIABLES: Final[tuple[str, ...]] = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
"""Proxy settings requests (and so huggingface_hub) honours; with one set, :func:`hub_reachable` does not probe."""


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or transformers' older ``TRANSFORMERS_OFFLINE``) is set to a true value.

    Then transformers loads from the local cache only.
    """
    return any(
        os.environ.get(name, "").strip().lower() in _TRUE_VALUES for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved as huggingface_hub does (without importing it).

    ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``
    (default ``~/.cache/huggingface/hub``).
    """
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached_snapshot(repo_id: str, cache: Path | None = None) -> Path | None:
    """A snapshot of model ``repo_id`` in the hub cache that holds weights and a tokenizer, or None.

    The cache layout is ``models--ORG--NAME/snapshots/REVISION/`` (huggingface_hub's ``file_download``); the
    revision ``refs/main`` names is tried first, then any other.
    """
    root = (cache or hub_cache_dir()) / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    if not root.is_dir():
        return None
    main = root.parent / "refs" / "main"
    preferred = main.read_text(encoding="utf-8").strip() if main.is_file() else ""
    snapshots = sorted(root.iterdir(), key=lambda path: path.name != preferred)
    return next((path for path in snapshots if has_weights(path) and has_tokenizer(path)), None)


def hub_reachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """None when a TCP connection to the hub opens within ``timeout_s``; else why not, in a few words.

    The hub is ``$HF_ENDPOINT``, default https://huggingface.co. Nothing is sent: this asks the network, not the hub.

    Behind a proxy (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY``, either case) a direct connection says
    nothing about the hub: not probed (None).
    """
    if any(os.environ.get(name) for key in PROXY_VARIABLES for name in (key, key.lower())):
        return None
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parts = urlsplit(endpoint)
    host = parts.hostname or endpoint
    try:
        port = parts.port or (80 if parts.scheme == "http" else 443)
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except (OSError, ValueError) as error:
        return f"{host} cannot be reached ({' '.join(str(error).split()) or type(error).__name__})"


def check_hub_model(repo_id: str) -> None:
    """A hub model the run will load is in the local cache, or can be downloaded: not offline, hub reachable.

    Raises:
        ConfigError: one line: the model is not cached and ``HF_HUB_OFFLINE`` is set or the hub cannot be
            reached; names the cache directory and how to get the model.
    """
    if cached_snapshot(repo_id) is not None:
        return
    why = hub_offline_reason()
    if why is None:
        return  # the training core downloads it
    raise ConfigError(
        f"model {repo_id} is not in the Hugging Face cache ({hub_cache_dir()}) and {why}: download it first "
        f"({download_command(repo_id)}) or give a local model directory (nothing was written)"
    )


def download_command(repo_id: str) -> str:
    """The command that puts model ``repo_id`` into the hub cache: ``hf download``.

    The locked huggingface_hub (2.4) installs the ``hf`` console script and no ``huggingface-cli``.
    """
    return f"hf download {repo_id}"


def hub_offline_reason() -> str | None:
    """Why the hub cannot be used now (``HF_HUB_OFFLINE`` set, or unreachable), or None when it can."""
    if hub_offline():
        return "HF_HUB_OFFLINE is set"
    return hub_reachable()


def datasets_cache_dir() -> Path:
    """The ``datasets`` library's cache, resolved as ``datasets.config`` does (without importing it).

    ``$HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``, else ``$XDG_CACHE_HOME/huggingface/datasets`` (default
    ``~/.cache/huggingface/datasets``): ``datasets.config.HF_DATASETS_CACHE`` (datasets 5.2).
    """
    explicit = os.environ.get("HF_DATASETS_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    )
    return Path(home).expanduser() / "datasets"


_CAMEL_UPPER = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_LOWER = re.compile(r"([a-z\d])([A-Z])")


def cached_dataset(repo_id: str, cache: Path | None = None) -> Path | None:
    """A prepared copy of hub dataset ``repo_id`` in the ``datasets`` cache, or None.

    The rule is the one ``datasets.load_dataset`` applies offline, ``datasets.load.CachedDatasetModuleFactory``
    (datasets 5.2): ``CACHE/NAMESPACE___name/CONFIG/VERSION/HASH/`` with the name in snake case
    (``datasets.naming.camelcase_to_snakecase``). Offline, ``load_dataset`` asks the hub first (refused:
    ``OfflineModeIsEnabled``) and then uses exactly such a directory, so a dataset only in the hub cache
    (``datasets--ORG--NAME``) does not load offline either.
    """
    parts = repo_id.split("/")
    parts[-1] = _CAMEL_LOWER.sub(r"\1_\2", _CAMEL_UPPER.sub(r"\1_\2", parts[-1])).lower()
    root = (cache or datasets_cache_dir()) / "___".join(parts)
    return next((path for path in sorted(root.glob("*/*/*")) if path.is_dir()), None)


def check_hub_dataset(repo_id: str) -> None:
    """A hub dataset the run will load is in the local ``datasets`` cache, or can be downloaded (the model's rule).

    Raises:
        ConfigError: one line: the dataset is not cached and ``HF_HUB_OFFLINE`` is set or the hub cannot be
            reached; names the cache directory and the fix.
    """
    if cached_dataset(repo_id) is not None:
        return
    why = hub_offline_reason()
    if why is None:
        return  # the training core downloads it
    raise ConfigError(
        f"dataset {repo_id} is not in the datasets cache ({datasets_cache_dir()}) and {why}: load it once with "
        "the hub reachable (python -c \"import datasets; datasets.load_dataset('"
        f"{repo_id}')\") or give a local .jsonl file (nothing was written)"
    )


def required_packages(plan: PlanFile) -> list[str]:
    """The Python packages a run of ``plan`` imports."""
    setting = plan.setting
    packages = list(TRAINING_STACK)
    if setting.sharding.startswith("zero"):
        packages.append("deepspeed")
    if setting.method == "qlora" or "8bit" in setting.optimizer:
        packages.append("bitsandbytes")
    return packages


def check_environment(plan: PlanFile) -> None:
    """The training stack ``plan`` needs is installed (found by ``importlib.util.find_spec``; nothing imported).

    Raises:
        ConfigError: the missing packages and the install command.
    """
    missing = [name for name in required_packages(plan) if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"the training stack is not installed here (missing {', '.join(missing)}): "
            f'pip install -e ".[train]" in {sys.prefix}'
        )


def check_tracker(report_to: str) -> None:
    """The package of ``--report-to``'s tracker is installed (found, not imported); ``none`` needs nothing.

    Raises:
        ConfigError: one line naming the package and its optional extra.
    """
    package = TRACKER_PACKAGES.get(report_to)
    if package is not None and importlib.util.find_spec(package) is None:
        raise ConfigError(
            f"--report-to {report_to} needs the {package} package, which is not installed here: "
            f'pip install -e ".[{package}]" in {sys.prefix} (or --report-to none)'
        )


def check_stack_versions() -> None:
    """The installed training stack is within the tested versions (read from package metadata; nothing imported).

    ``AUTOTUNE_ALLOW_UNTESTED_STACK`` lets it through (the training core then logs the versions as a warning):
    :func:`~autotune.schemas.training_stack.untested_stack_allowed`.

    Raises:
        InvalidRequestError: :func:`~autotune.schemas.training_stack.untested_stack_error`'s one line.
    """
    stack_error = untested_stack_error(installed_versions())
    if stack_error and not untested_stack_allowed():
        raise InvalidRequestError(stack_error)


def check_gpu_visible() -> None:
    """Refuse a launch without ``--cpu`` on a machine where torch sees no GPU, asked in a subprocess of this Python.

    The subprocess runs this interpreter; the question is ``torch.cuda.is_available()``, which is also true on ROCm
    builds.

    A probe that cannot import torch or times out is not a refusal: the training core reports it.

    Raises:
        InvalidRequestError: torch sees no GPU (names ``--cpu``).
    """
    script = f"import sys, torch; sys.exit(0 if torch.cuda.is_available() else {_NO_GPU_EXIT})"
    try:
        probe = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, timeout=GPU_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return
    if probe.returncode == _NO_GPU_EXIT:
        raise InvalidRequestError(
            "torch sees no GPU on this machine (torch.cuda.is_available() is False): add --cpu to train on the "
            "CPU, or fix the CUDA / ROCm install (nothing was written)"
        )


def torch_extensions_root() -> Path:
    """Where torch's ``cpp_extension.load`` builds C++ extensions, resolved without importing torch.

    ``$TORCH_EXTENSIONS_DIR``, else ``$XDG_CACHE_HOME/torch_extensions`` (default ``~/.cache/torch_extensions``), as
    ``torch.utils.cpp_extension._get_build_directory`` and ``torch._appdirs.user_cache_dir`` (torch 2.13) resolve it.
    """
    explicit = os.environ.get("TORCH_EXTENSIONS_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torch_extensions"


def extension_build_locks(root: Path | None = None) -> list[Path]:
    """The build locks under the torch extensions root.

    ``ROOT/OP/lock`` with ``$TORCH_EXTENSIONS_DIR``, ``ROOT/py311_cu124/OP/lock`` otherwise.

    torch's ``FileBaton`` (``torch/utils/file_baton.py``) takes a build by creating ``lock`` and waits, with no
    timeout, while the file exists; the builder deletes it when done. A file left by a killed build therefore
    stops the next DeepSpeed launch that needs that op before its first step, silently.

    Args:
        root: the extensions root; default :func:`torch_extensions_root`.

    Returns:
        The lock files found, sorted (empty when the root does not exist).
    """
    base = torch_extensions_root() if root is None else root
    if not base.is_dir():
        return []
    return sorted({*base.glob("*/lock"), *base.glob("*/*/lock")})


def describe_build_lock(lock: Path, now_s: float | None = None) -> str:
    """One warning line for a build lock: its path and age, and what to do."""
    try:
        age_s = (time.time() if now_s is None else now_s) - lock.stat().st_mtime
    except OSError:
        age_s = 0.0
    age = f"{age_s / 3600:.1f} h" if age_s >= 3600 else f"{age_s / 60:.0f} min"
    return (
        f"{lock} ({age} old) makes DeepSpeed wait forever to build the {lock.parent.name} op if the build that "
        "made it was killed: delete it unless another launch is building that op now"
    )
