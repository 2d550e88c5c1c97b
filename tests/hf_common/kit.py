"""transformers' own common model and config tests (``tests/test_modeling_common.py``, ``tests/test_configuration_common.py``),
taken from the source distribution of the installed transformers version: downloaded by pip into a cache on first use,
never copied into this repository.

The source distribution ships those two files without the helper modules they import from transformers' test tree
(export, generation and config helpers); this kit writes stand-ins for them: empty mixins (no export or generation
tests: the Linformer is an encoder) and the common config arguments ``check_config_arguments_init`` sets.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import transformers

PACKAGE = "transformers_kit"  # the tests' package name here (theirs is "tests", which is ours)
FILES = ("test_modeling_common.py", "test_configuration_common.py")
STANDINS = {
    "exporters/test_export.py": "class ExportTesterMixin:\n    \"\"\"No export tests: a stand-in.\"\"\"\n",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    \"\"\"No generation tests: a stand-in.\"\"\"\n",
    # non-default values of PretrainedConfig's common arguments, each checked to be set by check_config_arguments_init
    "utils/test_configuration_utils.py": (
        "config_common_kwargs = {\n"
        "    'return_dict': False, 'output_hidden_states': True, 'output_attentions': True, 'dtype': 'float16',\n"
        "    'id2label': {0: 'neg', 1: 'pos'}, 'label2id': {'neg': 0, 'pos': 1}, 'problem_type': 'regression',\n"
        "    'chunk_size_feed_forward': 5, 'is_encoder_decoder': False, 'tie_word_embeddings': False,\n"
        "}\n"),
}


def cache_root() -> Path:
    return Path(os.environ.get("LINFORMER_TEST_CACHE", Path.home() / ".cache" / "linformer")) / \
        f"transformers-{transformers.__version__}-tests"


def fetch(root: Path) -> None:
    """Download the installed version's source distribution and write the kit's package under root (atomically: a
    half-written kit is never used)."""
    version = transformers.__version__
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"transformers=={version}", "-d", tmp], check=True, capture_output=True, timeout=600)
        (sdist,) = Path(tmp).glob("transformers-*.tar.gz")
        package = Path(tmp) / "kit" / PACKAGE
        package.mkdir(parents=True)
        with tarfile.open(sdist) as tar:
            for name in FILES:
                member = tar.extractfile(f"transformers-{version}/tests/{name}")
                (package / name).write_bytes(member.read())
        (package / "__init__.py").write_text("")
        for rel, text in STANDINS.items():
            (package / rel).parent.mkdir(parents=True, exist_ok=True)
            (package / rel).write_text(text)
            (package / rel).parent.joinpath("__init__.py").touch()
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(Path(tmp) / "kit", root)
        except OSError:
            if not (root / PACKAGE / FILES[0]).is_file():  # not another test worker's kit, finished first
                raise


def ensure() -> str:
    """Fetch the kit into the cache unless it is there; "" or why it could not be (nothing imported: its modules
    carry pytest marks, which must be registered first)."""
    root = cache_root()
    if not (root / PACKAGE / FILES[0]).is_file():
        try:
            fetch(root)
        except (subprocess.SubprocessError, OSError, KeyError, ValueError) as err:
            if not (root / PACKAGE / FILES[0]).is_file():
                return (f"transformers {transformers.__version__}'s source distribution could not be fetched "
                        f"(pip download, a package index needed once): {err}")
    return ""


def load() -> tuple[object | None, str]:
    """(the kit's test_modeling_common and test_configuration_common modules, "") or (None, why not)."""
    why = ensure()
    if why:
        return None, why
    root = cache_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return (importlib.import_module(f"{PACKAGE}.test_modeling_common"),
            importlib.import_module(f"{PACKAGE}.test_configuration_common")), ""
