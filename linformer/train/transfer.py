"""Attention transfer on the training core: ``transfer(spec, run_dir)``.

The student is a pretrained BERT/RoBERTa encoder converted to a Linformer (``from_pretrained_encoder``); the
teacher is the same weights with full attention. Training fits the student's layers to the teacher's on packed
n-token blocks of a corpus tokenized with the source's tokenizer:

- ``transfer.train=projections`` (default) trains only E and F; every other weight is frozen, so the teacher is the
  student's own modules run with full attention (no second copy);
- ``transfer.train=all`` also adapts every other weight at ``transfer.lr_rest`` (a frozen copy is the teacher).

``model_path`` may also be a Linformer that a ``transfer.train=projections`` run made: the transfer continues it
(LoLCATs' order: fit the new attention first, then adapt every weight), and its card records both phases.

The loss is, per layer, ||student - teacher||^2 / ||teacher||^2 at real tokens, averaged over layers, on each
layer's output (``transfer.target=hidden``) or its attention's output before the residual (``attention``). Evaluation reports
each layer's relative error ||student - teacher|| / ||teacher|| on the held-out blocks of the corpus.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from ..data import load_prepared
from ..data.collator import BlockCollator
from ..data.io import load_auto
from ..data.streams import SEEDING_STEP, VALIDATION_SEED, BlockStream
from ..data.tokenizer import load_tokenizer
from ..errors import ConfigError
from ..files.runs import MODEL_DIR
from ..modeling import LinformerModel
from ..modeling.card import card_path, continued_info, conversion_info, read_card_info, write_model_card
from ..modeling.configuration import ATTENTION_FIELDS, EXACT_KEY_FIELDS
from ..modeling.convert import CONVERTED_LENGTH_POLICY, is_projection_weight, settings_named
from ..modeling.loading import load_pretrained, resolve_model_path, weights_sha256
from ..modeling.reference import full_attention, squared_relative_error
from ..runconfig import TrainerSettings, TransferSpec
from .common import projection_param_groups
from .core import run_training
from .summary import next_line
from .task import BlockStreamTask
from .trainer import Trainer

log = logging.getLogger(__name__)


def layer_outputs(model, batch: dict[str, torch.Tensor], target: str) -> list[torch.Tensor]:
    """Each layer's output (hidden), or its attention's output before the residual and LayerNorm (attention)."""
    if target == "hidden":
        return list(model(**batch, output_hidden_states=True).hidden_states[1:])
    caught: list[torch.Tensor] = []
    base = getattr(model, "module", model)  # under DDP the layers live in .module
    hooks = [layer.attention.self.register_forward_hook(lambda _m, _i, out: caught.append(out[0]))
             for layer in base.encoder.layer]
    try:
        model(**batch)
    finally:
        for h in hooks:
            h.remove()
    return caught


class TransferTask(BlockStreamTask):
    stage = "transfer"
    main_metric = "val_rel_err"

    def __init__(self, spec: TransferSpec, settings: TrainerSettings, world: int, rank: int):
        tr = self.transfer = spec.transfer
        self.model_path, self.settings = spec.model_path, settings
        self.target, self.train_mode, self.lr_rest = tr.target, tr.train, tr.lr_rest
        self.source = resolve_model_path(spec.model_path)
        self.start_weights_sha256 = weights_sha256(self.source)  # the source by content: a path may be rebuilt
        self.tokenizer = load_tokenizer(self.source, "model_path")
        m = spec.model
        self.earlier = None  # the card of the Linformer this transfer continues, if it continues one
        if load_auto(AutoConfig, self.source).model_type == "linformer":
            self.model, self.earlier = continue_transfer(spec.model_path, self.source, m, tr.train)
        else:
            student = dict(
                attention="linformer", max_seq_len=m["max_seq_len"], projected_dim=m["projected_dim"],
                sharing=m["sharing"], projection=m["projection"],
                **{key: m[key] for key in (*CONVERTED_LENGTH_POLICY, *EXACT_KEY_FIELDS) if m.get(key) is not None},
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # the teacher has no dropout either
            with settings_named("model"):  # the config is built, and a bad setting said, before the weights load
                self.model = LinformerModel.from_pretrained_encoder(self.source, **student)
        self.source_dropout = _source_dropout(self.source)
        self.teacher = None
        if self.train_mode == "projections":
            for name, p in self.model.named_parameters():
                p.requires_grad_(is_projection_weight(name))
        else:
            self.teacher = copy.deepcopy(self.model).eval().requires_grad_(False)
        # ids the source's tokenizer gives and the model has rows for, as the corpus must hold
        data = load_prepared(spec.corpus_dir, self.source, min(len(self.tokenizer), self.model.config.vocab_size))
        self.n = len(data["train"][0]["input_ids"])
        if self.n != self.model.config.max_seq_len:
            raise ConfigError(
                f"corpus_dir={spec.corpus_dir} holds blocks of {self.n} tokens but model.max_seq_len is "
                f"{self.model.config.max_seq_len}: prepare the corpus with data.n={self.model.config.max_seq_len}."
            )
        seed, b = spec.seed, settings.batch_size
        short, min_length, self.short_length = tr.short_fraction, tr.min_length, tr.eval_short_length
        if short > 0 and not 2 <= min_length <= self.n:
            raise ConfigError(f"transfer.min_length={min_length}: a length in 2..n={self.n} (the blocks' length)")
        if self.short_length is not None and self.short_length >= self.n:
            log.warning("transfer.eval_short_length=%d is not below the blocks' %d tokens: the full evaluation covers "
                        "it, so no short evaluation is reported", self.short_length, self.n)
            self.short_length = None
        config = self.model.config
        if config.exact_short_inputs:  # inputs of at most k tokens attend exactly: nothing there to fit
            min_length = min(max(min_length, max(map(config.k_of_layer, range(config.num_hidden_layers))) + 1),
                             self.n)
        self.train_stream = BlockStream(data["train"], b, world, rank, seed, BlockCollator(short, min_length), "train",
                                        settings.grad_accum)
        self.val = BlockStream(data["validation"], b, world, rank, VALIDATION_SEED, BlockCollator(), "validation")
        # the same held-out blocks cut to one short length: how well the student fits inputs like a sentence
        self.val_short = None if self.short_length is None else BlockStream(
            data["validation"], b, world, rank, VALIDATION_SEED, BlockCollator(length=self.short_length), "validation")
        self.seed, self.batch_seeding = seed, SEEDING_STEP
        self.eval_blocks = settings.eval_blocks
        self.tracker_tags = [f"k={m['projected_dim']}", f"sharing={m['sharing']}", f"train={self.train_mode}",
                             f"target={self.target}"]

    def param_groups(self, weight_decay: float) -> list[dict]:
        """E and F at trainer.lr; with transfer.train=all every other weight at transfer.lr_rest."""
        return projection_param_groups(self.model, weight_decay, lr_rest=self.lr_rest)

    def keep_draws(self, state: Mapping[str, Any]) -> None:
        super().keep_draws(state)
        self.val_short = self.val_short and self.val_short.replaced(seed=self.val.seed)

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        return self.train_stream.micro_batch(g)

    def count(self, batch) -> int:
        return int(batch["input_ids"].shape[0])

    def epoch_of(self, step: int) -> float:
        return step * self.settings.grad_accum / self.train_stream.batches_per_epoch

    def _pairs(self, model, batch) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(student, teacher) outputs of every layer; the teacher never needs gradients."""
        student = layer_outputs(model, batch, self.target)
        with torch.no_grad():
            teacher_model = model if self.teacher is None else self.teacher
            with full_attention(teacher_model):
                teacher = layer_outputs(teacher_model, batch, self.target)
        return list(zip(student, teacher))

    def loss(self, model, batch) -> torch.Tensor:
        pairs = self._pairs(model, batch)
        errs = [squared_relative_error(s, t) for s, t in pairs]
        return torch.stack(errs).mean()

    @torch.no_grad()
    def evaluate(self, model, acc) -> dict[str, float]:
        """Each layer's relative error on the held-out blocks, and with transfer.eval_short_length on the same
        blocks cut to that length (``val_rel_err_short``, its mean over layers)."""
        model.eval()
        rel = self._relative_errors(model, self.val, acc)
        out = {"val_rel_err": sum(rel) / len(rel), **{f"val_rel_err_{i}": r for i, r in enumerate(rel)}}
        if self.val_short is not None:
            short = self._relative_errors(model, self.val_short, acc)
            out |= {"val_rel_err_short": sum(short) / len(short),
                    **{f"val_rel_err_short_{i}": r for i, r in enumerate(short)}}
        model.train()
        return out

    def _relative_errors(self, model, stream: BlockStream, acc) -> list[float]:
        """||student - teacher|| / ||teacher|| per layer, summed over every eval batch and rank."""
        layers = self.model.config.num_hidden_layers  # a process with no block to score adds zeros
        num = den = torch.zeros(layers, dtype=torch.float64, device=acc.device)
        for batch in stream.held_out(self.eval_blocks, acc.device, self.val_scoring):
            pairs = self._pairs(model, batch)
            num = num + torch.stack([((s.float() - t.float()) ** 2).sum() for s, t in pairs]).double()
            den = den + torch.stack([(t.float() ** 2).sum() for _, t in pairs]).double()
        num, den = acc.reduce(num, "sum"), acc.reduce(den, "sum")
        return (num / den).sqrt().tolist()

    def finish(self, trainer: Trainer) -> tuple[dict[str, Any], None]:
        errors = self._errors_before_after(trainer.state["evals"], "val_rel_err")
        if self.val_short is not None:
            errors |= self._errors_before_after(trainer.state["evals"], "val_rel_err_short")
        model = trainer.accelerator.unwrap_model(trainer.model)
        model.config.update(self.source_dropout)  # the saved model finetunes with the source's dropout
        model_dir = trainer.run_dir / MODEL_DIR
        trainer.save_model(model_dir)
        if trainer.is_main:
            self._write_card(model_dir, trainer, errors)
        fmt = lambda errs: " ".join(f"{e:.3f}" for e in errs or [])
        report = []
        for key, what in (("rel_err", "held out"), ("rel_err_short", f"held out, cut to {self.short_length} tokens")):
            before, after = errors.get(f"{key}_before"), errors.get(f"{key}_after")
            if after is not None:
                report.append(f"relative error by layer, {what}: " + (f"{fmt(before)} -> " if before else "")
                              + fmt(after))
        summary = {
            "model_dir": str(model_dir), "source": self.source, "start_weights_sha256": self.start_weights_sha256,
            "target": self.target, "train": self.train_mode,
            **errors, "report": report,
            "next": next_line(self.stage, trainer.run_dir, str(model_dir)),
        }
        return summary, None

    def _errors_before_after(self, evals: list[dict], key: str) -> dict[str, list[float] | None]:
        """{<key>_before: by layer at step 0 (None without eval_at_start), <key>_after: by layer at the end}."""
        name = key.removeprefix("val_")
        layers = range(self.model.config.num_hidden_layers)
        before = next(([e[f"{key}_{i}"] for i in layers] for e in evals if e["step"] == 0), None)
        after = [evals[-1][f"{key}_{i}"] for i in layers] if evals else None
        return {f"{name}_before": before, f"{name}_after": after}

    def _write_card(self, model_dir: Path, trainer: Trainer, errors: dict) -> None:
        """The model card records the source, n, k, sharing, and the transfer: tokens, steps, error by layer."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        # a continued transfer keeps its model's architecture (continue_transfer): its card's source and model
        info = continued_info(self.earlier, trainer.run_dir.name) if self.earlier else \
            conversion_info(self.model_path, model, name=trainer.run_dir.name)
        info["transfer"] = {"steps": trainer.state["step"], "tokens": trainer.state["tokens"], "target": self.target,
                            "train": self.train_mode, "short_fraction": self.transfer.short_fraction,
                            "eval_short_length": self.short_length, "max_seq_len": model.config.max_seq_len, **errors}
        if self.earlier:  # the phases in order: the one this run continued first
            info["transfer"]["continued"] = {"model_path": card_path(self.model_path), **self.earlier["transfer"]}
        write_model_card(model_dir, info)


def continue_transfer(given: str, path: str, settings: Mapping, train: str) -> tuple[LinformerModel, dict]:
    """The Linformer at `path` (model_path `given`), made by an earlier transfer of E and F only, to transfer further
    (LoLCATs' order: the new attention first, then every weight). Its other weights are still the source's, so the
    teacher is its own weights attending fully. Refused, naming the key, when its earlier transfer trained every
    weight (the teacher would no longer be the source), when it has no transfer record, or when a model.* setting
    differs from its own."""
    info = read_card_info(path) or {}
    earlier = info.get("transfer")
    if not earlier:
        raise ConfigError(f"model_path={given} is a Linformer with no transfer record: transfer from its source "
                          "encoder (a BERT/RoBERTa-family model) instead")
    if earlier.get("train") != "projections":
        raise ConfigError(f"model_path={given} was transferred with transfer.train={earlier.get('train')}: its weights "
                          "are no longer the source's, so they cannot be the teacher. Continue from a transfer with "
                          "transfer.train=projections (E and F first, then the rest), or transfer from the source.")
    model = load_pretrained(LinformerModel, path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    for key in ATTENTION_FIELDS:  # a continued transfer keeps the model it continues
        want, have = settings.get(key), getattr(model.config, key)
        if want is not None and want != have:
            raise ConfigError(f"model.{key}={want} but model_path={given} is a Linformer with {key}={have}: a "
                              f"continued transfer keeps its model's architecture (set model.{key}={have})")
    log.info("transfer.train=%s continues %s (its earlier transfer: %s steps of E and F)", train, given,
             earlier.get("steps"))
    return model, info


def _source_dropout(source: str) -> dict[str, float]:
    c = load_auto(AutoConfig, source)
    return {"hidden_dropout_prob": c.hidden_dropout_prob, "attention_probs_dropout_prob":
            c.attention_probs_dropout_prob}


def transfer(spec: TransferSpec | Mapping, run_dir: str | Path) -> dict:
    """Fit a converted Linformer's attention to its full-attention teacher; returns the summary. `spec` may be a
    composed configs/transfer.yaml, read into the spec first."""
    spec = TransferSpec.of(spec)

    def make_task(accelerator, settings: TrainerSettings) -> TransferTask:
        task = TransferTask(spec, settings, accelerator.num_processes, accelerator.process_index)
        if task.teacher is not None:  # not prepared by Accelerate (it never trains): place it by hand
            task.teacher.to(accelerator.device)
        return task

    return run_training(spec, run_dir, make_task)
