"""Kill the training core with SIGKILL at seeded random points, resume it each time, report what happened.

Run as a script (``python fault_harness.py SPEC.json RESULT.json``) by ``test_fault_injection.py``.
The training stack is imported once here; every invocation of the core is a ``fork`` of this process
that runs ``autotune.trainer.__main__.main`` (the real entry point), so twenty kills cost twenty
short runs, not twenty interpreter starts.

Kill points are *events* inside the child: a micro step (``Trainer.training_step``) or one part of
a checkpoint save (the model weights, optimizer + scheduler, RNG state, ``trainer_state.json``, the
completion manifest written before the staged checkpoint is renamed into place). At the chosen event
the child either dies before it (``before``) or lets it write, truncates the file it wrote to half
its size, and dies (``mid``: a save cut short). The parent draws (event, variant) from
``random.Random(seed)``, so the run is the same every time.

The reference is one uninterrupted run of the same command; the result holds both runs' final
``trainer_state.json`` log histories (step, loss) and the largest difference of the final weights.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors.torch import load_file
from transformers import Trainer, TrainerState

import autotune.trainer.checkpoints as checkpoints
import autotune.trainer.train  # noqa: F401  (the whole training stack, loaded before forking)
from autotune.trainer.__main__ import main

CHILD_TIMEOUT_S = 240
_SAVE_PARTS = {
    "save_model": (Trainer, "save_model"),
    "optimizer": (Trainer, "_save_optimizer_and_scheduler"),
    "rng": (Trainer, "_save_rng_state"),
    "state": (TrainerState, "save_to_json"),
}


def _newest_file(path: Path) -> Path | None:
    if path.is_file():
        return path
    files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else []
    return max(files, key=lambda f: f.stat().st_mtime_ns, default=None)


def _install_fault(kill_at: int, variant: str) -> None:
    """Patch the event points so that the ``kill_at``-th event kills this process (see module doc)."""
    counter = [0]

    def hit(target: Path | None, call: Any) -> Any:
        counter[0] += 1
        if counter[0] != kill_at:
            return call()
        if variant == "mid" and target is not None:
            result = call()
            written = _newest_file(target)
            if written is not None:
                with written.open("r+b") as handle:
                    handle.truncate(written.stat().st_size // 2)
            del result
        os.kill(os.getpid(), signal.SIGKILL)
        return None

    original_step = Trainer.training_step

    def training_step(self: Trainer, *args: Any, **kwargs: Any) -> Any:
        return hit(None, lambda: original_step(self, *args, **kwargs))

    Trainer.training_step = training_step  # type: ignore[method-assign]
    for owner, name in _SAVE_PARTS.values():
        original = getattr(owner, name)

        def patched(self: Any, path: Any = None, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            target = Path(path) if path is not None else None
            return hit(target, lambda: _original(self, path, *args, **kwargs))

        setattr(owner, name, patched)
    original_manifest = checkpoints.write_manifest

    def write_manifest(checkpoint: Path, *args: Any, **kwargs: Any) -> Any:
        return hit(checkpoint / "autotune_checkpoint.json", lambda: original_manifest(checkpoint, *args, **kwargs))

    checkpoints.write_manifest = write_manifest


def invoke(argv: list[str], log: Path, kill_at: int | None = None, variant: str = "before") -> tuple[str, int]:
    """Run the core in a forked child; ('killed', 9) or ('exit', code)."""
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            signal.alarm(CHILD_TIMEOUT_S)
            if kill_at is not None:
                _install_fault(kill_at, variant)
            code = main(argv)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed", os.WTERMSIG(status)
    return "exit", os.WEXITSTATUS(status)


def final_history(out: Path) -> list[tuple[int, float]]:
    """(step, loss) of every logged step in the newest checkpoint's trainer_state.json."""
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    state = json.loads((checkpoints[-1] / "trainer_state.json").read_text())
    return [(int(entry["step"]), float(entry["loss"])) for entry in state["log_history"] if "loss" in entry]


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """The reference run, then the faulted run with ``spec['kills']`` kills; both runs' outcomes."""
    base: list[str] = spec["argv"]
    work = Path(spec["work_dir"])
    reference = work / "reference"
    outcome, code = invoke([*base, "--output-dir", str(reference)], work / "reference.log")
    assert (outcome, code) == ("exit", 0), (work / "reference.log").read_text()[-3000:]
    faulted = work / "faulted"
    argv = [*base, "--output-dir", str(faulted)]
    rng = random.Random(spec["seed"])
    attempts: list[dict[str, Any]] = []
    kills = 0
    while kills < spec["kills"] and len(attempts) < 4 * spec["kills"]:
        kill_at = rng.randint(1, spec["max_event"])
        variant = rng.choice(["before", "mid"])
        resume = any((faulted / "checkpoints").glob("checkpoint-*"))
        log = work / f"attempt-{len(attempts)}.log"
        outcome, code = invoke([*argv, "--resume"] if resume else argv, log, kill_at, variant)
        text = log.read_text(errors="replace")
        attempts.append({"kill_at": kill_at, "variant": variant, "resume": resume, "outcome": outcome, "code": code})
        attempts[-1]["log_tail"] = text[-400:]
        if outcome == "killed":
            kills += 1
        elif code == 2 and "no intact checkpoint" in text:
            continue  # every checkpoint was partial (set aside): the next attempt starts afresh
        elif code == 0 or "already completed" in text:
            break
        else:
            raise AssertionError(f"attempt {len(attempts)} exited {code}:\n{text[-3000:]}")
    resumed = any((faulted / "checkpoints").glob("checkpoint-*"))
    outcome, code = invoke([*argv, "--resume"] if resumed else argv, work / "final.log")
    final_log = (work / "final.log").read_text(errors="replace")
    reference_weights = load_file(str(reference / "final" / "adapter_model.safetensors"))
    weights = load_file(str(faulted / "final" / "adapter_model.safetensors")) if code == 0 else {}
    max_diff = max(
        (float((reference_weights[k] - weights[k]).abs().max()) for k in reference_weights if k in weights),
        default=float("inf"),
    )
    return {
        "kills": kills,
        "attempts": attempts,
        "final": {"outcome": outcome, "code": code, "log_tail": final_log[-1500:]},
        "reference_history": final_history(reference),
        "history": final_history(faulted) if code == 0 else [],
        "same_weight_names": sorted(reference_weights) == sorted(weights),
        "max_weight_diff": max_diff,
        "ignored": sorted(p.name for p in (faulted / "checkpoints" / "ignored").glob("*"))
        if (faulted / "checkpoints" / "ignored").is_dir()
        else [],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


if __name__ == "__main__":
    spec_path, result_path = Path(sys.argv[1]), Path(sys.argv[2])
    result = run(json.loads(spec_path.read_text()))
    result_path.write_text(json.dumps(result, indent=1))
