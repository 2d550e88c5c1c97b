"""What a training loop supplies to the core (``TrainingTask``), and the task of packed blocks (``BlockStreamTask``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
from accelerate import Accelerator

from ..data.streams import SCORING_BLOCKS, recorded_draws


class TrainingTask:
    """What a training loop supplies to the core: the one contract between a task and ``run_training``.

    A task is built by its stage's ``make_task(accelerator, settings)`` from its run spec, once the run directory is
    claimed. It must set ``model``, ``tokenizer`` (or None), ``settings`` (the TrainerSettings it runs with: the
    per-device batch, the run's max_steps) and may set ``tracker_tags``, ``tracker_config`` and ``prepare``. The core
    then hands it, and nothing else: ``prepared`` (what Accelerate returned for ``prepare``, in order), the accelerator
    in ``evaluate``, and the Trainer (``trainer.Trainer``) in ``on_best`` and ``finish``. The hooks below are all it
    overrides.
    """

    stage = "train"                 # pretrain | finetune | transfer | distill: the run record's stage and tracker job type
    main_metric = "loss"            # the evaluation metric that picks the best step
    greater_is_better = False
    select_best = True              # False: every evaluation replaces the best (the run's result is its last model)
    default_eval_every: int | None = None  # steps; trainer.eval_every overrides it
    flops_per_token: float | None = None   # training FLOPs per token, for MFU
    compile_dynamic: bool | None = None    # trainer.compile: False = every shape fixed; None = Dynamo's automatic
    pads = False                    # its batches are padded: versions that counted padding in `tokens` gave another count
    peak_flops: float | None = None        # the device's dense peak FLOP/s at the run's precision, for MFU
    tracker_tags: Sequence[str] = ()       # (immutable defaults: a subclass instance assigns its own)
    # what the trackers' config gets beside the run's (common.tracker_config: its model's architecture, ...)
    tracker_config: Mapping[str, Any] = MappingProxyType({})
    prepare: tuple = ()                    # objects Accelerate must wrap besides model, optimizer and schedule
    prepared: Sequence = ()                # ...and what it returned for them

    def draws(self) -> dict[str, Any]:
        """What decides the task's random draws besides the seed (its batch seeding, its validation seed), saved
        with each checkpoint and recorded in run.json."""
        return {}

    def keep_draws(self, state: Mapping[str, Any]) -> None:
        """Go on drawing as the checkpoint whose `state` is given did (a key it lacks: it was saved before the key
        was recorded, with that version's draws)."""

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        """This rank's slice of global micro-batch g (one of ``step_batches``), on the host. On a GPU it is called
        from a background thread while the device runs the previous step: host work only, no model."""
        raise NotImplementedError

    def step_batches(self, step: int, accum: int) -> range:
        """The global micro-batches optimizer step `step` takes: `accum` in a row (finetuning's epochs end on a
        step boundary instead)."""
        return range(step * accum, (step + 1) * accum)

    def count(self, batch: Mapping[str, torch.Tensor]) -> int:
        """Items the batch's loss is a mean over (MLM targets, examples): the step's loss weights batches by it."""
        return int((batch["labels"] != -100).sum())

    def tokens(self, batch: Mapping[str, torch.Tensor]) -> int:
        """The batch's real tokens (its attention mask's ones; every position where it has none, as packed blocks):
        what a run's `tokens` and tokens/s count, padding left out."""
        mask = batch.get("attention_mask")
        return int(mask.sum()) if mask is not None else int(batch["input_ids"].numel())

    def loss(self, model, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss

    def evaluate(self, model, accelerator: Accelerator) -> dict[str, float]:
        """Evaluation metrics of `model` (the prepared one), reduced over the accelerator's processes."""
        return {}

    def epoch_of(self, step: int) -> float:
        return 0.0

    def step_metrics(self, loss: float) -> dict[str, float]:
        """Extra per-step metrics derived from the loss (pretraining: perplexity)."""
        return {}

    def on_best(self, trainer, step: int) -> None:
        """Called when an evaluation beats every earlier one (finetuning keeps that model in best/)."""

    def selected_step(self, trainer) -> int:
        """The step whose model the run reports: its last (finetuning: the one its validation split chose)."""
        return trainer.state["step"]

    def param_groups(self, weight_decay: float) -> list[dict] | None:
        """Optimizer groups of the task's own (None: decay matrices, not biases and LayerNorms, at trainer.lr)."""
        return None

    def finish(self, trainer) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The run's summary (summary.json) and, for finetuning, its results (results.json)."""
        return {}, None


class BlockStreamTask(TrainingTask):
    """A task that reads packed blocks through ``BlockStream``s (pretraining, transfer): it sets ``seed``,
    ``batch_seeding``, ``train_stream`` and ``val``, whose draws its checkpoints record and a resume keeps (and
    ``val_scoring``, how its evaluations choose the blocks they score: ``streams.SCORING_BLOCKS`` for a new run)."""

    seed: int
    batch_seeding: str
    val_scoring: str = SCORING_BLOCKS

    def draws(self) -> dict[str, Any]:
        return {"batch_seeding": self.batch_seeding, "validation_seed": self.val.seed,
                "validation_scoring": self.val_scoring}

    def keep_draws(self, state: Mapping[str, Any]) -> None:
        self.batch_seeding, val_seed, self.val_scoring = recorded_draws(state, self.seed)
        self.train_stream = self.train_stream.replaced(seeding=self.batch_seeding)
        self.val = self.val.replaced(seed=val_seed)
