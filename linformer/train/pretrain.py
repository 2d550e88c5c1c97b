"""MLM pretraining with Accelerate: ``pretrain(cfg, run_dir)``.

Data order and masking are pure functions of (seed, step): the global micro-batch g = step * grad_accum + micro
takes rows ``perm_epoch[...]`` of a seeded per-epoch permutation, every rank masks that whole micro-batch with a
generator seeded by (seed, g) and keeps its own slice. So resume needs only the step, and 1 process with batch 2b
sees exactly the tokens and masks that 2 processes with batch b see. The loss is normalised by the global number
of MLM targets of the optimizer step, so gradients match too.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm
from transformers import AutoTokenizer

from ..bench.flops import peak_flops, training_flops_per_token
from ..data import MLMCollator, load_prepared
from ..data.io import resolve_path
from ..errors import CheckpointError, ConfigError, TrainingDiverged
from ..modeling import LinformerConfig, LinformerForMaskedLM
from . import checkpoint as ckpt
from .common import (
    MetricsLog,
    build_accelerator,
    build_optimizer,
    build_scheduler,
    clip_norm,
    finish,
    init_trackers,
    perplexity,
    save_model_atomic,
    seed_everything,
    write_json_atomic,
)

log = logging.getLogger(__name__)


class BlockStream:
    """Deterministic global micro-batches of packed blocks; rank r keeps rows [r*b, (r+1)*b)."""

    def __init__(self, dataset, per_device: int, world: int, rank: int, seed: int, collator: MLMCollator):
        self.blocks = dataset.with_format("numpy", columns=["input_ids"])  # rows read per batch, not held
        self.per_device, self.world, self.rank, self.seed = per_device, world, rank, seed
        self.global_micro = per_device * world
        self.batches_per_epoch = len(dataset) // self.global_micro
        if self.batches_per_epoch == 0:
            raise ConfigError(
                f"the corpus has {len(dataset)} blocks, fewer than one global batch of "
                f"{self.global_micro} (trainer.batch_size={per_device} x {world} processes); lower trainer.batch_size."
            )
        self.collator = collator
        self._perm: tuple[int, torch.Tensor] | None = None

    def _rows(self, g: int) -> torch.Tensor:
        epoch, pos = divmod(g, self.batches_per_epoch)
        if self._perm is None or self._perm[0] != epoch:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm = (epoch, torch.randperm(len(self.blocks), generator=gen))
        return self._perm[1][pos * self.global_micro : (pos + 1) * self.global_micro]

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        """The rank's slice of global micro-batch g, masked identically whatever the number of processes."""
        rows = self.blocks[self._rows(g).tolist()]["input_ids"]  # (global micro-batch, n) int32
        self.collator.generator = torch.Generator().manual_seed(self.seed * 7_919 + g)
        batch = self.collator([{"input_ids": r.tolist()} for r in rows])
        lo = self.rank * self.per_device
        return {k: v[lo : lo + self.per_device] for k, v in batch.items()}

    def epoch_of(self, g: int) -> float:
        return g / self.batches_per_epoch


def build_model(cfg: DictConfig, tokenizer) -> LinformerForMaskedLM:
    """A fresh Linformer from cfg.model (vocabulary and special ids from the tokenizer), or cfg.init_from."""
    fields = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "name"}
    fields.update(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    init_from = cfg.get("init_from")
    if init_from:  # start from a RoBERTa checkpoint: only E, F start fresh
        keep = ("attention", "max_seq_len", "projected_dim", "sharing", "projection")
        return LinformerForMaskedLM.from_roberta(resolve_path(init_from), **{k: fields[k] for k in keep})
    return LinformerForMaskedLM(LinformerConfig(**fields))


@torch.no_grad()
def evaluate_mlm(model, accelerator, stream: BlockStream, num_batches: int | None) -> dict[str, float]:
    """Validation loss over fixed masks (the same every evaluation), summed over ranks."""
    model.eval()
    total = stream.batches_per_epoch if num_batches is None else min(num_batches, stream.batches_per_epoch)
    loss_sum = torch.zeros((), device=accelerator.device, dtype=torch.float64)
    count = torch.zeros((), device=accelerator.device, dtype=torch.float64)
    for g in range(total):
        batch = {k: v.to(accelerator.device) for k, v in stream.micro_batch(g).items()}
        n_targets = (batch["labels"] != -100).sum()
        if n_targets == 0:
            continue
        loss_sum += model(**batch).loss.double() * n_targets
        count += n_targets
    loss_sum, count = accelerator.reduce(loss_sum, "sum"), accelerator.reduce(count, "sum")
    model.train()
    loss = (loss_sum / count.clamp(min=1)).item()
    return {"val_loss": loss, "val_ppl": perplexity(loss)}


def pretrain(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Pretrain a Linformer with MLM; returns a summary (final/best validation loss, tokens/s, paths)."""
    run_dir = Path(run_dir)
    t = cfg.trainer
    accelerator = build_accelerator(t, cfg.logger, run_dir)
    world, rank = accelerator.num_processes, accelerator.process_index
    per_device, accum = _batch_geometry(t, world)
    seed_everything(int(cfg.seed))

    tokenizer_dir = resolve_path(cfg.tokenizer_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    data = load_prepared(resolve_path(cfg.corpus_dir), tokenizer_dir)
    model = build_model(cfg, tokenizer)
    n_block = len(data["train"][0]["input_ids"])
    if n_block > model.config.max_seq_len:
        raise ConfigError(
            f"the corpus blocks have {n_block} tokens but model.max_seq_len is {model.config.max_seq_len}; "
            f"set model.max_seq_len={n_block} or prepare the corpus with data.n={model.config.max_seq_len}."
        )
    collator = MLMCollator(tokenizer, mlm_probability=float(t.mlm_probability))
    train = BlockStream(data["train"], per_device, world, rank, int(cfg.seed), collator)
    val = BlockStream(data["validation"], per_device, world, rank, int(cfg.seed) + 1, collator)

    optimizer = build_optimizer(model, t.lr, cfg.optim)
    scheduler = build_scheduler(optimizer, t.warmup_steps, t.max_steps, t)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)

    if accelerator.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
    resume_from = ckpt.resolve_resume(t.resume, run_dir)
    state = {"step": 0, "nonfinite": 0, "tokens": 0}
    if resume_from is not None:
        state = ckpt.load_checkpoint(accelerator, resume_from)
        state["resumed_from_step"] = state["step"]
        log.info("resumed from %s at step %d", resume_from, state["step"])
    elif ckpt.complete_checkpoints(run_dir):
        raise CheckpointError(
            f"{run_dir} holds checkpoints of an earlier run but trainer.resume={t.resume}: continue it with "
            "trainer.resume=auto, or choose another run_name (or delete the directory) to start over."
        )
    cfg_dict = OmegaConf.to_container(cfg, resolve=True)
    mc = cfg.model
    init_trackers(accelerator, cfg.logger, run_dir, cfg.run_name, cfg_dict, "pretrain", cfg.get("experiment_name"),
                  [f"attention={mc.attention}", f"k={mc.projected_dim}", f"sharing={mc.sharing}", f"model={mc.name}"])
    metrics = MetricsLog(accelerator, run_dir, resume_step=state["step"] if resume_from is not None else None)
    unwrapped = accelerator.unwrap_model(model)
    flops_per_token = training_flops_per_token(unwrapped.config, n_block, float(t.mlm_probability))
    peak = peak_flops(accelerator.device, t.mixed_precision, t.get("peak_tflops"))
    tokens_per_step = per_device * accum * world * n_block

    def save(step: int) -> None:
        ckpt.save_checkpoint(accelerator, run_dir, step, state, t.keep_last)

    step = int(state["step"])
    best_val = state.get("best_val_loss", math.inf)
    if step == 0 and t.get("eval_at_start", False):
        ev = evaluate_mlm(model, accelerator, val, t.eval_batches)
        metrics.log(0, ev)
        state["initial_val_loss"] = ev["val_loss"]
    bar = tqdm(total=int(t.max_steps), initial=step, desc="pretrain", disable=not accelerator.is_main_process,
               dynamic_ncols=True)
    model.train()
    t_start = time.perf_counter()
    steps_timed = 0
    while step < int(t.max_steps):
        t0 = time.perf_counter()
        micro = [train.micro_batch(step * accum + i) for i in range(accum)]
        local_targets = sum(int((b["labels"] != -100).sum()) for b in micro)
        n_targets = accelerator.reduce(torch.tensor(local_targets, device=accelerator.device), "sum").item()
        loss_sum = torch.zeros((), device=accelerator.device)
        for i, batch in enumerate(micro):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            sync = i == accum - 1
            with contextlib.nullcontext() if sync else accelerator.no_sync(model):
                out = model(**batch)
                targets = int((batch["labels"] != -100).sum())
                # sum over this rank's targets / all targets of the step; x world because DDP averages gradients
                part = out.loss * targets / max(n_targets, 1)
                accelerator.backward(part * world)
                loss_sum += part.detach()
        loss = accelerator.reduce(loss_sum, "sum")
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), clip_norm(t))
        finite = bool(torch.isfinite(loss)) and bool(torch.isfinite(torch.as_tensor(grad_norm)))
        if finite or t.mixed_precision == "fp16":  # fp16: the grad scaler skips overflowing steps itself
            optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        state["step"] = step
        state["tokens"] = int(state["tokens"]) + tokens_per_step
        state["nonfinite"] = 0 if bool(torch.isfinite(loss)) else int(state["nonfinite"]) + 1
        dt = time.perf_counter() - t0
        steps_timed += 1
        tok_s = tokens_per_step / dt
        row = {
            "loss": loss.item(),
            "ppl": perplexity(loss.item()),
            "lr": scheduler.get_last_lr()[0],
            "grad_norm": float(grad_norm),
            "tokens_per_s": tok_s,
            "mfu": flops_per_token * tok_s / peak if peak else None,
            "epoch": train.epoch_of(step * accum),
            "tokens": state["tokens"],
        }
        if state["nonfinite"]:
            log.warning("step %d: non-finite loss (%d in a row); update skipped", step, state["nonfinite"])
        if state["nonfinite"] >= int(t.max_nonfinite_steps):
            save(step)
            bar.close()
            finish(accelerator)
            raise TrainingDiverged(
                f"{state['nonfinite']} consecutive non-finite losses at step {step} (trainer.max_nonfinite_steps="
                f"{t.max_nonfinite_steps}); checkpoint saved in {ckpt.checkpoint_dir(run_dir)}. Lower trainer.lr, "
                "raise trainer.warmup_steps or use trainer.mixed_precision=bf16."
            )
        if step % int(t.eval_every) == 0 or step == int(t.max_steps):
            ev = evaluate_mlm(model, accelerator, val, t.eval_batches)
            row.update(ev)
            best_val = min(best_val, ev["val_loss"])
            state["best_val_loss"] = best_val
            state["last_val_loss"] = ev["val_loss"]
        metrics.log(step, {k: v for k, v in row.items() if v is not None})
        bar.update(1)
        if step % int(t.log_every) == 0:
            bar.set_postfix(loss=f"{row['loss']:.3f}", tok_s=f"{tok_s:,.0f}", lr=f"{row['lr']:.2e}")
        if step % int(t.save_every) == 0 or step == int(t.max_steps):
            save(step)
    bar.close()
    wall = time.perf_counter() - t_start

    model_dir = run_dir / "model"
    save_model_atomic(accelerator, model, tokenizer, model_dir)
    summary = {
        "run_dir": str(run_dir),
        "model_dir": str(model_dir),
        "steps": step,
        "tokens": state["tokens"],
        "initial_val_loss": state.get("initial_val_loss"),
        "final_val_loss": state.get("last_val_loss"),
        "final_val_ppl": perplexity(state["last_val_loss"]) if state.get("last_val_loss") is not None else None,
        "best_val_loss": None if math.isinf(best_val) else best_val,
        "tokens_per_s": tokens_per_step * steps_timed / wall if steps_timed else None,
        "wall_time_s": wall,
        "processes": world,
        "resumed_from_step": state.get("resumed_from_step"),
    }
    if accelerator.is_main_process:
        write_json_atomic(run_dir / "summary.json", summary)
    finish(accelerator)
    return summary


def _batch_geometry(t: Mapping, world: int) -> tuple[int, int]:
    """Per-device batch and accumulation; trainer.global_batch_size (optional) must split across processes."""
    accum = int(t.grad_accum)
    if accum < 1:
        raise ConfigError(f"trainer.grad_accum={accum} must be at least 1.")
    global_batch = t.get("global_batch_size")
    if global_batch is None:
        return int(t.batch_size), accum
    if int(global_batch) % (world * accum):
        raise ConfigError(
            f"trainer.global_batch_size={global_batch} does not divide across {world} processes x "
            f"trainer.grad_accum={accum}; choose a multiple of {world * accum}."
        )
    return int(global_batch) // (world * accum), accum
