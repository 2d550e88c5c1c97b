"""A tiny tokenizer + packed corpus built once per session, and Hydra-composed tiny configs."""

import random
from pathlib import Path

import pytest

from linformer.configs import compose
from linformer.data import prepare_corpus, train_tokenizer

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
N = 32  # tokens per block in the fixtures


def _synthetic_corpus(path: Path, docs: int = 120, seed: int = 0) -> Path:
    """Documents of templated English sentences: a learnable signal, so the MLM loss falls in a few steps."""
    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the old man", "my sister", "the teacher", "a small bird"]
    verbs = ["sees", "likes", "follows", "paints", "finds", "remembers"]
    objects = ["the river", "a red house", "the garden", "an apple", "the long road", "a quiet song"]
    with path.open("w") as f:
        for _ in range(docs):
            for _ in range(rng.randint(2, 5)):
                sents = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}." for _ in range(4)]
                f.write(" ".join(sents).capitalize() + "\n")
            f.write("\n")
    return path


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_data")
    text = _synthetic_corpus(root / "corpus.txt")
    tok = train_tokenizer([str(text)], str(root / "tokenizer"), vocab_size=300, min_frequency=1, show_progress=False)
    prepare_corpus([str(text)], tok, str(root / "corpus"), n=N, val_fraction=0.1, num_proc=1)
    return {"tokenizer_dir": tok, "corpus_dir": str(root / "corpus")}


PRETRAIN_OVERRIDES = [
    "model=tiny",
    f"model.max_seq_len={N}",
    "model.projected_dim=8",
    "model.hidden_size=32",
    "model.intermediate_size=64",
    "trainer.batch_size=8",
    "trainer.max_steps=12",
    "trainer.warmup_steps=2",
    "trainer.lr=3e-3",
    "trainer.eval_every=6",
    "trainer.eval_blocks=16",
    "trainer.save_every=4",
    "trainer.log_every=1",
]


def compose_pretrain(tiny_data, *overrides: str, with_hydra: bool = False):
    """The real configs/pretrain.yaml with a tiny model on the fixture corpus."""
    base = [*PRETRAIN_OVERRIDES, f"tokenizer_dir={tiny_data['tokenizer_dir']}", f"corpus_dir={tiny_data['corpus_dir']}"]
    return compose("pretrain", base + list(overrides), with_hydra=with_hydra)


def write_sst2_fixture(root: Path, train: int = 200, dev: int = 40, seed: int = 0) -> Path:
    """GLUE SST-2 layout (sentence<TAB>label, no quoting) with a learnable sentiment signal. Every sentence is
    distinct (a row tag), as in the real splits: training drops the train rows that are also dev rows."""
    rng = random.Random(seed)
    good, bad = ["good", "great", "lovely", "fine"], ["bad", "awful", "dull", "poor"]
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        lines = ["sentence\tlabel"]
        for _ in range(rows):
            label = rng.randint(0, 1)
            word = rng.choice(good if label else bad)
            lines.append(f"{word} {word} , the film {name[0]}{len(lines)} is {word} . \t{label}")
        (root / name).write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def pretrained_run(tiny_data, tmp_path_factory):
    """A tiny pretraining run directory (with model/ and summary.json)."""
    from linformer.train.pretrain import pretrain

    run = tmp_path_factory.mktemp("pretrained")
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6"), run)
    return run


def compose_finetune(*overrides: str):
    base = ["trainer.epochs=2", "trainer.batch_size=16", "trainer.eval_batch_size=32", "trainer.lr=1e-3",
            "trainer.log_every=1"]
    return compose("finetune", base + list(overrides))


def nan_losses_after(monkeypatch, calls: int) -> None:
    """Every training forward of LinformerForMaskedLM after its first `calls` returns a NaN loss (the weights and the
    evaluation's forwards are untouched): what a diverging run looks like to the trainer."""
    from linformer.modeling import LinformerForMaskedLM

    forward, seen = LinformerForMaskedLM.forward, {"n": 0}

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        seen["n"] += 1
        if self.training and seen["n"] > calls:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(LinformerForMaskedLM, "forward", poisoned)


def signal_at_step(monkeypatch, at: int, signum: int) -> None:
    """The process sends itself `signum` as the trainer starts step `at`: the real signal, through the handler the run
    installs. monkeypatch.undo() (or a new test) lets the next run train without it."""
    import os

    from linformer.train.trainer import Trainer

    real_step = Trainer._train_step

    def signalled(self, step):
        if step == at:
            os.kill(os.getpid(), signum)
        return real_step(self, step)

    monkeypatch.setattr(Trainer, "_train_step", signalled)
