"""Data-layer fixtures: a small synthetic corpus, a tokenizer trained on it, the mirror location."""

import os
import random
from pathlib import Path

import pytest

from linformer.files.locations import resolve_path

MIRROR = Path(resolve_path(os.environ.get("LINFORMER_DATA_MIRROR", "../shared/data")))
WORDS = ["the", "of", "and", "to", "in", "a", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his", "her", "he", "she", "it", "they", "an", "be", "had", "are", "this", "which", "were", "one", "all", "their", "there", "been", "would", "have", "not", "but", "when", "who", "into", "more", "some", "than", "them", "time", "could", "river", "castle", "winter", "music", "science", "history", "garden", "letter", "window", "morning", "village", "doctor", "ship"]


def write_corpus(path: Path, n_docs: int = 40, seed: int = 0, prefix: str = "doc") -> Path:
    """Documents `<prefix>NNN ...` of 1-6 paragraphs, blank line between documents."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        paras = []
        for p in range(rng.randint(1, 6)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 40))]
            head = f"{prefix}{d:03d} " if p == 0 else ""
            paras.append(head + " ".join(words).capitalize() + ".")
        docs.append("\n".join(paras))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory, corpus_file) -> str:
    from linformer.data.tokenizer import train_tokenizer

    return train_tokenizer([str(corpus_file)], str(tmp_path_factory.mktemp("tok") / "tok"), vocab_size=400,
                           min_frequency=1, show_progress=False)


@pytest.fixture(scope="session")
def tokenizer(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tok_dir)


@pytest.fixture
def mirror() -> Path:
    if not (MIRROR / "MANIFEST.md").is_file():
        pytest.skip(f"data mirror not present at {MIRROR}")
    return MIRROR


@pytest.fixture
def make_corpus():
    """The `write_corpus(path, n_docs=40, seed=0, prefix="doc")` helper, as a fixture."""
    return write_corpus


@pytest.fixture(params=["same path", "overlapping glob", "a copy"])
def text_given_twice(request, tmp_path, corpus_file) -> list[str]:
    """Sources that give one text twice: a path listed twice, a glob and a path it matches, a copy under another
    name."""
    import shutil

    here = tmp_path / "src"
    here.mkdir()
    shutil.copy(corpus_file, here / "a.txt")
    return [str(s) for s in {"same path": [here / "a.txt", here / "a.txt"],
                             "overlapping glob": [here / "*.txt", here / "a.txt"],
                             "a copy": [here / "a.txt", shutil.copy(corpus_file, tmp_path / "backup.txt")]}[request.param]]


# what a text given twice is refused with, at either stage
GIVEN_TWICE = r"(is given twice|holds the same text as .*a copy).*Give each text once"
