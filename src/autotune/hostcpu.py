"""Whether this machine's CPU has bf16 instructions (for ``--cpu`` runs). Standard library only.

Without them a bf16 matmul is emulated (converted to fp32 and back around each kernel) and runs several times
slower than fp32 (issue 19: ~20x on the CPU it was measured on; the README's CPU demo then took 21 minutes for
10 steps), so a ``--cpu`` run of a bf16 plan trains in fp32 there (``autotune.trainer.model.choose_precision``)
and ``autotune launch`` says so. Read from the kernel's CPU flags (``/proc/cpuinfo``): on x86 ``avx512_bf16``
(AVX512-BF16: Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4 and later) or ``amx_bf16``
(Intel AMX); on Arm the ``bf16`` feature (Armv8.6 BFloat16). Where the flags cannot be read (macOS, no /proc),
bf16 is taken as missing: fp32 is never wrong, only slower where bf16 would have been fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

CPUINFO: Final[Path] = Path("/proc/cpuinfo")

BF16_FLAGS: Final[frozenset[str]] = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""CPU flags (x86 ``flags``, Arm ``Features``) that mean native bf16 arithmetic."""


def cpu_bf16_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The bf16 flags of the first CPU listed in ``cpuinfo`` (empty when none, or the file cannot be read)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split()) & BF16_FLAGS
    except OSError:
        pass
    return frozenset()


def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """True when this CPU has native bf16 instructions (:data:`BF16_FLAGS`)."""
    return bool(cpu_bf16_flags(cpuinfo))


def cpu_precision_note(precision: str, cpuinfo: Path = CPUINFO) -> str | None:
    """The note for a ``--cpu`` run of a plan with ``precision``: None when it runs as planned.

    When the plan computes in bf16 on a CPU without bf16 instructions, the note says that it trains in fp32 and why.
    """
    if precision == "fp32" or cpu_has_bf16(cpuinfo):  # fp16-mixed runs as bf16-mixed on the CPU
        return None
    return (
        f"this CPU has no bf16 instructions (no {', '.join(sorted(BF16_FLAGS))} flag in {cpuinfo}): the --cpu run "
        f"trains in fp32 instead of {precision} (bf16 would be emulated, several times slower)"
    )
