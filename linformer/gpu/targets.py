"""Run the GPU targets of the reproduction, each as one command whose results are a few small files.

    python scripts/gpu.py tests table3 throughput --out $OUT     # $OUT/gpu.tgz: everything, one file

Targets (see README, "On a GPU"):
  tests       pytest -m gpu tests/gpu (fp16/bf16 training, padding invariance, RoBERTa equality, SDPA kernels,
              exact resume, finetuning and conversion, FLOP counts on CUDA) -> gpu_tests.log
  table3      the paper's Table 3 (configs/benchmark_table3_gpu.yaml) -> table3_gpu.{md,csv,png}
  table3_local  Table 3 for the local/global Linformer (configs/benchmark_table3_local_gpu.yaml: base shape, bf16,
              w = 128, global [0, -1], k = 128; inference at n = 4,096 .. 32,768, the training step at 4,096 ..
              16,384) through flex_attention, then through the blocked path -> table3_local_gpu.{md,csv,png},
              table3_local_train_gpu.{md,csv}, and the same names with _blocked
  throughput  training throughput and MFU (configs/benchmark_throughput_gpu.yaml) -> throughput_gpu.{md,csv}
  mfu         the trainer's own MFU: short compiled pretraining runs of the base model at n = 512 in bf16, full
              attention, full attention with the trainer's levers (host reads every 10 steps, one micro-batch of
              128, CUDA graphs), and Linformer k = 128 (configs/experiment/mfu_gpu.yaml), on a prepared corpus
              data/processed/wiki_mfu and tokenizer data/tokenizers/wiki carried with the checkout -> their
              summary.json, metrics.jsonl and run record under <work>/repo/outputs/pretrain/mfu-*, and
              mfu_gpu/{runs.md,mfu.png} (the steady-state MFU of each run, MFU per step)
  table2      Table 2 from all-MiniLM-L6-v2 at GPU scale (scripts/reproduce_pretrained.py --profile gpu: resumable,
              its finished runs' records kept under docs/results/table2_pretrained_runs; --only ROW,ROW: those rows)
              -> those records, table2_pretrained_gpu.{md,json} and the runner's job logs, copied under
              <work>/repo/ at their paths in the repository
  scratch     Table 2 from the framework's own pretraining (scripts/reproduce_scratch.py --profile gpu --rows N,
              default 1: the next N rows not complete; --only ROW,ROW: those rows), each pretrained on the carried
              Wikipedia head and finetuned on SST-2 and IMDB with 3 seeds) -> the records under
              docs/results/table2_scratch_gpu_runs, table2_scratch_gpu.* and the runner's job logs, copied under
              <work>/repo/ at their paths in the repository (carry: gpu_carry.py pack scratch)
  figure3     the paper's Figure 3a: a tokenizer and n = 512 corpus of the Wikipedia slice (data=wiki, read from
              paths.data_mirror: configs/paths/default.yaml says where, and which variable moves it), then
              full attention and Linformer k = 64, 128, 256 pretrained on the same tokens
              (configs/experiment/figure3_gpu.yaml), as many at once as the GPU's free memory holds (Together)
              -> figure3_gpu.{json,png}, and each run's curves and summary under <work>/repo/outputs/pretrain/fig3-*
  figure3d    the paper's Figure 3d: a tokenizer of the book texts and a corpus per n = 512 .. 4096 (data=books; carry:
              gpu_carry.py pack figure3d), the Linformer at k = 128 at each n (the paper's is k = 256:
              figure3d_gpu.yaml says why this one differs), then full attention at each n, the
              same tokens per update everywhere (configs/experiment/figure3d_gpu.yaml), as many at once as the GPU's
              free memory holds -> figure3d_gpu.{json,png} and the runs' records under
              <work>/repo/outputs/pretrain/fig3d-*

The targets write their files under --work (default outputs/gpu_work in the checkout). Every target's command line,
exit code, wall time, start, device, commit, torch/CUDA/driver versions and gpu.py's arguments go into
<work>/gpu_targets.json (one record per target run, newest last), so a batch of targets returns what each did even
when one of them fails; <work>/pip_packages.txt has the versions of every package the batch's Python sees (pip list
--format=freeze), the node's and the wheels'.

--out gets one file, gpu.tgz: the whole of --work as one .tar.gz, written atomically before each target, rewritten
while it runs as soon as one of its runs' records appears in the repository (copy_back_patterns, every
DELIVER_EVERY_S), and after it: a command the machine kills (SIGKILL, nothing after it runs) returns the targets
before it, the runs its target finished, and gpu_targets.json naming the target that was running. A machine that returns only a few files, at most two
folders down (the device tool: 8), returns it whole, whatever the targets wrote; extract it to read them.

--stop-after MIN ends the batch MIN minutes after the command started (--started EPOCH_S: `t0=$(date +%s)` first in
the machine's command, so that the install and the unpack before gpu.py count; default gpu.py's own start), for a
machine whose commands have a time limit: the
running command gets SIGTERM (a resumable target keeps what it finished and exits within its own stop time; one
still running linformer.jobs.STOP_WAIT_S = 120 s later is killed), no further command starts, and the target is
recorded as stopped, not failed. So the command may last MIN minutes plus that wait and END_MIN for the last archive:
a --stop-after whose sum passes --limit (the machine's limit on one command, default COMMAND_LIMIT_MIN = 10) is refused
before anything runs, as the machine would kill the command mid-job. scratch refuses a --stop-after its first row
cannot end by (a pretrained row cut short runs again whole), naming the row that would (scratch.first_units), and
table2 one a row it runs cannot end by, each against the minutes --started has left of it (minutes_left); its
dry run says which rows one command can finish. Without --past-estimates, the table2 and scratch runners start no job
whose estimate ends past the stop (--end-by: a job stopped there leaves a checkpoint under outputs/ that does not
come back, and its stop's wait is time the next command could use); the summary names the jobs not started. A target's files under the repository
(copy_back_patterns) are copied to <out>/repo/ whatever its exit, so a later run of the same target on a fresh
machine, with those files back in the checkout, resumes where this one stopped.

Before anything runs, every module the targets' jobs import must be there and the installed versions must meet the
installed packages' requirements (node.py: the wheels go in with pip --no-deps), and a target that reads a carry (gpu_carry.py) has it checked against the config (carry.py,
check_carry): a carry not unpacked, another target's, or one cut for other settings is one error line.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ..argtypes import at_least, positive_minutes
from ..argtypes import folder as folder_path
from ..cli import ArgumentParser, cli_errors
from ..data.io import default_data_mirror
from ..errors import ConfigError, DataError, LinformerError, OutputPathError
from ..experiments import CHECKOUT, Places, frontend, job_script, pretrained, run_dir, scratch
from ..files.atomic import atomic_write, record_output_files, write_json
from ..files.hashing import tree_sha256
from ..files.locations import repo_root
from ..files.outputs import check_output_files, made_by
from ..files.runs import CONFIG, METRICS, RUN, SUMMARY
from ..jobs import NOT_STARTED, STOP_WAIT_S, Job, JobFailed, JobsStopped, run_jobs, stopped_by
from ..progress import every
from ..rundir import code_revision, copy_record
from ..script_help import description
from ..signals import interrupt_status
from . import carry, node

REPO = repo_root()
WORK = "outputs/gpu_work"  # --work's default, in the checkout (git-ignored; a warm machine's next batch adds to it)
ARCHIVE = "gpu.tgz"  # the one file gpu.py writes under --out
# beside gpu_targets.json: `pip list --format=freeze` of the batch's Python, the node's own packages and the wheels
# installed for it, so that a lending says which versions ran (the node list, docs/gpu/node_packages.txt, names some
# without one)
PACKAGES = "pip_packages.txt"
# What the device tool returns of --out: 8 files of at most 16 MiB each, two folders down at most
RETURNED_FILE_MIB = 16
COMMAND_LIMIT_MIN = 10.0  # --limit's default: the device tool's limit on one command, 600 s
# After the stop's wait: the last records' copy, the archive and the exit, in minutes; a --stop-after must leave it
END_MIN = 0.5
# How often, in seconds, a running target's new records are looked for (deliver_while): a command the machine kills
# (SIGKILL, nothing after it runs) returns every run finished more than this long before the kill
DELIVER_EVERY_S = 10.0
LOG_EVERY_S = 60.0  # and the archive is rewritten at least this often while the target's log grows


FIGURE3_KS = (64, 128, 256)
FIGURE3_RUNS = ("fig3-full", *(f"fig3-k{k}" for k in FIGURE3_KS))
# GPU memory one Figure 3 run takes, at most: four compiled base-model runs at 128 x 512 tokens per step in bf16
# held 116 GB together on an H200 (docs/results/figure3_gpu_notes.md); the small model's runs take far less.
FIGURE3_RUN_GIB = 32.0
# Figure 3d: the Linformer at k = 128 (figure3d_gpu.yaml; the paper's k = 256) and full attention at each n, on the
# book texts, with the same tokens per update at every n (figure3_gpu.yaml's 64 x 512)
FIGURE3D_NS = (512, 1024, 2048, 4096)
FIGURE3D_TOKENS = 32_768
FIGURE3D_EVAL_TOKENS = 8 * FIGURE3D_TOKENS  # validation tokens each evaluation scores, at every n
FIGURE3D_RUNS = {f"fig3d-{kind}-n{n}": (n, override) for kind, override in
                 (("k128", "model.attention=linformer"), ("full", "model.attention=full")) for n in FIGURE3D_NS}
FIGURE3D_RUN_GIB = 16.0  # the small model at 32,768 tokens per update: a fraction of FIGURE3_RUN_GIB's base runs
RUN_RECORDS = (SUMMARY, METRICS, RUN, CONFIG)
# Rows of the from-scratch Table 2 per lending: a row's pretrained weights do not outlive the machine, so a slice
# finishes whole rows (experiments/scratch.py). One row (one pretraining, 6 finetuning runs) takes about 9 minutes by
# the profile's estimates, more than one command's largest --stop-after (scratch_first_unit refuses it, naming the
# no-pretraining row, whose finished runs count on any machine: docs/gpu/README.md)
SCRATCH_ROWS = 1
# The targets, in the order target_commands gives their commands: the command line's choices, read without the
# configs that some targets' commands are composed from (--help over a wheel needs none)
TARGETS = ("tests", "table3", "table3_local", "throughput", "table2", "scratch", "mfu", "figure3", "figure3d")
# The MFU runs: full attention as before (a host read every step), with host reads every 10 steps, and the
# Linformer; then, after a first report (a failing command ends its target), the levers that can fail at their start
# on top: one micro-batch of 128 (the same 65,536 tokens per step; its validation split must hold 128 blocks), then
# CUDA graphs, and the report again with every run.
_ASYNC = ["trainer.sync_every=10"]
_B128 = [*_ASYNC, "trainer.batch_size=128", "trainer.grad_accum=1"]
MFU_RUNS = {"mfu-full": ["model.attention=full"],
            "mfu-full-async": ["model.attention=full", *_ASYNC],
            "mfu-k128": ["model.projected_dim=128", "model.sharing=layerwise"],
            "mfu-full-async-b128": ["model.attention=full", *_B128],
            "mfu-full-async-b128-graphs": ["model.attention=full", *_B128, "trainer.compile_mode=reduce-overhead"]}
MFU_FIRST_REPORT = 3  # the runs reported before the ones that can fail at their start


def copy_back_patterns(target: str) -> tuple[str, ...]:
    """What a target writes inside the repository (globs relative to it) that a fresh machine needs to resume the
    target, and the results themselves; nothing for the targets that write only under --out."""
    if target in ("mfu", "figure3", "figure3d"):
        runs = {"mfu": MFU_RUNS, "figure3": FIGURE3_RUNS, "figure3d": FIGURE3D_RUNS}[target]
        return tuple(f"{run_dir('pretrain', run)}/{name}" for run in runs for name in RUN_RECORDS)
    if target == "scratch":  # the records, the table and the runner's job logs (scripts/reproduce_scratch.py's)
        gpu = scratch.PROFILES["gpu"]
        return f"{gpu.records}/*", f"{gpu.table}.*", f"{CHECKOUT.outputs('reproduce_scratch_gpu_logs')}/*.log"
    if target != "table2":
        return ()

    gpu = pretrained.PROFILES["gpu"]  # and the job logs of scripts/reproduce_pretrained.py
    return (pretrained.finetune_runs(gpu), f"{pretrained.table_path(gpu)}.*",
            f"{CHECKOUT.outputs('reproduce_pretrained_gpu_logs')}/*.log")


class Together(NamedTuple):
    """Independent commands that share the GPU: as many run at once as its free memory holds at `gib_each` GiB
    apiece (one at a time without CUDA), the next starting when one ends. While one run compiles or evaluates on
    the host, the others keep the GPU busy, so the group ends sooner than the runs one after another; each run's
    own tokens/s and MFU then count the time it waited for the others."""
    commands: tuple[list[str], ...]
    gib_each: float

    def slots(self) -> int:
        import torch

        if len(self.commands) == 1 or not torch.cuda.is_available():
            return 1
        free_bytes, _ = torch.cuda.mem_get_info()
        return max(1, min(len(self.commands), int(free_bytes / 2**30 // self.gib_each)))


def figure3_commands(py: str, out: Path) -> list:
    """Data, the four pretraining runs (the same tokens and steps), then the figure."""
    pretrain = [py, job_script("pretrain"), "model=small", "data=wiki", "experiment=figure3_gpu"]
    attention = {"fig3-full": "model.attention=full", **{f"fig3-k{k}": f"model.projected_dim={k}" for k in FIGURE3_KS}}
    runs = tuple([*pretrain, attention[run], f"run_name={run}"] for run in FIGURE3_RUNS)
    return [[py, job_script("train_tokenizer"), "data=wiki", "show_progress=false"],
            [py, job_script("prepare_corpus"), "data=wiki", "data.num_proc=16"],
            Together(runs, FIGURE3_RUN_GIB),
            [py, job_script("figure3"), *(str(run_dir("pretrain", run)) for run in FIGURE3_RUNS),
             "--out", str(out / "figure3_gpu")]]


def figure3d_commands(py: str, out: Path) -> list:
    """The book texts' tokenizer and a corpus per n, the Linformer runs side by side (the figure's subject, first:
    a batch cut short still returns them), full attention's, then panel d."""
    prepare = [[py, job_script("prepare_corpus"), "data=books", f"data.n={n}", f"data.name=books-n{n}",
                "data.num_proc=16"] for n in FIGURE3D_NS]
    runs = {name: [py, job_script("pretrain"), "model=small", "data=books", f"data.n={n}", f"data.name=books-n{n}",
                   "experiment=figure3d_gpu", f"model.max_seq_len={n}", f"trainer.batch_size={FIGURE3D_TOKENS // n}",
                   f"trainer.eval_blocks={FIGURE3D_EVAL_TOKENS // n}", override, f"run_name={name}"] for name, (n, override) in FIGURE3D_RUNS.items()}
    groups = [Together(tuple(c for name, c in runs.items() if kind in name), FIGURE3D_RUN_GIB)
              for kind in ("-k128-", "-full-")]
    return [[py, job_script("train_tokenizer"), "data=books", "show_progress=false"], *prepare, *groups,
            [py, job_script("figure3"), "--panel", "d", *(str(run_dir("pretrain", name)) for name in FIGURE3D_RUNS),
             "--out", str(out / "figure3d_gpu")]]


def mfu_commands(py: str, out: Path) -> list[list[str]]:
    """The MFU runs (the same tokens and steps, full attention first: the trainer's 45% target,
    bench.throughput.TRAINER_TARGET_MFU, is the base model's), then
    their table and per-step MFU plot (compare_runs: the steady-state columns come from each summary)."""
    pretrain = [py, job_script("pretrain"), "model=base", *carry.PREPARED["mfu"], "experiment=mfu_gpu", "logger=none"]
    runs = [[*pretrain, *overrides, f"run_name={run}"] for run, overrides in MFU_RUNS.items()]

    def report(names) -> list[str]:
        return [py, job_script("compare_runs"), *(str(run_dir("pretrain", run)) for run in names), "--metrics",
                "loss", "tokens_per_s", "mfu", "--plot", "mfu", "--out", str(out / "mfu_gpu"), "--overwrite"]

    first = MFU_FIRST_REPORT
    return [*runs[:first], report(list(MFU_RUNS)[:first]), *runs[first:], report(MFU_RUNS)]


def target_commands(out: Path, jobs: int | None = None, rows: int | None = SCRATCH_ROWS,
                    only: str | None = None, end_by: float | None = None) -> dict[str, list[list[str]]]:
    """Each target's commands, run in order; a target stops at its first failing command. jobs: the table2 and
    scratch jobs at once (None: the gpu profile's); rows: scratch's rows (None: every one `only` names); only: the
    rows of table2 or scratch to run (None: all); end_by: --stop-after's time (seconds since the epoch), by which
    table2's and scratch's runners start no job whose estimate ends later (None: every job starts)."""
    py = sys.executable
    at_once = ["--jobs", str(jobs)] if jobs is not None else []
    at_once += ["--end-by", f"{end_by:.0f}"] if end_by is not None else []
    targets = {
        "tests": [[py, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rA", "--timeout=600", "-p",
                   "no:cacheprovider"]],
        "table3": [[py, job_script("benchmark"), "--config-name", "benchmark_table3_gpu", f"out_dir={out}",
                    "progress=false"]],
        "table3_local": [[py, job_script("benchmark"), "--config-name", "benchmark_table3_local_gpu", f"out_dir={out}",
                          "progress=false", *extra] for extra in
                         ([], ["inference.linformer_attn_implementation=sdpa",
                               "throughput.linformer_attn_implementation=sdpa", "name=table3_local_blocked_gpu",
                               "throughput_name=table3_local_blocked_train_gpu"])],
        "throughput": [[py, job_script("benchmark"), "--config-name", "benchmark_throughput_gpu", f"out_dir={out}",
                        "progress=false"]],
        "table2": [[py, job_script("reproduce_pretrained"), "--profile", "gpu", *at_once,
                    *(["--only", only] if only is not None else [])]],
        "scratch": [[py, job_script("reproduce_scratch"), "--profile", "gpu",
                     *(["--rows", str(rows)] if rows is not None else []), *at_once,
                     *(["--only", only] if only is not None else [])]],
        "mfu": mfu_commands(py, out),
        "figure3": figure3_commands(py, out),
        "figure3d": figure3d_commands(py, out),
    }
    assert tuple(targets) == TARGETS, "TARGETS names each target of target_commands, in order"
    return targets


# pytest's closing count line, e.g. "185 skipped in 3.20s" or "== 3 passed, 2 skipped in 9.1s =="
_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s")


def all_skipped(log_text: str) -> bool:
    """Whether pytest's last summary in `log_text` counts skips and no passes: a test target that tested nothing."""
    counts = [m.group(1) for m in map(_PYTEST_SUMMARY.match, log_text.splitlines()) if m]
    return bool(counts) and "passed" not in counts[-1] and "skipped" in counts[-1]


def log_name(target: str) -> str:
    return "gpu_tests.log" if target == "tests" else f"{target}.log"


def run_target(name: str, commands: list, out: Path, deadline: float | None = None,
               archive_to: Path | None = None, warned: set | None = None) -> dict:
    """Run one target's commands in order (a Together group's commands side by side, through the project's job
    runner, linformer.jobs.run_jobs), their output streamed to the console and to <out>/<name>.log (tests:
    gpu_tests.log); the first that fails ends the target. At `deadline` (time.monotonic()) the running commands get
    SIGTERM and no other starts: the record says `stopped`. With `archive_to`, what the target writes in the
    repository is copied under <out>/repo/ and all of `out` archived there as each run finishes (deliver_while;
    `warned`: archive's)."""
    log_path = out / log_name(name)
    start, rc, stopped, interrupted = time.perf_counter(), 0, False, False
    with open(log_path, "w", encoding="utf-8") as log, deliver_while(copy_back_patterns(name), out, archive_to,
                                                                      log_path, warned):
        for command in commands:
            group = command if isinstance(command, Together) else Together((command,), 0.0)
            slots = group.slots()  # once: the free GPU memory it reads moves
            if len(group.commands) > 1:
                log.write(f"# {len(group.commands)} commands, {slots} at a time\n")
            plan = [Job(str(i), c, None) for i, c in enumerate(group.commands)]
            try:
                run_jobs(plan, jobs=slots, cwd=REPO, stream=log, deadline=deadline)
            except JobFailed as failed:
                rc = failed.status
            except JobsStopped as ended:
                rc, stopped = next((code for code in ended.exit_codes.values() if code != 0), 0), True
            except KeyboardInterrupt as err:  # SIGTERM or Ctrl-C to this script: its commands were stopped (run_jobs)
                rc, stopped, interrupted = interrupt_status(err), True, True
            except LinformerError as err:  # refused before it started (the output rule): a failed target, not a crash
                print(f"error: {err}", file=log, flush=True)
                print(f"error: {err}", flush=True)
                rc = 2
            if rc != 0 or stopped:
                break
    if name == "tests" and rc == 0 and all_skipped(log_path.read_text(encoding="utf-8")):
        rc = 1  # exit 0 with every test skipped: nothing was tested, so the target did not pass
        print(f"error: every GPU test was skipped ({log_path}): the target tested nothing", flush=True)
    record = {"target": name, "commands": [_shown(c) for c in commands], "rc": rc,
              "wall_s": round(time.perf_counter() - start, 1), "log": log_path.name}
    if stopped:
        record["stopped"] = True
    if interrupted:
        record["interrupted"] = True
    copied = copy_back(copy_back_patterns(name), out / "repo")
    if copied:
        record["copied"] = copied
    not_started = jobs_not_started(log_path)
    if not_started:
        record["not_started"] = not_started
    return record


def jobs_not_started(log_path: Path) -> list[str]:
    """The jobs a target's runner did not start, their estimates ending past --stop-after (its jobs.NOT_STARTED
    lines in the target's log)."""
    names = []
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = re.sub(r"^\[[^]]*\] ", "", line)  # a Together group's commands' lines: "[i] " first
        if line.startswith(NOT_STARTED):
            names += [name for name in line.removeprefix(NOT_STARTED).strip().split(", ") if name]
    return names


def _shown(command) -> str:
    if isinstance(command, Together):
        return " & ".join(" ".join(c) for c in command.commands)
    return " ".join(command)


def copy_back(patterns: tuple[str, ...], dest: Path) -> list[str]:
    """Copy the files and directories matching `patterns` (relative to the repository) to the same relative paths
    under `dest`, a run's record naming no path of this machine (``rundir.copy_record``); returns the paths
    copied."""
    copied = []
    for pattern in patterns:
        for found in sorted(glob.glob(pattern, root_dir=REPO)):
            source, target = REPO / found, dest / found
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():  # kept records (a plan's keep_records, keep_pretrain): copied so already
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:  # a run's record with its paths as they read on every machine
                copy_record(source, target)
            copied.append(found)
    return copied


def _fingerprint(patterns: tuple[str, ...]) -> tuple:
    """The files matching `patterns` under the repository (a matched folder's files too), with their sizes and
    modification times: what copy_back would copy, changed or not."""
    found = []
    for pattern in patterns:
        for match in glob.glob(pattern, root_dir=REPO):
            path = REPO / match
            for file in (sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]):
                try:
                    stat = file.stat()
                except OSError:  # removed meanwhile (a runner replacing a record)
                    continue
                found.append((str(file), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


@contextmanager
def deliver_while(patterns: tuple[str, ...], work: Path, dest: Path | None, log_path: Path,
                  warned: set | None = None):
    """While the block runs (a target's commands): every DELIVER_EVERY_S, where the files matching `patterns` changed
    (a run finished and its records were kept), they are copied under <work>/repo/ and `work` archived at `dest`;
    where only the log grew, at most every LOG_EVERY_S. The machine's limit kills a command with SIGKILL, after which
    nothing runs: what it finished before is then in the archive already. No-op without `dest`."""
    if dest is None:
        yield
        return
    records = tuple(p for p in patterns if not p.endswith(".log"))  # the job logs grow all along: they ride along
    seen, logged, last = _fingerprint(records), 0, time.monotonic()

    def deliver() -> None:
        nonlocal seen, logged, last
        try:
            now, size = _fingerprint(records), log_path.stat().st_size
            if now != seen or (size != logged and time.monotonic() - last >= LOG_EVERY_S):
                copy_back(patterns, work / "repo")
                archive(work, dest, warned)
                seen, logged, last = now, size, time.monotonic()
        except (OSError, LinformerError) as err:  # a copy that failed: the target's own end copies again
            print(f"warning: the records could not be archived while the target ran ({err})", file=sys.stderr,
                  flush=True)

    with every(DELIVER_EVERY_S, deliver, "deliver_while"):
        yield


def archive(folder: Path, dest: Path, warned: set | None = None) -> None:
    """`folder`'s files as one .tar.gz at `dest`, written atomically; a warning when it is larger than a file the
    device tool returns, once per `dest` in `warned` (a command's set: its archive is rewritten as runs finish)."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    atomic_write(dest, buffer.getvalue())
    mib = len(buffer.getvalue()) / 2**20
    if mib > RETURNED_FILE_MIB and (warned is None or dest not in warned):
        if warned is not None:
            warned.add(dest)
        print(f"warning: {dest} is {mib:.1f} MiB, over the {RETURNED_FILE_MIB} MiB a file the device tool returns: "
              f"run fewer targets per command", file=sys.stderr, flush=True)


SOURCE_GLOBS = ("linformer/**/*.py", "scripts/*.py", "configs/**/*.yaml", "pyproject.toml")


def source_sha256(root: Path = REPO) -> str:
    """The code a target runs, by content: one sha256 over the relative path and bytes of each file of
    SOURCE_GLOBS under `root`. It names the code where no git checkout travels (the device tool sends the work tree
    without .git): a dry run here prints the checkout's, and the same value in a record means that code ran."""
    return tree_sha256(root, SOURCE_GLOBS)


def provenance(argv: list[str], gpu: str) -> dict:
    """What made a batch's results, for each target's record: the device, the package's version, commit and whether
    the checkout had uncommitted changes, as a run's record gives them (``rundir.code_revision``: commit and dirty
    None without a git checkout; the device tool sends none, so the commit is the one the checkout was sent from), the
    source's sha256 (which names the code either way), torch, its CUDA, the driver, and gpu.py's arguments."""
    import torch

    driver = (_command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or "").split()
    return {"device": gpu, **code_revision(), "source_sha256": source_sha256(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "driver": driver[0] if driver else None, "argv": argv}


def _command_output(command: list[str]) -> str | None:
    """A command's output, or None where it fails or is missing."""
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=30, check=True,
                              encoding="utf-8", errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=description(__doc__, __file__))
    parser.add_argument("targets", nargs="+", choices=sorted(TARGETS), help="targets to run, in order")
    parser.add_argument("--out", type=folder_path, help=f"the folder that comes back from the machine: it gets one file, "
                                                 f"{ARCHIVE}, every target's files as one archive, rewritten after "
                                                 "every target (needed but for --dry-run)")
    parser.add_argument("--work", type=folder_path, default=REPO / WORK, metavar="DIR",
                        help=f"the targets' files: logs, record, results (default {WORK} in the checkout)")
    parser.add_argument("--stop-after", type=positive_minutes, metavar="MIN",
                        help="stop the batch this many minutes after the command started (--started; SIGTERM to "
                             f"the running command); with the stop's wait of {STOP_WAIT_S} s and {END_MIN:g} min for "
                             "the last archive it must end within --limit")
    parser.add_argument("--limit", type=positive_minutes, default=COMMAND_LIMIT_MIN, metavar="MIN",
                        help=f"the machine's limit on one command, in minutes (default {COMMAND_LIMIT_MIN:g}): a "
                             "--stop-after that with the stop's wait passes it is refused")
    # a call from Python (tests, a driver) counts from the call, the command line from the process's start
    parser.add_argument("--started", type=float, default=process_start() if argv is None else time.time(),
                        metavar="EPOCH_S",
                        help="when the machine's command started, in seconds since the epoch (`t0=$(date +%%s)` first "
                             "in the command, then --started $t0): --stop-after counts from then (default this "
                             "process's start, leaving out what ran before it)")
    parser.add_argument("--overwrite", action="store_true", help="replace logs, the record or the archive that "
                                                                  "scripts/gpu.py did not write")
    parser.add_argument("--jobs", type=at_least(1), metavar="N",
                        help="table2, scratch: jobs at once (default the gpu profile's); fewer finish the first runs "
                             "sooner")
    parser.add_argument("--rows", type=at_least(1), metavar="N", help=f"scratch: the next N rows not complete (default "
                                                              f"{SCRATCH_ROWS})")
    parser.add_argument("--only", metavar="ROW[,ROW...]", help="table2 or scratch: only these rows "
                                                               "(reproduce_pretrained.py, reproduce_scratch.py --only)")
    parser.add_argument("--past-estimates", action="store_true",
                        help="table2, scratch: start rows the plan's estimates say cannot end by --stop-after (the "
                             "estimates are unmeasured on this machine until its job logs say; a second command on "
                             "the still-warm machine finds the first's outputs and continues a row)")
    parser.add_argument("--dry-run", action="store_true", help="print each target's commands and exit (no GPU needed); "
                        "with --stop-after, also scratch's rows and whether they fit")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    _check_arguments(parser, args)
    # from the command's start (--started): the install and unpack before gpu.py, and its own start, count
    deadline = None if args.stop_after is None else \
        time.monotonic() + 60 * args.stop_after - max(0.0, time.time() - args.started)
    if args.dry_run:  # in the order they would run, which decides what a --stop-after cuts
        planned = target_commands(args.work, args.jobs, scratch_rows(args), args.only)
        for name in args.targets:
            print(f"[{name}] -> {args.work / log_name(name)}", *(f"  {_shown(c)}" for c in planned[name]), sep="\n")
            if name == "scratch" and args.stop_after is not None:  # its rows' fit, as its own dry run says it
                with cli_errors():
                    print(*(f"  {line}" for line in scratch_fit(args)), sep="\n")
                if args.targets.index(name):
                    print("  (the minutes count from the batch's start: the targets before scratch take from them)")
            if name == "scratch":
                with cli_errors():
                    print(f"  {scratch_lending_line(args)}")
        print(f"archive: {args.out or Path('<out>')}/{ARCHIVE}")
        print(f"source_sha256: {source_sha256()} (this checkout's code; a record with the same value ran it)")
        return 0
    with cli_errors():  # what is wrong with the machine or the files, not with the command line: one line, no usage
        if args.stop_after is not None and not args.past_estimates:  # before the machine's minutes are spent
            checks = {"scratch": scratch_first_unit, "table2": table2_first_unit}
            why = next(filter(None, (check(args, minutes_left(args)) for name, check in checks.items()
                                     if name in args.targets)), None)
            if why is not None:
                raise ConfigError(why)
        return _run(args, deadline, argv if argv is not None else sys.argv[1:])


def _check_arguments(parser, args) -> None:
    """The command line's own errors (usage and exit 2): an option for a target not run is refused, not ignored."""
    if args.rows is not None and "scratch" not in args.targets:
        parser.error("--rows is scratch's option, and scratch is not among the targets")
    if args.only is not None and len({"table2", "scratch"} & set(args.targets)) != 1:
        parser.error("--only names the rows of table2 or of scratch: give exactly one of them among the targets "
                     "(the other in a command of its own)")
    if args.past_estimates and not {"table2", "scratch"} & set(args.targets):
        parser.error("--past-estimates is table2's and scratch's option, and neither is among the targets")
    if args.out is None and not args.dry_run:
        parser.error("the following arguments are required: --out")
    ends = None if args.stop_after is None else stopped_by(args.stop_after) + END_MIN
    if ends is not None and ends > args.limit:
        wait = ends - args.stop_after  # minutes a stopped job may take to save its checkpoint and exit, and the end
        parser.error(f"--stop-after {args.stop_after:g} plus the stop's wait and the records' archive ({wait:g} min: "
                     f"linformer.jobs.STOP_WAIT_S, END_MIN) is {ends:g} min, past --limit {args.limit:g} (one "
                     f"command's time on the machine, which would kill it mid-job): give --stop-after at most "
                     f"{largest_stop_after(args.limit):g}, with --started $t0 from the command's start")
    if args.stop_after is not None and time.time() - args.started >= 60 * args.stop_after:
        parser.error(f"--started {args.started:.0f} is {(time.time() - args.started) / 60:.1f} min ago, past "
                     f"--stop-after {args.stop_after:g}: nothing would run (give the command's start, date +%s)")


def largest_stop_after(limit: float = COMMAND_LIMIT_MIN) -> float:
    """The largest --stop-after (minutes from the command's start) whose stop's wait and end fit in `limit`."""
    return max(limit - stopped_by(0) - END_MIN, 0.0)


def minutes_left(args) -> float:
    """What is left of --stop-after now: its minutes less those since --started (the install and the unpack before
    gpu.py, and gpu.py's own start, took them), to the hundredth of a minute: the estimates it is compared with are
    in tenths, and a call from Python starts its count a few milliseconds before this."""
    return round(args.stop_after - max(0.0, time.time() - args.started) / 60, 2)


def left_words(args, left: float) -> str:
    """`left` minutes of --stop-after, in words: the whole of it, or what --started has left of it."""
    used = args.stop_after - left
    if used < 0.05:
        return f"--stop-after {args.stop_after:g}"
    return f"the {left:.1f} min left of --stop-after {args.stop_after:g} ({used:.1f} min used since --started)"


def process_start() -> float:
    """This process's start, in seconds since the epoch: its start after boot (/proc/self/stat, in clock ticks) plus
    the boot's time (/proc/stat), to the second; now where there is no Linux /proc."""
    try:
        ticks = int(Path("/proc/self/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text(encoding="utf-8").splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def scratch_fit(args) -> list[str]:
    """The scratch rows' minutes and whether they fit in --stop-after (from the batch's start: the targets before
    scratch take from it), by the gpu profile's estimates and the records in this checkout."""
    profile = scratch.PROFILES["gpu"]
    only = None if args.only is None else frontend.chosen_rows(args.only, [row.label for row in scratch.rows(profile)])
    return scratch.fit_lines(profile, args.jobs or profile.jobs, scratch_rows(args), only, args.stop_after)


# The refusals' last words: the estimates are the plan's, not yet measured on the machine, and a warm machine keeps a
# first command's outputs for a second
PAST_ESTIMATES = " (or --past-estimates, to start it all the same)"


def scratch_first_unit(args, stop_after: float) -> str | None:
    """Why scratch's command cannot finish anything that counts in `stop_after` minutes (minutes_left: what is left of
    --stop-after; its first row not complete needs longer, scratch.first_units), naming the rows that would fit; None
    where it can."""
    profile = scratch.PROFILES["gpu"]
    only = None if args.only is None else frontend.chosen_rows(args.only, [row.label for row in scratch.rows(profile)])
    chosen, _ = scratch.slice_rows(profile, Places.of(None, profile.records), scratch_rows(args), only=only)
    units = scratch.first_units(profile, args.jobs or profile.jobs)
    if not chosen or units[chosen[0]] <= stop_after:
        return None
    fit = [f"--only {row} (about {minutes:.1f} min)" for row, minutes in units.items() if minutes <= stop_after]
    return (f"scratch's first row, {chosen[0]}, needs about {units[chosen[0]]:.1f} min before any of its work counts "
            f"(a pretrained row cut short runs again whole), past {left_words(args, stop_after)}: "
            + (f"give {fit[0]}" if fit else f"no row fits; the least needs {min(units.values()):.1f} min")
            + PAST_ESTIMATES)


def table2_first_unit(args, stop_after: float) -> str | None:
    """Why table2's command cannot finish a row's work that counts in `stop_after` minutes (minutes_left; a row it
    runs, --only's or every row not complete, needs longer: pretrained.first_units), naming the rows that would fit;
    None where each can."""
    profile = pretrained.PROFILES["gpu"]
    units = pretrained.first_units(profile, args.jobs or profile.jobs)
    only = None if args.only is None else frontend.chosen_rows(args.only, list(pretrained.row_runs(profile)))
    late = [row for row, minutes in units.items() if (only is None or row in only) and minutes > stop_after]
    if not late:
        return None
    fit = {row: minutes for row, minutes in units.items() if minutes <= stop_after}
    return (f"table2's row {late[0]} needs about {units[late[0]]:.1f} min before any of its work counts (a "
            f"transferred row's whole: its runs finetune one build of its transfer, which a fresh machine builds "
            f"again; the teacher's next run), past {left_words(args, stop_after)}: "
            + (f"give --only {','.join(fit)} (about " + ", ".join(f"{m:.1f}" for m in fit.values()) + " min)"
               if fit else f"no row fits; the least needs {min(units.values()):.1f} min") + PAST_ESTIMATES)


def scratch_lending_line(args) -> str:
    """The dry run's line on the rows a lending's command (--stop-after at most largest_stop_after) can finish."""
    profile = scratch.PROFILES["gpu"]
    most = largest_stop_after(args.limit)
    units = scratch.first_units(profile, args.jobs or profile.jobs)
    fit = [f"{row} ({minutes:.1f} min)" for row, minutes in units.items() if minutes <= most]
    return (f"rows whose first work that counts fits one command (--stop-after at most {most:g} from its start): "
            + (", ".join(fit) or "none") + f"; rows not complete: {len(units)}")


def scratch_rows(args) -> int | None:
    """scratch's --rows: as given, else every row --only names, else SCRATCH_ROWS."""
    return args.rows if args.rows is not None else None if args.only is not None else SCRATCH_ROWS


def _run(args, deadline: float | None, argv: list[str]) -> int:
    work, out = args.work.resolve(), args.out.resolve()
    for flag, folder in (("--out", out), ("--work", work)):
        if folder.exists() and not folder.is_dir():
            raise OutputPathError(f"{flag} {folder} is a file, not a folder")
    if out == work or out.is_relative_to(work):
        raise ConfigError(f"--out {args.out} is inside --work {args.work}: the archive of --work would hold itself; "
                          "give --out a folder of its own (the one that comes back from the machine)")
    record_path = work / "gpu_targets.json"
    try:
        records = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else []
    except ValueError:
        raise DataError(f"{record_path} is not JSON (damaged): move it away to start a new record there") from None
    if not isinstance(records, list):
        raise DataError(f"{record_path} is not a list of target records: move it away to start a new record there")
    # the output rule: the logs, the record and the archive are this script's to replace, never a file of someone
    # else's (refused, naming it, before anything else); claimed before they are written, so a run stopped half-way
    # leaves files the next run may replace
    written = [work / log_name(name) for name in args.targets] + [record_path, work / PACKAGES, out / ARCHIVE]
    owner = made_by("gpu", {})
    check_output_files(written[:-1], owner, args.overwrite, key="--work")
    check_output_files(written[-1:], owner, args.overwrite, key="--out")
    node.check_node()  # a module a job imports missing, or a wheel's requirement the node's version fails
    from ..devices import cuda_device_name  # torch: after the command line is read

    gpu = cuda_device_name()
    if gpu is None:  # every GPU test would be skipped (and pass) and every benchmark fail on its device
        raise ConfigError("no CUDA device here (torch.cuda.is_available() is false): the GPU targets need one")
    for name in args.targets:  # a carry not unpacked, or not what the config reads: refused before any target runs
        carry.check_carry(name, Path(default_data_mirror()))
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    record_output_files(written, owner)
    # the runners of table2 and scratch start no job whose estimate ends past the stop, unless --past-estimates
    end_by = None if args.stop_after is None or args.past_estimates else args.started + 60 * args.stop_after
    commands = target_commands(work, args.jobs, scratch_rows(args), args.only, end_by)
    made = provenance(argv, gpu)
    packages = _command_output([sys.executable, "-m", "pip", "list", "--format=freeze"])
    warned: set[Path] = set()  # the archive's size warning: once in the command, not at every rewrite
    atomic_write(work / PACKAGES, packages or f"# {sys.executable} -m pip list --format=freeze failed here\n")
    for name in args.targets:
        print(f"== target {name} on {gpu}", flush=True)
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        # until it ends, a record saying it runs: an archive made meanwhile, the last of a command the machine killed,
        # says which target the kill cut
        write_json(record_path, [*records, {"target": name, "started": started, "running": True, **made}], indent=1)
        archive(work, out / ARCHIVE, warned)
        record = {**run_target(name, commands[name], work, deadline, out / ARCHIVE, warned), "started": started,
                  **made}
        records.append(record)
        write_json(record_path, records, indent=1)
        archive(work, out / ARCHIVE, warned)
        how = ("stopped by a signal, exit" if record.get("interrupted") else
               "stopped at --stop-after, exit" if record.get("stopped") else "exit")
        print(f"== target {name}: {how} {record['rc']} in {record['wall_s']} s", flush=True)
        if record.get("interrupted"):
            print(f"stopped by a signal during {name}: its record is in {record_path} ({out / ARCHIVE}); no further "
                  "target runs", file=sys.stderr)
            return record["rc"]
    batch = records[-len(args.targets):]
    stopped = [r["target"] for r in batch if r.get("stopped")]
    failed = [r["target"] for r in batch if r["rc"] != 0 and not r.get("stopped")]
    late = "; ".join(f"{r['target']}: {len(r['not_started'])} jobs ({', '.join(r['not_started'])})"
                     for r in batch if r.get("not_started"))
    print(f"gpu targets: {len(batch) - len(failed) - len(stopped)} of {len(batch)} passed"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + (f"; stopped at --stop-after (resumable): {', '.join(stopped)}" if stopped else "")
          + (f"; not started, their estimates ending past --stop-after (a command with the time for them runs "
             f"them): {late}" if late else "")
          + f" ({record_path}; all of {work} in {out / ARCHIVE})")
    return 1 if failed else 0
