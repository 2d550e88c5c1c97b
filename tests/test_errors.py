"""Every error a user can fix is a LinformerError, a missing file too, so a notebook catches them with one except."""

import pytest

from linformer.errors import LinformerError, MissingFileError


def _calls(tmp_path):
    from linformer.data.io import expand_sources
    from linformer.data.task_readers import check_task_dir
    from linformer.data.tokenizer import tokenizer_hash
    from linformer.modeling.configuration import check_local_path
    from linformer.train.predict import predict_file

    gone = tmp_path / "gone"
    return {
        "corpus source": lambda: expand_sources([str(gone / "*.txt")]),
        "task directory": lambda: check_task_dir("sst2", gone),
        "tokenizer directory": lambda: tokenizer_hash(str(gone)),
        "model directory": lambda: check_local_path(str(gone)),
        "file to predict": lambda: predict_file(None, gone / "reviews.txt", None),  # checked before the model is used
    }


@pytest.mark.parametrize("what", ["corpus source", "task directory", "tokenizer directory", "model directory",
                                  "file to predict"])
def test_a_missing_file_is_a_linformer_error_and_still_a_file_not_found_error(what, tmp_path):
    with pytest.raises(LinformerError) as caught:
        _calls(tmp_path)[what]()
    assert isinstance(caught.value, MissingFileError) and isinstance(caught.value, FileNotFoundError)
    assert str(tmp_path / "gone") in str(caught.value)  # the message names the path
