"""The specs of the scripts beside the training stages: the corpus group (configs/data/) and the arguments that
``scripts/prepare_corpus.py``, ``train_tokenizer.py`` and ``analyze_spectrum.py`` pass on, read and checked once at
their entry (a wrong type is a ConfigError naming its key, and so is a seed or a count out of its range, by the
checks the run specs use; the library functions check the other values' ranges)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..data.io import resolve_sources
from ..devices import resolve_device
from ..files.locations import resolve_path
from ..files.names import folder_name
from ..modeling.loading import resolve_tokenizer_dir
from .runs import plain_config
from .settings import check_corpus_names, check_types, positive_int, refuse_unknown, seed_value


def _typed(cls, values: Mapping, prefix: str) -> dict[str, Any]:
    """The fields of the dataclass `cls` from `values`, each of its annotated type (missing ones None). With a
    `prefix`, `values` is that config group and a key that is no field is refused; without, `values` is the top
    level and only the fields are read."""
    names = [f.name for f in fields(cls)]
    if prefix:
        refuse_unknown(values, cls, prefix)
    picked = {name: values.get(name) for name in names}
    check_types({k: v for k, v in picked.items() if k in values}, cls, prefix)
    return picked


class _Arguments:
    def arguments(self) -> dict[str, Any]:
        """The spec as the library function's keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class CorpusData:
    """``cfg.data``: a pretraining corpus's sources, the tokenizer trained on it, and how it is packed."""

    name: str
    sources: list[str]               # .txt/.txt.gz files or globs, or hf:<name>[:<config>]
    tokenizer: str                   # data/tokenizers/<tokenizer>/
    n: int                           # block length in tokens
    val_fraction: float              # validation share of tokens, whole documents
    seed: int
    num_proc: int
    skip_bad_rows: bool
    tokenizer_max_lines: int | None  # the tokenizer's training sample; None = every line
    max_documents: int | None        # the first that many documents; None = all
    vocab_size: int | None = None    # the tokenizer's vocabulary (None: configs/tokenizer.yaml's default)

    @classmethod
    def read(cls, d: Mapping, prepares: bool = False) -> CorpusData:
        """`prepares`: read for prepare_corpus (``check_corpus_names``)."""
        seed = seed_value(d, "seed", "data")  # before the types: every seed's one error line
        values = _typed(cls, d, "data")
        check_corpus_names(values, prepares)
        counts = {key: positive_int(values, key, "data", allow_none=key != "num_proc")
                  for key in ("num_proc", "tokenizer_max_lines", "max_documents", "vocab_size")}
        return cls(**values | counts | {"seed": seed})


@dataclass(frozen=True)
class CorpusSpec(_Arguments):
    """configs/corpus.yaml: ``prepare_corpus(**spec.arguments())``, paths resolved."""

    sources: list[str]
    tokenizer_dir: str
    out_dir: str
    n: int
    val_fraction: float
    num_proc: int
    seed: int
    skip_bad_rows: bool
    max_documents: int | None
    force: bool
    overwrite: bool

    @classmethod
    def read(cls, cfg: Mapping) -> CorpusSpec:
        cfg = plain_config(cfg, "corpus")
        d = CorpusData.read(cfg.get("data") or {}, prepares=True)
        top = _typed(cls, cfg, "")
        # a packaged model's name (tokenizer_dir=minilm) packs blocks with that model's own tokenizer
        return cls(sources=resolve_sources(d.sources),
                   tokenizer_dir=resolve_tokenizer_dir(str(top["tokenizer_dir"]), check=False),
                   out_dir=resolve_path(str(top["out_dir"])), n=d.n, val_fraction=d.val_fraction,
                   num_proc=d.num_proc, seed=d.seed, skip_bad_rows=d.skip_bad_rows, max_documents=d.max_documents,
                   force=bool(top["force"]), overwrite=bool(top["overwrite"]))


@dataclass(frozen=True)
class TokenizerSpec(_Arguments):
    """configs/tokenizer.yaml: ``train_tokenizer(**spec.arguments())``, paths resolved."""

    files: list[str]
    out_dir: str
    vocab_size: int
    min_frequency: int
    max_lines: int | None
    show_progress: bool
    overwrite: bool
    skip_bad_rows: bool = False  # data.skip_bad_rows: the corpus's lines are read as prepare_corpus reads them

    @classmethod
    def read(cls, cfg: Mapping) -> TokenizerSpec:
        cfg = plain_config(cfg, "tokenizer")
        d = CorpusData.read(cfg.get("data") or {})  # the group its files and sample come from
        # the tokenizer's name (data.tokenizer unless given) names its out_dir and Hydra's folder
        folder_name(cfg.get("name"), "name", "a tokenizer folder", "paths.data_dir/tokenizers/", stage="tokenizer")
        top = {k: v for k, v in _typed(cls, cfg, "").items() if k != "skip_bad_rows"}
        return cls(**top | {"files": resolve_sources(top["files"]),
                            "out_dir": resolve_path(str(top["out_dir"])), "skip_bad_rows": d.skip_bad_rows})


@dataclass(frozen=True)
class SpectrumSpec(_Arguments):
    """configs/spectrum.yaml: ``analyze_spectrum(**spec.arguments())``, paths resolved (Figure 1's windows come from
    a prepared corpus or raw text)."""

    model_path: str
    out_dir: str
    prefix: str
    corpus_dir: str | None
    text_path: str | None
    num_windows: int
    batch_size: int
    k: int | None
    seed: int
    max_lines: int
    device: str
    description: str | None
    overwrite: bool

    @classmethod
    def read(cls, cfg: Mapping) -> SpectrumSpec:
        plain = plain_config(cfg, "spectrum")
        seed = seed_value(plain)  # before the types: every seed's one error line
        top = _typed(cls, plain, "")
        folder_name(top["prefix"], "prefix", "a file name prefix", "out_dir")  # <out_dir>/<prefix>_curves.png
        top |= {key: positive_int(top, key, "", allow_none=key == "k")
                for key in ("num_windows", "batch_size", "k", "max_lines")} | {"seed": seed}
        resolve_device(top["device"])  # a GPU the machine lacks is refused before the model loads
        # model_path stays as given: analyze_spectrum resolves it as every stage does (a run or model directory,
        # minilm, a hub name), which a path made absolute here would no longer be
        paths = {key: resolve_path(str(top[key])) if top[key] else None for key in ("out_dir", "corpus_dir", "text_path")}
        return cls(**top | paths)
