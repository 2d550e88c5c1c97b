import numpy as np
import pytest

from linformer.data import compute_metrics


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


def test_a_task_of_more_labels_scores_a_macro_f1(monkeypatch):
    """The packaged F1 scored the positive label only (sklearn's "binary"): a task of four labels failed its final
    scoring with "Target is multiclass". f1_macro averages the labels' F1."""
    from linformer.data import tasks

    monkeypatch.setitem(tasks.TASKS, "four", tasks.TaskSpec("four", ("text",), "label", ("a", "b", "c", "d"),
                                                            ("0", "1", "2", "3"), metrics=("accuracy", "f1_macro")))
    out = compute_metrics("four", [0, 1, 2, 3, 3], [0, 1, 2, 3, 2])
    assert out["accuracy"] == 0.8 and out["f1_macro"] == pytest.approx((1 + 1 + 2 / 3 + 2 / 3) / 4)


def test_the_metric_modules_load_without_writing_under_hf_home(monkeypatch):
    """evaluate.load copies each module into $HF_HOME/modules: a read-only home failed a finetuning run at its
    final scoring, after all its training. The packaged modules are imported from the package instead."""
    import evaluate.loading

    from linformer.data import metrics

    def read_only_home(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/home/ro/.cache/huggingface/modules")

    monkeypatch.setattr(evaluate.loading, "init_dynamic_modules", read_only_home)
    metrics.load_metric.cache_clear()
    try:
        assert compute_metrics("qqp", [1, 1, 0, 0], [1, 0, 0, 1]) == {"accuracy": 0.5, "f1": 0.5}
    finally:
        metrics.load_metric.cache_clear()


def test_every_metric_says_which_way_is_better():
    """compare_runs read a metric's direction from a list of words ("mcc" was lower-is-better) while finetuning
    maximised any first metric: both read the registry now."""
    from linformer.data.metrics import METRICS, higher_is_better
    from linformer.report.compare import higher_is_better as best_is_max

    for name, spec in METRICS.items():
        assert (spec.path.is_file(), higher_is_better(name)) == (True, spec.higher_is_better)
        assert best_is_max(f"val_{name}") is best_is_max(f"eval_{name}") is spec.higher_is_better
    assert best_is_max("val_agreement") and best_is_max("tokens_per_s") and not best_is_max("val_loss")


def test_without_evaluate_a_run_s_metrics_are_one_error_naming_the_package(monkeypatch):
    """The import failed deep inside the metric loader: a Hydra-wrapped ModuleNotFoundError traceback."""
    import sys

    from linformer.data.metrics import load_metric, load_metrics
    from linformer.errors import ConfigError

    load_metric.cache_clear()  # a module loaded earlier in this process is cached
    monkeypatch.setitem(sys.modules, "evaluate", None)  # as where it is not installed: its import fails
    monkeypatch.setitem(sys.modules, "evaluate.loading", None)
    try:
        with pytest.raises(ConfigError, match=r"^scoring a task \(.*\) needs the evaluate package, .*: "
                                              r"pip install evaluate$"):
            load_metrics(("accuracy",))
    finally:
        load_metric.cache_clear()
