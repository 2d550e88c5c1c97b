import re
from pathlib import Path

import pytest

from linformer import LinformerConfig


def tiny_config(**overrides) -> LinformerConfig:
    """2 layers, width 32, 4 heads, n = 16: big enough to exercise every code path, fast on CPU."""
    kwargs = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_seq_len=16,
        projected_dim=4,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    kwargs.update(overrides)
    return LinformerConfig(**kwargs)


@pytest.fixture
def make_config():
    return tiny_config


def run_usage(model_dir: Path, monkeypatch) -> dict:
    """The card's usage snippet run as written from the folder's parent: its namespace (model, tokenizer)."""
    text = (model_dir / "README.md").read_text()
    [code] = re.findall(r"## Usage\n.*?```python\n(.*?)```", text, flags=re.S)
    monkeypatch.chdir(model_dir.parent)
    namespace = {}
    exec(code, namespace)
    return namespace
