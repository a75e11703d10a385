"""The versions of the training stack the core is tested with, and the one-line refusal of any other.

The ranges are the ``train`` extra of pyproject.toml (tests/unit/launcher/test_training_stack.py holds the two equal):
each starts at the version constraints.txt locks (what CI installs and every test ran with) and stops before the
next minor release, which the project has not run. The core uses APIs that a wider range would not have: e.g.
``TrainingArguments(activation_checkpointing=...)`` exists from transformers 5.23.0 on (5.17.0 – 5.22.x only
have ``gradient_checkpointing``; issue 21 saw ``autotune launch`` fail on 5.17.0 after writing the run
directory). Versions are read from the installed distributions' metadata (``importlib.metadata``): nothing is
imported, so the CLI checks them without loading torch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import metadata
from typing import Final

TESTED_TRAINING_STACK: Final[dict[str, tuple[str, str]]] = {
    "torch": ("2.13.0", "2.14"),
    "transformers": ("5.23.0", "5.24"),
    "peft": ("0.21.2", "0.22"),
    "bitsandbytes": ("0.50.2", "0.51"),
    "accelerate": ("1.15.0", "1.16"),
    "deepspeed": ("0.19.8", "0.20"),
    "datasets": ("5.2.0", "5.3"),
}
"""Distribution name → (lowest tested version, first untested version): ``>=low,<high``."""

ALLOW_UNTESTED_ENV: Final = "AUTOTUNE_ALLOW_UNTESTED_STACK"
"""Set to 1 to run an untested stack anyway (e.g. a GPU image whose CUDA torch is another minor version): the launch
goes on and the training core logs the versions as a warning (:func:`untested_stack_allowed`)."""

_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string (PEP 440's release segment): ``"2.13.0+cu128"`` → ``(2, 13, 0)``.

    A pre-release or dev suffix is ignored (``5.24.0rc1`` → ``(5, 24, 0)``). Raises ValueError without numbers.
    """
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    numbers = tuple(int(part) for part in match.group(1).split("."))
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]
    return numbers


def installed_versions(names: tuple[str, ...] = tuple(TESTED_TRAINING_STACK)) -> dict[str, str | None]:
    """The installed version of each distribution (``importlib.metadata.version``), None where it is missing."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def untested_stack_allowed() -> bool:
    """True when the user opted in to an untested stack (``AUTOTUNE_ALLOW_UNTESTED_STACK=1``)."""
    return os.environ.get(ALLOW_UNTESTED_ENV, "") == "1"


def untested_stack_error(versions: Mapping[str, str | None]) -> str | None:
    """One line naming every installed package of the stack outside its tested range, or None.

    A missing package is not this rule's business (the launch pre-flight and the imports report it).
    """
    outside: list[str] = []
    for name, version in versions.items():
        if version is None or name not in TESTED_TRAINING_STACK:
            continue
        low, high = TESTED_TRAINING_STACK[name]
        try:
            if release(low) <= release(version) < release(high):
                continue
        except ValueError:
            pass
        outside.append(f"{name} {version} (tested: >={low},<{high})")
    if not outside:
        return None
    return (
        f"untested version of the training stack: {', '.join(outside)}; install the tested set "
        f'(pip install -c constraints.txt -e ".[train]") or run it anyway with {ALLOW_UNTESTED_ENV}=1'
    )
