"""The test suite keeps out of the user's Hugging Face caches (tests/conftest.py)."""

import tempfile
from pathlib import Path


def test_the_tests_write_into_no_hugging_face_cache_of_the_user():
    """A trust_remote_code load copies the model's code into transformers_modules/<its folder's name>, an evaluate
    module its files and locks: the suite left ~/.cache/huggingface/modules with a folder per test's model (5.8 MB
    over a session, one more per code version) and evaluate's metric locks. Every cache the libraries write, as
    they read it at their import, is under one folder of this test process's own in the temporary directory."""
    import datasets.config
    import evaluate.config
    import huggingface_hub.constants
    from transformers.utils import hub

    caches = {"transformers modules": hub.HF_MODULES_CACHE, "datasets": datasets.config.HF_DATASETS_CACHE,
              "datasets modules": datasets.config.HF_MODULES_CACHE, "evaluate": evaluate.config.HF_EVALUATE_CACHE,
              "evaluate modules": evaluate.config.HF_MODULES_CACHE, "metrics": evaluate.config.HF_METRICS_CACHE,
              "hub": huggingface_hub.constants.HF_HUB_CACHE, "home": huggingface_hub.constants.HF_HOME}
    homes = {Path(where).resolve().relative_to(Path(tempfile.gettempdir()).resolve()).parts[0]
             for where in caches.values()}
    assert len(homes) == 1 and next(iter(homes)).startswith("linformer-tests-hf-"), caches
