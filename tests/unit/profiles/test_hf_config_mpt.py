"""autotune.profiles.hf_config: an MPT config.json read through the config path."""

from __future__ import annotations

from pathlib import Path

from autotune.costmodel.params import count_params


def test_mpt_config_json_loads_through_the_config_path(tmp_path: Path) -> None:
    import json

    from autotune.profiles.hf_config import model_spec_from_config

    config = {
        "model_type": "mpt",
        "d_model": 2048,
        "n_heads": 16,
        "n_layers": 24,
        "expansion_ratio": 4,
        "max_seq_len": 2048,
        "vocab_size": 50368,
        "no_bias": False,
        "learned_pos_emb": True,
        "attn_config": {"attn_type": "multihead_attention", "alibi": False},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = model_spec_from_config(path)
    assert (model.hidden_size, model.intermediate_size, model.num_key_value_heads) == (2048, 8192, 16)
    assert model.fused_qkv and not model.mlp_gated and model.norm_has_bias and model.tie_word_embeddings
    # README of the development data: mpt-1b N(2048) = 1,315,950,592 including the 2048 × 2048 position table.
    assert count_params(model).total_params == 1_315_950_592 - 2048 * 2048
    assert any("position table" in note for note in model.approximations)
    config["no_bias"] = True
    config["attn_config"] = {"attn_type": "grouped_query_attention", "kv_n_heads": 4}
    path.write_text(json.dumps(config))
    gqa = model_spec_from_config(path)
    assert gqa.num_key_value_heads == 4 and not gqa.attention_bias and not gqa.norm_has_bias
