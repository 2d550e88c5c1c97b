"""Experiment plans: the jobs of ``make demo`` (``demo``), ``make reproduce-mini`` (``mini``), ``make
reproduce-pretrained`` (``pretrained``) and their targets. Each job is a real CLI line run by
``linformer.jobs``; where it writes is read from the configs the job's script composes (``run_dir``), so a
renamed key or directory moves the plans' done-paths with it instead of leaving them checking elsewhere."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from ..configs import compose
from ..data.io import path_root
from ..errors import ConfigError
from ..files.locations import repo_relative, repo_root, resolve_path, script
from ..files.outputs import MANIFEST
from ..files.runs import RESULTS, SUMMARY
from ..jobs import Job, corpus_check, tokenizer_check
from ..shell import hydra_override

_MARKER = "RUN-NAME-OF-A-PLAN"


@functools.cache
def _run_dir_pattern(config: str, overrides: tuple[str, ...] = ()) -> str:
    run_dir = Path(str(compose(config, [*overrides, f"run_name={_MARKER}"], with_hydra=True).hydra.run.dir))
    # the configs resolve it against the repository; the plans' commands and records name it relative to it
    run_dir = repo_relative(run_dir)
    if _MARKER not in run_dir:
        raise ConfigError(f"hydra.run.dir of configs/{config}.yaml ({run_dir}) does not follow run_name: the "
                          "experiment plans name their runs' directories through it")
    return run_dir


@functools.cache
def out_dir(config: str, overrides: tuple[str, ...] = ()) -> Path:
    """Where scripts/<config>.py writes its output directory (the config's out_dir, with `overrides`), relative to the
    repository as the config gives it: the plans read it rather than spell the path again."""
    return Path(compose(config, list(overrides)).out_dir)


# The file each script writes last in the folder its config names (its out_dir, or its run's directory): a plan's job
# is done once it exists there (``done_file``; the folder always from the job's config: out_dir, run_dir, the demo's)
DONE_FILES = {"tokenizer": "tokenizer.json", "corpus": MANIFEST, "convert": "config.json", "pretrain": SUMMARY,
              "transfer": SUMMARY, "finetune": RESULTS}


def done_file(config: str, folder: str | Path) -> Path:
    """The file in `folder` (where scripts/<config>.py writes, as its config says) that says the script finished."""
    return Path(folder) / DONE_FILES[config]


def job_script(name: str) -> str:
    """scripts/<name>.py as a plan's job names it, run from the repository (``run_jobs``' cwd, ``repo_root``): the
    scripts beside the one started (``locations.script``), a clone's over a wheel too, where the repository is the
    working directory."""
    return script(name, repo_root())


def tokenizer_job(python: str, overrides: list[str] | tuple[str, ...], **job) -> Job:
    """Every plan's tokenizer job: scripts/train_tokenizer.py with `overrides` (`job`: the Job's other fields), done
    once its tokenizer.json is in the folder its config names, and only while that tokenizer is the one the command
    trains now (``jobs.tokenizer_check``: its settings, its data group's texts by content). Its config is read here
    as the script reads it, so a setting the script would refuse is refused before any job starts."""
    cfg = compose("tokenizer", list(overrides), with_hydra=True)
    from ..runconfig.data import TokenizerSpec  # the run specs import the model's modules (torch): not at a parse
    from ..runconfig.runs import plain_config

    spec = TokenizerSpec.read(OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"]))
    settings = {key: getattr(spec, key) for key in ("vocab_size", "min_frequency", "max_lines", "skip_bad_rows")}
    check = functools.partial(tokenizer_check, files=spec.files, settings=settings, data=plain_config(cfg.data),
                              group=_data_group(cfg))
    return Job(job.pop("name", "tokenizer"), [python, job_script("train_tokenizer"), *overrides],
               done_file("tokenizer", spec.out_dir), check=check, **job)


def corpus_job(python: str, overrides: list[str] | tuple[str, ...], **job) -> Job:
    """Every plan's corpus job: scripts/prepare_corpus.py with `overrides` (`job`: the Job's other fields), done once
    its manifest is in the folder its config names, and only while pretraining would read that corpus
    (``jobs.corpus_check`` with its data group and tokenizer: the files, the data.* settings, the sources' texts, the
    tokenizer's settings and ids), as the demo's: a corpus prepared with other settings is prepared again (or refused
    by its command, naming them) before a job reads it."""
    from ..runconfig.runs import plain_config

    cfg = compose("corpus", list(overrides), with_hydra=True)
    check = functools.partial(_corpus_check, data=plain_config(cfg.data), tokenizer=str(cfg.tokenizer_dir),
                              group=_data_group(cfg))
    return Job(job.pop("name", "corpus"), [python, job_script("prepare_corpus"), *overrides],
               done_file("corpus", resolve_path(str(cfg.out_dir))), check=check, **job)


def _data_group(cfg) -> str | None:
    """The data group's option a job's cfg was composed with (``compose(..., with_hydra=True)``), which the commands
    its checks print name (data=mirror_mini): composed here, outside the job's own Hydra run."""
    return cfg.hydra.runtime.choices.get("data")


def _corpus_check(done: Path, data: dict, tokenizer: str, group: str | None) -> None:
    """``jobs.corpus_check`` with the tokenizer_dir the job's config gives, resolved as prepare_corpus resolves it (a
    packaged model's name, minilm, is its folder), when the check runs: a plan is made where that model is not
    installed too."""
    from ..modeling.loading import resolve_tokenizer_dir  # the model's modules import torch: a plan's parser does not

    corpus_check(done, data, resolve_tokenizer_dir(tokenizer, check=False), group)


def run_dir(config: str, run_name: str, overrides: tuple[str, ...] = ()) -> Path:
    """Where scripts/<config>.py writes the run named `run_name` (relative to the repository, as the config says),
    with the plan's `overrides` (e.g. paths.output_dir=...) given to every job."""
    return Path(_run_dir_pattern(config, tuple(overrides)).replace(_MARKER, run_name))


COMMAND_ROOTS = ("data_dir", "output_dir")  # the roots of configs/paths that the plans' commands write under


@dataclass(frozen=True)
class Places:
    """Where a plan's jobs write: the roots of configs/paths (data/, outputs/, docs/results/, outputs/reports/ of the
    checkout; paths relative to the repository, as the commands and the records name them), or each of them under
    one folder (`under`: a rehearsal that leaves the checkout alone). Files are looked up at REPO / path, which an
    absolute path ignores."""

    overrides: tuple[str, ...] = ()
    under: Path | None = None
    records: Path | None = None

    @classmethod
    def of(cls, under: Path | None = None, records: Path | None = None) -> Places:
        if under is None:
            return cls((), None, records)
        under = Path(under).resolve()
        return cls(tuple(hydra_override(f"paths.{key}", under / path_root(key)) for key in COMMAND_ROOTS), under,
                   under / records.name if records is not None else None)

    def run(self, config: str, name: str) -> Path:
        """scripts/<config>.py's run directory for run_name `name`."""
        return run_dir(config, name, self.overrides)

    def path(self, relative: str | Path) -> Path:
        """A path relative to the checkout, or its place under `under`."""
        return Path(relative) if self.under is None else self.under / relative

    def results(self, name: str) -> Path:
        """`name` under paths.results_dir (the committed measurements)."""
        return self.path(Path(path_root("results_dir")) / name)

    def outputs(self, name: str) -> Path:
        """`name` under paths.output_dir."""
        return self.path(Path(path_root("output_dir")) / name)


CHECKOUT = Places()  # the plans' default: data/, outputs/ and docs/results/ of the checkout
