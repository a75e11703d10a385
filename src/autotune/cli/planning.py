"""Helpers shared by the planning commands (``plan``, ``sweep``, ``launch MODEL``): options → request → plan.

The options themselves are declared once, as the parameters of ``autotune plan`` (:mod:`autotune.cli.plan_cmd`);
``launch MODEL [plan options]`` parses them with that same command, found through click's context
(:func:`parse_plan_args`), so no command module imports another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.cli._shared import coefficients_from_option, stack_note
from autotune.cli.resolve import build_request, host_memory_note, kernels_notes, lora_dropout_notes
from autotune.errors import InvalidRequestError
from autotune.planner.build import build_plan_file
from autotune.planner.request import PlanRequest
from autotune.planner.search import PlanResult, search
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import DEFAULT_SEQ_LEN


def request_from_options(
    model: str,
    gpu: str,
    num_gpus: int = 1,
    num_nodes: int = 1,
    host_memory_gib: float | None = None,
    seq_len: int = DEFAULT_SEQ_LEN,
    global_batch_size: int = 32,
    num_samples: int | None = None,
    dataset_tokens: int | None = None,
    epochs: float = 1.0,
    objective: str = "quality",
    calibration: Path | None = None,
    **overrides: Any,
) -> tuple[PlanRequest, list[str]]:
    """Build a validated PlanRequest from ``plan``'s options (also used by ``sweep`` and ``launch MODEL``)."""
    coefficients, calibration_name = coefficients_from_option(calibration)
    return build_request(
        model=model,
        gpu=gpu,
        num_gpus=num_gpus,
        num_nodes=num_nodes,
        host_memory_gib=host_memory_gib,
        seq_len=seq_len,
        global_batch_size=global_batch_size,
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
        objective=objective,
        overrides=overrides,
        coefficients=coefficients,
        calibration_name=calibration_name,
    )


def plan_from_options(**options: Any) -> tuple[PlanFile, PlanResult, list[str]]:
    """Plan from ``plan``'s options: returns the plan file, the search result and notes for the user."""
    request, notes = request_from_options(**options)
    result = search(request)
    plan_file = build_plan_file(request, result)
    settings = [plan_file.setting, *(alt.setting for alt in plan_file.alternatives)]
    notes += host_memory_note(request.cluster, options.get("host_memory_gib"), settings)
    notes += lora_dropout_notes(request.model, [plan_file.setting])
    notes += kernels_notes([plan_file.setting])
    speed = stack_note(request.coefficients)
    if speed is not None:
        notes.append(speed)
    return plan_file, result, notes


PLAN_OUTPUT_PARAMS = frozenset({"output", "json_", "plot", "verify"})
"""``plan`` parameters that choose what to print or write, not what to plan."""


def options_from_params(params: dict[str, Any]) -> dict[str, Any]:
    """Planning options from the parsed parameters of the ``plan`` command (click's ``ctx.params``)."""
    options = {name: value for name, value in params.items() if name not in PLAN_OUTPUT_PARAMS}
    options.pop("ctx", None)
    options["compile"] = options.pop("compile_", None)
    options["lora_targets"] = parse_lora_targets(options.get("lora_targets"))
    return options


def parse_plan_args(plan_command: Any, model: str, args: list[str]) -> dict[str, Any]:
    """Parse ``[MODEL, *args]`` with ``plan_command`` (the click command of ``autotune plan``).

    Raises:
        click.UsageError: unknown or malformed options (rendered as one line by the CLI).
        InvalidRequestError: an output option of ``plan`` (``-o``, ``--json``, ``--plot``).
    """
    context = plan_command.make_context("autotune launch", [model, *args])
    given = [name for name in PLAN_OUTPUT_PARAMS if context.params.get(name) not in (None, False)]
    if given:
        raise InvalidRequestError(
            f"{', '.join(sorted(given))}: output options of 'autotune plan' do not apply to launch; "
            "run 'autotune plan ... -o plan.yaml' first"
        )
    return options_from_params(dict(context.params))


def parse_lora_targets(value: str | None) -> tuple[str, ...] | None:
    """'q_proj,v_proj' → ('q_proj', 'v_proj'); None stays None."""
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())
