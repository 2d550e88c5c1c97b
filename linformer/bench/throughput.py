"""Training throughput and MFU: tokens/s of one full MLM step (forward, backward, clipping, AdamW step): the
trainer's own step (``linformer.train.step.optimizer_step``), so the figures are those of the step users run.

Models of the same size train on the same batch (random ids, ~15% of positions labelled): LinformerForMaskedLM with
attention='linformer' (one row per k in ``ks``) and 'full' (SDPA) - both with sparse_prediction=True, vocabulary
logits only at the labelled positions, as in pretraining - and Hugging Face RobertaForMaskedLM
(attn_implementation='sdpa'), which computes logits at every position.

The grid is blocks of (n, precision, compile); every model of a block is timed in interleaved rounds (each round runs
every model once, order rotated and reversed every other round; median step time), so the ratios inside a block are
side by side. Warm-up steps (compilation included: the first step of a compiled model compiles it) are excluded from
timing.

Precisions: 'fp32'; 'bf16' = the forward under ``torch.autocast`` bf16, fp32 weights and optimizer; 'fp16' = autocast
fp16 with a ``torch.amp.GradScaler`` (scale the loss, unscale before clipping, ``scaler.step``, ``scaler.update``), as
Accelerate does (``train.step.AmpOps``). fp16
needs CUDA: on CPU it is refused with an ``error:`` as the trainer does (Accelerate would silently train in fp32).

MFU = training FLOPs per token x tokens/s / the device's dense peak at that precision (linformer.modeling.flops).
Each model is credited with the FLOPs its own algorithm executes: ours from ``training_flops_per_token(config, n,
mlm_fraction)`` with the batch's labelled fraction (1.0 with full logits), HF RoBERTa from the same count for full
attention with mlm_fraction = 1.0 (it computes the vocabulary logits at every position). So MFU measures how busy the
GPU is; "vs HF RoBERTa" (the tokens/s ratio) measures the useful speed-up.

Levers (``levers``): one block at one (n, precision) that times, for a few models, a base configuration and one
variant per lever, each flipping a single lever: compile on/off, fused AdamW vs foreach, sparse MLM logits vs full
logits, and ``attention_mask=None`` vs an all-ones mask (packed blocks have no padding; the pretraining collator passes
an all-ones mask). Effects are ratios inside that one block, never timed assertions.
"""

from __future__ import annotations

import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field, fields, replace

import torch
from torch import nn

from ..devices import resolve_device
from ..errors import ConfigError, Preempted, first_line
from ..modeling.flops import peak_flops, training_flops_per_token
from ..progress import progress_bar
from ..runconfig.settings import COMPILE_MODES, positive_int
from ..train.compiling import CompileCounts, raise_recompile_limit
from ..train.step import AmpOps, optimizer_step
from .common import (
    free_memory,
    interleaved_medians,
    is_oom,
    load_average,
    machine_description,
    peak_memory_bytes,
    synchronize,
    timed,
)
from .models import build_ours, build_roberta, label, linformer_fields, ours_config, size_of, with_kernel

TRAIN_MODELS = ("linformer", "full", "roberta")
PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("fused", "foreach")
MASKS = ("none", "ones")
LEVERS = ("compile", "optimizer", "sparse_prediction", "attention_mask")
TARGET_MFU = 0.40  # the MFU the benchmark step of the base model should reach at n = 512 (docs/results/gpu_h200_notes.md)
TRAINER_TARGET_MFU = 0.45  # the MFU the trainer itself should reach there (compiled bf16 pretraining, its levers on)
BASE_SHAPE = {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072}  # RoBERTa-base


@dataclass(frozen=True)
class Variant:
    """How one model trains: every setting a lever flips."""

    compile: bool = False
    optimizer: str = "fused"          # fused | foreach AdamW
    sparse_prediction: bool = True    # ours: vocabulary logits only at labelled positions (HF RoBERTa: always all)
    attention_mask: str = "none"      # none: attention_mask=None | ones: an all-ones (batch, n) mask

    def flip(self, lever: str) -> Variant:
        """This variant with one lever set to its other value."""
        if lever == "compile":
            return replace(self, compile=not self.compile)
        if lever == "optimizer":
            return replace(self, optimizer="foreach" if self.optimizer == "fused" else "fused")
        if lever == "sparse_prediction":
            return replace(self, sparse_prediction=not self.sparse_prediction)
        if lever == "attention_mask":
            return replace(self, attention_mask="ones" if self.attention_mask == "none" else "none")
        raise ConfigError(f"throughput.levers.vary: unknown lever {lever!r}; expected some of {list(LEVERS)}.")

    def describe(self, lever: str) -> str:
        """The value of one lever, as the lever table shows it."""
        return {
            "compile": "torch.compile" if self.compile else "eager",
            "optimizer": f"{self.optimizer} AdamW",
            "sparse_prediction": "sparse logits (labelled positions)" if self.sparse_prediction
            else "full logits (every position)",
            "attention_mask": "attention_mask=None" if self.attention_mask == "none" else "all-ones attention_mask",
        }[lever]


def _check_variant(v: Variant, where: str) -> None:
    if v.optimizer not in OPTIMIZERS:
        raise ConfigError(f"{where}.optimizer={v.optimizer!r} is not one of {list(OPTIMIZERS)}.")
    if v.attention_mask not in MASKS:
        raise ConfigError(f"{where}.attention_mask={v.attention_mask!r} is not one of {list(MASKS)}.")


@dataclass
class LeverSettings:
    """One block at (n, precision): for each model, the base variant and one variant per lever in ``vary``."""

    enabled: bool = False
    n: int = 512
    precision: str = "bf16"
    models: list[str] = field(default_factory=lambda: ["full", "linformer"])
    k: int = 128  # the Linformer's k in this block
    base: dict = field(default_factory=lambda: {"compile": True, "optimizer": "fused", "sparse_prediction": True,
                                                "attention_mask": "none"})
    vary: list[str] = field(default_factory=lambda: list(LEVERS))

    def base_variant(self) -> Variant:
        unknown = set(self.base) - {f.name for f in fields(Variant)}
        if unknown:
            raise ConfigError(f"throughput.levers.base: unknown keys {sorted(unknown)}; known: "
                              f"{[f.name for f in fields(Variant)]}.")
        v = Variant(**self.base)
        _check_variant(v, "throughput.levers.base")
        return v


@dataclass
class ThroughputSettings:
    ns: list[int] = field(default_factory=lambda: [512, 2048])
    tokens_per_step: int = 4096  # batch = tokens_per_step // n
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    ffn: int = 1024
    vocab: int = 50265
    pad_vocab_to_multiple_of: int | None = None  # ours: the vocabulary rows rounded up, as pretraining does (64)
    ks: list[int] = field(default_factory=lambda: [256])  # one Linformer row per k
    k: int | None = None  # a single k (older configs): ks = [k]
    sharing: str = "layerwise"
    dropout: float = 0.1  # RoBERTa's hidden and attention dropout, as in pretraining
    mask_prob: float = 0.15
    precisions: list[str] = field(default_factory=lambda: ["fp32", "bf16"])
    models: list[str] = field(default_factory=lambda: list(TRAIN_MODELS))
    compile: list[bool] = field(default_factory=lambda: [False])  # the grid's compile settings, e.g. [false, true]
    compile_ns: list[int] | None = None          # compiled blocks only at these n (null: every n)
    compile_precisions: list[str] | None = None  # ... and only at these precisions (null: every precision)
    compile_mode: str | None = None              # torch.compile mode (null: the default)
    compile_warmup: int = 3  # warm-up steps of a compiled model (the first compiles)
    optimizer: str = "fused"  # the grid's AdamW: fused | foreach
    sparse_prediction: bool = True  # the grid's (ours): logits only at labelled positions
    attention_mask: str = "none"  # the grid's: none | ones
    steps: int = 3
    warmup: int = 1
    lr: float = 1e-4
    max_grad_norm: float = 1.0  # the trainer's clipping (trainer.max_grad_norm's default), part of the timed step
    peak_tflops: float | None = None  # the device's dense peak for MFU (null: the datasheet table in flops.py)
    levers: LeverSettings | dict = field(default_factory=LeverSettings)
    profile: bool = False  # torch.profiler over the lever block's best row -> <name>_profile.md
    profile_steps: int = 3
    profile_top: int = 25
    device: str = "auto"
    seed: int = 0
    local_window: int = 0  # the Linformer rows' exact local keys (0: the paper's Linformer)
    global_positions: list[int] | None = None  # ... and global tokens, e.g. [0, -1]
    linformer_attn_implementation: str = "sdpa"  # the Linformer rows' kernel: sdpa or flex_attention (no dropout)

    def __post_init__(self):
        if self.k is not None:
            self.ks = [int(self.k)]
        if isinstance(self.levers, dict):
            unknown = set(self.levers) - {f.name for f in fields(LeverSettings)}
            if unknown:
                raise ConfigError(f"throughput.levers: unknown keys {sorted(unknown)}; known: "
                                  f"{[f.name for f in fields(LeverSettings)]}.")
            self.levers = LeverSettings(**self.levers)
        for name, values, allowed in (("precisions", self.precisions, PRECISIONS),
                                      ("models", self.models, TRAIN_MODELS),
                                      ("levers.models", self.levers.models, TRAIN_MODELS),
                                      ("levers.vary", self.levers.vary, LEVERS)):
            bad = [v for v in values if v not in allowed]
            if bad:
                raise ConfigError(f"throughput.{name}: {bad} not among {list(allowed)}.")
        if self.levers.precision not in PRECISIONS:
            raise ConfigError(f"throughput.levers.precision={self.levers.precision!r} is not one of {list(PRECISIONS)}.")
        if self.levers.enabled:
            self._check_lever_block()
        _check_variant(self.grid_variant(False), "throughput")
        self.levers.base_variant()
        self._check_compile_mode()
        if self.tokens_per_step < 1 or self.steps < 1 or self.warmup < 0:
            raise ConfigError("throughput.tokens_per_step and throughput.steps must be >= 1, throughput.warmup >= 0.")
        if self.profile and not self.levers.enabled:
            raise ConfigError("throughput.profile=true profiles the best row of the lever block: set "
                              "throughput.levers.enabled=true.")

    def _check_compile_mode(self) -> None:
        """A compile_mode torch.compile does not know (else a traceback per model and a table of failed rows), or
        one with nothing compiled (else silently ignored), is one ConfigError, as the trainer's."""
        mode = self.compile_mode
        if mode is None:
            return
        if mode not in COMPILE_MODES:
            raise ConfigError(f"throughput.compile_mode={mode!r} is not one of {', '.join(COMPILE_MODES)} (or null).")
        L = self.levers
        if True not in self.compile and not (L.enabled and (L.base_variant().compile or "compile" in L.vary)):
            raise ConfigError(f"throughput.compile_mode={mode}: nothing is compiled (throughput.compile={self.compile}"
                              + (", and the lever block compiles nothing" if L.enabled else "")
                              + "): set throughput.compile=[true] (or [false,true]), or leave compile_mode null.")

    def _check_lever_block(self) -> None:
        """The lever block's own n, k and models, refused as the grid's are (bench.cli._check_grid): a count below
        1, no model, or a Linformer with k >= n (nothing to project) would be measured or written without a word."""
        L = self.levers
        for key in ("n", "k"):
            positive_int(vars(L), key, "throughput.levers")
        if not L.models:
            raise ConfigError("throughput.levers.models=[]: the lever block would time nothing; give at least one.")
        if "linformer" in L.models and L.k >= L.n:
            raise ConfigError(f"throughput.levers.k={L.k} is not below throughput.levers.n={L.n}: the lever block's "
                              "Linformer would have nothing to project; give k < n.")

    def grid_variant(self, compile: bool) -> Variant:
        return Variant(bool(compile), self.optimizer, self.sparse_prediction, self.attention_mask)

    def is_base_shape(self) -> bool:
        return all(getattr(self, key) == value for key, value in BASE_SHAPE.items())

    def check_device(self, device: torch.device) -> None:
        """fp16 needs CUDA: on CPU autocast fp16 with a grad scaler is not what Accelerate runs (it trains fp32)."""
        used = set(self.precisions) | ({self.levers.precision} if self.levers.enabled else set())
        if "fp16" in used and device.type != "cuda":
            raise ConfigError("throughput precision fp16 needs a CUDA device (autocast fp16 with a GradScaler); on "
                              "CPU Accelerate would silently train in fp32: use bf16 or fp32 (throughput.precisions, "
                              "throughput.levers.precision).")


@dataclass(frozen=True)
class Entry:
    """One timed model of a block: a model kind (and k), how it trains, and its lever (lever blocks only)."""

    kind: str
    k: int | None
    variant: Variant
    lever: str | None = None  # None in the grid; 'base' or a lever name in the lever block

    @property
    def key(self) -> str:
        return f"{self.kind}{self.k or ''}/{self.lever or ''}"


@dataclass
class Block:
    section: str  # grid | levers
    n: int
    precision: str
    compile: bool | None  # the grid's compile setting (None in the lever block, whose entries differ)
    entries: list[Entry]


def _model_entries(kinds: list[str], ks: list[int], variant: Variant, lever: str | None = None) -> list[Entry]:
    out = []
    for kind in kinds:
        for k in (ks if kind == "linformer" else [None]):
            out.append(Entry(kind, k, variant, lever))
    return out


def beyond_n(s: ThroughputSettings) -> list[tuple[int, list[int]]]:
    """(n, [k >= n]) for each n of the grid where a Linformer row is left out: a k >= n has nothing to project (as
    the inference grid's cells)."""
    if "linformer" not in s.models:
        return []
    return [(n, ks) for n in s.ns if (ks := [k for k in s.ks if k >= n])]


def plan_blocks(s: ThroughputSettings) -> list[Block]:
    """The grid's blocks in order (by n, then precision, then compile), with the lever block right after the grid
    blocks at its n (so that the models built and compiled there are reused). The Linformer rows at each n are those
    of k < n (beyond_n: the rest)."""
    blocks: list[Block] = []
    for n in s.ns:
        ks = [k for k in s.ks if k < n]
        for precision in s.precisions:
            for c in dict.fromkeys(bool(c) for c in s.compile):
                if c and ((s.compile_ns is not None and n not in s.compile_ns)
                          or (s.compile_precisions is not None and precision not in s.compile_precisions)):
                    continue
                entries = _model_entries(s.models, ks, s.grid_variant(c))
                if entries:  # only Linformer rows, none of k < n at this n
                    blocks.append(Block("grid", n, precision, c, entries))
    if s.levers.enabled:
        L = s.levers
        base = L.base_variant()
        entries = []
        for kind in L.models:
            entries += _model_entries([kind], [L.k], base, "base")
            for lever in L.vary:
                if lever == "sparse_prediction" and kind == "roberta":
                    continue  # HF RoBERTa always computes logits at every position
                entries += _model_entries([kind], [L.k], base.flip(lever), lever)
        lever_block = Block("levers", L.n, L.precision, None, entries)
        after = max((i for i, b in enumerate(blocks) if b.n == L.n), default=len(blocks) - 1)
        blocks.insert(after + 1, lever_block)
    return blocks


def build_mlm(kind: str, n: int, s: ThroughputSettings, k: int | None = None, sparse_prediction: bool = True
              ) -> nn.Module:
    """One of TRAIN_MODELS, in training mode, for sequences of n tokens (k: the Linformer's; default ks[0])."""
    if kind in ("linformer", "full"):
        fields = linformer_fields(s) if kind == "linformer" else {}
        model = build_ours(size_of(s), n, kind, k or s.ks[0], s.sharing, mlm=True, **fields)
        model.config.sparse_prediction = bool(sparse_prediction)
        return with_kernel(model, s.linformer_attn_implementation if kind == "linformer" else "sdpa").train()
    if kind == "roberta":
        return build_roberta(size_of(s), n, "sdpa", mlm=True).train()
    raise ValueError(f"unknown model {kind!r}; expected one of {TRAIN_MODELS}")


def flops_per_token(kind: str, n: int, s: ThroughputSettings, k: int | None = None, sparse_prediction: bool = True,
                    mlm_fraction: float = 0.15) -> float:
    """Training FLOPs per token that the model executes (flops.training_flops_per_token).

    Ours: its own config (Linformer with k), the MLM head on ``mlm_fraction`` of the tokens with sparse logits, on
    every token without. HF RoBERTa: our full-attention count with the head on every token (mlm_fraction = 1.0).
    """
    size = size_of(s) if kind != "roberta" else replace(size_of(s), pad_vocab_to_multiple_of=None)
    config = ours_config(size, n, "full" if kind == "roberta" else kind, k or s.ks[0], s.sharing,
                         **(linformer_fields(s) if kind == "linformer" else {}))
    dense = kind == "roberta" or not sparse_prediction
    return training_flops_per_token(config, n, 1.0 if dense else mlm_fraction)


def mfu(flops: float | None, tokens_per_s: float | None, peak: float | None) -> float | None:
    """Model FLOP utilisation: FLOPs per token x tokens/s / peak FLOP/s (None where any is unknown)."""
    if not flops or not tokens_per_s or not peak:
        return None
    return flops * tokens_per_s / peak


def make_batch(batch: int, n: int, vocab: int, mask_prob: float, device, generator=None):
    """Random ids and labels at ~mask_prob of the positions (at least one), -100 elsewhere."""
    ids = torch.randint(3, vocab, (batch, n), generator=generator)
    targets = torch.rand(batch, n, generator=generator) < mask_prob
    targets[0, 0] = True
    labels = torch.where(targets, ids, torch.full_like(ids, -100))
    return ids.to(device), labels.to(device)


def make_optimizer(model: nn.Module, kind: str, lr: float) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if kind == "fused":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    if kind == "foreach":
        return torch.optim.AdamW(params, lr=lr, foreach=True)
    raise ValueError(f"unknown optimizer {kind!r}; expected one of {OPTIMIZERS}")


def train_step(model, ops: AmpOps, ids, labels, max_grad_norm: float, attention_mask=None) -> torch.Tensor:
    """One MLM step, the trainer's own (``train.step.optimizer_step``): one micro-batch, the forward pass under
    ``ops``' autocast, clipping and the non-finite guard; fp16 through ``ops``' grad scaler, as Accelerate does."""
    def loss_fn(m, batch):
        with ops.autocast():
            return m(**batch).loss

    batch = {"input_ids": ids, "labels": labels}
    if attention_mask is not None:
        batch["attention_mask"] = attention_mask
    loss, _, _ = optimizer_step(ops, model, ops.optimizer, [batch], [1], loss_fn, max_grad_norm)
    return loss


class _Models:
    """The models of one n: built once (seeded) and shared by every block at that n; compiled lazily
    (``torch.compile(dynamic=False)``: a fixed batch shape, as in training on packed blocks)."""

    def __init__(self, s: ThroughputSettings, device: torch.device):
        self.s, self.device, self.n = s, device, None
        self.raw: dict[tuple, nn.Module] = {}
        self.compiled: dict[tuple, nn.Module] = {}

    def get(self, entry: Entry, n: int) -> nn.Module:
        if n != self.n:
            self.clear()
            self.n = n
        sparse = entry.variant.sparse_prediction or entry.kind == "roberta"
        key = (entry.kind, entry.k, sparse)
        if key not in self.raw:
            torch.manual_seed(self.s.seed)
            with self.device:
                self.raw[key] = build_mlm(entry.kind, n, self.s, entry.k, sparse)
        if not entry.variant.compile:
            return self.raw[key]
        if key not in self.compiled:
            raise_recompile_limit(256)
            self.compiled[key] = torch.compile(self.raw[key], dynamic=False, mode=self.s.compile_mode)
        return self.compiled[key]

    def clear(self) -> None:
        had_compiled = bool(self.compiled)
        self.raw.clear()
        self.compiled.clear()
        if had_compiled:
            torch._dynamo.reset()
        free_memory(self.device)


def warmups(e: Entry, s: ThroughputSettings) -> int:
    """Untimed steps before timing: at least one, and ``compile_warmup`` for a compiled model."""
    return max(1, s.warmup, s.compile_warmup if e.variant.compile else 0)


def run_throughput(s: ThroughputSettings, progress: bool = True, log=print) -> tuple[list[dict], dict]:
    device = resolve_device(s.device)
    s.check_device(device)
    blocks = plan_blocks(s)
    total = sum(warmups(e, s) + s.steps for b in blocks for e in b.entries)
    bar = progress_bar(None if progress else False, total=total, desc="training", unit="step")
    models = _Models(s, device)
    rows: list[dict] = []
    load = load_average()
    meta: dict = {"settings": s, "compiles_during_timing": 0, "beyond_n": beyond_n(s)}
    start = time.perf_counter()
    for i, block in enumerate(blocks):
        bar.set_postfix(section=block.section, n=block.n, precision=block.precision, compile=block.compile)
        t0 = time.perf_counter()
        try:
            rows += _run_block(block, s, device, models, bar, log, meta)
        except Preempted as err:  # SIGTERM or Ctrl-C (bench.cli): the blocks measured so far are kept and written
            meta["stop"] = err.with_traceback(None)  # not its frames: they hold the models
            meta["not_measured"] = [_block_words(b) for b in blocks[i:]]
            break
        with bar.external_write_mode():  # cleared from under a terminal's bar, drawn again after it
            log(f"[bench] throughput: {_block_words(block)}: {len(block.entries)} models in "
                f"{time.perf_counter() - t0:.0f} s")
    models.clear()
    bar.close()
    meta["machine"] = machine_description(device, load)  # its load average at the start and now, the end
    meta["elapsed_s"] = time.perf_counter() - start
    meta["target"] = mfu_target(rows, s)
    return rows, meta


def _block_words(block: Block) -> str:
    return f"{block.section} n={block.n} {block.precision}" + ("" if block.compile is None else f" compile={block.compile}")


def _run_block(block: Block, s: ThroughputSettings, device, models: _Models, bar, log, meta: dict) -> list[dict]:
    """Every entry of one (n, precision) block warmed up, then timed in interleaved rounds: one row each."""
    n, precision = block.n, block.precision
    batch = max(1, s.tokens_per_step // n)
    gen = torch.Generator().manual_seed(s.seed)
    ids, labels = make_batch(batch, n, s.vocab, s.mask_prob, device, gen)
    fraction = float((labels != -100).float().mean())
    steps, info = _warm_steps(block, s, device, models, ids, labels, bar, log)
    before = CompileCounts.now()
    t = interleaved_medians(steps, s.steps, device, on_call=lambda: bar.update(1)) if steps else {}
    compiled = CompileCounts.now().since(before).graphs  # nothing should compile while timing
    if compiled > 0:
        meta["compiles_during_timing"] += compiled
        log(f"[bench] throughput: {compiled} graph(s) compiled during timing at n={n} {precision}: "
            "raise throughput.compile_warmup")
    peak = peak_flops(device, precision, s.peak_tflops)
    rows = [_row(block, e, s, t.get(e.key), info[e.key], batch, fraction, peak) for e in block.entries]
    _add_speedups(rows, block, s, t)
    if block.section != "grid" and s.profile:  # the base configuration of ours with the highest MFU there
        based = [(r["mfu"] or 0, e) for r, e in zip(rows, block.entries)
                 if e.lever == "base" and r["step_s"] and e.kind != "roberta"]
        if based:
            best = max(based, key=lambda x: x[0])[1]
            meta["profile"] = {
                "row": rows[block.entries.index(best)], "steps": s.profile_steps,
                "kernels": profile_kernels(steps[best.key], device, s.profile_steps, s.profile_top),
            }
    steps.clear()
    free_memory(device)
    return rows


def _warm_steps(block: Block, s: ThroughputSettings, device, models: _Models, ids, labels, bar, log
                ) -> tuple[dict[str, object], dict[str, dict]]:
    """({entry key: its training step, warmed up}, {entry key: first step's time, step memory, error}). One model's
    failure (out of memory, a compiler error) is recorded as its error and does not lose the block."""
    n, precision = block.n, block.precision
    ones = torch.ones_like(ids)
    steps: dict[str, object] = {}
    info: dict[str, dict] = {}
    for e in block.entries:
        info[e.key] = {"error": None, "first_step_s": None, "step_mem_gib": None}
        try:
            module = models.get(e, n)
            raw = models.raw[(e.kind, e.k, e.variant.sparse_prediction or e.kind == "roberta")]
            ops = AmpOps(device, precision, make_optimizer(raw, e.variant.optimizer, s.lr))
            mask = ones if e.variant.attention_mask == "ones" else None
            fn = (lambda m=module, o=ops, am=mask: train_step(m, o, ids, labels, s.max_grad_norm, attention_mask=am))
            info[e.key]["first_step_s"] = timed(fn, device)  # compiles a compiled model
            bar.update(1)
            for i in range(1, warmups(e, s)):
                if device.type == "cuda" and i == warmups(e, s) - 1:  # the last warm-up step, allocator warm
                    info[e.key]["step_mem_gib"] = peak_memory_bytes(fn, device) / 2**30
                else:
                    fn()
                bar.update(1)
            steps[e.key] = fn
        except Exception as err:
            if (stop := _stop_within(err)) is not None:  # a signal, even one the compiler wrapped: not this model's
                raise stop from None
            if not (is_oom(err) or e.variant.compile):
                raise
            info[e.key]["error"] = "out of memory" if is_oom(err) else first_line(err, named=True)[:200]
            log(f"[bench] throughput: {label(e.kind, e.k, s.sharing)} at n={n} {precision} failed: "
                f"{info[e.key]['error']}")
            if not is_oom(err):
                traceback.print_exc(file=sys.stderr)
            free_memory(device)
    return steps, info


def _stop_within(err: BaseException) -> Preempted | None:
    """The Preempted that `err` is or was raised from (torch.compile wraps what a compilation raised), if any."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, Preempted):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def _row(block: Block, e: Entry, s: ThroughputSettings, step_s: float | None, info: dict, batch: int,
         fraction: float, peak: float | None) -> dict:
    """One entry's row: its step time, tokens per second, FLOPs and MFU, and what it ran as."""
    n = block.n
    sparse = e.variant.sparse_prediction and e.kind != "roberta"
    fpt = flops_per_token(e.kind, n, s, e.k, sparse, fraction)
    tps = batch * n / step_s if step_s else None
    first = info["first_step_s"]
    return {
        "section": block.section, "n": n, "precision": block.precision, "compile": e.variant.compile,
        "lever": e.lever or "", "optimizer": e.variant.optimizer,
        "sparse_prediction": sparse, "attention_mask": e.variant.attention_mask,
        "batch_size": batch, "model": e.kind, "label": label(e.kind, e.k, s.sharing),
        "layers": s.layers, "hidden": s.hidden, "heads": s.heads, "ffn": s.ffn, "vocab": s.vocab,
        "k": min(e.k, n) if e.kind == "linformer" else None,
        "sharing": s.sharing if e.kind == "linformer" else None,
        "step_s": step_s, "tokens_per_s": tps,
        "flops_per_token": fpt, "mlm_fraction": 1.0 if not sparse else fraction,
        "achieved_tflops": fpt * tps / 1e12 if tps else None,
        "peak_tflops": peak / 1e12 if peak else None, "mfu": mfu(fpt, tps, peak),
        "first_step_s": first,
        "compile_s": max(0.0, first - step_s) if e.variant.compile and first and step_s else None,
        "step_mem_gib": info["step_mem_gib"], "error": info["error"],
    }


def _add_speedups(rows: list[dict], block: Block, s: ThroughputSettings, t: dict[str, float]) -> None:
    """The grid's rows against HF RoBERTa; the levers' rows against the same model's base configuration."""
    if block.section == "grid":
        ref = t.get(next((e.key for e in block.entries if e.kind == "roberta"), ""))
        for r in rows:
            r["speedup_vs_roberta"] = ref / r["step_s"] if ref and r["step_s"] else None
        return
    for r, e in zip(rows, block.entries):
        base = t.get(Entry(e.kind, e.k, s.levers.base_variant(), "base").key)
        r["speedup_vs_base"] = base / r["step_s"] if base and r["step_s"] else None


def mfu_target(rows: list[dict], s: ThroughputSettings) -> dict:
    """The MFU target: >= 40% for the base model at n = 512.

    Judged on the best of our rows at n = 512 that train as pretraining does, with sparse MLM logits. Full logits
    execute more FLOPs per token (the vocabulary projection at every position) for fewer tokens/s, so their MFU can be
    higher while the model trains slower; the best of those is reported beside (``best_full_logits``).
    """
    ours = [r for r in rows if r["n"] == 512 and r["model"] != "roberta" and r.get("mfu") is not None]
    best = max((r for r in ours if r["sparse_prediction"]), key=lambda r: r["mfu"], default=None)
    dense = max((r for r in ours if not r["sparse_prediction"]), key=lambda r: r["mfu"], default=None)
    return {"target": TARGET_MFU, "applies": s.is_base_shape(), "best": best, "best_full_logits": dense,
            "met": None if best is None or not s.is_base_shape() else best["mfu"] >= TARGET_MFU}


# Kernel name -> what it does, first match wins (attention before GEMM: flash and cutlass-based attention kernels
# carry GEMM-like names). Inductor's Triton kernels are named triton_<kind>_fused_<ops>: 'tem' is a matmul template,
# 'poi' (pointwise), 'red' and 'per' (reductions) are fused elementwise / normalisation / loss code.
_CATEGORIES = (
    ("attention", ("flash", "fmha", "sdpa", "attention", "attn", "cudnn::fusion")),
    ("GEMM", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul", "triton_tem", "aten::mm", "addmm", "bmm",
              "aten::linear")),
    ("optimizer", ("adam", "multi_tensor", "foreach", "unscale", "non_finite")),
    ("loss (softmax / cross-entropy)", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("layer norm", ("layer_norm", "layernorm")),
    ("indexing / embedding", ("index", "scatter", "gather", "nonzero", "embedding", "masked")),
    ("dropout / random", ("dropout", "bernoulli", "philox", "rand")),
    ("compiled graph (inductor, CPU)", ("compiledfxgraph",)),
    ("memory copy / set", ("memcpy", "memset", "copy_", "fill")),
    ("elementwise / reduction (eager)", ("elementwise", "vectorized", "reduce", "unrolled", "gelu", "aten::mul",
                                         "aten::add", "aten::div", "aten::sub", "aten::sum", "aten::where")),
)
_TRITON_LOSS = ("softmax", "nll_loss", "cross_entropy")


def kernel_category(name: str) -> str:
    low = name.lower()
    if low.startswith("triton_") and not low.startswith("triton_tem"):
        if any(key in low for key in _TRITON_LOSS):
            return "loss (softmax / cross-entropy)"
        return "fused elementwise / norm (Triton)"
    for category, keys in _CATEGORIES:
        if any(key in low for key in keys):
            return category
    return "other"


def _is_annotation(evt) -> bool:
    """A user range on the GPU timeline (the optimizer step, a compiled graph call): it spans kernels counted on
    their own, so counting it too would count their time twice."""
    name = evt.key
    return bool(getattr(evt, "is_user_annotation", False)) or name.startswith(("Optimizer.", "ProfilerStep")) or (
        "##" in name)


def profile_kernels(fn, device: torch.device, steps: int = 3, top: int = 25) -> dict:
    """torch.profiler over ``steps`` calls of ``fn`` (after one more, unprofiled): on CUDA every kernel's
    total time (all kernels for the category shares, the ``top`` longest listed), on CPU every operator's self time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fn()
    synchronize(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Profiler clears events at the end of each cycle"
        with profile(activities=activities) as prof:
            for _ in range(steps):
                fn()
            synchronize(device)
    kernels = []
    for evt in prof.key_averages():
        if cuda:
            if evt.device_type != DeviceType.CUDA or _is_annotation(evt):
                continue
            us = getattr(evt, "self_device_time_total", None)
            if us is None:
                us = getattr(evt, "self_cuda_time_total", 0)
        else:
            if evt.device_type != DeviceType.CPU:
                continue
            us = evt.self_cpu_time_total
        if us > 0:
            kernels.append({"name": evt.key, "category": kernel_category(evt.key), "calls": evt.count,
                            "total_ms": us / 1000 / steps})
    kernels.sort(key=lambda k: -k["total_ms"])
    total = sum(k["total_ms"] for k in kernels)
    categories: dict[str, float] = {}
    for k in kernels:
        k["calls"] = k["calls"] / steps
        k["share"] = k["total_ms"] / total if total else 0.0
        categories[k["category"]] = categories.get(k["category"], 0.0) + k["total_ms"]
    return {"unit": "CUDA kernels" if cuda else "CPU operators (self time)", "per_step_ms": total,
            "top": kernels[:top], "categories": sorted(categories.items(), key=lambda c: -c[1])}


__all__ = [
    "LEVERS",
    "TARGET_MFU",
    "TRAINER_TARGET_MFU",
    "TRAIN_MODELS",
    "Block",
    "Entry",
    "LeverSettings",
    "ThroughputSettings",
    "Variant",
    "build_mlm",
    "flops_per_token",
    "kernel_category",
    "make_batch",
    "make_optimizer",
    "mfu",
    "mfu_target",
    "plan_blocks",
    "profile_kernels",
    "run_throughput",
    "train_step",
]
