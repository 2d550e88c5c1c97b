"""`make reproduce-pretrained`: Table 2 from a real pretrained encoder converted to Linformer (the plan).

Rows: the source encoder with full attention (the teacher, mean pooling as the source was trained), and Linformer
variants built from its weights at n = 512 for every (k, sharing, length policy) of the profile, each with
transfer (``scripts/transfer.py``: every weight fitted to the teacher's layer outputs on 512-token blocks of the
mirror corpus, tokenized with the source's tokenizer, a share of them cut shorter so that short inputs are fitted
too). The policies: the converted models' default (``convert.CONVERTED_LENGTH_POLICY`` with the exact local and global
keys of ``convert.CONVERTED_EXACT_KEYS``: "local"), the same without the exact keys ("converted"), and the paper's
slice of E.
Each row is finetuned on SST-2 and IMDB (n = 512) through ``scripts/finetune.py`` (``subset_seed`` stays 0, so
every seed and row sees the same train rows and eval examples, which the paired intervals need).

Every finished finetuning run's small records (results.json, eval_predictions.json, config.yaml and the model's
card) are kept under ``RECORDS`` (docs/results, committed), and the table reads them there, so a half-finished
experiment survives a fresh clone: a job is done when its records are kept, and the corpus and models (jobs
marked intermediate) are rebuilt only for the runs still to do.

Profiles: ``cpu`` fits into sittings on 2 CPU cores (fp32: bf16 is emulated on CPUs without native support);
``cpu12k`` is IMDB alone on 12,000 training reviews (a scale where the teacher reaches its target): the teacher and
the "local" policy's rows that the IMDB targets read, and one seed of the comparisons, over several sittings;
``gpu`` is the full-size table (IMDB 25k/25k, 3 seeds on every row, bf16). On the CPU profiles only the rows a
target reads (the teacher and the "local" policy's) get 3 seeds; the other rows, comparisons, get one. Every job is resumable
(``linformer/jobs.py``): run the same command again after an interruption.
"""

from __future__ import annotations

import functools
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..data.io import local_path, path_root
from ..files.atomic import atomic_dir
from ..files.locations import repo_root
from ..files.mappings import read_json
from ..files.runs import CONFIG, MODEL_DIR, PREDICTIONS, RESULTS
from ..jobs import Job, in_order_of_use, wanted
from ..modeling.values import CONVERTED_EXACT_KEYS, CONVERTED_LENGTH_POLICY, NO_EXACT_KEYS
from ..rundir import chosen_on_reported, copy_record
from ..script_help import description
from ..shell import hydra_override
from . import CHECKOUT, Places, corpus_job, done_file, frontend, job_script, out_dir

REPO = repo_root()  # the jobs run there, and their finished files are looked up there, wherever the caller is
N = 512
SOURCE = "minilm"
LR = 5e-5  # the default finetuning lr of a task's rows (every row of a task shares it; no per-row tuning)
KEPT_FILES = (RESULTS, PREDICTIONS, CONFIG)
# The targets (report.table2_pretrained checks them against the table)
TEACHER_TARGET = {"sst2": 88.0, "imdb": 90.0}  # the teacher's accuracy (SST-2 dev, IMDB test subset)
# task -> k -> points: the "local" policy with transfer, at most this far below the teacher
WITHIN = {"imdb": {128: 0.5, 64: 1.0}, "sst2": {128: 0.5, 64: 0.5}}
SEEDS = 3                     # every row a target reads has this many seeds
CLOSES = 0.5  # on IMDB, transfer closes at least this share of the gap left without it (where that gap is > 1 point)

# Length policies of the rows: LinformerConfig fields, each given explicitly to transfer.py.
POLICIES = {
    # overlap_columns named: these rows were measured with "keep", and a conversion gives CONVERTED_OVERLAP unless told
    "local": {**CONVERTED_LENGTH_POLICY, **CONVERTED_EXACT_KEYS, "overlap_columns": "keep"},
    "converted": {**CONVERTED_LENGTH_POLICY, **NO_EXACT_KEYS},
    # fairseq's slice, unmasked (the paper does not say how it projects a short input); "paper" stays its key because
    # the committed runs are named by it (tp-<profile>-<task>-k128-layerwise-paper-tr-s0)
    "paper": {"length_policy": "slice", "mask_empty_windows": False, "exact_short_inputs": False, **NO_EXACT_KEYS},
    # the local policy with its projected keys pooled by attention in their windows (LinformerConfig.landmark_pooling):
    # closer to its source than the local policy before any training (length_policy_landmarks.md); this row asks
    # whether that holds after transfer and finetuning
    "landmarks": {**CONVERTED_LENGTH_POLICY, **CONVERTED_EXACT_KEYS, "overlap_columns": "keep", "landmark_pooling": True},
}


@dataclass(frozen=True)
class TaskScale:
    train: int | None        # stratified train subset (None = the whole split)
    eval: int | None         # stratified eval subset (None = the whole split)
    epochs: int
    max_length: int
    minutes: dict            # estimated minutes per run on the profile's machine: {"full": ..., "linformer": ...}
    lr: float = LR           # the same for every row of the task
    batch_size: int = 32


@dataclass(frozen=True)
class Profile:
    name: str
    ks: tuple[int, ...]
    sharings: tuple[str, ...]
    policies: tuple[str, ...]  # keys of POLICIES
    transfer_steps: int
    transfer_batch: int
    transfer_short_fraction: float  # share of transfer batches cut to a random shorter length (SST-2 is short)
    tasks: dict               # task -> TaskScale
    seeds: tuple[int, ...]    # the seeds of every row a target reads (the teacher, the converted policy's rows)
    other_rows_seeds: tuple[int, ...]  # the seeds of the other rows (comparisons no target reads)
    mixed_precision: str
    jobs: int
    transfer_minutes: float   # estimated per transfer run
    timing: str               # where the minutes come from
    policy_ks: dict = field(default_factory=dict)  # policy -> the ks its rows run at, where not every k of ks
    policy_tasks: dict = field(default_factory=dict)  # policy -> the tasks its rows run on, where not every task
    # policy -> why its rows' runs started from more than one build of their transfer (the report refuses a row
    # whose runs started from different weights unless its plan says why here)
    mixed_starts: dict = field(default_factory=dict)
    policy_transfer_minutes: dict = field(default_factory=dict)  # policy -> its transfer's minutes, where measured


DEFAULT_PROFILE = "cpu"  # what make reproduce-pretrained and its report run without --profile
PROFILES = {
    # Minutes per job as the profile runs them (2 jobs of 1 thread on 2 cores, fp32, batches grouped by length),
    # estimated: the SST-2 teacher runs its 2,105 updates at about 3 per second with 2 threads on an idle machine;
    # a full-attention IMDB run at 512 tokens takes about 1.5 times a Linformer one (16 and 10 min per 1,000 reviews).
    "cpu": Profile(
        name="cpu", ks=(128, 64), sharings=("layerwise",), policies=("local", "converted", "paper", "landmarks"),
        transfer_steps=150, transfer_batch=4, transfer_short_fraction=0.5,
        tasks={"sst2": TaskScale(train=None, eval=None, epochs=1, max_length=128,
                                 minutes={"full": 20, "linformer": 18}),
               # 2,000 reviews at batch 16 are 125 updates (lr 1e-4): past the first few dozen, where one recipe
               # detail moved single runs by points
               "imdb": TaskScale(train=2000, eval=2000, epochs=1, max_length=N, lr=1e-4, batch_size=16,
                                 minutes={"full": 32, "linformer": 20})},
        seeds=(0, 1, 2), other_rows_seeds=(0,), mixed_precision="no", jobs=2, transfer_minutes=7.5,
        timing="estimated from runs on 2 AMD EPYC cores, 2 jobs at a time",
        # landmark pooling acts on the projected keys, which SST-2's sentences (shorter than k) never reach
        policy_tasks={"landmarks": ("imdb",)}),
    # the cpu profile's IMDB recipe on 6x the reviews (750 updates); minutes: a run on one thread beside another, the
    # local policy's a little longer than the teacher's (docs/results/table2_pretrained_cpu12k_notes.md, and the
    # cost columns of table2_pretrained_cpu12k.md). The comparisons (the converted policy
    # without exact keys, fairseq's slice at k = 128) get seed 0: whether the local policy's lead over them holds
    # where the teacher is strong
    "cpu12k": Profile(
        name="cpu12k", ks=(128, 64), sharings=("layerwise",), policies=("local", "converted", "paper"),
        transfer_steps=150, transfer_batch=4, transfer_short_fraction=0.5,
        tasks={"imdb": TaskScale(train=12000, eval=2000, epochs=1, max_length=N, lr=1e-4, batch_size=16,
                                 minutes={"full": 110, "linformer": 115})},
        seeds=(0, 1, 2), other_rows_seeds=(0,), mixed_precision="no", jobs=2, transfer_minutes=7.5,
        timing="estimated from runs on 2 AMD EPYC cores, 2 jobs at a time", policy_ks={"paper": (128,)},
        mixed_starts={"local": "seed 0 of each local row was finetuned from the cpu profile's transfer build, seeds 1-2 "
                               "from a rebuild of the same recipe on a fresh clone (records made before one start per "
                               "row was enforced; both builds are listed)"}),
    "gpu": Profile(
        name="gpu", ks=(128, 64), sharings=("layerwise", "headwise"), policies=("local", "converted", "paper"),
        transfer_steps=2000, transfer_batch=16, transfer_short_fraction=0.5,
        tasks={"sst2": TaskScale(train=None, eval=None, epochs=3, max_length=128,
                                 minutes={"full": 3.5, "linformer": 3.5}),
               "imdb": TaskScale(train=None, eval=None, epochs=2, max_length=N,
                                 minutes={"full": 2, "linformer": 4})},
        # jobs: a 22M-parameter encoder keeps a GPU busy a small share of each step (launches, data loading on the
        # host), so 4 runs share the device, each with its own host process
        # minutes: the transfers and finetuning runs measured at k = 128 layerwise with 4 runs sharing the H200
        # (docs/results/table2_pretrained_gpu_notes.md); the other ks and sharings are taken to cost the same
        seeds=(0, 1, 2), other_rows_seeds=(0, 1, 2), mixed_precision="bf16", jobs=4, transfer_minutes=4,
        policy_transfer_minutes={"local": 5.5, "converted": 3, "paper": 2},
        timing="measured on one H200, 4 runs sharing it: docs/results/table2_pretrained_gpu_notes.md",
        mixed_starts={"local": "its SST-2 and IMDB runs were finetuned from two builds of its transfer, one per GPU "
                               "session (GPU kernels are not bitwise reproducible; records made before one start per "
                               "row was enforced)"}),
}


@dataclass(frozen=True)
class Row:
    label: str               # e.g. "full (teacher)", "k=128, layerwise, converted policy, transfer"
    slug: str                # run-name part, e.g. full, k128-layerwise-converted-tr
    model_dir: Path
    k: int | None
    sharing: str | None
    policy: str | None       # a key of POLICIES
    prepare: str             # the job that builds model_dir

    @property
    def read_by_targets(self) -> bool:
        """The teacher and the "local" policy's rows: the targets (report.table2_pretrained) read them, so they
        get every seed of the profile."""
        return self.policy in (None, "local")


def row_seeds(p: Profile, row: Row) -> tuple[int, ...]:
    return p.seeds if row.read_by_targets else p.other_rows_seeds


def row_tasks(p: Profile, row: Row) -> tuple[str, ...]:
    return tuple(t for t in p.tasks if t in p.policy_tasks.get(row.policy, p.tasks))


def converted_dir(attention: str, places: Places = CHECKOUT) -> Path:
    """Where scripts/convert.py writes SOURCE converted with `attention` at n = N (its config's out_dir)."""
    return out_dir("convert", (*places.overrides, f"model_path={SOURCE}", f"model.max_seq_len={N}",
                               f"model.attention={attention}"))


def transfer_run(k: int, sharing: str, policy: str) -> str:
    return f"{SOURCE}-linformer-n{N}-k{k}-{sharing}-{policy}-all-hidden-s0"


def rows(p: Profile, places: Places = CHECKOUT) -> list[Row]:
    out = [Row("full attention (teacher)", "full", converted_dir("full", places), None, None, None, "convert full")]
    for sharing in p.sharings:  # the decisive rows first: they run first
        for k in p.ks:
            for policy in (x for x in p.policies if k in p.policy_ks.get(x, p.ks)):
                slug = f"k{k}-{sharing}-{policy}-tr"
                out.append(Row(f"k={k}, {sharing}, {policy} policy, transfer", slug,
                               places.run("transfer", transfer_run(k, sharing, policy)) / MODEL_DIR, k, sharing, policy,
                               f"transfer k{k}-{sharing}-{policy}"))
    return out


def run_name(p: Profile, task: str, row: Row, seed: int) -> str:
    return f"tp-{p.name}-{task}-{row.slug}-s{seed}"


def profile_of(run: str) -> str | None:
    """The profile whose job made the run of this name (run_name), or None for a run of no profile."""
    return next((name for name in PROFILES if run.startswith(f"tp-{name}-")), None)


def keep_records(run_dir: Path, records_dir: Path) -> bool:
    """Copy a finished finetuning run's small records (KEPT_FILES and its model's card sidecar) into records_dir,
    which appears complete or not at all. False when the run has not finished. The kept records name their paths
    as a run's record does (``rundir.copy_record``: the model relative to the repository where it lies there):
    committed records read the same on every checkout, and say nothing of the machine that made them."""
    if not (run_dir / RESULTS).is_file() or not (run_dir / PREDICTIONS).is_file():
        return False
    from ..modeling.card import SIDECAR  # the model's modules import torch: a plan's parser reads this module

    results = read_json(run_dir / RESULTS)
    with atomic_dir(records_dir, overwrite=True) as tmp:  # the records of an earlier try of this run are replaced
        for name in KEPT_FILES:
            if (run_dir / name).is_file():
                copy_record(run_dir / name, tmp / name)
        card = Path(local_path(results.get("model_path") or "")) / SIDECAR  # the model's card: its transfer
        if results.get("model_path") and card.is_file():
            shutil.copy2(card, tmp / SIDECAR)
    return True


def chosen_on_reported_record(kept: Path) -> bool:
    """Whether the kept records chose their epoch on the reported split (``rundir.chosen_on_reported``): then the job
    runs again under the protocol and its new records replace them (``Job.stale``)."""
    record = read_json(kept / RESULTS) if (kept / RESULTS).is_file() else {}
    return bool(record) and chosen_on_reported(record)


def row_runs(p: Profile, places: Places = CHECKOUT) -> dict[str, set[str]]:
    """Each row's name (its slug, as its runs are named: --only takes it) -> the names of its finetuning jobs."""
    return {row.slug: {f"finetune {run_name(p, task, row, seed)}" for task in row_tasks(p, row)
                       for seed in row_seeds(p, row)} for row in rows(p, places)}


def plan(p: Profile, python: str = sys.executable, places: Places = CHECKOUT, only: list[str] | None = None
         ) -> list[Job]:
    """Every job, cheapest and most decisive first, each corpus, converted or transferred model just before the
    first run that needs it: run_jobs starts them in this order as their needs finish, so a few jobs at a time (the
    gpu profile's 4) finish runs from their first minutes instead of building every model first. `only`: the rows
    (slugs) whose jobs the plan holds, with what they need (a lending's unit of work)."""
    # beside the corpora prepare_corpus.py writes (its config's out_dir), named for SOURCE's tokenizer and N
    corpus_dir = out_dir("corpus", (*places.overrides, "data=mirror_slice")).with_name(
        f"mirror_slice-{SOURCE}-n{N}")
    base = list(places.overrides)
    plan = [corpus_job(python, [*base, "data=mirror_slice", f"data.n={N}", f"tokenizer_dir={SOURCE}",
                                hydra_override("out_dir", corpus_dir)], intermediate=True)]
    table = [row for row in rows(p, places) if only is None or row.slug in only]
    for row in table:
        if row.policy is None:
            plan.append(Job(row.prepare, [python, job_script("convert"), *base, f"model_path={SOURCE}",
                                              f"model.max_seq_len={N}", "model.attention=full",
                                              hydra_override("out_dir", row.model_dir)], REPO / done_file("convert", row.model_dir),
                                  intermediate=True))
            continue
        policy = [f"model.{key}={str(value).lower().replace(' ', '')}" for key, value in POLICIES[row.policy].items()]
        plan.append(Job(
            row.prepare,
            [python, job_script("transfer"), *base, f"model_path={SOURCE}", f"model.max_seq_len={N}",
             f"model.projected_dim={row.k}", f"model.sharing={row.sharing}", *policy, "transfer.train=all",
             "transfer.target=hidden", f"transfer.short_fraction={p.transfer_short_fraction:g}",
             f"trainer.max_steps={p.transfer_steps}", f"trainer.batch_size={p.transfer_batch}",
             f"trainer.eval_every={p.transfer_steps}", f"trainer.save_every={max(1, p.transfer_steps // 4)}",
             f"trainer.mixed_precision={p.mixed_precision}", hydra_override("corpus_dir", corpus_dir),
             f"run_name={transfer_run(row.k, row.sharing, row.policy)}"],
            REPO / done_file("transfer", row.model_dir.parent), ("corpus",), intermediate=True))
    # (priority, job): every seed of the rows the targets decide on (the teacher, the local policy with the first
    # sharing) first, so a profile run in short slices decides its targets first; then seed 0 of every other row
    # (a whole table), then their other seeds; seed by seed (each seed pairs with the teacher's), then row by row,
    # SST-2 (cheap) before IMDB
    runs = []
    for t_i, (task, scale) in enumerate(p.tasks.items()):
        for r_i, row in enumerate(table):
            if task not in row_tasks(p, row):
                continue
            decides = row.read_by_targets and row.sharing in (None, p.sharings[0])
            for seed in row_seeds(p, row):
                name = run_name(p, task, row, seed)
                args = [python, job_script("finetune"), *base, f"task={task}", hydra_override("model_path", row.model_dir), f"seed={seed}",
                        "subset_seed=0", f"run_name={name}", "experiment_name=table2_pretrained",
                        f"trainer.lr={scale.lr:g}", f"trainer.batch_size={scale.batch_size}",
                        f"trainer.epochs={scale.epochs}", f"trainer.max_length={scale.max_length}",
                        f"trainer.mixed_precision={p.mixed_precision}", "trainer.save_best=false",
                        "trainer.group_by_length=true"]
                if scale.train is not None:
                    args.append(f"max_train_examples={scale.train}")
                if scale.eval is not None:
                    args.append(f"max_eval_examples={scale.eval}")
                finished, kept = REPO / places.run("finetune", name), REPO / records(places) / name
                runs.append(((not decides, seed, r_i, t_i), Job(
                    f"finetune {name}", args, kept / RESULTS, (row.prepare,),
                    keep=lambda finished=finished, kept=kept: keep_records(finished, kept),
                    stale=lambda kept=kept: chosen_on_reported_record(kept))))
    plan += [s for _, s in sorted(runs, key=lambda x: x[0])]
    return in_order_of_use(plan)


def estimated_minutes(p: Profile, job: Job) -> float:
    """Rough minutes for one job on the profile's machine (from the measurements the profile records)."""
    if job.name.startswith("transfer"):
        policy = job.name.rsplit("-", 1)[1]  # "transfer k128-layerwise-local"
        return p.policy_transfer_minutes.get(policy, p.transfer_minutes)
    if job.name.startswith("finetune"):
        task = next(a for a in job.argv if a.startswith("task=")).split("=", 1)[1]
        full = "-full-" in job.name
        return p.tasks[task].minutes["full" if full else "linformer"]
    return 0.5


def first_units(p: Profile, jobs: int, places: Places = CHECKOUT) -> dict[str, float]:
    """Each row not complete (its slug) -> the minutes alone (the profile's estimates) a command needs before any of
    the row's work counts: a transferred row's whole (its runs finetune one build of its transfer, and a build on
    another machine differs, GPU kernels not being bitwise reproducible: the report refuses a row whose runs
    started from two, ``Profile.mixed_starts``), the converted teacher's first run to end with its conversion, its
    runs `jobs` at a time (the same weights on every machine: its finished runs count whichever machine made
    them)."""
    planned = plan(p, places=places)
    todo = wanted(planned, {s.name for s in planned if s.finished})
    units = {}
    for row in rows(p, places):
        left = [s.name for s in todo if s.name in row_runs(p, places)[row.slug]]
        if left:
            minutes = functools.partial(estimated_minutes, p)
            units[row.slug] = (frontend.span(frontend.needed(todo, set(left)), minutes, jobs) if row.policy is not None
                               else frontend.first_end(todo, set(left), minutes, jobs))
    return units


def records(places: Places = CHECKOUT) -> Path:
    """Where the finished runs' records are kept (``RECORDS``, or its place under a rehearsal's folder)."""
    return places.records or _records()


def finetune_runs(p: Profile, places: Places = CHECKOUT) -> str:
    """The records of the profile's finished finetuning runs (a glob)."""
    return str(records(places) / f"tp-{p.name}-*")


def table_path(p: Profile, places: Places = CHECKOUT) -> str:
    """Where the profile's table is written (without the .md/.json suffix)."""
    return str(places.results("table2_pretrained" + ("" if p.name == "cpu" else f"_{p.name}")))


def reproduce(profile: Profile, jobs: int, dry_run: bool, report_only: bool, places: Places = CHECKOUT,
              only: list[str] | None = None, stop_after: float | None = None,
              end_by: float | None = None) -> int:
    """`make reproduce-pretrained`: the plan of `profile` (its rows `only`, where given), then its table."""
    row_sets = row_runs(profile, places)
    return frontend.reproduce(
        plan(profile, places=places, only=only), title=description(__doc__, __file__, paragraph=True),
        minutes=lambda s: estimated_minutes(profile, s), timing=profile.timing, jobs=jobs, dry_run=dry_run,
        report_only=report_only, report=report_argv(profile, places),
        log_dir=REPO / places.outputs(f"reproduce_pretrained_{profile.name}_logs"),
        rows={row: runs for row, runs in row_sets.items() if only is None or row in only}, stop_after=stop_after,
        end_by=end_by)


def report_argv(p: Profile, places: Places = CHECKOUT) -> list[str]:
    """scripts/table2.py's arguments for the profile's table (--overwrite: the reproduction owns its docs/results
    files, which are committed without the output record)."""
    return [finetune_runs(p, places), "--layout", "pretrained", "--profile", p.name, "--out", table_path(p, places),
            "--command", f"make reproduce-pretrained ARGS='--profile {p.name}'", "--overwrite"]


def recipe_text(p: Profile) -> str:
    """What the runs' results.json do not record, for the table's header (the rest is read from the runs)."""
    precision = "fp32" if p.mixed_precision == "no" else p.mixed_precision
    return (f"linear decay, warmup 6%, batches grouped by length, {precision}; transfer {p.transfer_steps} steps x "
            f"{p.transfer_batch} blocks of {N} tokens ({p.transfer_short_fraction:.0%} of batches cut to a random "
            "shorter length), every weight")


def planned_runs(p: Profile) -> set[str]:
    """The run names of the profile's finetuning jobs (what the table's runs are, when they are the experiment's)."""
    return {s.name.removeprefix("finetune ") for s in plan(p) if s.name.startswith("finetune ")}


def missing_runs(p: Profile) -> list[str]:
    """The profile's finetuning runs whose records are not kept yet, in the plan's order: what the table lacks. (The
    corpus, converted and transferred models they need are rebuilt wherever they run, so they are not listed.)"""
    return [s.name.removeprefix("finetune ") for s in plan(p) if s.name.startswith("finetune ") and not s.finished]


def _records() -> Path:
    """Each finished run's small records, committed: under paths.results_dir."""
    return Path(path_root("results_dir")) / "table2_pretrained_runs"


def __getattr__(name: str):
    """RECORDS, read from the configs when first asked for: importing the module needs none (a wheel)."""
    if name == "RECORDS":
        return _records()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
