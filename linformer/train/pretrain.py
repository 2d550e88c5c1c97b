"""MLM pretraining on the training core: ``pretrain(spec, run_dir)``.

Data order and masking are pure functions of (seed, step): step s's global batch takes rows ``perm_epoch[...]`` of a
seeded per-epoch permutation, every rank masks that whole batch with a generator seeded by (seed, s) and keeps its
own slice of each micro-batch (``data.streams.BlockStream``). So resume needs only the step, and 1 process with batch
2b, 2 processes with batch b, and 1 process with batch b x trainer.grad_accum=2 see exactly the same tokens and
masks. The validation blocks and masks are drawn with a fixed seed (``VALIDATION_SEED``), whatever the run's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..data import MLMCollator, load_prepared
from ..data.corpus import check_corpus_settings, read_manifest
from ..data.io import load_auto
from ..data.streams import SEEDING_STEP, VALIDATION_SEED, BlockStream
from ..data.tokenizer import load_tokenizer
from ..data.unigram import PLATEAU_RATIO, corpus_perplexities, on_plateau
from ..errors import ConfigError
from ..files.hashing import check_inputs_unchanged, input_states
from ..files.runs import MODEL_DIR
from ..modeling import LinformerForMaskedLM
from ..modeling.configuration import TOKENIZER_FIELDS
from ..modeling.convert import NO_EXACT_KEYS
from ..modeling.flops import UncountedProjection, peak_flops, training_flops_per_token
from ..modeling.loading import (
    check_tokenizer_fits,
    load_pretrained,
    resolve_model_path,
    resolve_tokenizer_dir,
    weights_sha256,
)
from ..modeling.values import projects_keys, round_up
from ..runconfig import PretrainSpec, TrainerSettings, model_config
from .common import architecture_tags, model_architecture
from .core import run_training
from .step import share
from .summary import next_line
from .task import BlockStreamTask
from .trainer import Trainer

log = logging.getLogger(__name__)


def build_model(spec: PretrainSpec, tokenizer, init_path: str | None = None) -> LinformerForMaskedLM:
    """A fresh Linformer from the model group (vocabulary and special ids from the tokenizer), or init_from (found at
    `init_path`, where the caller has resolved it).

    Training asks for sparse (masked-only) logits: the vocabulary projection of unmasked positions is wasted work.
    A fresh model's vocabulary is padded to ``spec.pad_vocab_to_multiple_of`` rows (the padding gets no
    probability: LinformerConfig.tokenizer_vocab_size)."""
    fields = dict(spec.model)
    for key in TOKENIZER_FIELDS:
        if key in fields:  # set below from the tokenizer: a value given here would be silently replaced
            raise ConfigError(f"model.{key}={fields[key]!r}: a fresh model takes the tokenizer's ({len(tokenizer)} tokens in "
                              f"{spec.tokenizer_dir}); remove the key, or train another tokenizer")
    vocab = round_up(len(tokenizer), spec.pad_vocab_to_multiple_of)
    fields.update(
        vocab_size=vocab,
        tokenizer_vocab_size=len(tokenizer) if vocab > len(tokenizer) else None,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if spec.init_from:
        model = _init_from(spec.init_from, init_path or resolve_model_path(spec.init_from, "init_from"), fields,
                            tokenizer)
    else:
        model = LinformerForMaskedLM(model_config(fields))
    model.config.sparse_prediction = True
    return model


def _init_from(init_from: str, path: str, fields: dict, tokenizer) -> LinformerForMaskedLM:
    """MLM continuation: a converted or pretrained Linformer directory keeps its own architecture (the model group is not
    applied to it); a BERT/RoBERTa-family encoder is converted with the model group's Linformer fields, only E, F (and an
    MLM head the source lacks, which the conversion names) starting fresh."""
    from transformers import AutoConfig

    if load_auto(AutoConfig, path).model_type == "linformer":
        model = load_pretrained(LinformerForMaskedLM, path, "init_from")
        log.warning("init_from=%s is a Linformer: it keeps its own architecture (%s, width %d, %d layers); the "
                    "model group's settings are not applied (config.yaml records them as given)", init_from,
                    model.config.attention_label, model.config.hidden_size, model.config.num_hidden_layers)
    else:
        keep = ("attention", "max_seq_len", "projected_dim", "sharing", "projection")
        # the model group's exact keys (the paper's Linformer unless it names them), not the converted default
        exact = {key: fields.get(key, value) for key, value in NO_EXACT_KEYS.items()} \
            if projects_keys(fields.get("attention")) else {}
        model = LinformerForMaskedLM.from_pretrained_encoder(path, **{k: fields[k] for k in keep}, **exact)
    check_tokenizer_fits(tokenizer, model.config, path)
    return model


class PretrainTask(BlockStreamTask):
    """MLM on packed n-token blocks. Compiled (trainer.compile), every shape is fixed: the blocks are never padded,
    so the all-ones attention_mask is dropped on the host, and the MLM head runs on a fixed number of prediction
    slots (``prediction_slots``) rather than on a batch's own number of labelled positions (on a GPU too, compiled
    or not: no step then reads a count back from the device)."""

    stage = "pretrain"
    main_metric = "val_loss"
    compile_dynamic = False

    def __init__(self, spec: PretrainSpec, settings: TrainerSettings, world: int, rank: int, device: torch.device):
        self.settings = settings
        self.tokenizer_dir = resolve_tokenizer_dir(spec.tokenizer_dir)
        # the tokenizer's files as they are before it is loaded: load_prepared hashes them after
        # (check_corpus_tokenizer), so one trained again in between would pass as the one the run trains with
        tokenizer_files = input_states([self.tokenizer_dir])
        self.tokenizer = load_tokenizer(self.tokenizer_dir)
        # every id of the blocks below the vocabulary the model is built from (one of init_from's holds at least it)
        data = load_prepared(spec.corpus_dir, self.tokenizer_dir, len(self.tokenizer))
        check_inputs_unchanged(tokenizer_files)
        init_path = resolve_model_path(spec.init_from, "init_from") if spec.init_from else None
        self.model = build_model(spec, self.tokenizer, init_path)
        # the architecture of the model built (an init_from's own where it keeps it), named as finetuning names it
        self.tracker_tags = [*architecture_tags(self.model.config), f"model={spec.model_name}"]
        self.tracker_config = model_architecture(self.model.config)
        # init_from's weights by content (a path may be rebuilt); a fresh model's start is its seed
        self.start_weights_sha256 = weights_sha256(init_path) if init_path else None
        self.n = len(data["train"][0]["input_ids"])
        # a fresh model is trained at its n (blocks shorter than n would train E, F's first rows only: another
        # model than the one named); a continued one (init_from) may go on at a shorter length
        if self.n > self.model.config.max_seq_len or (spec.init_from is None and self.n != self.model.config.max_seq_len):
            raise ConfigError(
                f"the corpus blocks have {self.n} tokens but model.max_seq_len is {self.model.config.max_seq_len}; "
                f"set model.max_seq_len={self.n} or prepare the corpus with data.n={self.model.config.max_seq_len}."
            )
        mlm_probability = settings.require("mlm_probability", "pretraining")
        collator = MLMCollator(self.tokenizer, mlm_probability=mlm_probability)
        seed, b = spec.seed, settings.batch_size
        self.train_stream = BlockStream(data["train"], b, world, rank, seed, collator, "train", settings.grad_accum)
        self.val = BlockStream(data["validation"], b, world, rank, VALIDATION_SEED, collator, "validation")
        self.seed, self.batch_seeding = seed, SEEDING_STEP
        self.eval_blocks = settings.eval_blocks
        self.default_eval_every = None
        try:
            self.flops_per_token = training_flops_per_token(self.model.config, self.n, mlm_probability)
        except UncountedProjection as err:  # a projection of one's own trains without an MFU, not with a wrong one
            log.warning("%s metrics.jsonl and the summary give no MFU for this run.", err)
            self.flops_per_token = None
        # tokens/s counts every process's tokens (core), so the peak is every process's: one device's times the world
        one = peak_flops(device, settings.mixed_precision, settings.peak_tflops)
        self.peak_flops = one * world if one else None
        self.accum = settings.grad_accum
        # fixed prediction slots where shapes must not change (compiled) and on a GPU, where boolean indexing of the
        # targets would read their count back to the host in every micro-batch (a wait for the device)
        self.slots = prediction_slots(b * self.n, mlm_probability) if settings.compile or device.type == "cuda" else None
        manifest = read_manifest(spec.corpus_dir)
        self.unigram_val_ppl = manifest["unigram_val_ppl"]  # load_prepared checked it is there
        self.context_free_val_ppl = manifest.get("context_free_val_ppl")
        if self.context_free_val_ppl is None and self.unigram_val_ppl is not None:  # a manifest that predates it
            self.context_free_val_ppl = corpus_perplexities(data, self.tokenizer)[1]

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        return self._host_ready(self.train_stream.micro_batch(g))

    def _host_ready(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A CPU batch as the model should get it: without an all-ones attention_mask (packed blocks: the model
        then needs no mask check), and with the prediction slots raised if this batch has more targets (one
        recompile; it should never happen at the slots' margin)."""
        if "attention_mask" in batch and bool(batch["attention_mask"].all()):
            batch = {k: v for k, v in batch.items() if k != "attention_mask"}
        if self.slots is not None:
            targets = int((batch["labels"] != -100).sum())
            if targets > self.slots:
                log.warning("a batch has %d MLM targets, more than the %d prediction slots: raising them to %d "
                            "(one recompile)", targets, self.slots, round_up(targets, 64))
                self.slots = round_up(targets, 64)
        return batch

    def loss(self, model, batch) -> torch.Tensor:
        if self.slots is None:
            return model(**batch).loss
        # a short batch (the held-out split's last, when the batch size does not divide it) may have fewer positions
        # than the slots: it takes all of them (one more shape to compile; the loss is the same mean over targets)
        return model(**batch, prediction_slots=min(self.slots, batch["labels"].numel())).loss

    def epoch_of(self, step: int) -> float:
        return step * self.accum / self.train_stream.batches_per_epoch

    def step_metrics(self, loss: float) -> dict[str, float]:
        return {"ppl": perplexity(loss)}

    @torch.no_grad()
    def evaluate(self, model, acc) -> dict[str, float]:
        """Validation loss over fixed masks (the same every evaluation), summed over ranks."""
        model.eval()
        loss_sum = torch.zeros((), device=acc.device, dtype=torch.float64)
        count = torch.zeros((), device=acc.device, dtype=torch.float64)
        for batch in self.val.held_out(self.eval_blocks, "cpu", self.val_scoring):
            batch = self._host_ready(batch)
            n_targets = int((batch["labels"] != -100).sum())
            # a batch without a target runs its forward too (every process runs as many: FSDP gathers in each),
            # and adds nothing (``share``: its loss is a mean over no target)
            loss = self.loss(model, {k: v.to(acc.device) for k, v in batch.items()})
            loss_sum += share(loss.double(), n_targets, 1)
            count += n_targets
        loss_sum, count = acc.reduce(loss_sum, "sum"), acc.reduce(count, "sum")
        model.train()
        if count.item() == 0:  # a loss of 0 (perplexity 1) would read as a perfect model
            raise ConfigError(
                f"the validation blocks evaluated (trainer.eval_blocks={self.eval_blocks}) hold no masked token: "
                "their masks are drawn once, so no evaluation would measure anything; evaluate more of them "
                "(a larger trainer.eval_blocks, or null for the whole split) or use longer "
                "blocks (data.n)")
        loss = (loss_sum / count).item()
        return {"val_loss": loss, "val_ppl": perplexity(loss)}

    def finish(self, trainer: Trainer) -> tuple[dict[str, Any], None]:
        model_dir = trainer.run_dir / MODEL_DIR
        # the saved model gives HF's full-vocabulary logits; only this training loop wants masked-only ones
        trainer.accelerator.unwrap_model(trainer.model).config.sparse_prediction = False
        trainer.save_model(model_dir)
        evals = [e for e in trainer.state["evals"] if "val_loss" in e]
        initial = next((e["val_loss"] for e in evals if e["step"] == 0), None)
        final = evals[-1]["val_loss"] if evals else None
        best = trainer.state["best"]
        final_ppl = perplexity(final) if final is not None else None
        report = [(f"validation perplexity {_ppl_change(initial, final)} (token frequencies alone: "
                  f"{self.unigram_val_ppl:,.1f}; no context, its own input token only: "
                  f"{self.context_free_val_ppl:,.1f})")]
        # a run of one update (the scratch rows' shape job, experiments.scratch.SHAPE) makes a starting point of
        # the model's shape, not a model to judge: it is not told to train further
        if trainer.state["step"] > 1 and on_plateau(final_ppl, self.context_free_val_ppl):
            report.append("the model has not yet learned to use its context (its perplexity is not below "
                          f"{PLATEAU_RATIO:.0%} of a model's that reads only its own input token): train it for more "
                          "steps before comparing or finetuning")
        summary = {
            "model_dir": str(model_dir),
            "start_weights_sha256": self.start_weights_sha256,
            "initial_val_loss": initial,
            "final_val_loss": final,
            "final_val_ppl": final_ppl,
            "unigram_val_ppl": self.unigram_val_ppl,
            "context_free_val_ppl": self.context_free_val_ppl,
            "best_val_loss": best["value"] if best else final,
            # what each evaluation scored: blocks of the validation split (trainer.eval_blocks), or for a run begun
            # before that was recorded, whole batches
            "validation": {"blocks": self.val.scored_blocks(self.eval_blocks), "of": len(self.val.dataset),
                           "scoring": self.val_scoring},
            "report": report,
            "next": next_line(self.stage, trainer.run_dir, str(model_dir)),
        }
        return summary, None


def prediction_slots(positions: int, mlm_probability: float) -> int:
    """Rows the compiled MLM head runs on for a batch of `positions` tokens: the expected number of targets plus
    6 standard deviations of the binomial draw (a batch beyond that is rarer than 1 in 10^8), rounded up to a
    multiple of 64 for the GEMM, at most every position."""
    mean = positions * mlm_probability
    bound = mean + 6 * math.sqrt(positions * mlm_probability * (1 - mlm_probability)) + 1
    return min(positions, round_up(math.ceil(bound), 64))


def perplexity(loss: float) -> float:
    """exp(loss), inf from a loss of 50 on (exp overflows a float past ~709; no perplexity that large is readable)."""
    return math.exp(loss) if loss < 50 else float("inf")


def perplexity_text(loss: float | None) -> str:
    """The perplexity of a validation loss as printed, "not measured" where no evaluation gave one."""
    return f"{perplexity(loss):,.1f}" if loss is not None else "not measured"


def _ppl_change(initial: float | None, final: float | None) -> str:
    if initial is None:
        return perplexity_text(final)
    return f"{perplexity_text(initial)} -> {perplexity_text(final)}"


def pretrain(spec: PretrainSpec | Mapping, run_dir: str | Path) -> dict:
    """Pretrain a Linformer with MLM; returns the summary (final/best validation loss, tokens/s, paths). `spec` may
    be a composed configs/pretrain.yaml, read into the spec first."""
    spec = PretrainSpec.of(spec)
    # before the run is recorded: its config.yaml must not name sources it does not train on
    check_corpus_settings(spec.corpus_dir, spec.config.get("data") or {}, spec.tokenizer_dir)

    def make_task(accelerator, settings: TrainerSettings) -> PretrainTask:
        world = accelerator.num_processes
        settings = dataclasses.replace(settings, batch_size=_per_device_batch(settings, world))
        return PretrainTask(spec, settings, world, accelerator.process_index, accelerator.device)

    return run_training(spec, run_dir, make_task)


def _per_device_batch(settings: TrainerSettings, world: int) -> int:
    """trainer.batch_size, or trainer.global_batch_size (optional) split across processes and accumulation."""
    global_batch, accum = settings.global_batch_size, settings.grad_accum
    if global_batch is None:
        return settings.batch_size
    if global_batch % (world * accum):
        raise ConfigError(
            f"trainer.global_batch_size={global_batch} does not divide across {world} processes x "
            f"trainer.grad_accum={accum}; choose a multiple of {world * accum}."
        )
    per_device = global_batch // (world * accum)
    if per_device != settings.batch_size:  # config.yaml keeps both: say which one the run follows
        log.warning("trainer.global_batch_size=%d sets the batch per device to %d (over %d process(es) x "
                    "trainer.grad_accum=%d): trainer.batch_size=%d is not used", global_batch, per_device, world,
                    accum, settings.batch_size)
    return per_device
