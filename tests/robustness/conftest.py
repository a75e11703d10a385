"""Robustness suite: hostile values and files, faults, locks. Reuses the integration tests' tiny-model helpers."""

from __future__ import annotations

import sys
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
if str(INTEGRATION) not in sys.path:
    sys.path.insert(0, str(INTEGRATION))
