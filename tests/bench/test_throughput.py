"""Training throughput and MFU: the FLOP and MFU arithmetic, the block plan, lever rows and the profile on a
tiny CPU model, fp16 refused on CPU, and the GPU config. No timed asserts."""

import csv
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from linformer.bench import ThroughputSettings, run_benchmark
from linformer.bench.cli import settings_from_config
from linformer.bench.report import throughput_markdown
from linformer.bench.throughput import (
    TARGET_MFU,
    beyond_n,
    flops_per_token,
    kernel_category,
    mfu,
    mfu_target,
    plan_blocks,
    run_throughput,
)
from linformer.configs import compose
from linformer.errors import ConfigError, LinformerError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
BASE = {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 50265}


def tiny(**kw) -> ThroughputSettings:
    base = {"ns": [64], "tokens_per_step": 128, "layers": 1, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 64,
            "ks": [16], "steps": 1, "warmup": 1, "precisions": ["fp32"], "device": "cpu"}
    base.update(kw)
    return ThroughputSettings(**base)


def test_flops_per_token_of_the_base_model_by_hand():
    s = ThroughputSettings(**BASE)
    D, F, V, n, L = 768, 3072, 50265, 512, 12
    layer = 8 * D * D + 4 * D * F + 4 * n * D  # Q, K, V, O projections; FFN; scores and P V
    head = 2 * D * D + 2 * D * V  # the MLM head's dense and decoder
    # HF RoBERTa: full attention, the head on every token; ours: the head on the labelled fraction only
    assert flops_per_token("roberta", n, s) == pytest.approx(3 * (L * layer + head))
    assert flops_per_token("full", n, s, mlm_fraction=0.15) == pytest.approx(3 * (L * layer + 0.15 * head))
    assert flops_per_token("full", n, s, sparse_prediction=False, mlm_fraction=0.15) == pytest.approx(
        flops_per_token("roberta", n, s))  # full logits: the same count as HF RoBERTa
    lin = flops_per_token("linformer", n, s, k=128, mlm_fraction=0.15)
    # layerwise sharing: E^T X once (2 n k D), K and V on k rows (2 * 2 k D^2), scores and P V against k keys
    lin_layer = 4 * D * D + 4 * D * F + (2 * n * 128 * D + 4 * 128 * D * D) / n + 4 * 128 * D
    assert lin == pytest.approx(3 * (L * lin_layer + 0.15 * head))
    assert lin < flops_per_token("full", n, s, mlm_fraction=0.15)
    assert 6.0e8 < flops_per_token("full", n, s, mlm_fraction=0.15) < 6.1e8  # ~6 x 100M params a token


def test_mfu_is_flops_times_tokens_over_peak():
    assert mfu(6e8, 5e5, 1e15) == pytest.approx(0.3)
    assert mfu(6e8, 5e5, None) is None and mfu(6e8, None, 1e15) is None


def test_k_alias_and_validation():
    assert tiny(k=8).ks == [8]
    with pytest.raises(ConfigError, match="levers"):
        tiny(levers={"enabled": True, "bogus": 1})
    with pytest.raises(ConfigError, match="nope"):
        tiny(levers={"vary": ["nope"]})
    with pytest.raises(ConfigError, match="base"):
        tiny(levers={"base": {"compiled": True}})
    with pytest.raises(ConfigError, match="optimizer"):
        tiny(optimizer="sgd")
    with pytest.raises(ConfigError, match="levers.enabled"):
        tiny(profile=True)
    with pytest.raises(ConfigError, match="precisions"):
        tiny(precisions=["fp8"])


@pytest.mark.parametrize("levers, message", [
    ({"n": 64, "k": 64}, r"^throughput.levers.k=64 is not below throughput.levers.n=64: .*nothing to project"),
    ({"n": 0}, r"^throughput.levers.n=0 must be a whole number of at least 1\.$"),
    ({"k": -16}, r"^throughput.levers.k=-16 must be a whole number of at least 1\.$"),
    ({"models": []}, r"^throughput.levers.models=\[\]: the lever block would time nothing"),
])
def test_the_lever_block_s_n_k_and_models_are_checked_as_the_grid_s(levers, message):
    """The lever block measured a Linformer with k >= n (nothing projected) or k = 0, and wrote an empty block for no
    models, without a word; n = 0 was a traceback."""
    with pytest.raises(ConfigError, match=message):
        tiny(levers={"enabled": True, "n": 64, "k": 16, **levers})
    tiny(levers={"n": 64, "k": 64})  # a disabled block is not read
    tiny(levers={"enabled": True, "n": 64, "k": 64, "models": ["full"]})  # no Linformer: no k to project


def test_fp16_is_refused_on_cpu():
    with pytest.raises(ConfigError) as err:
        run_throughput(tiny(precisions=["fp16"]), progress=False, log=lambda *_: None)
    assert "fp16 needs a CUDA device" in str(err.value) and isinstance(err.value, LinformerError)  # `error:` line
    with pytest.raises(ConfigError, match="fp16"):
        run_throughput(tiny(levers={"enabled": True, "precision": "fp16", "base": {"compile": False}}),
                       progress=False, log=lambda *_: None)


def test_plan_compiles_only_where_asked_and_levers_vary_one_at_a_time():
    s = ThroughputSettings(ns=[512, 4096], ks=[128, 256], models=["full", "linformer", "roberta"],
                           precisions=["bf16", "fp16"], compile=[False, True], compile_ns=[512],
                           compile_precisions=["bf16"], levers={"enabled": True})
    blocks = plan_blocks(s)
    assert [(b.section, b.n, b.precision, b.compile) for b in blocks] == [
        ("grid", 512, "bf16", False), ("grid", 512, "bf16", True), ("grid", 512, "fp16", False),
        ("levers", 512, "bf16", None),  # right after the n = 512 grid, whose models it reuses
        ("grid", 4096, "bf16", False), ("grid", 4096, "fp16", False)]
    assert all(len(b.entries) == 4 for b in blocks if b.section == "grid")  # full, k = 128, k = 256, RoBERTa
    levers = blocks[3].entries
    assert [(e.kind, e.k, e.lever) for e in levers] == [
        (kind, k, lever) for kind, k in (("full", None), ("linformer", 128))
        for lever in ("base", "compile", "optimizer", "sparse_prediction", "attention_mask")]
    base = levers[0].variant
    for e in levers[1:5]:  # each variant differs from the base in exactly its own lever
        changed = [f for f in ("compile", "optimizer", "sparse_prediction", "attention_mask")
                   if getattr(e.variant, f) != getattr(base, f)]
        assert changed == [e.lever]


def test_the_grid_times_the_linformer_only_where_k_is_below_n_and_says_where_not(tmp_path):
    """As the inference grid's cells: a k >= n has nothing to project, so no Linformer row of that k at that n."""
    s = tiny(ns=[16, 32], ks=[16], models=["full", "linformer"])
    assert beyond_n(s) == [(16, [16])] and beyond_n(tiny(ns=[16], ks=[16], models=["full"])) == []
    assert [(b.n, [(e.kind, e.k) for e in b.entries]) for b in plan_blocks(s)] == [
        (16, [("full", None)]), (32, [("full", None), ("linformer", 16)])]
    assert [b.n for b in plan_blocks(tiny(ns=[16, 32], ks=[16], models=["linformer"]))] == [32]  # no empty block
    run_benchmark(tmp_path, "t3", None, s, "thr", progress=False, log=lambda *_: None)
    rows = list(csv.DictReader((tmp_path / "thr.csv").read_text().splitlines()))
    assert [(r["n"], r["model"], r["k"]) for r in rows] == [("16", "full", ""), ("32", "full", ""),
                                                            ("32", "linformer", "16")]
    assert ("Not measured: the Linformer at n=16, k=16 (k >= n leaves nothing to project)."
            in (tmp_path / "thr.md").read_text())


def test_lever_rows_mfu_and_profile_on_a_tiny_cpu_model(tmp_path):
    s = tiny(ks=[16, 32], models=["full", "linformer", "roberta"], precisions=["bf16"], profile=True, profile_top=5,
             levers={"enabled": True, "n": 64, "k": 16, "models": ["full", "linformer"], "base": {"compile": False},
                     "vary": ["optimizer", "sparse_prediction", "attention_mask"]})
    written = run_benchmark(tmp_path, "t3", None, s, "thr", command="cmd y", progress=False, log=lambda *_: None)
    assert {p.name for p in written.values()} == {"thr.csv", "thr.md", "thr_profile.md"}
    rows = list(csv.DictReader((tmp_path / "thr.csv").read_text().splitlines()))
    grid = [r for r in rows if r["section"] == "grid"]
    assert [(r["model"], r["k"]) for r in grid] == [("full", ""), ("linformer", "16"), ("linformer", "32"),
                                                     ("roberta", "")]
    levers = [r for r in rows if r["section"] == "levers"]
    assert [(r["model"], r["lever"]) for r in levers] == [
        (m, lever) for m in ("full", "linformer") for lever in ("base", "optimizer", "sparse_prediction",
                                                                 "attention_mask")]
    for r in rows:
        assert float(r["tokens_per_s"]) > 0 and not r["error"]
        assert float(r["mfu"]) == pytest.approx(float(r["flops_per_token"]) * float(r["tokens_per_s"])
                                                / (float(r["peak_tflops"]) * 1e12), rel=1e-4)
    by = {(r["model"], r["lever"]): r for r in levers}
    assert by[("full", "optimizer")]["optimizer"] == "foreach" and by[("full", "base")]["optimizer"] == "fused"
    assert by[("full", "attention_mask")]["attention_mask"] == "ones"
    dense, sparse = by[("full", "sparse_prediction")], by[("full", "base")]
    assert dense["sparse_prediction"] == "False" and float(dense["mlm_fraction"]) == 1.0
    assert float(dense["flops_per_token"]) > float(sparse["flops_per_token"])
    assert float(sparse["speedup_vs_base"]) == pytest.approx(1.0)
    assert float(grid[3]["speedup_vs_roberta"]) == pytest.approx(1.0)
    md = (tmp_path / "thr.md").read_text()
    assert "## Levers (n = 64, bf16)" in md and "| ours, full attention | optimizer | foreach AdamW |" in md
    assert "not assessed" not in md and "No row of ours" in md  # no n = 512 row in this run
    assert "cmd y" in md and "thr_profile.md" in md
    profile = (tmp_path / "thr_profile.md").read_text()
    assert "## By category" in profile and "| 1 | `" in profile and "| 6 | `" not in profile  # top 5


def test_target_line_is_computed_from_the_rows():
    s = ThroughputSettings(**BASE)

    def row(model, mfu_, sparse=True, n=512):
        return {"section": "grid", "n": n, "precision": "bf16", "compile": True, "optimizer": "fused",
                "sparse_prediction": sparse, "attention_mask": "none", "batch_size": 128, "model": model,
                "label": model, "step_s": 0.1, "tokens_per_s": 6e5, "mfu": mfu_, "peak_tflops": 989.0}

    rows = [row("full", 0.35), row("linformer", 0.41), row("roberta", 0.5), row("full", 0.6, n=4096),
            row("full", 0.45, sparse=False)]
    target = mfu_target(rows, s)
    assert target["best"] is rows[1] and target["met"] is True and target["best_full_logits"] is rows[4]
    meta = {"settings": s, "machine": {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3"}, "target": target}
    md = throughput_markdown(rows, meta, "cmd")
    assert f"at least {TARGET_MFU:.0%} MFU" in md and "41.0% MFU: **met**" in md and "`cuda` (**NVIDIA H100 80GB HBM3**)" in md
    # the step named as timed: the trainer's, its clipping and the grid's settings filled in
    assert "Step: the trainer's (forward, backward, gradients clipped to norm 1.0," in md
    assert "Grid: fused AdamW, sparse MLM logits for ours, attention_mask=None" in md and "{s." not in md
    rows[1]["mfu"] = 0.39
    assert mfu_target(rows, s)["met"] is False
    assert mfu_target(rows, ThroughputSettings())["met"] is None  # not the base shape: not assessed


def test_kernel_categories():
    assert kernel_category("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN") == "GEMM"
    assert kernel_category("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26") == "attention"
    assert kernel_category("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>") == "attention"
    assert kernel_category("fmha_cutlassF_bf16_aligned_64x64_rf_sm80") == "attention"
    assert kernel_category("triton_per_fused_add_native_dropout_native_layer_norm_8") == (
        "fused elementwise / norm (Triton)")
    assert kernel_category("triton_red_fused__log_softmax_addmm_prepare_softmax_online_view_13") == (
        "loss (softmax / cross-entropy)")
    assert kernel_category("triton_tem_fused_mm_0") == "GEMM"
    assert kernel_category("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>") == "optimizer"


def test_gpu_config_composes():
    inf, thr = settings_from_config(compose("benchmark_throughput_gpu"))
    assert inf is None and thr.device == "cuda" and thr.is_base_shape() and thr.ks == [128] and thr.ns == [512]
    assert thr.precisions == ["bf16"] and thr.compile == [True] and thr.pad_vocab_to_multiple_of == 64
    assert thr.levers.enabled and thr.levers.vary == [] and thr.profile  # the profiled base row, no lever rows
    assert thr.tokens_per_step // 512 == 128
    entries = [(b.section, e.kind) for b in plan_blocks(thr) for e in b.entries]
    assert entries == [("grid", "full"), ("grid", "linformer"), ("grid", "roberta"), ("levers", "full")]
    _, cpu = settings_from_config(compose("benchmark", ["device=cpu"]))  # the CPU default keeps its grid
    assert cpu.ks == [256] and cpu.compile == [False] and not cpu.levers.enabled and not cpu.profile


@pytest.mark.slow
def test_compiled_rows_on_cpu(tmp_path):
    """torch.compile on CPU (inductor's C++ backend): minutes, hence slow."""
    rows, meta = run_throughput(tiny(compile=[False, True], compile_warmup=2), progress=False, log=lambda *_: None)
    compiled = [r for r in rows if r["compile"]]
    assert len(compiled) == 3 and all(r["compile_s"] is not None and r["tokens_per_s"] > 0 for r in compiled)
    assert meta["compiles_during_timing"] == 0
    torch._dynamo.reset()


def test_padded_vocabulary_counts_for_ours_and_not_for_hf_roberta():
    _, thr = settings_from_config(compose("benchmark_throughput_gpu"))
    plain = replace(thr, pad_vocab_to_multiple_of=None)
    head = 3 * 2 * 768 * (50304 - 50265)  # training FLOPs of the 39 padding rows, per predicted token
    assert flops_per_token("full", 512, thr) - flops_per_token("full", 512, plain) == pytest.approx(0.15 * head)
    assert flops_per_token("roberta", 512, thr) == flops_per_token("roberta", 512, plain)


def test_the_header_says_the_tokens_each_step_really_held():
    """batch = max(1, tokens_per_step // n): an n above tokens_per_step still runs one whole sequence."""
    from linformer.bench.report import _tokens_per_step

    assert _tokens_per_step(ThroughputSettings(ns=[32, 64], tokens_per_step=64)) == \
        "64 tokens per step (batch = tokens // n)"
    assert _tokens_per_step(ThroughputSettings(ns=[64, 128], tokens_per_step=64)) == \
        "tokens per step: 64 at n = 64, 128 at n = 128 (batch = max(1, 64 // n))"


def test_the_bar_is_drawn_on_a_terminal_and_not_into_a_log_file(capsys, monkeypatch):
    """progress=true drew the benchmark's bars wherever stderr went: in a log file (nohup, CI, `> bench.log 2>&1`)
    each redraw's carriage returns ran into one line. The bar follows every command's rule
    (``progress.progress_bar``): on a terminal only, its `[bench]` lines saying the same in a log file."""
    from linformer import progress

    run_throughput(tiny(), progress=True, log=lambda *_: None)
    assert "training: 100%" not in capsys.readouterr().err  # stderr captured: not a terminal
    monkeypatch.setattr(progress, "progress_to_log_file", lambda: False)  # a terminal
    run_throughput(tiny(), progress=True, log=lambda *_: None)
    assert "training: 100%" in capsys.readouterr().err
