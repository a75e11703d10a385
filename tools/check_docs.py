"""Keep README.md and docs/ matched to the tool: the output they quote is generated, and checked in CI.

Two kinds of generated text:

* **Quoted output.** A block between ``<!-- docs-check: autotune ARGS [; option=value ...] -->`` and
  ``<!-- /docs-check -->`` is the output of that command, as a fenced ``text`` block. The command runs
  in-process (never through a shell; only ``autotune`` commands) in a temporary directory that holds the
  files the same document declares with ``<!-- docs-file: NAME -->`` before a fenced block, with an empty
  user config dir (the shipped calibration) and stdout as a terminal of ``columns`` columns (default 100).
  Options: ``from=REGEX`` starts at the first line matching REGEX, ``lines=N`` keeps N lines, ``match=REGEX``
  keeps only the lines matching REGEX, ``stderr=1`` quotes stderr after stdout.
* **Python examples.** A fenced ``python`` block between ``<!-- docs-python -->`` and ``<!-- /docs-python -->`` is
  run (in-process, in a temporary directory, with an empty user config dir) and the fenced ``text`` block after it
  in the same marker pair is what it prints (docs/api.md: the Python API's example).
* **Generated lists.** A block between ``<!-- docs-generated: NAME -->`` and ``<!-- /docs-generated -->`` is the
  text of :data:`GENERATORS` ``[NAME]`` (e.g. ``launch-checks``: docs/launcher.md's list of launch checks, from
  ``autotune.launcher.checks.LAUNCH_CHECKS``).
* **docs/json.md**, every field of ``plan --json`` and ``estimate --json``, generated from the pydantic
  schemas' field descriptions (:func:`json_reference`).

Usage:
    python tools/check_docs.py           # exit 1 and list the blocks that drifted
    python tools/check_docs.py --write   # regenerate them in place

tests/unit/test_docs.py runs the check in the default test run. Only planning, estimating and
calibrating commands are quoted (a few seconds in all); nothing trains.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
JSON_DOC = ROOT / "docs" / "json.md"

BLOCK = re.compile(r"(<!-- docs-check: (?P<spec>.+?) -->\n)(?P<body>.*?)(<!-- /docs-check -->)", re.DOTALL)
FILE = re.compile(r"<!-- docs-file: (?P<name>[\w.-]+) -->\n```[a-z]*\n(?P<content>.*?)```", re.DOTALL)
GENERATED = re.compile(
    r"(<!-- docs-generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /docs-generated -->)", re.DOTALL
)
PYTHON = re.compile(
    r"(<!-- docs-python -->\n```python\n(?P<code>.*?)```\n)(?P<body>.*?)(<!-- /docs-python -->)", re.DOTALL
)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Drift:
    """A generated block whose text in the document differs from what the tool prints now."""

    document: Path
    spec: str
    expected: str
    found: str


def run_autotune(args: list[str], *, cwd: Path, columns: int) -> tuple[int, str, str]:
    """Run ``autotune ARGS`` in-process as a user at a ``columns``-wide terminal; returns (code, stdout, stderr)."""
    from autotune.cli.app import main
    from autotune.cli.console import console, err_console

    saved_env = dict(os.environ)
    saved_cwd = Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with tempfile.TemporaryDirectory() as config:
        os.environ.update(
            {"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": str(columns), "AUTOTUNE_CONFIG_DIR": config}
        )
        console.cache_clear()
        err_console.cache_clear()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(args)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            console.cache_clear()
            err_console.cache_clear()
    return code, ANSI.sub("", out.getvalue()), ANSI.sub("", err.getvalue())


def _options(spec: str) -> tuple[list[str], dict[str, str]]:
    command, *rest = [part.strip() for part in spec.split(";")]
    args = shlex.split(command)
    if not args or args[0] != "autotune":
        raise ValueError(f"docs-check runs autotune commands only, got {command!r}")
    options = dict(part.split("=", 1) for part in rest if part)
    return args[1:], options


def quoted_output(spec: str, files: dict[str, str]) -> str:
    """The fenced block a ``docs-check`` marker stands for."""
    args, options = _options(spec)
    with tempfile.TemporaryDirectory() as work:
        for name, content in files.items():
            (Path(work) / name).write_text(content)
        code, out, err = run_autotune(args, cwd=Path(work), columns=int(options.get("columns", "100")))
    text = out + (err if options.get("stderr") == "1" else "")
    if code != 0:
        raise RuntimeError(f"`{spec}` exited {code}: {err.strip()}")
    lines = [line.rstrip() for line in text.splitlines()]
    if "from" in options:
        start = next((i for i, line in enumerate(lines) if re.search(options["from"], line)), None)
        if start is None:
            raise RuntimeError(f"`{spec}`: no line matches from={options['from']!r}")
        lines = lines[start:]
    if "match" in options:
        lines = [line for line in lines if re.search(options["match"], line)]
    if "lines" in options:
        lines = lines[: int(options["lines"])]
    return "```text\n" + "\n".join(lines) + "\n```\n"


def python_output(code: str) -> str:
    """The fenced ``text`` block of what ``code`` (a docs-python example) prints, run as a user's script would be."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    out = io.StringIO()
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as config:
        os.environ["AUTOTUNE_CONFIG_DIR"] = config
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<docs-python>", "exec"), {"__name__": "__main__"})  # the project's own docs
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    return "```text\n" + "\n".join(lines) + "\n```\n"


def regenerate(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The document with every ``docs-check`` block regenerated, and (spec, old, new) for each block."""
    files = {match["name"]: match["content"] for match in FILE.finditer(text)}
    blocks: list[tuple[str, str, str]] = []

    def replace(match: re.Match[str]) -> str:
        new = quoted_output(match["spec"], files)
        blocks.append((match["spec"], match["body"], new))
        return match.group(1) + new + match.group(4)

    def generate(match: re.Match[str]) -> str:
        new = GENERATORS[match["name"]]()
        blocks.append((f"docs-generated: {match['name']}", match["body"], new))
        return match.group(1) + new + match.group(4)

    def run_python(match: re.Match[str]) -> str:
        new = python_output(match["code"])
        blocks.append(("docs-python", match["body"], new))
        return match.group(1) + new + match.group(4)

    return PYTHON.sub(run_python, GENERATED.sub(generate, BLOCK.sub(replace, text))), blocks


def _launch_checks() -> str:
    from autotune.launcher.checks import checks_markdown

    return checks_markdown()


STACK_NAMES = {
    "autotune-core-h100": "the project's own core",
    "llm-foundry-mpt.jsonl": "llm-foundry",
    "003_51edbf0898b4ad92.txt": "seed 003's HF Trainer",
    "001_351ee1f9e626a6ae.txt": "seed 001's trainer",
}
"""Readable names of the shipped fit's stacks (the keys of ``stack_time_factor``: the seed tables' files)."""


def _shipped_fit() -> str:
    """docs/cost-model.md §6: the shipped fit's stack factors and headline efficiencies, from ``seeds.yaml``."""
    from autotune.costmodel.calibration import default_coefficients

    fit = default_coefficients()
    factors = sorted((fit.stack_time_factor or {}).items(), key=lambda item: item[1])
    stacks = ", ".join(f"{STACK_NAMES.get(key, key)} at {value:.2f}" for key, value in factors)
    matmul, attention = fit.matmul_efficiency, fit.attention_efficiency
    return (
        f"The shipped fit (`profiles/calibration/seeds.yaml`) puts {stacks}, with `bandwidth_efficiency` "
        f"{fit.bandwidth_efficiency:.2f}, large-GEMM efficiency {matmul['ampere']:.2f} Ampere / {matmul['hopper']:.2f} "
        f"Hopper and attention efficiency {attention['ampere']:.2f} Ampere / {attention['hopper']:.2f} Hopper.\n"
    )


GENERATORS: dict[str, typing.Callable[[], str]] = {"launch-checks": _launch_checks, "shipped-fit": _shipped_fit}
"""The generated lists, by the name their block gives."""


def _type_name(annotation: object) -> str:
    text = str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    return re.sub(r"\b(?:typing|autotune\.schemas\.\w+)\.", "", text).replace("NoneType", "None")


def field_table(model: type[BaseModel], fallback: str | None = None) -> str:
    """A markdown table of ``model``'s fields: name, type, meaning (the field's description)."""
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        description = info.description or fallback
        if description is None:
            raise ValueError(f"{model.__name__}.{name} has no description: add Field(description=...)")
        type_name = _type_name(info.annotation).replace("|", "\\|")
        rows.append(f"| `{name}` | `{type_name}` | {description.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def json_reference() -> str:
    """docs/json.md: every field of ``plan --json`` and ``estimate --json``, from the schemas."""
    from autotune.schemas.dataset_stats import DatasetFingerprint, DatasetStats
    from autotune.schemas.estimate import Estimate
    from autotune.schemas.model import ModelSpec
    from autotune.schemas.plan import Alternative, ClusterChoice, PlanFile, Rejection
    from autotune.schemas.recipe import TrainingRecipe
    from autotune.schemas.setting import TrainingSetting
    from autotune.schemas.trainer_options import EvalData
    from autotune.schemas.workload import EvalSet, FilledBatches, PackedBatches, PaddedBatches, PaddedLengths, Workload

    return f"""# `--json` output, field by field

Generated from the pydantic schemas by `python tools/check_docs.py --write` (the test suite checks it is
current). Memory is in GiB (2^30 bytes), times in seconds, per GPU unless a field says otherwise.

## `autotune plan --json`

| key | meaning |
|---|---|
| `plan` | the chosen setting's prediction: every field of [Estimate](#estimate), plus `setting` \
([TrainingSetting](#trainingsetting)) |
| `alternatives` | runner-ups (the best setting of each other method and sharding, in the planner's order), each \
like `plan` plus `why_not_chosen` (why the planner's rule put the chosen setting first: reserved memory at the card, \
the objective, within the tie band, or slower) |
| `rejected` | one [Rejection](#rejection) per method or sharding with no setting that fits |
| `notes` | one-line remarks (GPU alias taken, host RAM assumed, approximations of the model's config) |
| `searched` | how many candidate settings the planner estimated |
| `plan_file` | the plan file `-o` writes ([PlanFile](#planfile)), as JSON |

## `autotune estimate --json`

Every field of [Estimate](#estimate), plus `setting` ([TrainingSetting](#trainingsetting)) and `notes` (one-line
remarks; when the setting does not fit, the nearest setting that does); with `--dataset`, `dataset`
([DatasetStats](#planfiledataset-datasetstats)).

## Estimate

{field_table(Estimate)}
## TrainingSetting

{field_table(TrainingSetting)}
## Rejection

{field_table(Rejection)}
## Alternative

A runner-up as the plan file (`alternatives`, [PlanFile](#planfile)) stores it; `plan --json` shows the same runner-ups
flattened (every field of `prediction` at the top level, beside `setting` and `why_not_chosen`).

{field_table(Alternative)}
## PlanFile

{field_table(PlanFile)}
### PlanFile.cluster (ClusterChoice)

{field_table(ClusterChoice)}
### PlanFile.workload (Workload)

{field_table(Workload)}
### PlanFile.workload.batches

One of three, by `kind` (plan files before schema 3 wrote them as flat fields of the workload: `tokens_per_sample`,
`padded_length_quantiles`, `padded_longest_tokens`, `packed_attention_span_tokens`,
`packed_multi_example_block_share`; they still read). `filled` (FilledBatches):

{field_table(FilledBatches)}
`padded` (PaddedBatches):

{field_table(PaddedBatches)}
its `lengths` (PaddedLengths), from a dataset:

{field_table(PaddedLengths)}
`packed` (PackedBatches):

{field_table(PackedBatches)}
### PlanFile.workload.eval (EvalSet)

With `plan --eval-fraction` / `--eval-dataset` (before schema 3: `eval_samples`, `eval_steps`).

{field_table(EvalSet)}
### PlanFile.dataset (DatasetStats)

With `plan --dataset`: the data the plan was made for, its lengths at the plan's `seq_len` and the blocks
best-fit-decreasing packing makes of them (the launch's own tokenization and packing). `blocks` and the token counts
are of the rows read; the workload's `num_samples` is the blocks scaled to every row.

{field_table(DatasetStats)}
`fingerprint` (DatasetFingerprint): what `autotune launch` compares its `--dataset` with (a warning when it differs).

{field_table(DatasetFingerprint)}
### PlanFile.eval_data (EvalData)

With `plan --eval-fraction` / `--eval-dataset`: where `autotune launch PLAN` takes its eval loss from.

{field_table(EvalData)}
### PlanFile.training (TrainingRecipe)

Defaults by method and their sources: `src/autotune/schemas/recipe.py`.

{field_table(TrainingRecipe)}
### PlanFile.model (ModelSpec)

Fields without a description are the Hugging Face `config.json` fields of the same name.

{field_table(ModelSpec, fallback="as in `config.json`")}"""


def check(write: bool, documents: typing.Sequence[Path] = tuple(DOCUMENTS)) -> list[Drift]:
    """Regenerate the generated blocks of ``documents`` (default: all); with ``write`` save them, else list drift."""
    drifts: list[Drift] = []
    if JSON_DOC in documents:
        reference = json_reference()
        current = JSON_DOC.read_text() if JSON_DOC.exists() else ""
        if current != reference:
            drifts.append(Drift(JSON_DOC, "json_reference()", reference, current))
            if write:
                JSON_DOC.write_text(reference)
    for document in documents:
        if document == JSON_DOC:
            continue
        text = document.read_text()
        new_text, blocks = regenerate(text)
        drifts += [Drift(document, spec, new, old) for spec, old, new in blocks if old != new]
        if write and new_text != text:
            document.write_text(new_text)
    return drifts


def main() -> int:
    """Check (or with ``--write`` regenerate) the generated blocks; exit 1 when a check finds drift."""
    write = "--write" in sys.argv[1:]
    drifts = check(write)
    for drift in drifts:
        verb = "rewrote" if write else "drifted"
        print(f"{verb}: {drift.document.relative_to(ROOT)}: {drift.spec}")
        if not write:
            print("--- in the document\n" + drift.found + "--- the tool prints now\n" + drift.expected)
    if drifts and not write:
        print("run: python tools/check_docs.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
