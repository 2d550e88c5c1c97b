"""`make demo` (scripts/demo.py): the whole pipeline at toy scale on the mirror data, in minutes on 2 CPU cores.

Runs the real command lines one after another through the job runner (each printed before it runs; a tokenizer
and corpus already built are kept, the demo's pretraining and finetuning runs start over: their folders are deleted,
refused where they hold anything their run did not write), then writes
outputs/demo/summary.json: perplexity before and after pretraining, SST-2 dev accuracy and wall times (of the jobs
the command ran).
Extra arguments are Hydra overrides for the pretraining job (e.g. trainer.max_steps=100).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import sys
import time
from pathlib import Path

import torch

from ..configs import compose
from ..errors import ConfigError, DataError, LinformerError
from ..files.atomic import write_json
from ..files.hashing import hashed_once
from ..files.locations import repo_relative, repo_root, resolve_path
from ..files.mappings import read_json
from ..files.outputs import MANIFEST
from ..files.runs import (
    BEST_DIR,
    CHECKPOINTS_DIR,
    CONFIG,
    LOCK,
    METRICS,
    MODEL_DIR,
    PREDICTIONS,
    RESULTS,
    RUN,
    SUMMARY,
    read_record,
)
from ..files.temporaries import temporary_of
from ..jobs import Job
from ..logfile import say
from ..output_rule import check_plan
from ..runconfig import FinetuneSpec, PretrainSpec
from ..rundir import RunLock
from ..shell import hydra_override, shell_command
from ..train.common import native_cpu_bf16
from ..train.pretrain import perplexity, perplexity_text
from . import Places, corpus_job, done_file, frontend, job_script, tokenizer_job

REPO = repo_root()
PY = sys.executable


def _job(name: str, script: str, config: str, overrides: list[str], done, needs: tuple[str, ...] = (),
         spec=None) -> Job:
    """A job running scripts/<script>.py, done when the file `done(cfg)` exists, cfg being configs/<config>.yaml
    composed with the job's own overrides: the path the script itself writes, so a renamed key or directory
    cannot leave the demo checking elsewhere. `spec`: the run spec its script reads the config into, read here too,
    so that a setting the run would refuse is refused before the demo removes its earlier runs. (The tokenizer and
    corpus jobs are every plan's: ``experiments.tokenizer_job``, ``corpus_job``.)"""
    cfg = compose(config, overrides, with_hydra=True)
    if spec is not None:
        spec.read(cfg)
    return Job(name, [PY, job_script(script), *overrides], Path(resolve_path(str(done(cfg)))), needs)


DEMO = "demo"  # the demo's runs' experiment_name: what marks a run directory as the demo's to replace


def check_demo_run(run: Path) -> None:
    """Refuse a run directory the demo did not make (its config.yaml says experiment_name: demo): it holds someone's
    run or files (run_name=... names the directory), or is a link to anywhere."""
    if run.is_symlink():  # its target may be anyone's: the demo deletes only directories it made
        raise DataError(f"{run} is a symbolic link, not a demo run: the demo replaces only its own run directories; "
                        "choose another run_name= or move that link.")
    if not run.exists():
        return
    if not RunLock(run).holder_gone():  # another demo (or a run of this name) is training in it right now
        raise DataError(f"{run} is in use by a running process (its {LOCK}): wait for it to finish, or give this demo "
                        "another --under.")
    recorded = read_record(run, CONFIG).get("experiment_name")
    if recorded != DEMO:
        raise DataError(f"{run} exists and is not a demo run (its config.yaml has no experiment_name: {DEMO}): the "
                        "demo replaces only its own runs; choose another run_name= or move that directory.")
    others = others_in_run(run)
    if others:  # another command's output, or a user's file: the demo deletes only what its runs wrote
        path, what = others[0]
        raise DataError(f"{path} is {what}, inside the demo's run {run}, which the demo starts over by deleting it: "
                        "move it out of that directory (or give this demo another --under), then run it again.")


# What a run writes into its directory (rundir.py's record, its checkpoints, its saved models, the folders of its
# trackers: wandb/ here, TensorBoard's under logger.project), and Hydra's files of its command where a config keeps
# them (.hydra/, <script>.log)
RUN_ENTRIES = (CONFIG, RUN, METRICS, SUMMARY, RESULTS, PREDICTIONS, LOCK, CHECKPOINTS_DIR, MODEL_DIR, BEST_DIR,
               "wandb", ".hydra")


def others_in_run(run: Path) -> list[tuple[Path, str]]:
    """(path, what it is) for each entry of the run directory `run` that its run did not write: a name no run writes
    (a user's file, compare_runs' --out), or a folder under a run's name that carries another command's record
    (export's model-step-N, or its model/ of a finetuning run's final step, hold export's manifest.json)."""
    logger = read_record(run, CONFIG).get("logger") or {}
    own = {*RUN_ENTRIES, f"{read_record(run, RUN).get('stage')}.log", str(logger.get("project"))}
    found = []
    for path in sorted(run.iterdir()):
        name = temporary_of(path.name) or path.name  # an interrupted write's temporary stands for what it writes
        made = read_json(path / MANIFEST).get("command") if path.is_dir() and not path.is_symlink() else None
        if made:
            found.append((path, f"the output of {made}"))
        elif name not in own:
            found.append((path, "not a file a run writes"))
    return found


def remove_demo_run(run: Path) -> None:
    """Delete a run directory the demo made, which holds only what its run wrote; refuse any other
    (``check_demo_run``)."""
    check_demo_run(run)
    if run.exists():
        shutil.rmtree(run)


def _run_dir(cfg) -> str:
    return cfg.hydra.run.dir


def plan(extra: list[str], where: Places) -> list[Job]:
    """The demo's jobs (`extra`: Hydra overrides for its pretraining), writing where `where` says."""
    flags = [a for a in extra if a.startswith("-")]
    if flags:  # else Hydra's grammar refuses it as a lexer error naming pretrain.yaml
        raise ConfigError(f"{flags[0]}: the demo takes Hydra overrides for its pretraining job only (key=value, e.g. "
                          "trainer.max_steps=100), not a flag")
    places = list(where.overrides)
    # bf16 where the CPU computes it natively (faster than fp32 there); emulated bf16 is slower than fp32
    precision = "bf16" if torch.cuda.is_available() or native_cpu_bf16() else "no"
    # validation scores the whole held-out split (the slice's 162 blocks, fewer than trainer.eval_blocks' default)
    pretrain = [*places, "run_name=demo", f"experiment_name={DEMO}", "model=tiny", "data=mirror_slice",
                "trainer.max_steps=300", "trainer.batch_size=16", "trainer.lr=1e-3", "trainer.warmup_steps=30",
                "trainer.eval_every=100", "trainer.eval_blocks=null", "trainer.save_every=100",
                "trainer.log_every=100", f"trainer.mixed_precision={precision}", *extra]
    # a data override given for the pretraining names the corpus it reads: the tokenizer and corpus jobs make that one
    data = [a for a in extra if a.lstrip("+~").split("=")[0].split(".")[0] == "data"]
    data = data if any(a.startswith("data=") for a in data) else ["data=mirror_slice", *data]
    jobs = [tokenizer_job(PY, [*places, *data]),
            corpus_job(PY, [*places, *data], name="prepare_corpus", needs=("tokenizer",)),
            _job("pretrain", "pretrain", "pretrain", pretrain, lambda c: done_file("pretrain", _run_dir(c)),
                 ("prepare_corpus",), PretrainSpec)]
    pretrain_dir = jobs[-1].done.parent
    finetune = [*places, "task=sst2", hydra_override("model_path", repo_relative(pretrain_dir)), "run_name=demo-sst2",
                f"experiment_name={DEMO}",
                "max_train_examples=20000", "trainer.epochs=2", "trainer.lr=1e-3", "trainer.log_every=250",
                f"trainer.mixed_precision={precision}"]
    jobs.append(_job("finetune_sst2", "finetune", "finetune", finetune, lambda c: done_file("finetune", _run_dir(c)),
                     ("pretrain",), FinetuneSpec))
    return jobs


RUNS = ("pretrain", "finetune_sst2")  # the jobs whose run directories the demo replaces: they start over every time


@hashed_once()  # its jobs' done-checks, run as it shows and runs them, read each source text once
def run(extra: list[str], under: Path | None = None, dry_run: bool = False) -> int:
    """Run the demo (`extra`: Hydra overrides for its pretraining) and print its summary; the exit status (0, 1 after a
    failed job, 128 + the signal when stopped: ``frontend.run``). `under`: write data/ and outputs/ under that folder instead of
    the checkout (a rehearsal that leaves the checkout alone). `dry_run`: print the plan only."""
    where = Places.of(under)
    jobs = plan(extra, where)
    runs = [s.done.parent for s in jobs if s.name in RUNS]
    title = "make demo: the whole pipeline at toy scale (its pretraining and finetuning runs start over)"
    again = "Run again, it keeps the tokenizer and corpus it built."
    frontend.show([dataclasses.replace(s, done=None) if s.name in RUNS else s for s in jobs], title, None,
                  "one after another", 1, again=again)
    if dry_run:
        try:  # what the run would refuse first, said as a reproduction's dry run says it
            _check_outputs(jobs, runs)
        except (FileNotFoundError, LinformerError) as err:
            print(f"warning: the run would stop here: {err}", file=sys.stderr)
        return 0
    _check_outputs(jobs, runs)
    for run_dir in runs:
        remove_demo_run(run_dir)
    (REPO / where.outputs("demo/summary.json")).unlink(missing_ok=True)  # it described the runs just removed
    t0 = time.perf_counter()
    rc, times = frontend.run(jobs, 1, None, stopped=(
        "stopped: the demo's runs start over: run it again and it keeps the tokenizer and corpus it built but runs its "
        "pretraining and finetuning from the start; a checkpoint a job saved is not used by the demo (the job's own "
        "command resumes from it)"))
    if rc:
        return rc
    summarize(jobs, runs, {**times, "total": round(time.perf_counter() - t0, 1)}, REPO / where.outputs("demo/summary.json"))
    return 0


def _check_outputs(jobs: list[Job], runs: list[Path]) -> None:
    """Every output checked before anything is removed or written: the demo's runs always start over (only its own
    are removed), the tokenizer and corpus are kept."""
    for run_dir in runs:
        check_demo_run(run_dir)
    check_plan((s.argv for s in jobs), REPO)


def summarize(jobs: list[Job], runs: list[Path], times: dict[str, float], path: Path) -> dict:
    """The demo's summary (`path`: outputs/demo/summary.json) from the finished runs, written, printed and returned."""
    pretrain_dir, finetune_dir = runs
    pre = recorded_numbers(pretrain_dir, SUMMARY, ("final_val_loss", "steps", "tokens", "tokens_per_s"),
                           optional=("initial_val_loss",))
    fin = recorded_numbers(finetune_dir, RESULTS, ("metrics.accuracy", "num_train_examples", "num_eval_examples"))
    before, after = pre["initial_val_loss"], pre["final_val_loss"]
    summary = {
        "val_ppl_before_pretraining": perplexity(before) if before is not None else None,
        "val_ppl_after_pretraining": perplexity(after),
        "pretrain_steps": pre["steps"],
        "pretrain_tokens": pre["tokens"],
        "pretrain_tokens_per_s": round(pre["tokens_per_s"]),
        "sst2_dev_accuracy": fin["metrics.accuracy"],
        "sst2_train_examples": fin["num_train_examples"],
        "sst2_dev_examples": fin["num_eval_examples"],
        "wall_time_s": times,
        "commands": {s.name: shell_command("python", *s.argv[1:]) for s in jobs},
    }
    write_json(path, summary)
    say(f"\n==> demo summary ({path})\n"
        f"  validation perplexity: {perplexity_text(before)} before pretraining -> "
        f"{perplexity_text(after)} after {pre['steps']} steps ({pre['tokens']:,} tokens)\n"
        f"  SST-2 dev accuracy:    {100 * summary['sst2_dev_accuracy']:.1f}% "
        f"({fin['num_eval_examples']} examples, finetuned on {fin['num_train_examples']:,})\n"
        "  wall time (s):         " + ", ".join(f"{k} {v}" for k, v in summary["wall_time_s"].items())
        + _kept_note(jobs, times))
    return summary


def _kept_note(jobs: list[Job], times: dict[str, float]) -> str:
    """What the wall times leave out: the jobs an earlier command finished (the tokenizer, the corpus), kept, not
    run by this one (whose times, and total, are all that wall_time_s holds)."""
    kept = [s.name for s in jobs if s.name not in times]
    return f" (this command's jobs; {', '.join(kept)} kept from an earlier one, not counted)" if kept else ""


def recorded_numbers(run_dir: Path, name: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
                     ) -> dict[str, float | None]:
    """Each of `keys` and `optional` (dotted: metrics.accuracy) in the run's record file `name`, a finite number (an
    `optional` one may be null or absent: None). The file missing or not reading (``read_record``), or a key missing
    or not a number, is refused in one line naming the file and the key: the demo's run wrote it, so it was damaged
    or replaced since."""
    record, file = read_record(run_dir, name), run_dir / name
    if not record:
        raise DataError(f"{file} is missing: the demo's run in {run_dir} finished without it. Run the demo again.")
    found: dict[str, float | None] = {}
    for key in (*keys, *optional):
        value = record
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number and (key not in optional or value is not None):
            raise DataError(f"{file} has {'no ' + key if value is None else f'{key}: {value!r}, not a number'}: "
                            f"the demo's run in {run_dir} wrote it otherwise. Run the demo again.")
        found[key] = value
    return found

