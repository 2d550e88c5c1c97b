"""save_pretrained (safetensors) and Auto*.from_pretrained round trips, ties and classification losses."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from linformer import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForSequenceClassification,
    LinformerModel,
)

from .conftest import tiny_config


@pytest.mark.parametrize("sharing", ["none", "headwise", "kv", "layerwise"])
def test_mlm_auto_round_trip(tmp_path, sharing):
    config = tiny_config(sharing=sharing, projected_dim=[4, 8] if sharing != "layerwise" else 4)
    model = LinformerForMaskedLM(config).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "linformer" and saved["sharing"] == sharing

    assert isinstance(AutoConfig.from_pretrained(tmp_path), LinformerConfig)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, LinformerForMaskedLM)
    assert loaded.config.projected_dim == config.projected_dim
    assert loaded.lm_head.decoder.weight.data_ptr() == loaded.roberta.embeddings.word_embeddings.weight.data_ptr()
    ids = torch.randint(4, 64, (2, 12))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, msg=name)


def test_auto_model_loads_the_encoder_of_an_mlm_checkpoint(tmp_path):
    mlm = LinformerForMaskedLM(tiny_config()).eval()
    mlm.save_pretrained(tmp_path)
    encoder = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(encoder, LinformerModel)
    ids = torch.randint(4, 64, (2, 12))
    torch.testing.assert_close(encoder(ids).last_hidden_state, mlm.roberta(ids).last_hidden_state)


def test_sequence_classification_from_mlm_checkpoint(tmp_path):
    mlm = LinformerForMaskedLM(tiny_config())
    mlm.save_pretrained(tmp_path)
    clf = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert isinstance(clf, LinformerForSequenceClassification)
    torch.testing.assert_close(
        clf.roberta.embeddings.word_embeddings.weight, mlm.roberta.embeddings.word_embeddings.weight
    )
    clf.save_pretrained(tmp_path / "clf")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "clf")
    torch.testing.assert_close(again.classifier.out_proj.weight, clf.classifier.out_proj.weight)


@pytest.mark.parametrize(
    "num_labels, labels, problem_type, reference",
    [
        (1, torch.tensor([0.5, -1.0]), "regression", lambda z, y: torch.nn.functional.mse_loss(z.squeeze(-1), y)),
        (3, torch.tensor([2, 0]), "single_label_classification", torch.nn.functional.cross_entropy),
        (
            3,
            torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
            "multi_label_classification",
            torch.nn.functional.binary_cross_entropy_with_logits,
        ),
    ],
)
def test_problem_types(num_labels, labels, problem_type, reference):
    model = LinformerForSequenceClassification(tiny_config(num_labels=num_labels)).eval()
    out = model(torch.randint(4, 64, (2, 10)), labels=labels)
    assert model.config.problem_type == problem_type
    assert out.logits.shape == (2, num_labels)
    torch.testing.assert_close(out.loss, reference(out.logits, labels))


def test_return_dict_false_gives_a_tuple():
    model = LinformerForMaskedLM(tiny_config()).eval()
    out = model(torch.randint(4, 64, (1, 8)), return_dict=False)
    assert isinstance(out, tuple) and out[0].shape == (1, 8, 64)
