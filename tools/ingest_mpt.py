"""Ingest the llm-foundry MPT throughput rows (development data) as a measurement set with their conditions.

Reads ``llm-foundry-mpt.jsonl`` and ``configs/mpt-*.json`` from the development-data folder (default
docs/sources/llm-foundry-mpt, README.md there describes them) and writes:

* ``src/autotune/profiles/measurements/dev-mpt-llm-foundry.yaml`` — one :class:`Measurement` per row: full-parameter
  pre-training, FSDP FULL_SHARD, bf16 autocast with fp32 master weights and AdamW states (``bf16-mixed``),
  packed sequences of exactly ``seq_len`` tokens, triton flash attention (``flash-triton``), no compile, the row's
  micro batch, accumulation and checkpointing; ``step_time_s`` = the README's derived
  ``GlobalBatchSize (T) / Throughput (T/s)``;
* ``src/autotune/profiles/measurements/models/mpt-<size>-foundry.yaml`` — the benchmark yaml models read through
  the config path (``model_type: mpt``), not the released MPT checkpoints (README, "Model configs"), with the
  config's ``norm_type: low_precision_layernorm`` kept (llm-foundry's LPLayerNorm ran; the config path alone
  describes transformers' MPT, which builds nn.LayerNorm).

Usage:  python tools/ingest_mpt.py [--data docs/sources/llm-foundry-mpt]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from autotune.profiles.hf_config import model_spec_from_config
from autotune.schemas.calibration import Measurement, MeasurementSet
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "src" / "autotune" / "profiles" / "measurements"
DATA = ROOT / "docs" / "sources" / "llm-foundry-mpt"
SET_NAME = "dev-mpt-llm-foundry"
INTER_NODE_GB_PER_S = 200.0
"""1600 Gbps RoCE node-to-node (stated by the A100 tables); the H100 table states none: assumed the same."""

CONDITIONS = """\
llm-foundry MPT pre-training throughput (development data; docs/sources/llm-foundry-mpt/README.md). Stated by the
source tables: model size, sequence length, #GPUs, GPU, MFU/HFU, micro batch, grad accum, global batch,
throughput, precision (amp_bf16 / bf16), MP mode (DEFAULT / PURE), sharding FULL_SHARD, activation checkpointing,
no activation CPU offload. From the benchmark scripts (README, "Settings read from the scripts"): triton flash
attention, low-precision (bf16) LayerNorm, fused cross-entropy, Composer DecoupledAdamW with gradient clipping,
C4 concatenated to exactly seq_len tokens (packed), 30-step runs with a 10-batch throughput window.

Notes on the mapping (ours, not the source's): precision bf16-mixed (fp32 master weights and AdamW states held by
FSDP, bf16 autocast); attention_impl flash-triton (the triton flash-attention kernel: flash's FLOPs and memory,
its own speed); loss_impl native (the fused cross-entropy never
upcasts the full logits); step_time_s is the README's derived GlobalBatchSize (T) / Throughput (T/s); models are
the llm-foundry yaml models (learned positions, biases, no ALiBi), read from configs/mpt-*.json with model_type mpt;
the learned position table (a lookup) is not counted; multi-node rows get 200 GB/s per node (1600 Gbps RoCE,
stated for the A100 tables, assumed for the H100 table).
grad_sync every-micro-step: Composer reduces FSDP gradients after every microbatch (its ``ddp_sync_strategy``
defaults to MULTI_AUTO_SYNC when FSDP is on: composer/trainer/trainer.py; a reading of the code, not stated)."""


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _size(config_path: str) -> str:
    return Path(config_path).stem.removeprefix("mpt-")


def measurement(row: dict[str, Any]) -> Measurement:
    """One development-data row as a Measurement (conditions in the module docstring)."""
    gpus = int(row["num_gpus"])
    per_node = min(8, gpus)
    size = _size(row["model_config"])
    table = row["source_note"].split("table ", 1)[1].split(" (", 1)[0]
    setting = TrainingSetting(
        method="full",
        micro_batch_size=row["micro_batch_size"],
        grad_accum=row["grad_accum"],
        grad_ckpt=row["grad_ckpt"],
        compile=False,
        sharding="fsdp",
        optimizer="adamw",
        precision="bf16-mixed",
        loss_impl="native",
        attention_impl="flash-triton",
        grad_sync="every-micro-step",
    )
    workload = Workload(seq_len=row["seq_len"], global_batch_size=row["micro_batch_size"] * row["grad_accum"] * gpus)
    return Measurement(
        id=f"{row['id']}-{row['gpu']}-mpt-{size}-s{row['seq_len']}-mbs{row['micro_batch_size']}-x{gpus}",
        source=f"llm-foundry-mpt.jsonl, {table}, {row['id']}",
        model=f"mpt-{size}-foundry",
        gpu=row["gpu"],
        num_gpus_per_node=per_node,
        num_nodes=gpus // per_node,
        setting=setting,
        workload=workload,
        step_time_s=row["derived"]["step_time_s"],
        inter_node_gb_per_s=INTER_NODE_GB_PER_S if gpus > per_node else None,
        notes=f"caveats: {', '.join(row['caveats'])}. MFU {row['measured']['mfu']}. {row['notes']}",
    )


def main(argv: list[str] | None = None) -> int:
    """Write the measurement set and the model specs; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in (args.data / "llm-foundry-mpt.jsonl").read_text().splitlines() if line]
    models_dir = OUT_DIR / "models"
    models_dir.mkdir(exist_ok=True)
    for config in sorted((args.data / "configs").glob("mpt-*.json")):
        spec = model_spec_from_config(config)
        key = f"{config.stem}-foundry"
        # llm-foundry builds the norm its config names (transformers' MPT, which the config path describes for a
        # launch, always builds nn.LayerNorm): low_precision_layernorm is llm-foundry's LPLayerNorm
        norm = json.loads(config.read_text()).get("norm_type", "layernorm")
        norm_type = "low_precision_layernorm" if norm == "low_precision_layernorm" else spec.norm_type
        spec = spec.model_copy(
            update={
                "key": key,
                "source": f"docs/sources/llm-foundry-mpt/configs/{config.name} (llm-foundry yaml)",
                "norm_type": norm_type,
            }
        )
        text = yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        (models_dir / f"{key}.yaml").write_text(text, encoding="utf-8")
    measurement_set = MeasurementSet(
        name=SET_NAME,
        source="https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md "
        "(via docs/sources/llm-foundry-mpt/llm-foundry-mpt.jsonl)",
        conditions=CONDITIONS,
        measurements=[measurement(row) for row in rows],
    )
    text = yaml.dump(
        measurement_set.model_dump(mode="json", exclude_none=True), Dumper=_Dumper, sort_keys=False, width=110
    )
    (OUT_DIR / f"{SET_NAME}.yaml").write_text(text, encoding="utf-8")
    print(
        f"wrote {len(rows)} rows to {OUT_DIR / (SET_NAME + '.yaml')} and {len(list(models_dir.glob('*.yaml')))} models"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
