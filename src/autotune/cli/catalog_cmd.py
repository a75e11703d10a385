"""``autotune gpus`` and ``autotune models``: list the catalogs."""

from __future__ import annotations

from autotune.cli import options as opt
from autotune.cli.render import print_json
from autotune.cli.tables import Column, print_table
from autotune.costmodel.params import count_params
from autotune.profiles.catalog import list_gpus, list_models


def gpus_command(json_: opt.JsonOpt = False) -> None:
    """List the GPUs autotune knows (datasheet values; see each profile's source)."""
    gpus = list_gpus()
    if json_:
        print_json([gpu.model_dump(mode="json") for gpu in gpus])
        return
    columns = [
        Column("key"),
        Column("GiB", "right"),
        Column("bf16 TFLOP/s", "right", drop_order=3),
        Column("GB/s", "right", drop_order=4),
        Column("bitsandbytes", drop_order=5),
        Column("host link", drop_order=6, wrap=True),
        Column("GPU link", drop_order=7, wrap=True),
        Column("aliases", drop_order=8, wrap=True),
        Column("name", drop_order=9, wrap=True),
    ]
    rows = [
        [
            gpu.key,
            f"{gpu.memory_gib:g}",
            f"{gpu.bf16_tflops:g}" if gpu.bf16_tflops else "—",
            f"{gpu.memory_bandwidth_gb_per_s:g}",
            "yes" if gpu.supports_bitsandbytes else "no",
            gpu.host_link,
            gpu.gpu_link or "—",
            ", ".join(gpu.aliases),
            gpu.name,
        ]
        for gpu in gpus
    ]
    print_table("GPUs (datasheet values; sources: --json)", columns, rows)


def models_command(json_: opt.JsonOpt = False) -> None:
    """List the catalog models with their parameter counts (from config.json shapes)."""
    models = list_models()
    if json_:
        print_json([{**m.model_dump(mode="json"), "total_params": count_params(m).total_params} for m in models])
        return
    columns = [
        Column("key"),
        Column("params", "right"),
        Column("layers", "right", drop_order=3),
        Column("hidden", "right", drop_order=4),
        Column("heads (kv)", "right", drop_order=5),
        Column("vocab", "right", drop_order=6),
        Column("tied", drop_order=7),
        Column("Hugging Face repo", drop_order=8),
    ]
    rows = [
        [
            m.key,
            f"{count_params(m).total_params / 1e9:.2f} B",
            str(m.num_hidden_layers),
            str(m.hidden_size),
            f"{m.num_attention_heads} ({m.num_key_value_heads})",
            str(m.vocab_size),
            "yes" if m.tie_word_embeddings else "no",
            m.hf_repo_id or "—",
        ]
        for m in models
    ]
    print_table("Models (exact parameter counts: --json)", columns, rows)
