"""`make reproduce-pretrained`: Table 2 from a real pretrained encoder converted to Linformer (the plan).

Rows: the source encoder with full attention (the teacher), and Linformer variants built from its weights at
n = 512 for every (k, sharing) of the profile, each without transfer (``scripts/convert.py``: E/F start as
window means) and with transfer (``scripts/transfer.py``: every weight fitted to the teacher's layer outputs on
512-token blocks of the mirror corpus, tokenized with the source's tokenizer, a share of them cut shorter so that
short inputs such as SST-2's sentences are fitted too). Each row is finetuned on SST-2 and IMDB (n = 512) through
``scripts/finetune.py`` on fixed, stratified subsets (``subset_seed`` stays 0, so every seed and row sees the same
rows and the same eval examples, which the paired intervals of ``report/table2_pretrained.py`` need).

Profiles: ``cpu`` fits the targets' rows into sittings on 2 CPU cores (fp32: bf16 is emulated on CPUs without
native support); ``gpu`` is the full-size table (whole SST-2 train set, IMDB 25k/25k, 3 seeds on every row, bf16).
Every stage is resumable (``linformer/stages.py``): run the same command again after an interruption.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .stages import Stage

N = 512
SOURCE = "minilm"
LR = 5e-5  # the default finetuning lr of a task's rows (every row of a task shares it; no per-row tuning)


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
    transfer_steps: int
    transfer_batch: int
    transfer_short_fraction: float  # share of transfer batches cut to a random shorter length (SST-2 is short)
    tasks: dict               # task -> TaskScale
    seeds: tuple[int, ...]    # seeds for the rows that decide the targets (teacher, transferred rows)
    other_seeds: tuple[int, ...]  # seeds for the rows without transfer
    mixed_precision: str
    jobs: int
    transfer_minutes: float   # estimated per transfer run
    timing: str               # where the minutes come from


PROFILES = {
    # Minutes per stage as the profile runs them (2 jobs of 1 thread on 2 cores, fp32, batches grouped by length),
    # from the stages' wall times in docs/results/table2_pretrained.json: a full-attention IMDB run at 512 tokens
    # takes about 1.5 times a Linformer one.
    "cpu": Profile(
        name="cpu", ks=(64, 128), sharings=("layerwise", "headwise"), transfer_steps=150, transfer_batch=4,
        transfer_short_fraction=0.5,
        tasks={"sst2": TaskScale(train=6000, eval=None, epochs=1, max_length=128, minutes={"full": 3.5, "linformer": 2.5}),
               # 1,000 reviews are 32 updates at batch 32: too few at lr 5e-5 (the teacher's loss stays near
               # 0.66); batch 16 at lr 1e-4 makes 63 updates of the same compute
               "imdb": TaskScale(train=1000, eval=2000, epochs=1, max_length=N, lr=1e-4, batch_size=16,
                                 minutes={"full": 16, "linformer": 10})},
        seeds=(0, 1, 2), other_seeds=(0,), mixed_precision="no", jobs=2, transfer_minutes=7.5,
        timing="measured on 2 AMD EPYC cores, 2 stages at a time"),
    "gpu": Profile(
        name="gpu", ks=(64, 128), sharings=("layerwise", "headwise", "kv"), transfer_steps=2000, transfer_batch=16,
        transfer_short_fraction=0.5,
        tasks={"sst2": TaskScale(train=None, eval=None, epochs=3, max_length=128, minutes={"full": 6, "linformer": 6}),
               "imdb": TaskScale(train=None, eval=None, epochs=2, max_length=N,
                                 minutes={"full": 12, "linformer": 10})},
        seeds=(0, 1, 2), other_seeds=(0, 1, 2), mixed_precision="bf16", jobs=1, transfer_minutes=8,
        timing="rough guesses for one H100, not measured (no GPU was available)"),
}


@dataclass(frozen=True)
class Row:
    label: str               # e.g. "full (teacher)", "k=128, layerwise, transfer"
    slug: str                # run-name part, e.g. full, k128-layerwise, k128-layerwise-tr
    model_dir: Path
    k: int | None
    sharing: str | None
    transfer: bool
    prepare: tuple[str, ...]  # stages that build model_dir


def converted_dir(attention: str, k: int | None = None, sharing: str | None = None) -> Path:
    tag = f"full-n{N}" if attention == "full" else f"linformer-n{N}-k{k}-{sharing}"
    return Path(f"outputs/converted/{SOURCE}-{tag}")


def transfer_run(k: int, sharing: str) -> str:
    return f"{SOURCE}-linformer-n{N}-k{k}-{sharing}-all-hidden-s0"


def rows(p: Profile) -> list[Row]:
    out = [Row("full attention (teacher)", "full", converted_dir("full"), None, None, False, ("convert full",))]
    for sharing in p.sharings:  # the first sharing's rows first: they run first and decide the most
        for k in sorted(p.ks, reverse=True):
            base = f"k{k}-{sharing}"
            out.append(Row(f"k={k}, {sharing}", base, converted_dir("linformer", k, sharing), k, sharing, False,
                           (f"convert {base}",)))
            out.append(Row(f"k={k}, {sharing}, transfer", f"{base}-tr",
                           Path(f"outputs/transfer/{transfer_run(k, sharing)}/model"), k, sharing, True,
                           (f"transfer {base}",)))
    return out


def run_name(p: Profile, task: str, row: Row, seed: int) -> str:
    return f"tp-{p.name}-{task}-{row.slug}-s{seed}"


def plan(p: Profile, python: str = sys.executable) -> list[Stage]:
    """Every stage, cheapest and most decisive first: run_stages starts them in this order as their needs finish."""
    corpus_dir = f"data/processed/mirror_slice-{SOURCE}-n{N}"
    stages = [Stage("corpus", [python, "scripts/prepare_corpus.py", "data=mirror_slice", f"data.n={N}",
                               f"tokenizer_dir={SOURCE}", f"out_dir={corpus_dir}"],
                    Path(corpus_dir) / "manifest.json")]
    table = rows(p)
    for row in table:
        if row.transfer:
            stages.append(Stage(
                row.prepare[0],
                [python, "scripts/transfer.py", f"model_path={SOURCE}", f"model.max_seq_len={N}",
                 f"model.projected_dim={row.k}", f"model.sharing={row.sharing}", "transfer.train=all",
                 "transfer.target=hidden", f"transfer.short_fraction={p.transfer_short_fraction:g}",
                 f"trainer.max_steps={p.transfer_steps}",
                 f"trainer.batch_size={p.transfer_batch}", f"trainer.eval_every={p.transfer_steps}",
                 f"trainer.save_every={max(1, p.transfer_steps // 4)}", f"trainer.mixed_precision={p.mixed_precision}",
                 f"corpus_dir={corpus_dir}"],
                Path(f"outputs/transfer/{transfer_run(row.k, row.sharing)}/summary.json"), ("corpus",)))
        else:
            arch = ["model.attention=full"] if row.k is None else \
                ["model.attention=linformer", f"model.projected_dim={row.k}", f"model.sharing={row.sharing}"]
            stages.append(Stage(row.prepare[0], [python, "scripts/convert.py", f"model_path={SOURCE}",
                                                 f"model.max_seq_len={N}", *arch, f"out_dir={row.model_dir}"],
                                row.model_dir / "config.json"))
    decides = {r.slug for r in table if r.transfer or r.k is None}
    runs = []  # (priority, stage): seed 0 before other seeds, then row by row, SST-2 (cheap) before IMDB
    for t_i, (task, scale) in enumerate(p.tasks.items()):
        for r_i, row in enumerate(table):
            for seed in (p.seeds if row.slug in decides else p.other_seeds):
                name = run_name(p, task, row, seed)
                args = [python, "scripts/finetune.py", f"task={task}", f"model_path={row.model_dir}", f"seed={seed}",
                        "subset_seed=0", f"run_name={name}", "experiment_name=table2_pretrained",
                        f"trainer.lr={scale.lr:g}", f"trainer.batch_size={scale.batch_size}",
                        f"trainer.epochs={scale.epochs}", f"trainer.max_length={scale.max_length}",
                        f"trainer.mixed_precision={p.mixed_precision}", "trainer.save_best=false",
                        "trainer.group_by_length=true"]
                if scale.train is not None:
                    args.append(f"max_train_examples={scale.train}")
                if scale.eval is not None:
                    args.append(f"max_eval_examples={scale.eval}")
                runs.append(((seed > 0, r_i, t_i), Stage(f"finetune {name}", args,
                                                     Path(f"outputs/finetune/{name}/results.json"), row.prepare)))
    stages += [s for _, s in sorted(runs, key=lambda x: x[0])]
    return stages


def estimated_minutes(p: Profile, stage: Stage) -> float:
    """Rough minutes for one stage on the profile's machine (from the measurements the profile records)."""
    if stage.name.startswith("transfer"):
        return p.transfer_minutes
    if stage.name.startswith("finetune"):
        task = stage.argv[stage.argv.index("scripts/finetune.py") + 1].split("=", 1)[1]
        full = "-full-" in stage.name
        return p.tasks[task].minutes["full" if full else "linformer"]
    return 0.5


def finetune_runs(p: Profile) -> str:
    return f"outputs/finetune/tp-{p.name}-*"


def recipe_text(p: Profile) -> str:
    """The finetuning recipe in words, for the table's header."""
    parts = []
    for task, s in p.tasks.items():
        train = "all" if s.train is None else f"{s.train:,}"
        evals = "all" if s.eval is None else f"{s.eval:,}"
        parts.append(f"{task}: {train} train / {evals} eval examples, {s.epochs} epoch(s), lr {s.lr:g}, "
                     f"batch {s.batch_size}, max length {s.max_length}")
    precision = "fp32" if p.mixed_precision == "no" else p.mixed_precision
    return (f"linear decay, warmup 6%, batches grouped by length; {'; '.join(parts)}; {precision}; "
            f"transfer {p.transfer_steps} steps x {p.transfer_batch} blocks of {N} tokens "
            f"({p.transfer_short_fraction:.0%} of batches cut to a random shorter length), every weight")


def missing_stages(p: Profile) -> list[str]:
    return [s.name for s in plan(p) if not s.done.exists()]
