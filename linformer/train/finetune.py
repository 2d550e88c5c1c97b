"""Finetuning on a GLUE-style task on the training core: ``finetune(spec, run_dir)``.

Works from a pretraining run directory (its ``model/``), any Linformer directory, or a plain Hugging Face encoder
(RoBERTa, BERT-family: Table 2's baseline row).

The protocol: nothing is chosen on the split a table reports. With ``validation_fraction``, a stratified share of the
train rows is held out (``data.task_splits.carve_validation``) and evaluated every epoch (or every ``trainer.eval_every``
steps); the best evaluation there selects the model, kept in ``<run>/best``. Without it nothing is chosen: the last
model is the selected one. Either way the reported split (GLUE dev, IMDB test) is scored once, at the end, on the
selected model: its per-example predictions go to ``eval_predictions.json`` and its metrics to ``results.json``, which
also records which split chose, which reports, and the step of each.

As in pretraining, batch order is a pure function of (seed, step): epoch e visits the training examples in a
permutation seeded by (seed, e), so a resumed run sees exactly the batches the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..configs import command_line_gives
from ..data import compute_metrics, get_task, load_task
from ..data.metrics import higher_is_better, load_metrics
from ..data.streams import ExampleStream, TaskCollator, example_columns, token_lengths
from ..data.task_loading import split_info
from ..data.task_readers import check_task_data
from ..data.task_splits import CARVE, CARVE_BEFORE_RECORDED
from ..data.tokenizer import check_sequence_room, load_tokenizer
from ..errors import CheckpointError, ConfigError
from ..files.atomic import write_json
from ..files.locations import resolve_path
from ..files.mappings import read_json
from ..files.runs import BEST_DIR, PREDICTIONS, SUMMARY
from ..logfile import fewer_than_asked
from ..modeling.card import finetuned_card, start_card, write_model_card
from ..modeling.configuration import RECORDED_FIELDS, SIZE_FIELDS, projects_keys
from ..modeling.loading import (
    check_tokenizer_fits,
    load_classifier,
    max_tokens,
    resolve_model_path,
    weights_sha256,
)
from ..runconfig import FinetuneSpec, TaskData, TaskRunSpec, TrainerSettings
from .checkpoint import resumed_state
from .common import architecture_tags, model_architecture
from .core import run_training
from .summary import next_line
from .task import TrainingTask
from .trainer import Trainer

log = logging.getLogger(__name__)

# the score key counting the examples whose logits were not finite (``FinetuneTask.score``): val_nonfinite_outputs
# in metrics.jsonl
NONFINITE_OUTPUTS = "nonfinite_outputs"


def task_splits(data: TaskData, tokenizer, max_length: int, splits: tuple[str, ...] | None = None,
                carve: str = CARVE):
    """The task's tokenized splits as a run selects them (data_dir, subsets, subset_seed, validation carve by `carve`,
    cache): also how a report rebuilds the eval examples of a finished run from its config.yaml. Default splits:
    train, the validation carve where the run has one, and eval."""
    if splits is None:
        splits = ("train", "validation", "eval") if data.validation_fraction is not None else ("train", "eval")
    return load_task(data.name, data.data_dir, tokenizer, max_length, skip_bad_rows=data.skip_bad_rows,
                     splits=splits, cache_dir=data.cache_dir,
                     max_examples={"train": data.max_train_examples, "eval": data.max_eval_examples},
                     subset_seed=data.subset_seed, validation_fraction=data.validation_fraction, carve=carve)


def warn_unseen_labels(spec, train, data_dir: str | None, of: int | None = None) -> list[str]:
    """A warning naming each label no training row has: its class is never trained. Over the whole train file that
    is what a spec listing labels its files lack looks like (task=_example run on other files keeps red/green/blue
    unless told); over a subset (`of`: the rows it was drawn from, more than `train` holds) it is the subset's
    draw, and the warning says so instead. Returns the labels named."""
    counts = np.bincount(np.asarray(train["labels"], dtype=np.int64), minlength=len(spec.label_names))
    unseen = [f"{spec.label_names[i]!r} (written {spec.raw_labels[i]!r})" for i in np.flatnonzero(counts == 0)]
    if not unseen:
        return unseen
    where = f"{', '.join(unseen)} {'is' if len(unseen) == 1 else 'are'} in none of the {len(train)} training rows"
    if of is not None and of > len(train):
        log.warning("task %s: %s this run keeps of the %d in %s (max_train_examples, the validation carve or "
                    "min_train_tokens chose them): the classifier learns a class it never sees; more rows, or "
                    "another subset_seed, would take it in", spec.name, where, of, data_dir or "the hub")
    else:
        log.warning("task %s: %s (of %s): the classifier learns a class it never sees; if the files have no such "
                    "label, set task.spec.label_names and task.spec.raw_labels to the labels they do have",
                    spec.name, where, data_dir or "the hub")
    return unseen


# An epoch's last step on fewer than this share of a step's examples is warned of (``short_last_step``)
SHORT_LAST_STEP = 0.25


def short_last_step(examples: int, batch_size: int, grad_accum: int, world: int, selects: bool) -> str | None:
    """The warning for an epoch of `examples` whose last step takes fewer than SHORT_LAST_STEP of a step's examples
    that the epoch has not trained yet (``FinetuneTask.step_batches``: that step takes only what is left), else None.
    On one process its loss is a mean over those few, so they make a full update at the scheduled lr, right before the
    epoch's evaluation (`selects`: the one that chooses best/). On `world` > 1 processes its micro-batches are whole
    (``EpochOrder.rows``: the last is filled with rows from the start of the epoch's order, so every process gets a
    full slice), so the update is from those rows too, trained twice each epoch. The advice names only settings that
    reach a step dividing the examples: a per-process step of examples (trainer.batch_size x trainer.grad_accum) times
    the processes."""
    per_step = batch_size * grad_accum * world
    left = examples % per_step
    if examples <= per_step or not left or left >= SHORT_LAST_STEP * per_step:
        return None
    before = " right before the evaluation that chooses best/" if selects else ""
    whole = examples // per_step
    steps = (f"{whole:,} step{'s' * (whole != 1)} of {per_step} = trainer.batch_size {batch_size} x trainer.grad_accum "
             f"{grad_accum}{f' x {world} processes' if world > 1 else ''}, then the {left} left")
    if world == 1:
        what = (f"each epoch's last step trains on {left} example{'s' * (left != 1)} of {examples:,} ({steps}): "
                f"a full update at the scheduled lr from those alone{before}, every epoch")
    else:
        micro = batch_size * world  # a global micro-batch: whole on every process
        rows = -(-left // micro) * micro
        what = (f"each epoch's last step trains on the {left} example{'s' * (left != 1)} of {examples:,} not yet "
                f"trained ({steps}) and {rows - left} from the start of the epoch's order, which fill its "
                f"micro-batches of {micro} rows (trainer.batch_size {batch_size} x {world} processes) and so are "
                f"trained twice: an update at the scheduled lr from those {rows} rows{before}, every epoch")
    # a step that divides the examples, reachable on `world` processes (a multiple of it), smaller than this one
    divisors = [d for d in range(per_step // 2, 1, -1) if examples % d == 0 and d % world == 0][:1]
    instead = "" if not divisors else (
        f", or a trainer.batch_size x trainer.grad_accum of {divisors[0] // world}"
        f"{f' ({divisors[0]} on {world} processes)' if world > 1 else ''}, which divides {examples:,}")
    return (f"{what}. To avoid it give a training set that divides by {per_step} ({examples - left:,} or "
            f"{examples - left + per_step:,} examples: max_train_examples, less what validation_fraction holds "
            f"out){instead}")


class FinetuneTask(TrainingTask):
    stage = "finetune"
    pads = True  # examples padded to the longest in their batch
    min_tokens_key = "min_train_tokens"  # the key min_train_tokens(run) reads, for the error naming it

    def __init__(self, run: TaskRunSpec, settings: TrainerSettings, world: int, rank: int,
                 run_dir: Path | None = None):
        seed = self.seed = run.seed
        self.task_spec = get_task(run.task.name)
        load_metrics(self.task_spec.metrics)  # a metric that cannot load fails the run now, not after its training
        # the task's files' headers, before the model loads (seconds): a wrong column or an empty file is said at once
        check_task_data(run.task.name, run.task.data_dir)
        self.from_scratch = self.starts_from_scratch(run)  # random weights in the model's architecture
        self.model_path, self.tokenizer, self.model = self.load_model(run)
        self.config = self.model.config
        # the weights the run starts from, by content: ties its record to the converted or transferred model
        self.start_weights_sha256 = None if self.from_scratch else weights_sha256(self.model_path)
        check_tokenizer_fits(self.tokenizer, self.config, self.model_path)
        self.max_length = self._max_length(settings.max_length, run.task.max_length)
        self.carve = self.carve_of(settings, run_dir)  # a resumed run keeps its train and validation rows
        data = task_splits(run.task, self.tokenizer, self.max_length, carve=self.carve)
        self.min_tokens = self.min_train_tokens(run)
        self.train_set, self.eval = self.train_examples(data["train"]), data["eval"]
        self.validation = data.get("validation")  # None: nothing is chosen, the last model is reported
        self.data_spec, self.split_notes = run.task, split_info(data["train"])
        warn_unseen_labels(self.task_spec, self.train_set, run.task.data_dir, self.split_notes.get("of"))
        self._check_protocol(settings, world)
        # a pair's segment ids where the tokenizer gives them and the model has rows for them
        self.columns = example_columns(self.train_set, self.type_vocab_sizes(run))
        collate = TaskCollator(self.tokenizer, self.max_length)  # dynamic padding per batch, never past max_length
        self.train_stream = ExampleStream(self.train_set, settings.batch_size, world, rank, seed, collate,
                                          group_by_length=settings.group_by_length, columns=self.columns)
        eval_batch = settings.require("eval_batch_size", "finetuning")
        # the evaluated splits: "validation" chooses (each evaluation), "eval" reports (once, at the end)
        self.splits = {"eval": self.eval} | ({"validation": self.validation} if self.validation is not None else {})
        self.eval_orders, loaders = {}, []
        for name, split in self.splits.items():
            # longest first, so each batch pads to a similar length (outputs do not depend on padding); predictions
            # are put back in split order
            self.eval_orders[name] = np.argsort(-token_lengths(split), kind="stable")
            loaders.append(DataLoader(split.select(self.eval_orders[name]).with_format(columns=self.columns),
                                      batch_size=eval_batch, collate_fn=collate))
        self.steps_per_epoch = math.ceil(self.train_stream.batches_per_epoch / settings.grad_accum)
        self.max_steps = settings.max_steps or self.steps_per_epoch * settings.require("epochs", "finetuning")
        self.default_eval_every = self.steps_per_epoch if self.validation is not None else None
        if self.max_steps >= self.steps_per_epoch:  # the run reaches an epoch's end
            short = short_last_step(len(self.train_set), settings.batch_size, settings.grad_accum, world,
                                    self.validation is not None)
            if short:
                log.warning(short)
        self.save_best = settings.save_best
        self.settings = dataclasses.replace(settings, max_steps=self.max_steps)
        self.prepare = tuple(loaders)
        # the start model's architecture, named as pretraining names it, and its weights: runs filter by either
        self.tracker_tags = [f"task={self.task_spec.name}", *architecture_tags(self.config)]
        self.tracker_config = {**model_architecture(self.config), "start_weights_sha256": self.start_weights_sha256}

    @staticmethod
    def carve_of(settings: TrainerSettings, run_dir: Path | None) -> str:
        """How the run carves its validation rows (``task_splits.CARVES``): as the checkpoint it resumes did (one
        that records none carved by position, as runs did before the carve was recorded), else this version's (a
        task built outside a run directory, `run_dir` None, too)."""
        state = resumed_state(settings.resume, run_dir) if run_dir is not None else None
        return CARVE if state is None else state.get("validation_carve", CARVE_BEFORE_RECORDED)

    def draws(self) -> dict[str, Any]:
        return {"validation_carve": self.carve} if self.validation is not None else {}

    def keep_draws(self, state: Mapping[str, Any]) -> None:
        recorded = state.get("validation_carve", CARVE_BEFORE_RECORDED)
        if self.validation is not None and recorded != self.carve:  # checked where the task was built: not expected
            raise CheckpointError(f"the checkpoint resumed carved its validation rows by {recorded}, the run's newest "
                                  f"by {self.carve}: name the checkpoint to continue with trainer.resume=<its path>")

    def _check_protocol(self, settings: TrainerSettings, world: int) -> None:
        """What the protocol refuses: a training set of less than one batch, evaluations during training with nothing
        to evaluate but the reported split, and a choice whose model the run would not keep."""
        self._check_train_size(settings, world)
        fraction = self.data_spec.validation_fraction
        if self.validation is None:
            if settings.eval_every is not None:
                raise ConfigError(f"trainer.eval_every={settings.eval_every}: evaluations during training are made on "
                                  "a validation split, never on the reported one: set validation_fraction (e.g. 0.1), "
                                  "or trainer.eval_every=null (the reported split is scored once, at the end).")
            return
        if not settings.save_best and self.select_best:
            raise ConfigError(f"trainer.save_best=false with validation_fraction={fraction}: the run reports the model "
                              "its validation split chooses, so it keeps that model in <run>/best. Set "
                              "trainer.save_best=true, or validation_fraction=null (the last model is reported).")

    def _check_train_size(self, settings: TrainerSettings, world: int) -> None:
        """One rule for the smallest training set, whatever made it small (the task's train file, max_train_examples,
        the validation carve, the minimum length): at least one batch of every process, as pretraining asks of its
        blocks. Every step of a smaller set would train on fewer examples than trainer.batch_size says, and with
        several processes some would get none."""
        held, batch = len(self.train_set), settings.batch_size * world
        if held >= batch:
            return
        shrunk = [f"{key}={value}" for key, value in (("max_train_examples", self.data_spec.max_train_examples),
                                                      ("validation_fraction", self.data_spec.validation_fraction),
                                                      (self.min_tokens_key, self.min_tokens)) if value is not None]
        after = f" after {', '.join(shrunk)}" if shrunk else f" in the {self.data_spec.name} train split"
        lower = (f"lower trainer.batch_size to {held // world} or less, or " if held >= world else "")
        raise ConfigError(f"{held} training example{'' if held == 1 else 's'}{after}, fewer than one batch "
                          f"(trainer.batch_size={settings.batch_size} x {world} process{'' if world == 1 else 'es'}): "
                          f"{lower}train on more rows" + (" (max_train_examples, validation_fraction)" if shrunk else "")
                          + ".")

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
        # max_train_examples draws its subset before this filter: say what is left of it
        log.warning("%s=%d keeps %d of the %d train examples (those longer than %d tokens at trainer.max_length=%d)",
                    self.min_tokens_key, self.min_tokens, len(keep), len(split), self.min_tokens, self.max_length)
        return split.select(keep.tolist())

    def min_train_tokens(self, run: FinetuneSpec) -> int | None:
        """Train only on the examples longer than this many tokens; None = all."""
        return run.min_train_tokens

    def type_vocab_sizes(self, run: FinetuneSpec) -> list[int | None]:
        """The segment vocabularies of the models the batches feed (``example_columns``): the trained model's."""
        return [getattr(self.config, "type_vocab_size", None)]

    def starts_from_scratch(self, run: FinetuneSpec) -> bool:
        return run.from_scratch

    def load_model(self, run: FinetuneSpec) -> tuple[str, Any, torch.nn.Module]:
        """(where the model comes from, its tokenizer, the classifier to train) for the run's model_path."""
        model_path = resolve_model_path(run.model_path)
        tokenizer = load_tokenizer(model_path, "model_path")  # before the weights: a missing one is said at once
        model, _ = load_classifier(model_path, self.task_spec.label_names, self.from_scratch, self.task_spec.name)
        return model_path, tokenizer, model

    def _max_length(self, requested: int | None, task_max: int | None) -> int:
        """trainer.max_length when given (a request above the model's n is an error), else the model's n (or its
        position table) capped by the task's default length (task.max_length). A task.max_length above the model's n
        is cut to it: said as a warning where the command line gives it (a length the user asked for), else in the
        log file alone (the task config's default, 512, is above the n of most small models). The length must hold
        the special tokens the model's tokenizer adds and a token of each text (``check_sequence_room``: the config's
        early check could only take the least any tokenizer adds)."""
        limit = max_tokens(self.config, self.tokenizer, None, None)
        if requested is not None and requested > limit:
            raise ConfigError(
                f"trainer.max_length={requested} is above what the model {self.model_path} takes ({limit} tokens): "
                f"use trainer.max_length={limit} or less."
            )
        if requested is not None:
            length, key = requested, "trainer.max_length"
        elif task_max is not None and task_max <= limit:
            length, key = task_max, "task.max_length"
        else:
            length, key = limit, f"the model's n ({self.model_path})"
            if task_max is not None:
                if command_line_gives("task.max_length"):
                    fewer_than_asked(log, f"task.max_length={task_max}", f"the model {self.model_path}", limit,
                                     "positions", "reading examples up to")
                else:
                    log.info("task.max_length=%d is above the model's n: examples are read up to its %d tokens",
                             task_max, limit)
        check_sequence_room(length, key, f"an example of {self.task_spec.name}", len(self.task_spec.text_fields),
                            self.tokenizer, f"({self.model_path})")
        return length

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        return self.train_stream.micro_batch(g)

    def step_batches(self, step: int, accum: int) -> range:
        """An epoch's last step takes only what is left of its batches (fewer than `accum` where they do not divide
        by it), so that no step reaches into the next epoch: an epoch is every example once, and evaluations at its
        end see exactly that."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        per_epoch = self.train_stream.batches_per_epoch
        first = epoch * per_epoch + pos * accum
        return range(first, min(first + accum, (epoch + 1) * per_epoch))

    def examples_seen(self, steps: int) -> int:
        """Training examples the first `steps` steps took (each epoch: every example once)."""
        epochs, pos = divmod(steps, self.steps_per_epoch)
        per_batch = self.train_stream.order.global_micro
        return epochs * len(self.train_set) + min(pos * self.settings.grad_accum * per_batch, len(self.train_set))

    def epoch_of(self, step: int) -> float:
        return step / self.steps_per_epoch

    @torch.no_grad()
    def score(self, model, acc, split: str) -> dict[str, float]:
        """The task's metrics of `model` on `split` ("validation" or "eval"), reduced over the processes; the
        predictions and labels, in split order, are left in ``last_eval``. Where some example's logits are not
        finite, each metric is NaN and ``NONFINITE_OUTPUTS`` counts those examples (argmax would call every one
        class 0, and the score would be class 0's share): such a score is never best, and a run that reports it
        fails."""
        model.eval()
        preds, refs, finite = [], [], []
        for batch in self.prepared[list(self.splits).index(split)]:  # the split's DataLoader, wrapped by Accelerate
            logits = model(**batch).logits
            p, r, ok = acc.gather_for_metrics((logits.argmax(-1), batch["labels"],
                                               torch.isfinite(logits).all(-1)))
            preds.append(p.cpu())
            refs.append(r.cpu())
            finite.append(ok.cpu())
        model.train()
        order = self.eval_orders[split]
        self.last_eval = (self._in_split_order(preds, order), self._in_split_order(refs, order))
        bad = int((~torch.cat(finite)).sum())
        if bad:
            log.warning("%d of the %d %s examples gave non-finite logits: the model's %s scores are NaN", bad,
                        len(order), split, split)
            return {m: float("nan") for m in self.task_spec.metrics} | {NONFINITE_OUTPUTS: bad}
        return compute_metrics(self.task_spec.name, *map(np.asarray, self.last_eval))

    def evaluate(self, model, acc) -> dict[str, float]:
        """During training only the validation split is evaluated (``val_*``): it chooses. Without one, nothing."""
        if self.validation is None:
            return {}
        return {f"val_{k}": v for k, v in self.score(model, acc, "validation").items()}

    @property
    def main_metric(self) -> str:
        return f"val_{self.task_spec.metrics[0]}"

    @property
    def greater_is_better(self) -> bool:
        return bool(higher_is_better(self.task_spec.metrics[0]))

    @staticmethod
    def _in_split_order(parts: list[torch.Tensor], order) -> list[int]:
        """Undo the longest-first evaluation order."""
        out = np.empty(len(order), dtype=np.int64)
        out[order] = torch.cat(parts).numpy()
        return out.tolist()

    def on_best(self, trainer: Trainer, step: int) -> None:
        """The validation split chose this step: keep its model (the one the reported split will score)."""
        if self.select_best:
            trainer.save_model(trainer.run_dir / BEST_DIR)

    def selected_step(self, trainer: Trainer) -> int:
        """The step whose model is reported: the validation split's choice, else the last."""
        best = trainer.state["best"] if self.validation is not None else None
        return best["step"] if best else trainer.state["step"]

    def restore_selected(self, trainer: Trainer, step: int) -> None:
        """Put the chosen step's weights (``<run>/best``) back into the model on every process, where training went
        on past it."""
        from safetensors import SafetensorError
        from safetensors.torch import load_model

        path = trainer.run_dir / BEST_DIR / "model.safetensors"
        model = trainer.accelerator.unwrap_model(trainer.model)
        try:
            missing, unexpected = load_model(model, str(path), strict=False)
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{path}: the model chosen at step {step} cannot be read ({err}); it is the model "
                                  "the run reports: delete the run directory to run it again.") from err
        if missing or unexpected:
            raise CheckpointError(f"{path} is not this run's classifier (missing {', '.join(missing) or 'none'}; "
                                  f"unexpected {', '.join(unexpected) or 'none'}).")
        trainer.accelerator.wait_for_everyone()

    def report(self, trainer: Trainer, step: int) -> dict[str, float]:
        """Score the reported split, once, on the model of the selected `step`; its predictions go to
        eval_predictions.json (paired comparisons between models need them)."""
        if step != trainer.state["step"]:
            self.restore_selected(trainer, step)
        metrics = self.score(trainer.model, trainer.accelerator, "eval")
        if metrics.get(NONFINITE_OUTPUTS):  # before anything is saved: no best/ of a model without a score
            raise trainer.nonfinite_outputs(
                f"{metrics[NONFINITE_OUTPUTS]} of the {len(self.eval)} {self.task_spec.eval_split} examples the run "
                f"reports gave non-finite logits on the model of step {step}")
        if step == trainer.state["step"] and self.save_best and not (self.validation is not None
                                                                     and self.select_best):
            trainer.save_model(trainer.run_dir / BEST_DIR)  # nothing chose: the last model is the one kept
        if self.save_best:  # the model holds best/'s weights now: an earlier version's best/ is written anew
            trainer.renew_model(trainer.run_dir / BEST_DIR)
        if trainer.is_main:
            preds, labels = self.last_eval
            # compact: 25,000 IMDB reviews are 100 KB instead of 350, and the kept records travel to GPU nodes
            # each example's row in the split's file (its line, as an error names it): the join back to its text
            rows = split_info(self.eval).get("rows")
            write_json(trainer.run_dir / PREDICTIONS, {"step": step, "split": self.task_spec.eval_split,
                                                       "labels": labels, "predictions": preds,
                                                       **({"rows": rows} if rows is not None else {})}, indent=None)
        return metrics

    def selection_record(self, trainer: Trainer, step: int) -> dict[str, Any]:
        """Which split chose the reported model, how it was carved, and what it scored there."""
        if self.validation is None:
            return {"split": None, "step": step, "rule": "last model (no validation split: nothing chosen)"}
        if not self.select_best:  # distillation: the validation split reports, the student is the last model
            return {"split": None, "step": step, "rule": "last model (the validation split reports; it chooses "
                    "nothing)", "validation": {"examples": len(self.validation), "carve": self.carve,
                                               "rows": split_info(self.validation).get("rows")}}
        chosen = next((e for e in trainer.state["evals"] if e["step"] == step), {})
        info = split_info(self.validation)
        return {"split": "validation", "step": step, "rule": f"best {self.main_metric}",
                "metric": self.main_metric, "value": chosen.get(self.main_metric),
                "fraction": self.data_spec.validation_fraction, "seed": self.data_spec.subset_seed,
                "carve": self.carve, "examples": len(self.validation), "rows": info.get("rows")}

    def keep_results(self, trainer: Trainer, results: dict) -> None:
        """Where the run's results go beyond results.json: the model the run keeps (``<run>/best``) gets its source's
        card (a converted or transferred model's; ``start_card``) with this finetuning and its results added. The source itself is
        an input and is only read: a run writes nothing outside its run directory. (Distillation saves its student
        here, the model the results belong to.)"""
        if trainer.is_main and self.save_best:
            model = trainer.accelerator.unwrap_model(trainer.model)
            card = start_card(self.model_path, model, self.from_scratch)
            write_model_card(trainer.run_dir / BEST_DIR, finetuned_card(
                card, trainer.run_dir.name, type(model).__name__, results, trainer.run_dir, results["best_step"]))

    def finish(self, trainer: Trainer) -> tuple[dict[str, Any], dict[str, Any]]:
        step = self.selected_step(trainer)
        metrics = self.report(trainer, step)
        evals = trainer.state["evals"]
        arch = {k: getattr(self.config, k, None) for k in RECORDED_FIELDS}
        if not projects_keys(arch["attention"]):  # a Linformer in full mode, or a plain HF encoder (RoBERTa, BERT)
            arch.update({k: None for k in RECORDED_FIELDS if k not in ("max_seq_len", "classifier_pooling", *SIZE_FIELDS)},
                        attention="full")
            arch["max_seq_len"] = arch["max_seq_len"] or max_tokens(self.config, self.tokenizer, None, None)
        results = {
            "task": self.task_spec.name,
            "eval_split": self.task_spec.eval_split,
            "metrics": metrics,
            # the protocol: which split chose the model (and the step), which split reported it (scored once)
            "selection": self.selection_record(trainer, step),
            "reported": {"split": self.task_spec.eval_split, "step": step, "examples": len(self.eval),
                         "of": split_info(self.eval).get("of")},
            "best_epoch": self.epoch_of(step),
            "best_step": step,
            "num_train_examples": len(self.train_set),
            "eval_duplicates_dropped": self.split_notes.get("eval_duplicates_dropped"),
            # task.skip_bad_rows: the bad rows left out of each source file
            "skipped_bad_rows": {"train": self.split_notes.get("skipped_bad_rows"),
                                 "eval": split_info(self.eval).get("skipped_bad_rows")},
            "min_train_tokens": self.min_tokens,
            # what cleaned the task's text before tokenizing: raw text needs it too (the model's card says so)
            "text_cleaning": self.task_spec.text_cleaning,
            # the columns a row's texts come from (a pair: two): what a model's users give it (predict.py)
            "text_fields": list(self.task_spec.text_fields),
            "num_eval_examples": len(self.eval),
            "model_path": self.model_path,
            "from_scratch": self.from_scratch,
            "start_weights_sha256": self.start_weights_sha256,
            "model_type": self.config.model_type,
            **arch,
            # the start model's pretraining run, where it has one: its record is not this run's, read leniently
            "pretrain_val_ppl": read_json(Path(self.model_path).parent / SUMMARY).get("final_val_ppl"),
            "seed": self.seed,
            # what drew the train and scored subsets and the validation carve (the run's seed unless set)
            "subset_seed": self.data_spec.subset_seed,
            "lr": self.settings.lr,  # peak
            "batch_size": self.settings.batch_size,
            "max_length": self.max_length,
            "steps": trainer.state["step"],
            "history": [{k.removeprefix("val_"): v for k, v in e.items()} for e in evals if len(e) > 2],
        }
        self.keep_results(trainer, results)
        score = metrics.get(self.task_spec.metrics[0])
        chosen = (f"chosen on {len(self.validation)} validation examples" if self.validation is not None
                  and self.select_best else "the last model")
        model_dir = str(trainer.run_dir / BEST_DIR) if self.save_best else None
        summary = {
            "model_dir": model_dir,
            "next": next_line(self.stage, trainer.run_dir, model_dir),  # without a model kept: its export
            "task": self.task_spec.name,
            # every metric of the task (QQP: accuracy and F1; an F1 of 0 is a classifier that never says duplicate)
            "report": [(", ".join(f"{m} {metrics[m]:.4f}" for m in self.task_spec.metrics if metrics.get(m) is not None)
                        + f" on {len(self.eval)} {self.task_spec.name} "
                        f"{self.task_spec.eval_split} examples, scored once on the model of epoch "
                        f"{epoch_label(self.epoch_of(step))} (step {step}, {chosen})")] if score is not None else [],
        }
        return summary, results


def epoch_label(epoch: float) -> str:
    """An epoch as a summary line says it: whole ("1"), or a fraction to two decimals ("0.63", a max_steps run
    stopped inside an epoch), more where two would read as a whole epoch ("0.004", "1.998")."""
    if epoch.is_integer():
        return str(int(epoch))
    for decimals in (2, 3, 4):
        text = f"{epoch:.{decimals}f}"
        if not float(text).is_integer():
            return text
    return f"{epoch:g}"


def finetune(spec: FinetuneSpec | Mapping, run_dir: str | Path) -> dict:
    """Finetune a model on the spec's task; returns results.json's content. `spec` may be a composed
    configs/finetune.yaml, read into the spec first."""
    spec = FinetuneSpec.of(spec)

    def make_task(accelerator, settings: TrainerSettings) -> FinetuneTask:
        with accelerator.main_process_first():  # rank 0 tokenizes and saves the task cache, the others then load it
            return FinetuneTask(spec, settings, accelerator.num_processes, accelerator.process_index,
                                Path(resolve_path(run_dir)))  # as run_training takes it

    return run_training(spec, run_dir, make_task)
