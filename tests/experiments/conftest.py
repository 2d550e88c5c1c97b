"""The training tests' fixtures (a tiny tokenizer, corpus and pretraining run) for the plans' recipe tests."""

from tests.train.conftest import pretrained_run, tiny_data  # noqa: F401 (pytest fixtures, found by name)
