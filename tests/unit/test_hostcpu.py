"""This machine's CPU: bf16 read from the kernel's CPU flags (a bf16 plan on a CPU without them trains in fp32), the
physical cores (SMT siblings folded) and the threads busy now (issue 29 item 9)."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from autotune.hostcpu import cpu_bf16_flags, cpu_has_bf16, cpu_precision_note, physical_cores, runnable_others

X86_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n"
X86_PLAIN = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f fma\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n"


@pytest.mark.parametrize(
    ("cpuinfo", "flags"),
    [(X86_BF16, {"avx512_bf16"}), (X86_PLAIN, set()), (ARM_BF16, {"bf16"}), (None, set())],
    ids=["x86-avx512-bf16", "x86-without", "arm-bf16", "unreadable"],
)
def test_bf16_flags(tmp_path: Path, cpuinfo: str | None, flags: set[str]) -> None:
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    assert cpu_bf16_flags(path) == flags
    assert cpu_has_bf16(path) == bool(flags)


def test_a_bf16_plan_on_a_cpu_without_bf16_trains_in_fp32(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text(X86_PLAIN)
    with_bf16 = tmp_path / "bf16"
    with_bf16.write_text(X86_BF16)
    for precision in ("bf16", "bf16-mixed", "fp16-mixed"):
        note = cpu_precision_note(precision, plain)
        assert note is not None and f"trains in fp32 instead of {precision}" in note
        assert cpu_precision_note(precision, with_bf16) is None
    assert cpu_precision_note("fp32", plain) is None


def test_the_training_core_loads_fp32_without_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from autotune.schemas.setting import TrainingSetting
    from autotune.trainer import model

    setting = TrainingSetting(method="lora", precision="bf16")
    monkeypatch.setattr(model, "cpu_precision_note", lambda precision: "no bf16 here")
    choice = model.choose_precision(setting, cpu=True)
    assert (choice.load_dtype, choice.bf16, choice.fp16) == (torch.float32, False, False)
    assert model.choose_precision(setting, cpu=False).load_dtype == torch.bfloat16  # a GPU run is as planned
    monkeypatch.setattr(model, "cpu_precision_note", lambda precision: None)
    assert model.choose_precision(setting, cpu=True).load_dtype == torch.bfloat16


@pytest.mark.parametrize(("siblings", "logical", "physical"), [("0", 8, 8), ("0,4", 8, 4), ("0-1", 16, 8)])
def test_physical_cores_fold_smt_siblings(tmp_path: Path, siblings: str, logical: int, physical: int) -> None:
    path = tmp_path / "thread_siblings_list"
    path.write_text(siblings + "\n")
    assert physical_cores(logical, path) == physical
    assert physical_cores(logical, tmp_path / "missing") == logical


def _spin(spinning: Event, stop: Event) -> None:
    spinning.set()
    while not stop.is_set():
        pass


def test_busy_is_the_median_of_the_other_runnable_threads(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4\nprocs_running 3\nprocs_blocked 0\n")
    assert runnable_others(stat, samples=3, interval_s=0.0) == 2.0  # the reader itself is one of the 3
    stat.write_text("cpu  1 2 3 4\nprocs_blocked 0\n")
    assert runnable_others(stat, samples=3, interval_s=0.0) is None
    assert runnable_others(tmp_path / "missing", samples=3, interval_s=0.0) is None


def test_a_thread_spinning_beside_the_reader_counts_as_busy(tmp_path: Path) -> None:
    stat = Path("/proc/stat")
    if runnable_others(stat, samples=1, interval_s=0.0) is None:
        pytest.skip("no /proc/stat procs_running here")
    spinning = multiprocessing.get_context("spawn").Event()
    stop = multiprocessing.get_context("spawn").Event()
    worker = multiprocessing.get_context("spawn").Process(target=_spin, args=(spinning, stop), daemon=True)
    worker.start()
    try:
        assert spinning.wait(60)  # the marker: the worker is in its loop
        readings = [runnable_others(stat, samples=1, interval_s=0.0) for _ in range(50)]
        assert max(r or 0.0 for r in readings) >= 1.0
    finally:
        stop.set()
        worker.join(10)
