"""Binary F1 as an `evaluate` metric module, shipped in the package so `evaluate.load(<path>)` works offline."""

import datasets
import evaluate
from sklearn.metrics import f1_score

_DESCRIPTION = "F1: harmonic mean of precision and recall of the positive label (GLUE QQP / MRPC convention)."
_CITATION = ""
_KWARGS_DESCRIPTION = "predictions: list of int labels; references: list of int labels; pos_label (default 1)."


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class F1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references, labels=None, pos_label=1, average="binary", sample_weight=None):
        score = f1_score(references, predictions, labels=labels, pos_label=pos_label, average=average,
                         sample_weight=sample_weight)
        return {"f1": float(score)}
