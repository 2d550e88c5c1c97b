import numpy as np
import pytest

from linformer.data.metrics import compute_metrics


def test_accuracy_all_tasks():
    for task in ("sst2", "imdb", "qnli"):
        assert compute_metrics(task, [1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75}


def test_qqp_accuracy_and_f1():
    out = compute_metrics("qqp", [1, 1, 0, 0], [1, 0, 0, 1])
    assert out["accuracy"] == 0.5 and out["f1"] == pytest.approx(0.5)


def test_logits_are_argmaxed_and_errors():
    logits = np.array([[0.1, 0.9], [2.0, -1.0]])
    assert compute_metrics("sst2", logits, [1, 1]) == {"accuracy": 0.5}
    with pytest.raises(ValueError, match="shape"):
        compute_metrics("sst2", [1, 0, 1], [1, 0])
    with pytest.raises(KeyError, match="valid tasks"):
        compute_metrics("nope", [1], [1])
