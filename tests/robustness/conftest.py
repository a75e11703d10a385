"""Robustness suite: hostile values and files, faults, locks. Reuses the integration tests' tiny-model helpers."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
for helpers in (TESTS / "integration", TESTS / "helpers"):  # trainer_helpers; cli_runner, plans
    if str(helpers) not in sys.path:
        sys.path.insert(0, str(helpers))
