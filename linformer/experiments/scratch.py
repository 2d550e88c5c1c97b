"""`make reproduce-scratch`: the paper's Table 2 from the framework's own MLM pretraining (the plan and its profiles).

Rows, as in the paper's Table 2 at n: full attention, and Linformer at k = n/4 and n/2 (the paper's 128 and 256 at
n = 512) with headwise, kv and layerwise sharing. Each is pretrained from random weights side by side with the
others: one tokenizer, the same corpus blocks in the same order (one data seed), one recipe, the same steps. Each
pretrained model, and the full-attention model with no pretraining (``from_scratch=true``: the control that says
what pretraining adds), is finetuned on SST-2 and IMDB with every seed of the profile, under the finetuning protocol:
``validation_fraction`` of the train rows held out to choose the epoch, the reported split (SST-2 dev, IMDB test)
scored once. Figure 3a's curves are the same pretraining runs' validation perplexity.

The no-pretraining row's finetuning runs take only a shape and a tokenizer from their model folder, and draw their
own weights from their seed: that folder is full attention's pretraining command run one update, uncompiled (the
shape job, ``SHAPE``: a run takes at least one update), so the row waits on no pretraining, and its kept runs
count whichever machine made them.

Records: every finished run's small records (pretraining: summary, metrics, run record, config and the sha256 of the
weights it wrote; finetuning: results, predictions, config) are kept under the profile's records folder (the gpu
profile's is committed), and the table reads them there, so a table made over several sittings survives a fresh
clone. An interrupted run resumes: run the same command again.

One start per row. A row's pretrained weights live only where they were made (a GPU lending returns a few small
files, and a pretraining rebuilt on another machine is not bitwise the same), so a kept finetuning run counts as
done only when it started from the weights its row's finetuning would start from now: the pretraining on this
machine where it exists, else the kept one, and then only if every run of the row is kept and all started from it.
A row stopped part-way on a machine that is gone is run again whole, its pretraining first; a complete row's
records are final (no pretraining replaces its kept one).
``--rows N`` runs the first N rows not complete, so a slice of GPU time finishes whole rows; ``--only ROW,...``
runs those rows (if not complete).

Profiles: ``toy`` rehearses the whole plan on 2 CPU cores in minutes (a 2-layer, 64-wide model at n = 64 on a few
hundred Wikipedia articles and task subsets: its numbers say only that the plan runs end to end); ``gpu`` is the
table at the scale of the lent GPU (model=small, n = 512, 250M tokens per pretraining run, SST-2 and IMDB whole).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

from ..data.io import path_root
from ..data.tasks import MIRROR_TASKS
from ..errors import ConfigError
from ..files.atomic import atomic_dir, write_json
from ..files.locations import repo_root
from ..files.mappings import read_json
from ..files.runs import CONFIG, METRICS, MODEL_DIR, RESULTS, RUN, SUMMARY
from ..jobs import Job, in_order_of_use, wanted
from ..modeling.values import projects_keys
from ..rundir import chosen_on_reported, copy_record
from ..script_help import description
from ..shell import hydra_override
from . import Places, corpus_job, done_file, frontend, job_script, tokenizer_job
from .pretrained import keep_records

REPO = repo_root()
EXPERIMENT = "table2_scratch"
SHARINGS = ("headwise", "kv", "layerwise")  # the paper's Table 2 rows: one E, F per layer; E = F; one for all layers
KEPT_PRETRAIN = (SUMMARY, METRICS, RUN, CONFIG)
START = "start.json"  # in a kept pretraining record: {"weights_sha256": ...} of the model it wrote
# The targets (report.table2_scratch checks them against the table)
GAIN = 5.0          # pretraining adds at least this many points on each task over the same model not pretrained
WITHIN = {2: 0.5, 4: 1.0}  # n/k -> the most a row's two-task average may fall below full attention's (points)
PPL_RATIO = 1.05    # Figure 3a: every k within 5% of full attention's final validation perplexity
# The shape job's changes to the pretraining recipe: one update (a run takes at least one; from_scratch=true draws
# its own weights, so these are never used), not compiled (compiling would take longer than the update)
SHAPE = {"trainer.max_steps": "1", "trainer.warmup_steps": "0", "trainer.eval_at_start": "false",
         "trainer.compile": "false"}


@dataclass(frozen=True)
class Profile:
    name: str
    n: int
    data: tuple[str, ...]      # the corpus and its tokenizer: overrides of train_tokenizer, prepare_corpus and pretrain
    model: tuple[str, ...]     # the model's shape (pretraining overrides; the rows add attention, k and sharing)
    pretrain: tuple[str, ...]  # the pretraining recipe (trainer.* overrides), the same for every row
    recipes: dict              # task -> its finetuning recipe (overrides), the same for every row and seed
    seeds: tuple[int, ...]     # finetuning seeds of every row (pretraining has one, seed 0)
    jobs: int                  # jobs at once
    minutes: dict              # estimated minutes per job: "pretrain", "shape", and one per task
    timing: str                # where the minutes come from
    records: Path              # finished runs' small records (relative to the repository)
    table: str                 # the report's path without suffix
    validation_fraction: float = 0.1
    run_tasks: tuple[str, ...] = MIRROR_TASKS  # the tasks the plan finetunes on (with_tasks picks others)

    @property
    def ks(self) -> tuple[int, int]:
        return self.n // 4, self.n // 2

    @property
    def tasks(self) -> dict:
        """The recipes of the tasks the plan runs, in order."""
        return {t: self.recipes[t] for t in self.run_tasks}


# Shared by both profiles' finetuning recipes: batches grouped by length, RoBERTa's 6% warmup
_FINETUNE = ("trainer.group_by_length=true", "trainer.warmup_ratio=0.06")
# QNLI and QQP (GLUE's train.tsv is not obtainable here): the gpu profile's sentence-pair recipe, for a user who has
# the data under paths.data_mirror/glue/<task>/ (--tasks sst2,imdb,qnli,qqp); 2 epochs of 105k and 364k pairs
PAIR_RECIPE = ("trainer.epochs=2", "trainer.max_length=256", "trainer.batch_size=32", "trainer.lr=1e-4",
               "trainer.mixed_precision=bf16", *_FINETUNE)

DEFAULT_PROFILE = "toy"  # what make reproduce-scratch and its report run without --profile
PROFILE_NAMES = ("toy", "gpu")  # PROFILES' names, for a command line read before any configs (--help over a wheel)


@functools.cache
def _profiles() -> dict[str, Profile]:
    """The profiles by name (``PROFILES``): their records and tables lie under the roots of configs/paths, read
    when first asked for, so that importing the module needs no configs (a wheel)."""
    profiles = {
        "toy": Profile(
            name="toy", n=64,
            data=("data=wiki_scratch", "data.name=scratch_toy", "data.tokenizer=scratch_toy", "data.max_documents=300",
                  "data.n=64", "data.vocab_size=2000", "data.tokenizer_max_lines=20000", "data.num_proc=1",
                  "data.val_fraction=0.05"),  # 15 of 300 articles: at least one evaluation batch of 16 blocks
            model=("model=tiny", "model.max_seq_len=64", "model.hidden_size=64", "model.intermediate_size=128"),
            pretrain=("trainer.max_steps=60", "trainer.batch_size=16", "trainer.lr=1e-3", "trainer.warmup_steps=6",
                      "trainer.eval_every=20", "trainer.eval_blocks=64", "trainer.save_every=60", "trainer.log_every=20",
                      "trainer.mixed_precision=no"),
            recipes={"sst2": ("max_train_examples=2000", "max_eval_examples=200", "trainer.epochs=3", "trainer.max_length=64",
                            "trainer.batch_size=32", "trainer.lr=1e-3", "trainer.mixed_precision=no", *_FINETUNE),
                   "imdb": ("max_train_examples=1000", "max_eval_examples=200", "trainer.epochs=3", "trainer.max_length=64",
                            "trainer.batch_size=32", "trainer.lr=1e-3", "trainer.mixed_precision=no", *_FINETUNE),
                   **{t: ("max_train_examples=400", "max_eval_examples=200", "trainer.epochs=2", "trainer.max_length=64",
                          "trainer.batch_size=32", "trainer.lr=1e-3", "trainer.mixed_precision=no", *_FINETUNE)
                      for t in ("qnli", "qqp")}},
            seeds=(0, 1, 2), jobs=2,
            minutes={"pretrain": 0.5, "shape": 0.4, "sst2": 0.2, "imdb": 0.2, "qnli": 0.1, "qqp": 0.1},
            timing="the whole plan took 7 min 8 s on 2 AMD EPYC cores, 2 jobs at a time", records=Path(path_root("output_dir")) / "table2_scratch_toy_runs",
            table=f"{path_root('reports_dir')}/table2_scratch_toy"),
        # model=small (4 x 256, 4 heads) at n = 512: 7,630 updates of 64 x 512 tokens = 250M tokens per row (18.4
        # passes over data=wiki_scratch's 26,587 train blocks, 13.6M tokens, each pass re-masked). lr 1e-3 with 6% warmup, the recipe that took
        # model=small well off the plateau in 65M tokens (figure3_gpu_notes.md). Finetuning: RoBERTa's recipe
        # scaled to a small model (lr 1e-4, batch 32), 3 epochs of SST-2 at 128 tokens, 2 of IMDB at 512.
        "gpu": Profile(
            name="gpu", n=512,
            data=("data=wiki_scratch", "data.num_proc=16"),
            model=("model=small",),
            pretrain=("trainer.max_steps=7630", "trainer.batch_size=64", "trainer.lr=1e-3", "trainer.warmup_steps=460",
                      "trainer.eval_every=500", "trainer.eval_blocks=512", "trainer.save_every=2000",
                      "trainer.log_every=100", "trainer.mixed_precision=bf16", "trainer.compile=true", "logger=none"),
            recipes={"sst2": ("trainer.epochs=3", "trainer.max_length=128", "trainer.batch_size=32", "trainer.lr=1e-4",
                            "trainer.mixed_precision=bf16", *_FINETUNE),
                   "imdb": ("trainer.epochs=2", "trainer.max_length=512", "trainer.batch_size=32", "trainer.lr=1e-4",
                            "trainer.mixed_precision=bf16", *_FINETUNE),
                   "qnli": PAIR_RECIPE, "qqp": PAIR_RECIPE},
            # 2 pretraining runs share the GPU (each a small model that leaves it idle between launches), then their 12
            # finetuning runs 4 at a time; minutes per job, each estimated from the nearest measurement on one H200:
            # docs/gpu/table2_scratch_gpu_minutes.md derives each
            seeds=(0, 1, 2), jobs=4,
            minutes={"pretrain": 3.0, "shape": 0.5, "sst2": 3.5, "imdb": 1.5, "qnli": 3.5, "qqp": 12.0},
            timing="pretraining from figure3_gpu's tokens/s, finetuning from table2_pretrained_gpu's updates/s on one "
                   "H200 (docs/gpu/table2_scratch_gpu_minutes.md says how); the first slice measures it",
            records=Path(path_root("results_dir")) / "table2_scratch_gpu_runs",
            table=f"{path_root('results_dir')}/table2_scratch_gpu"),
    }
    assert tuple(profiles) == PROFILE_NAMES, "PROFILE_NAMES names each profile, in order"
    return profiles


def __getattr__(name: str):
    """PROFILES (``_profiles``), read from the configs when first asked for."""
    if name == "PROFILES":
        return _profiles()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def with_tasks(p: Profile, tasks: list[str] | tuple[str, ...] | None) -> Profile:
    """The profile finetuning on `tasks` (None: its own); ConfigError naming a task it has no recipe for."""

    if not tasks:
        return p
    unknown = [t for t in tasks if t not in p.recipes]
    if unknown:
        raise ConfigError(f"--tasks {','.join(tasks)}: profile {p.name} has no recipe for {unknown[0]!r} (it has "
                          f"{', '.join(p.recipes)})")
    return dataclasses.replace(p, run_tasks=tuple(dict.fromkeys(tasks)))


@dataclass(frozen=True)
class Row:
    label: str                 # run-name part: full, full-scratch, k128-headwise
    attention: str
    k: int | None
    sharing: str | None
    pretrained: bool = True

    @property
    def start_job(self) -> str:
        """The job that writes the model folder this row's finetuning runs take: its pretraining, or the
        no-pretraining row's shape job."""
        return f"{'pretrain' if self.pretrained else 'shape'} {self.label}"


def rows(p: Profile) -> list[Row]:
    """Full attention and its no-pretraining control first, then the paper's rows, headwise (plain Linformer) first."""
    return [Row("full", "full", None, None), Row("full-scratch", "full", None, None, pretrained=False),
            *(Row(f"k{k}-{s}", "linformer", k, s) for s in SHARINGS for k in p.ks)]


def pretrain_run(p: Profile, label: str) -> str:
    """The run name of the row's pretraining (or shape job)."""
    return f"ts-{p.name}-{label}"


def finetune_run(p: Profile, task: str, row: Row, seed: int) -> str:
    return f"ts-{p.name}-{task}-{row.label}-s{seed}"


def profile_of(run: str) -> str | None:
    """The profile whose job made the run of this name (pretrain_run, finetune_run), or None for a run of no
    profile."""
    return next((name for name in _profiles() if run.startswith(f"ts-{name}-")), None)


def keep_pretrain(run: Path, kept: Path) -> bool:
    """Copy a finished pretraining run's records (KEPT_PRETRAIN) and the sha256 of its weights (START) into `kept`,
    which appears complete or not at all. False when the run has not finished."""
    if not (run / SUMMARY).is_file():
        return False
    from ..modeling.loading import weights_sha256  # the model's modules import torch: a plan's parser reads this one

    with atomic_dir(kept, overwrite=True) as tmp:
        for name in KEPT_PRETRAIN:
            if (run / name).is_file():
                copy_record(run / name, tmp / name)  # its paths as they read on every machine
        write_json(tmp / START, {"weights_sha256": weights_sha256(str(run / MODEL_DIR))})
    return True


def _start_of(result: dict) -> str | None:
    return result.get("start_weights_sha256")


def _counts(result: dict) -> bool:
    """A kept finetuning record that counts: there, and not choosing its epoch on the reported split."""
    return bool(result) and not chosen_on_reported(result)


class Starts:
    """The weights a row's finetuning would start from now: its pretraining's on this machine, hashed once per finished
    run (the runner asks whether a job is done many times)."""

    def __init__(self) -> None:
        self._hashes: dict[tuple[Path, int], str | None] = {}

    def here(self, built: Path) -> str | None:
        if not (built / SUMMARY).is_file():
            return None
        key = (built, (built / SUMMARY).stat().st_mtime_ns)
        if key not in self._hashes:
            from ..modeling.loading import weights_sha256

            self._hashes[key] = weights_sha256(str(built / MODEL_DIR))
        return self._hashes[key]


def finished_runs(p: Profile, row: Row, places: Places, starts: Starts | None = None) -> dict[str, bool]:
    """Each finetuning run of the row -> whether its kept records count as done (the module's "one start per row")."""
    names = [finetune_run(p, task, row, seed) for task in p.tasks for seed in p.seeds]
    kept = {name: read_json(REPO / places.records / name / RESULTS) for name in names}
    valid = {name: _counts(r) for name, r in kept.items()}
    if not row.pretrained:
        return valid
    here = (starts or Starts()).here(REPO / places.run("pretrain", pretrain_run(p, row.label)))
    if here is not None:
        return {name: valid[name] and _start_of(kept[name]) == here for name in names}
    start = read_json(REPO / places.records / pretrain_run(p, row.label) / START).get("weights_sha256")
    whole = all(valid.values()) and start is not None and all(_start_of(r) == start for r in kept.values())
    return dict.fromkeys(names, whole)


def finished_run(p: Profile, row: Row, places: Places, name: str, starts: Starts) -> bool:
    """finished_runs for one run of the row, reading its own record only where the row's pretraining is on this
    machine (the runner asks this of every waiting job, many times)."""
    here = starts.here(REPO / places.run("pretrain", pretrain_run(p, row.label))) if row.pretrained else None
    if row.pretrained and here is None:  # the pretraining is gone from here: the whole-row rule
        return finished_runs(p, row, places, starts)[name]
    record = read_json(REPO / places.records / name / RESULTS)
    return _counts(record) and (not row.pretrained or _start_of(record) == here)


def row_complete(p: Profile, row: Row, places: Places, starts: Starts | None = None) -> bool:
    return all(finished_runs(p, row, places, starts).values())


def slice_rows(p: Profile, places: Places, max_rows: int | None, starts: Starts | None = None,
               only: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(the rows a run with `max_rows` takes, the rows not complete it leaves to later slices), by label; `only`:
    of those rows alone (--only), the first `max_rows` of them."""
    todo = [row.label for row in rows(p) if not row_complete(p, row, places, starts)]
    pick = [label for label in todo if only is None or label in only]
    chosen = pick[:len(pick) if max_rows is None else max_rows]
    return chosen, [label for label in todo if label not in chosen]


def slice_line(p: Profile, under: Path | None, max_rows: int | None, only: list[str] | None = None) -> str:
    """What a `--rows` or `--only` slice takes and leaves, in one line ("" without either)."""
    if max_rows is None and only is None:
        return ""
    chosen, later = slice_rows(p, Places.of(under, p.records), max_rows, only=only)
    given = " ".join(([f"--only {','.join(only)}"] if only is not None else []) +
                     ([f"--rows {max_rows}"] if max_rows is not None else []))
    return (f"This slice ({given}): {', '.join(chosen) or 'nothing: its rows are complete'}; "
            f"{len(later)} rows not complete after it" + (f" ({', '.join(later)})." if later else "."))


def row_runs(p: Profile, labels: list[str]) -> dict[str, set[str]]:
    """Each of the rows `labels` -> the names of its finetuning jobs."""
    return {row.label: {f"finetune {finetune_run(p, task, row, seed)}" for task in p.tasks for seed in p.seeds}
            for row in rows(p) if row.label in labels}


def plan(p: Profile, python: str = sys.executable, under: Path | None = None, max_rows: int | None = None,
         only: list[str] | None = None) -> list[Job]:
    """Every job, row by row (its pretraining or shape job, then its finetuning runs seed by seed, SST-2 first);
    with `max_rows`, only the first that many rows not complete, with `only`, only those of these rows."""
    places = Places.of(under, p.records)
    base = places.overrides
    plan = [tokenizer_job(python, [*p.data, *base, "show_progress=false"], intermediate=True),
            corpus_job(python, [*p.data, *base], needs=("tokenizer",), intermediate=True)]
    table = rows(p)
    starts = Starts()
    chosen, later = slice_rows(p, places, max_rows, starts, only)
    complete = {row.label for row in table} - set(chosen) - set(later)
    # the start of a row this slice finetunes, or the pretraining of a complete one (its records are kept); a later
    # slice's rows bring their own
    for row in table:
        if row.label not in chosen and not (row.label in complete and row.pretrained):
            continue
        name, run = pretrain_run(p, row.label), places.run("pretrain", pretrain_run(p, row.label))
        run_path, kept = REPO / run, REPO / places.records / name
        attention = [f"model.attention={row.attention}"] + (
            [f"model.projected_dim={row.k}", f"model.sharing={row.sharing}"] if projects_keys(row.attention) else [])
        recipe = p.pretrain if row.pretrained else with_settings(p.pretrain, SHAPE)
        plan.append(Job(
            row.start_job,
            [python, job_script("pretrain"), *p.data, *p.model, *attention, *recipe, *base, "seed=0",
             f"run_name={name}", f"experiment_name={EXPERIMENT}"],
            done_file("pretrain", run_path), ("corpus",), intermediate=True,
            # the shape job's run is never reported; a complete row's records are final
            keep=None if not row.pretrained or row.label in complete else
            (lambda run=run_path, kept=kept: keep_pretrain(run, kept))))
    for row in table:
        if row.label not in chosen:
            continue
        model = places.run("pretrain", pretrain_run(p, row.label))
        for seed in p.seeds:
            for task, recipe in p.tasks.items():
                name = finetune_run(p, task, row, seed)
                kept, run = REPO / places.records / name, REPO / places.run("finetune", name)
                args = [python, job_script("finetune"), f"task={task}", hydra_override("model_path", model),
                        f"from_scratch={str(not row.pretrained).lower()}", *recipe, *base, f"seed={seed}",
                        "subset_seed=0", f"validation_fraction={p.validation_fraction:g}", f"run_name={name}",
                        f"experiment_name={EXPERIMENT}"]
                plan.append(Job(
                    f"finetune {name}", args, kept / RESULTS, (row.start_job,),
                    keep=lambda run=run, kept=kept: keep_records(run, kept),
                    stale=lambda row=row, name=name: not finished_run(p, row, places, name, starts)))
    return in_order_of_use(plan)


def with_settings(overrides: tuple[str, ...], settings: dict[str, str]) -> tuple[str, ...]:
    """`overrides` with each key of `settings` set to its value there: in its place where the overrides give the key,
    else after them (one override per key)."""
    keys = [a.split("=", 1)[0] for a in overrides]
    return (*(f"{key}={settings[key]}" if key in settings else a for key, a in zip(keys, overrides)),
            *(f"{key}={value}" for key, value in settings.items() if key not in keys))


def estimated_minutes(p: Profile, job: Job) -> float:
    """Rough minutes for one job on the profile's machine."""
    kind = job.name.split()[0]
    if kind == "finetune":
        task = next(a.split("=", 1)[1] for a in job.argv if a.startswith("task="))
        return p.minutes[task]
    return p.minutes.get(kind, 0.5)


def planned_runs(p: Profile) -> list[str]:
    """Every finetuning run of the table, in the plan's order."""
    return [finetune_run(p, task, row, seed) for row in rows(p) for seed in p.seeds for task in p.tasks]


def reproduce(p: Profile, jobs: int, dry_run: bool, report_only: bool, under: Path | None = None,
              max_rows: int | None = None, only: list[str] | None = None, stop_after: float | None = None,
              end_by: float | None = None) -> int:
    """`make reproduce-scratch`: the plan of `p`'s rows (the first `max_rows` not complete, of those `only` where
    given), then its table."""
    if max_rows is not None and max_rows < 1:
        raise ConfigError(f"--rows {max_rows}: give at least 1 (or leave it out for every row)")
    chosen, _ = slice_rows(p, Places.of(under, p.records), max_rows, only=only)
    return frontend.reproduce(
        plan(p, under=under, max_rows=max_rows, only=only),
        title="\n".join(filter(None, [description(__doc__, __file__, paragraph=True), slice_line(p, under, max_rows, only)])),
        minutes=lambda s: estimated_minutes(p, s), timing=p.timing, jobs=jobs, dry_run=dry_run,
        report_only=report_only, report=report_argv(p, under),
        log_dir=REPO / Places.of(under).outputs(f"reproduce_scratch_{p.name}_logs"), rows=row_runs(p, chosen),
        stop_after=stop_after, end_by=end_by)


def fit_lines(p: Profile, jobs: int, max_rows: int | None, only: list[str] | None, stop_after: float) -> list[str]:
    """What a dry run says of the slice's rows: their minutes alone and whether they fit in `stop_after` minutes
    (``frontend.row_lines``)."""
    jobs_planned = plan(p, max_rows=max_rows, only=only)
    todo = wanted(jobs_planned, {s.name for s in jobs_planned if s.finished})
    chosen, _ = slice_rows(p, Places.of(None, p.records), max_rows, only=only)
    return frontend.row_lines(todo, lambda s: estimated_minutes(p, s), jobs, row_runs(p, chosen), stop_after)


def first_units(p: Profile, jobs: int) -> dict[str, float]:
    """Each row not complete -> the minutes alone (the profile's estimates) a command needs before any of the row's
    work counts: a pretrained row's whole (its pretrained weights do not outlive the machine, so a row cut short runs
    again whole), the no-pretraining row's first finetuning run to end, with its shape job, its runs `jobs` at a
    time (its finished runs count whichever machine made them)."""
    planned = plan(p)
    todo = wanted(planned, {s.name for s in planned if s.finished})
    units = {}
    for row in rows(p):
        left = [s.name for s in todo if s.name in row_runs(p, [row.label])[row.label]]
        if left:
            minutes = functools.partial(estimated_minutes, p)
            units[row.label] = (frontend.span(frontend.needed(todo, set(left)), minutes, jobs) if row.pretrained
                                else frontend.first_end(todo, set(left), minutes, jobs))
    return units


def report_argv(p: Profile, under: Path | None = None) -> list[str]:
    """scripts/table2.py's arguments for the profile's table (--overwrite: the reproduction owns its report)."""
    places = Places.of(under, p.records)
    out = str(Path(under).resolve() / Path(p.table).name) if under is not None else p.table
    return [str(places.records / f"ts-{p.name}-*"), "--layout", "scratch", "--profile", p.name, "--out", out,
            "--command", f"make reproduce-scratch ARGS='--profile {p.name}'", "--overwrite"]
