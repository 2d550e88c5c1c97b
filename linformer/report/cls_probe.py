"""What a pretrained encoder gives a classifier before finetuning: the <s> token's attention and its spread.

RoBERTa-style classification reads the final hidden state of <s> (position 0). Two numbers per model and task,
on a fixed sample of eval examples:
- entropy of <s>'s attention distribution, per layer, averaged over heads and examples (nats), beside its maximum
  ln(number of attended positions): at the maximum, <s> averages its context uniformly;
- relative spread of the final <s> state across examples, ||std over examples|| / ||mean over examples||: near 0,
  every input starts the classifier from almost the same vector, so finetuning must first build the signal.
Used to explain the mini Table 2 (docs/results/table2_mini_notes.md); it reads models, it trains nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

import linformer.modeling  # noqa: F401  (registers the Auto classes)
from linformer.data.io import default_data_mirror, load_auto
from linformer.data.task_loading import load_task
from linformer.data.task_readers import check_task_dir
from linformer.data.tokenizer import load_tokenizer
from linformer.errors import PartialOutput
from linformer.files.atomic import atomic_write
from linformer.files.tables import table_lines, table_row
from linformer.logfile import fewer_than_asked
from linformer.modeling.loading import load_pretrained, resolve_model_path
from linformer.report.measured import Started, provenance, start

log = logging.getLogger(__name__)


def task_dirs(tasks: list[str], data_mirror: str) -> dict[str, tuple[str | None, str]]:
    """{task: (the folder of its files (None: the hub dataset), where that folder is given, in words)}, each read from its task config as finetune's
    task=<name> reads it: configs/task/<name>.yaml, or a --config-dir's (``configs.command_sources``), with
    ${paths.data_mirror} at `data_mirror`. The task names are the task group's, as finetune's are; a task config's
    spec block registers its task (``TaskData.read``). A name that is no task config is a ConfigError with a
    did-you-mean, before any model is read."""
    from omegaconf import OmegaConf

    from ..configs import compose, config_words, refuse_missing_values
    from ..runconfig.settings import TaskData
    from ..shell import hydra_override

    dirs = {}
    for task in tasks:
        cfg = compose("finetune", [hydra_override("task", task), "model_path=-",
                                   hydra_override("paths.data_mirror", data_mirror)])
        # task.data_dir=??? (configs/task/_example.yaml): cls_probe takes task configs, not finetune's overrides
        refuse_missing_values(cfg, "finetune", how=(
            "cls_probe takes no overrides: set it in a copy of that file, task/<name>.yaml in a folder of your own, "
            "and give --tasks <name> --config-dir FOLDER"))
        data = TaskData.read(OmegaConf.to_container(cfg, resolve=True))
        under = data.data_dir is not None and Path(data.data_dir).is_relative_to(Path(data_mirror).absolute())
        dirs[task] = (data.data_dir, f"its folder under --data-mirror {data_mirror}" if under else
                      f"the data_dir of {config_words(f'task/{task}.yaml')}")
    return dirs


def eval_sample(task: str, tokenizer, where: tuple[str | None, str], n_examples: int, max_length: int,
                seed: int = 0):
    """A seeded sample of the task's eval split (`where`: its folder and its words, ``task_dirs``'), tokenized like
    finetuning does (truncated to max_length)."""
    data_dir, words = where
    if data_dir is not None:
        check_task_dir(task, data_dir, ("eval",), elsewhere=f" ({words})")
    data = load_task(task, data_dir, tokenizer, max_length, splits=("eval",))
    ev = data["eval"]
    if len(ev) < n_examples:  # the table's examples column shows the count probed; said here against the flag
        fewer_than_asked(log, f"--examples {n_examples}", f"the {task} eval split", len(ev), "examples", "probing")
    return ev.shuffle(seed=seed).select(range(min(n_examples, len(ev))))


# Why a row has no entropy: its model computes no attention probabilities, or returned no maps
NO_MAPS_EXACT_KEYS = ("exact local and global keys (local_window, global_positions) compute no attention "
                      "probabilities")
NO_MAPS = "the model returned no attention maps"


def has_maps(model) -> bool:
    """Whether the model's attention computes probabilities to return: not a Linformer with exact local and global
    keys beside its projected ones (LinformerModel warns and returns None for those layers)."""
    config = model.config
    return not (getattr(config, "attention", "full") != "full"
                and (getattr(config, "local_window", 0) or getattr(config, "global_positions", None)))


@torch.no_grad()
def cls_stats(model, batch: dict) -> dict:
    """Entropy of <s>'s attention per layer (nats, with its maximum) and the relative spread of the final <s>; a
    model without attention maps gets no entropy and "no_entropy", the reason."""
    maps = has_maps(model)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=maps)
    cls = out.last_hidden_state[:, 0].float()
    spread = (cls.std(0).norm() / cls.mean(0).norm().clamp_min(1e-12)).item()
    layers = [a for a in (out.attentions or ()) if a is not None] if maps else []
    if not layers:
        return {"cls_spread": spread, "entropy": [], "max_entropy": [],
                "no_entropy": NO_MAPS if maps else NO_MAPS_EXACT_KEYS}
    entropy, max_entropy = [], []
    for a in layers:  # (batch, heads, T, keys): keys = T (full) or k (Linformer)
        p = a[:, :, 0].float()
        entropy.append((-(p * p.clamp_min(1e-12).log()).sum(-1)).mean().item())
        # uniform over the keys <s> can see: the unpadded ones for full attention, all k projected rows otherwise
        visible = batch["attention_mask"].sum(-1).float() if a.shape[-1] == batch["input_ids"].shape[1] else \
            torch.full((a.shape[0],), float(a.shape[-1]))
        max_entropy.append(visible.log().mean().item())
    return {"cls_spread": spread, "entropy": entropy, "max_entropy": max_entropy}


def load_probed(path: str):
    """The encoder at `path` in eval mode, with attention that returns its maps: Hugging Face's eager attention for a
    model that is not ours (its default SDPA returns none)."""
    from transformers import AutoConfig, AutoModel

    from ..modeling import LinformerConfig

    ours = isinstance(load_auto(AutoConfig, path), LinformerConfig)
    # load_pretrained: transformers' load report (an MLM head left behind) as one INFO line, an encoder that would
    # start fresh refused
    return load_pretrained(AutoModel, path, add_pooling_layer=False,
                           **({} if ours else {"attn_implementation": "eager"})).eval()


def probe(runs: list[str], tasks: list[str], data_mirror: str | None = None, n_examples: int = 64,
          max_length: int | None = None, seed: int = 0, rows: list[dict] | None = None) -> list[dict]:
    """One row per run and task (appended to `rows` as each is measured, so a caller keeps what was measured before
    an error). Every run is resolved before anything is measured, so a wrong name stops nothing half-way."""
    from transformers import DataCollatorWithPadding

    dirs = task_dirs(tasks, data_mirror or default_data_mirror())
    rows = [] if rows is None else rows
    paths = [(run, resolve_model_path(str(run), "runs")) for run in runs]  # a run's model/, a model dir, a hub name
    for run, d in paths:
        tok = load_tokenizer(d, "runs")
        model = load_probed(d)
        length = max_length or int(getattr(model.config, "max_seq_len", 0) or model.config.max_position_embeddings - 2)
        collate = DataCollatorWithPadding(tok)
        for task in tasks:
            sample = eval_sample(task, tok, dirs[task], n_examples, length, seed)
            batch = collate([{"input_ids": x["input_ids"], "attention_mask": x["attention_mask"]} for x in sample])
            rows.append({"run": str(run), "task": task, "examples": len(sample), **cls_stats(model, batch)})
    return rows


def write_probe(runs: list[str], tasks: list[str], data_mirror: str | None, n_examples: int,
                out: str | None) -> None:
    """``probe``'s table printed, and written to `out` where given. Where an error stops it, the rows measured
    before it are printed and written marked partial, and PartialOutput carrying the error is raised
    (``atomic.output_files`` keeps that table as the command's output, then raises the error)."""
    started = start()
    rows: list[dict] = []
    try:
        probe(runs, tasks, data_mirror, n_examples, rows=rows)
    except Exception as err:
        if not rows:
            raise
        _write(rows, out, started, f"Partial: stopped after {len(rows)} rows by an error "
                                   f"({type(err).__name__}: {err}); the rest was not measured.")
        raise PartialOutput(err) from err
    _write(rows, out, started)


def _write(rows: list[dict], out: str | None, started: Started, partial: str = "") -> None:
    command, (machine, _) = provenance("scripts/cls_probe.py", started)
    md = to_markdown(rows, command, machine, partial)
    print(md)
    if out:
        atomic_write(out, md)
        print(f"wrote {out}")


def to_markdown(rows: list[dict], command: str, machine: str = "", partial: str = "") -> str:
    """The table; `partial`: the line saying why rows are missing (a run stopped by an error)."""
    lines = ["# <s> before finetuning: attention entropy and spread across inputs", "",
             *([machine] if machine else []), f"Command: `{command}`", "", *([f"**{partial}**", ""] if partial else []),
             ("Entropy of <s>'s attention per layer in nats (its maximum, uniform attention, in brackets); "
             "spread = ||std|| / ||mean|| of the final <s> state over the examples (0 = the same vector for "
             "every input)."), "",
             *table_lines(["run", "task", "examples", "<s> attention entropy per layer [max]", "spread of final <s>"])]
    for r in rows:
        ent = ", ".join(f"{e:.2f} [{m:.2f}]" for e, m in zip(r["entropy"], r["max_entropy"], strict=True)) or \
            f"- ({r.get('no_entropy', NO_MAPS)})"
        lines.append(table_row([Path(r["run"]).name, r["task"], r["examples"], ent, f"{r['cls_spread']:.3f}"]))
    return "\n".join(lines) + "\n"

