"""Finetuning on a GLUE-style task on the training core: ``finetune(spec, run_dir)``.

Works from a pretraining run directory (its ``model/``), any Linformer directory, or a plain Hugging Face encoder
(RoBERTa, BERT-family: Table 2's baseline row). Evaluates on the task's eval split every epoch (or every
``trainer.eval_every`` steps), keeps the best model in ``<run>/best`` and writes ``<run>/results.json``.

As in pretraining, batch order is a pure function of (seed, step): epoch e visits the training examples in a
permutation seeded by (seed, e), so a resumed run sees exactly the batches the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, DataCollatorWithPadding

from ..data import compute_metrics, get_task, load_task
from ..data.streams import COLUMNS, ExampleStream, token_lengths
from ..errors import ConfigError
from ..files import write_json
from ..modeling.card import add_results, read_card_info
from ..modeling.configuration import ATTENTION_FIELDS
from ..modeling.loading import (
    check_tokenizer_fits,
    load_classifier,
    max_tokens,
    resolve_model_path,
    weights_sha256,
)
from ..rundir import PREDICTIONS, RunRecord
from ..spec import FinetuneSpec, TaskData, TaskRunSpec, TrainerSettings
from .core import Trainer, TrainingTask, run_training

# The model's architecture as results.json records it: what a report's rows are told apart by.
ARCH_KEYS = ("attention", *ATTENTION_FIELDS, "classifier_pooling")


def task_splits(data: TaskData, tokenizer, max_length: int, splits: tuple[str, ...] = ("train", "eval")):
    """The task's tokenized splits as a run selects them (data_dir, subsets, subset_seed, cache): also how a report
    rebuilds the eval examples of a finished run from its config.yaml."""
    return load_task(data.name, data.data_dir, tokenizer, max_length, skip_bad_rows=data.skip_bad_rows,
                     splits=splits, cache_dir=data.cache_dir,
                     max_examples={"train": data.max_train_examples, "eval": data.max_eval_examples},
                     subset_seed=data.subset_seed)


class FinetuneTask(TrainingTask):
    stage = "finetune"
    greater_is_better = True
    min_tokens_key = "min_train_tokens"  # the key min_train_tokens(run) reads, for the error naming it

    def __init__(self, run: TaskRunSpec, settings: TrainerSettings, world: int, rank: int):
        seed = self.seed = run.seed
        try:
            self.task_spec = get_task(run.task.name)
        except KeyError as err:
            raise ConfigError(f"task={run.task.name}: {err.args[0]}") from err
        self.main_metric = f"eval_{self.task_spec.metrics[0]}"
        self.from_scratch = self.starts_from_scratch(run)  # random weights in the model's architecture
        self.model_path, self.tokenizer, self.model = self.load_model(run)
        self.config = self.model.config
        # the weights the run starts from, by content: ties its record to the converted or transferred model
        self.start_weights_sha256 = None if self.from_scratch else weights_sha256(self.model_path)
        check_tokenizer_fits(self.tokenizer, self.config, self.model_path)
        self.max_length = self._max_length(settings.max_length, run.task.max_length)
        data = task_splits(run.task, self.tokenizer, self.max_length)
        self.min_tokens = self.min_train_tokens(run)
        self.train, self.eval = self.train_examples(data["train"]), data["eval"]
        collate = DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8)  # dynamic padding per batch
        self.stream = ExampleStream(self.train, settings.batch_size, world, rank, seed, collate,
                                    group_by_length=settings.group_by_length)
        # Evaluation runs longest first, so each batch pads to a similar length (the models' outputs do not depend
        # on padding); predictions are put back in eval-split order.
        self.eval_order = np.argsort(-token_lengths(self.eval), kind="stable")
        self.eval_loader = DataLoader(self.eval.select(self.eval_order).with_format(columns=COLUMNS),
                                      batch_size=settings.require("eval_batch_size", "finetuning"),
                                      collate_fn=collate)
        self.steps_per_epoch = math.ceil(self.stream.batches_per_epoch / settings.grad_accum)
        self.max_steps = settings.max_steps or self.steps_per_epoch * settings.require("epochs", "finetuning")
        self.default_eval_every = self.steps_per_epoch
        self.save_best = settings.save_best
        self.settings = dataclasses.replace(settings, max_steps=self.max_steps)
        self.prepare = (self.eval_loader,)
        arch = {k: getattr(self.config, k, None) for k in ("attention", "projected_dim", "sharing")}
        self.tracker_tags = [f"task={self.task_spec.name}"] + [f"{k}={v}" for k, v in arch.items() if v is not None]

    def train_examples(self, split):
        """The train examples the run learns from: all of the selected split, or with a minimum length
        (`min_tokens`, from min_train_tokens) only those longer than that after truncation
        to the run's max_length: the long inputs a lengthened model is trained on."""
        if self.min_tokens is None:
            return split
        lengths = token_lengths(split)
        keep = np.flatnonzero(lengths > self.min_tokens)
        if not len(keep):
            raise ConfigError(f"{self.min_tokens_key}={self.min_tokens}: none of the {len(split)} train examples is "
                              f"longer (the longest has {int(lengths.max())} tokens at trainer.max_length="
                              f"{self.max_length}): lower it, or read longer inputs (trainer.max_length, up to the "
                              "model's n)")
        return split.select(keep.tolist())

    def min_train_tokens(self, run: FinetuneSpec) -> int | None:
        """Train only on the examples longer than this many tokens; None = all."""
        return run.min_train_tokens

    def starts_from_scratch(self, run: FinetuneSpec) -> bool:
        return run.from_scratch

    def load_model(self, run: FinetuneSpec) -> tuple[str, Any, torch.nn.Module]:
        """(where the model comes from, its tokenizer, the classifier to train) for the run's model_path."""
        model_path = resolve_model_path(run.model_path)
        model, _ = load_classifier(model_path, self.task_spec.num_labels, self.from_scratch)
        return model_path, AutoTokenizer.from_pretrained(model_path), model

    def _max_length(self, requested: int | None, task_max: int | None) -> int:
        """trainer.max_length when given (a request above the model's n is an error), else the model's n (or its
        position table) capped by the task's default length (task.max_length)."""
        limit = max_tokens(self.config, self.tokenizer, None, None)
        if requested is not None and requested > limit:
            raise ConfigError(
                f"trainer.max_length={requested} is above what the model {self.model_path} takes ({limit} tokens): "
                f"use trainer.max_length={limit} or less."
            )
        return min(limit, requested if requested is not None else (task_max or limit))

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        return self.stream.micro_batch(g)

    def epoch_of(self, step: int) -> float:
        return step / self.steps_per_epoch

    @torch.no_grad()
    def evaluate(self, model, acc) -> dict[str, float]:
        model.eval()
        preds, refs = [], []
        for batch in self.prepared[0]:  # the eval DataLoader, wrapped by Accelerate
            logits = model(**batch).logits
            p, r = acc.gather_for_metrics((logits.argmax(-1), batch["labels"]))
            preds.append(p.cpu())
            refs.append(r.cpu())
        model.train()
        self.last_eval = (self._in_split_order(preds), self._in_split_order(refs))
        scores = compute_metrics(self.task_spec.name, *map(np.asarray, self.last_eval))
        return {f"eval_{k}": v for k, v in scores.items()}

    def _in_split_order(self, parts: list[torch.Tensor]) -> list[int]:
        """Undo the longest-first evaluation order."""
        out = np.empty(len(self.eval_order), dtype=np.int64)
        out[self.eval_order] = torch.cat(parts).numpy()
        return out.tolist()

    def on_best(self, trainer: Trainer, step: int) -> None:
        if trainer.main:  # per-example outcomes, in eval-split order: paired comparisons between models need them
            preds, labels = self.last_eval
            # compact: 25,000 IMDB reviews are 100 KB instead of 350, and the kept records travel to GPU nodes
            write_json(trainer.run_dir / PREDICTIONS, {"step": step, "split": self.task_spec.eval_split,
                                                       "labels": labels, "predictions": preds}, indent=None)
        if self.save_best:
            trainer.save_model(trainer.run_dir / "best")

    def keep_results(self, trainer: Trainer, metrics: dict) -> None:
        """Where the run's results go beyond results.json: a converted or transferred model's card lists the results
        finetuned from it. (Distillation saves its student here, the model the results belong to.)"""
        if trainer.main and read_card_info(self.model_path):
            add_results(self.model_path, self.task_spec.name, metrics, trainer.run_dir)

    def finish(self, trainer: Trainer) -> tuple[dict[str, Any], dict[str, Any]]:
        best = trainer.state["best"] or {"step": trainer.state["step"]}
        evals = trainer.state["evals"]
        at_best = next(e for e in evals if e["step"] == best["step"]) if evals else {}
        metrics = {k[len("eval_"):]: v for k, v in at_best.items() if k.startswith("eval_")}
        arch = {k: getattr(self.config, k, None) for k in ARCH_KEYS}
        if arch["attention"] in (None, "full"):  # a Linformer in full mode, or a plain HF encoder (RoBERTa, BERT)
            arch.update({k: None for k in ARCH_KEYS if k not in ("max_seq_len", "classifier_pooling")},
                        attention="full")
            arch["max_seq_len"] = arch["max_seq_len"] or max_tokens(self.config, self.tokenizer, None, None)
        results = {
            "task": self.task_spec.name,
            "eval_split": self.task_spec.eval_split,
            "metrics": metrics,
            "best_epoch": at_best.get("epoch"),
            "best_step": best["step"],
            "num_train_examples": len(self.train),
            "min_train_tokens": self.min_tokens,
            "num_eval_examples": len(self.eval),
            "model_path": self.model_path,
            "from_scratch": self.from_scratch,
            "start_weights_sha256": self.start_weights_sha256,
            "model_type": self.config.model_type,
            **arch,
            "pretrain_val_ppl": RunRecord(Path(self.model_path).parent, "pretrain").summary().get("final_val_ppl"),
            "seed": self.seed,
            "lr": self.settings.lr,  # peak; table2.py picks the best lr per cell when a grid was run
            "batch_size": self.settings.batch_size,
            "max_length": self.max_length,
            "steps": trainer.state["step"],
            "history": [{k.removeprefix("eval_"): v for k, v in e.items()} for e in evals],
        }
        self.keep_results(trainer, metrics)
        score = metrics.get(self.task_spec.metrics[0])
        summary = {
            "model_dir": str(trainer.run_dir / "best") if self.save_best else None,
            "next": None if self.save_best else (f"python scripts/export.py {trainer.run_dir} (trainer.save_best=false "
                                                 "kept no model: this saves the final one)"),
            "task": self.task_spec.name,
            "report": [(f"{'best ' if self.select_best else 'final '}{self.task_spec.metrics[0]} {score:.4f} at epoch {at_best.get('epoch', 0):g} "
                       f"(step {best['step']}) on {len(self.eval)} {self.task_spec.name} {self.task_spec.eval_split} examples")]
            if score is not None else [],
        }
        return summary, results


def finetune(spec: FinetuneSpec | Mapping, run_dir: str | Path) -> dict:
    """Finetune a model on the spec's task; returns results.json's content. `spec` may be a composed
    configs/finetune.yaml, read into the spec first."""
    spec = FinetuneSpec.of(spec)

    def make_task(accelerator, settings: TrainerSettings) -> FinetuneTask:
        with accelerator.main_process_first():  # rank 0 tokenizes and saves the task cache, the others then load it
            return FinetuneTask(spec, settings, accelerator.num_processes, accelerator.process_index)

    return run_training(spec, run_dir, make_task)
