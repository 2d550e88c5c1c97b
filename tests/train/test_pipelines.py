"""Hugging Face pipelines on a model this framework trained: fill-mask, text-classification and feature-extraction
load it by directory (Auto classes, its tokenizer beside it) and cut an over-long input to the model's n."""

import pytest
import torch
from transformers import AutoTokenizer, pipeline

from linformer import LinformerForSequenceClassification

LONG = "the cat sees the river . " * 40  # far more tokens than the fixture model's n


def test_a_trained_models_tokenizer_knows_n(pretrained_run):
    tokenizer = AutoTokenizer.from_pretrained(pretrained_run / "model")
    n = LinformerForSequenceClassification.config_class.from_pretrained(pretrained_run / "model").max_seq_len
    assert tokenizer.model_max_length == n  # so that truncation=True cuts to what E and F take


def test_fill_mask_runs_and_truncates(pretrained_run):
    fill = pipeline("fill-mask", model=str(pretrained_run / "model"), device="cpu")
    mask = fill.tokenizer.mask_token
    out = fill(f"the cat {mask} the river .", top_k=3)
    assert len(out) == 3 and all(0.0 <= o["score"] <= 1.0 for o in out)
    long = fill(f"the cat {mask} the river . " + LONG, top_k=2, tokenizer_kwargs={"truncation": True})
    assert len(long) == 2
    with pytest.raises(TypeError, match="truncation"):  # the other pipelines' form: the guide gives fill-mask's own
        fill(f"the cat {mask} the river . " + LONG, truncation=True)


def test_text_classification_runs_and_truncates(pretrained_run, tmp_path):
    model = LinformerForSequenceClassification.from_pretrained(pretrained_run / "model", num_labels=2)
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(pretrained_run / "model").save_pretrained(tmp_path)
    classify = pipeline("text-classification", model=str(tmp_path), device="cpu")
    (short,) = classify("the cat sees the river .")
    assert short["label"] in ("LABEL_0", "LABEL_1")
    (long,) = classify(LONG, truncation=True)
    assert 0.0 <= long["score"] <= 1.0
    with pytest.raises(ValueError, match="Truncate inputs"):  # without truncation the model says what to do
        classify(LONG)


def test_feature_extraction_gives_one_vector_per_token_up_to_n(pretrained_run):
    extract = pipeline("feature-extraction", model=str(pretrained_run / "model"), device="cpu", framework="pt")
    n = extract.model.config.max_seq_len
    features = torch.tensor(extract(LONG, truncation=True))  # the guide's call
    assert features.shape == (1, n, extract.model.config.hidden_size)
    assert torch.equal(torch.tensor(extract(LONG, tokenize_kwargs={"truncation": True})), features)
