"""``errors.first_line``, the one way a message quotes an exception, and the places that quote one: an exception
with an empty message (a bare ``OSError()``, ``KeyError()``) is named by its type, never an IndexError raised over
the error being reported."""

import logging
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationResolutionError

from linformer.errors import CheckpointError, ConfigError, first_line


def test_first_line_quotes_the_first_line_or_names_the_type():
    assert first_line(ValueError("  disk full\nmore  ")) == "disk full"
    assert first_line(OSError()) == "OSError"
    assert first_line(KeyError()) == "KeyError"
    assert first_line(OSError("disk full\nmore"), named=True) == "OSError: disk full"
    assert first_line(OSError(), named=True) == "OSError"


class _Record(SimpleNamespace):
    started = True
    dir = "/tmp/run"

    def info(self):
        return {"status": "running"}

    def fail(self, err):
        raise OSError()  # a write that fails with no message


def test_record_end_warns_over_a_recording_error_without_a_message(caplog):
    from linformer.train.core import _record_end

    with caplog.at_level(logging.WARNING):
        _record_end(_Record(), ValueError("the user's error"))
    assert "cannot record how the run ended (OSError)" in caplog.text


def test_an_interpolation_refused_without_a_message_is_a_config_error(monkeypatch):
    from linformer.configs import refuse_bad_interpolations

    def select(*args, **kwargs):
        raise InterpolationResolutionError("")

    monkeypatch.setattr(OmegaConf, "select", select)
    with pytest.raises(ConfigError, match=r"seed=\$\{nope\} does not resolve: InterpolationResolutionError"):
        refuse_bad_interpolations(OmegaConf.create({"seed": 1}), "pretrain", ["seed=${nope}"])


def test_a_model_refused_with_a_bare_key_error_is_a_checkpoint_error(monkeypatch, tmp_path):
    from linformer.modeling import loading

    def load_auto(*args, **kwargs):
        raise KeyError()

    monkeypatch.setattr(loading, "load_auto", load_auto)
    with pytest.raises(CheckpointError, match=r"cannot classify sequences \(KeyError\)"):
        loading.load_pretrained(loading.AutoModelForSequenceClassification, str(tmp_path))
