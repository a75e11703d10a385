"""One vocabulary of memory part names (``schemas.memory_parts``): what the memory model emits, the headroom band's
parts, the planner, the plots and the trace."""

from __future__ import annotations

import itertools

import pytest

from autotune.cli.plot_data import PART_COLOURS
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import dynamic_memory_gib
from autotune.costmodel.memory import predict_memory
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.memory_parts import (
    MEMORY_PARTS,
    MODEL_STATE_PARTS,
    MODELLED_PARTS,
    TRACE_CATEGORY_PARTS,
    memory_part,
)
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trace import CATEGORIES
from autotune.schemas.workload import Workload
from autotune.units import GIB

MODEL = resolve_model_profile("llama3-8b")
SETTINGS = [
    TrainingSetting(
        method=method, sharding=sharding, grad_accum=accum, optimizer=optimizer, grad_ckpt=ckpt, compile=compiled
    )
    for method, sharding, accum, optimizer, ckpt, compiled in itertools.product(
        ("full", "lora", "qlora"),
        ("none", "ddp", "fsdp", "fsdp-offload"),
        (1, 4),
        ("adamw", "adamw-8bit"),
        (True, False),
        (False, True),
    )
    if not (method == "qlora" and sharding != "none")
]


def _emitted_parts() -> set[str]:
    parts: set[str] = set()
    coefficients = default_coefficients()
    for gpu_key, setting in itertools.product(("h100", "4090"), SETTINGS):
        ranks = 1 if setting.sharding == "none" else 4
        cluster = ClusterSpec(gpu=resolve_gpu(gpu_key)[0], num_gpus_per_node=ranks)
        memory = predict_memory(MODEL, setting, cluster, Workload(seq_len=1024), coefficients)
        parts |= set(memory.breakdown_bytes)
    return parts


def test_every_part_the_memory_model_emits_is_in_the_vocabulary() -> None:
    emitted = _emitted_parts()
    assert emitted <= set(MEMORY_PARTS)
    assert emitted >= MODELLED_PARTS  # the headroom band's parts are emitted under these names


def test_the_named_part_sets_are_subsets_of_the_vocabulary() -> None:
    assert set(MEMORY_PARTS) >= MODELLED_PARTS
    assert set(MODEL_STATE_PARTS) <= set(MEMORY_PARTS)
    assert set(PART_COLOURS) == set(MEMORY_PARTS)


def test_the_headroom_band_scales_the_modelled_parts() -> None:
    breakdown = {part: float(GIB) for part in MEMORY_PARTS}
    assert dynamic_memory_gib(breakdown) == pytest.approx(len(MODELLED_PARTS))


def test_every_trace_category_maps_to_a_memory_part() -> None:
    assert set(TRACE_CATEGORY_PARTS) == set(CATEGORIES)
    assert {memory_part(c) for c in CATEGORIES} <= set(MEMORY_PARTS)
    assert memory_part("adapters") == "lora adapters"
    assert memory_part("saved activations") == "activations"
