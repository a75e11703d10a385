"""``autotune gpus`` and ``autotune models``: list the catalogs."""

from __future__ import annotations

from rich.table import Table

from autotune.cli import options as opt
from autotune.cli.console import console
from autotune.cli.render import print_json
from autotune.costmodel.params import count_params
from autotune.profiles.catalog import list_gpus, list_models


def gpus_command(json_: opt.JsonOpt = False) -> None:
    """List the GPUs autotune knows (datasheet values; see each profile's source)."""
    gpus = list_gpus()
    if json_:
        print_json([gpu.model_dump(mode="json") for gpu in gpus])
        return
    table = Table(title="GPUs")
    for column in (
        "key",
        "name",
        "GiB",
        "bf16 TFLOP/s",
        "GB/s",
        "host link",
        "GPU link",
        "bitsandbytes",
        "aliases",
    ):
        table.add_column(column)
    for gpu in gpus:
        table.add_row(
            gpu.key,
            gpu.name,
            f"{gpu.memory_gib:g}",
            f"{gpu.bf16_tflops:g}" if gpu.bf16_tflops else "—",
            f"{gpu.memory_bandwidth_gb_per_s:g}",
            gpu.host_link,
            gpu.gpu_link or "—",
            "yes" if gpu.supports_bitsandbytes else "no",
            ", ".join(gpu.aliases[:4]),
        )
    console().print(table)


def models_command(json_: opt.JsonOpt = False) -> None:
    """List the catalog models with their parameter counts (from config.json shapes)."""
    models = list_models()
    if json_:
        print_json([{**m.model_dump(mode="json"), "total_params": count_params(m).total_params} for m in models])
        return
    table = Table(title="Models")
    for column in ("key", "Hugging Face repo", "params", "layers", "hidden", "heads (kv)", "vocab", "tied"):
        table.add_column(column)
    for m in models:
        table.add_row(
            m.key,
            m.hf_repo_id or "—",
            f"{count_params(m).total_params / 1e9:.2f} B",
            str(m.num_hidden_layers),
            str(m.hidden_size),
            f"{m.num_attention_heads} ({m.num_key_value_heads})",
            str(m.vocab_size),
            "yes" if m.tie_word_embeddings else "no",
        )
    console().print(table)
