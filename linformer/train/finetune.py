"""Finetuning on a GLUE-style task with Accelerate: ``finetune(cfg, run_dir)``.

Works from a pretraining run directory (its ``model/``), any Linformer directory, or a plain Hugging Face encoder
(RoBERTa, BERT-family: Table 2's baseline row). Evaluates on the task's eval split every epoch, keeps the best
checkpoint in ``<run>/best`` and writes ``<run>/results.json``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
)

from .. import modeling  # noqa: F401  (registers the Linformer Auto classes)
from ..data import compute_metrics, get_task, load_task
from ..data.io import resolve_path
from ..errors import CheckpointError, TrainingDiverged
from .common import (
    MetricsLog,
    build_accelerator,
    build_optimizer,
    build_scheduler,
    clip_norm,
    finish,
    init_trackers,
    save_model_atomic,
    seed_everything,
    write_json_atomic,
)

log = logging.getLogger(__name__)
_POSITION_OFFSET_MODELS = ("roberta", "xlm-roberta", "camembert", "linformer")  # positions start at pad + 1


def resolve_model_path(model_path: str) -> str:
    """A pretraining run dir (uses its model/), a model dir (config.json), or a hub name (needs network)."""
    if not model_path:
        raise CheckpointError("model_path is empty: give a pretraining run directory or a Hugging Face model.")
    p = Path(resolve_path(model_path))
    if (p / "model" / "config.json").is_file():
        return str(p / "model")
    if (p / "config.json").is_file():
        return str(p)
    if p.exists() or str(model_path).startswith((".", "/", "~")) or str(model_path).count("/") > 1:
        raise CheckpointError(
            f"model_path={model_path!r} ({p}) holds no model: expected a pretraining run directory with model/, or "
            "a Hugging Face model directory with config.json and weights."
        )
    return str(model_path)  # a hub name such as roberta-base


def load_classifier(model_path: str, num_labels: int, from_scratch: bool):
    try:
        config = AutoConfig.from_pretrained(model_path, num_labels=num_labels)
        if from_scratch:
            return AutoModelForSequenceClassification.from_config(config), config
        return AutoModelForSequenceClassification.from_pretrained(model_path, config=config), config
    except OSError as err:
        raise CheckpointError(
            f"model_path={model_path!r} could not be loaded (a hub name needs the network; offline, give a local "
            f"directory). Cause: {err}"
        ) from err
    except (ValueError, KeyError) as err:
        raise CheckpointError(
            f"model_path={model_path!r} holds a model that cannot classify sequences "
            f"(AutoModelForSequenceClassification has no class for it). Cause: {err}"
        ) from err


def max_tokens(config, tokenizer, requested: int | None, task_max: int | None) -> int:
    """The longest input the model takes: its n (Linformer) or its position table, capped by the request."""
    if getattr(config, "max_seq_len", None):
        limit = int(config.max_seq_len)
    else:
        offset = (config.pad_token_id or 0) + 1 if config.model_type in _POSITION_OFFSET_MODELS else 0
        limit = int(config.max_position_embeddings) - offset
    limit = min(limit, int(tokenizer.model_max_length)) if tokenizer.model_max_length < 1e9 else limit
    for cap in (requested, task_max):
        if cap:
            limit = min(limit, int(cap))
    return limit


def _subsample(ds, n: int | None, seed: int):
    return ds if n is None or n >= len(ds) else ds.shuffle(seed=seed).select(range(int(n)))


@torch.no_grad()
def evaluate_task(model, accelerator, loader, task: str) -> dict[str, float]:
    model.eval()
    preds, refs = [], []
    for batch in loader:
        logits = model(**batch).logits
        p, r = accelerator.gather_for_metrics((logits.argmax(-1), batch["labels"]))
        preds.append(p.cpu())
        refs.append(r.cpu())
    model.train()
    return compute_metrics(task, torch.cat(preds).numpy(), torch.cat(refs).numpy())


def finetune(cfg: DictConfig, run_dir: str | Path) -> dict:
    run_dir = Path(run_dir)
    t = cfg.trainer
    t_start = time.perf_counter()
    accelerator = build_accelerator(t, cfg.logger, run_dir)
    seed = int(cfg.seed)
    seed_everything(seed)
    spec = get_task(cfg.task.name)  # unknown task names fail here, listing the valid ones
    model_path = resolve_model_path(str(cfg.model_path))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model, config = load_classifier(model_path, spec.num_labels, bool(cfg.get("from_scratch", False)))
    length = max_tokens(config, tokenizer, t.get("max_length"), cfg.task.get("max_length"))
    data_dir = cfg.task.get("data_dir")
    cache_dir = cfg.get("task_cache_dir")
    with accelerator.main_process_first():  # rank 0 tokenizes and saves the cache, the others then load it
        data = load_task(spec.name, resolve_path(data_dir) if data_dir else None, tokenizer, length,
                         skip_bad_rows=bool(cfg.task.get("skip_bad_rows", False)),
                         cache_dir=resolve_path(cache_dir) if cache_dir else None)
    train = _subsample(data["train"], cfg.get("max_train_examples"), seed)
    evald = _subsample(data["eval"], cfg.get("max_eval_examples"), seed)
    collate = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)  # dynamic padding per batch
    cols = ["input_ids", "attention_mask", "labels"]
    train_loader = DataLoader(train.with_format(columns=cols), batch_size=int(t.batch_size), shuffle=True,
                              collate_fn=collate, generator=torch.Generator().manual_seed(seed))
    eval_loader = DataLoader(evald.with_format(columns=cols), batch_size=int(t.eval_batch_size), collate_fn=collate)

    accum = int(t.grad_accum)
    steps_per_epoch = math.ceil(len(train_loader) / accelerator.num_processes / accum)
    total_steps = int(t.max_steps) if t.get("max_steps") else steps_per_epoch * int(t.epochs)
    epochs = math.ceil(total_steps / steps_per_epoch)
    optimizer = build_optimizer(model, t.lr, cfg.optim)
    scheduler = build_scheduler(optimizer, round(float(t.warmup_ratio) * total_steps), total_steps, t)
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )
    if accelerator.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
    arch = {k: getattr(config, k, None) for k in ("attention", "max_seq_len", "projected_dim", "sharing")}
    tags = [f"task={spec.name}"] + [f"{k}={v}" for k, v in arch.items() if v is not None]
    init_trackers(accelerator, cfg.logger, run_dir, cfg.run_name, OmegaConf.to_container(cfg, resolve=True),
                  "finetune", cfg.get("experiment_name"), tags)
    metrics_log = MetricsLog(accelerator, run_dir)
    main_metric = spec.metrics[0]

    step, nonfinite, best, best_epoch, history = 0, 0, -math.inf, None, []
    bar = tqdm(total=total_steps, desc=f"finetune {spec.name}", disable=not accelerator.is_main_process,
               dynamic_ncols=True)
    model.train()
    for epoch in range(1, epochs + 1):
        losses = []
        for i, batch in enumerate(train_loader):
            sync = (i + 1) % accum == 0 or i + 1 == len(train_loader)
            with contextlib.nullcontext() if sync else accelerator.no_sync(model):
                loss = model(**batch).loss
                accelerator.backward(loss / accum)
            if not sync:
                continue
            loss = accelerator.reduce(loss.detach(), "mean")
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), clip_norm(t))
            if bool(torch.isfinite(loss)) or t.mixed_precision == "fp16":
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            nonfinite = 0 if bool(torch.isfinite(loss)) else nonfinite + 1
            if nonfinite >= int(t.max_nonfinite_steps):
                finish(accelerator)
                raise TrainingDiverged(
                    f"{nonfinite} consecutive non-finite losses at step {step} (trainer.max_nonfinite_steps); "
                    "lower trainer.lr."
                )
            losses.append(loss.item())
            if step % int(t.log_every) == 0:
                metrics_log.log(step, {"loss": loss.item(), "lr": scheduler.get_last_lr()[0],
                                       "grad_norm": float(grad_norm), "epoch": epoch})
                bar.set_postfix(loss=f"{loss.item():.3f}")
            bar.update(1)
            if step >= total_steps:
                break
        scores = evaluate_task(model, accelerator, eval_loader, spec.name)
        row = {"epoch": epoch, "step": step, "train_loss": float(np.mean(losses)) if losses else None, **scores}
        history.append(row)
        metrics_log.log(step, {f"eval_{k}": v for k, v in scores.items()} | {"epoch": epoch})
        log.info("epoch %d: %s", epoch, scores)
        if scores[main_metric] > best:
            best, best_epoch = scores[main_metric], epoch
            if t.get("save_best", True):
                save_model_atomic(accelerator, model, tokenizer, run_dir / "best")
        if step >= total_steps:
            break
    bar.close()
    pretrain_summary = Path(model_path).parent / "summary.json"
    results = {
        "task": spec.name,
        "eval_split": spec.eval_split,
        "metrics": next(h for h in history if h["epoch"] == best_epoch),
        "best_epoch": best_epoch,
        "num_train_examples": len(train),
        "num_eval_examples": len(evald),
        "model_path": model_path,
        "from_scratch": bool(cfg.get("from_scratch", False)),
        "model_type": config.model_type,
        **arch,
        "pretrain_val_ppl": json.loads(pretrain_summary.read_text()).get("final_val_ppl")
        if pretrain_summary.is_file() else None,
        "seed": seed,
        "lr": float(t.lr),  # peak; table2.py picks the best lr per cell when a grid was run
        "batch_size": int(t.batch_size),
        "max_length": length,
        "steps": step,
        "wall_time_s": time.perf_counter() - t_start,
        "history": history,
    }
    if accelerator.is_main_process:
        write_json_atomic(run_dir / "results.json", results)
    finish(accelerator)
    return results
