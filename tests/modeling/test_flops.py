"""The analytic FLOP count against torch's FlopCounterMode on the real model, forward and backward."""

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers import initialization as init

from linformer import LinformerForMaskedLM
from linformer.modeling.attention import PoolProjection, Projection, register_projection
from linformer.modeling.flops import (
    UncountedProjection,
    flop_ratio,
    forward_flops_per_token,
    layer_flops,
    training_flops_per_token,
)

from .conftest import tiny_config

B = 2
# Every way attention is computed: full, each sharing mode, per-layer k, window-masked, conv and pooling projections.
MODES = [
    dict(attention="full"),
    dict(sharing="headwise", projected_dim=[4, 8]),
    dict(sharing="kv"),
    dict(sharing="layerwise"),
    dict(sharing="none"),
    dict(sharing="headwise", mask_empty_windows=True),  # T = 12 of n = 16 reach 3 of k = 4 columns
    dict(projection="conv", sharing="headwise"),
    dict(projection="mean_pool"),
    dict(sharing="kv", length_policy="resample"),
    dict(sharing="none", length_policy="resample"),
    dict(sharing="headwise", projected_dim=12, exact_short_inputs=True),  # T = 12: exact; T = 16: projected
    dict(sharing="kv", local_window=4, global_positions=[0, -1]),
    # a window wider than T = 2 and 12 (blocks of 7 queries, 21 band keys; T = 16 is not whole blocks either), and
    # global keys alone (blocks of 1 query, a band of 1 key)
    dict(sharing="headwise", local_window=14, global_positions=[0, -1]),
    dict(sharing="layerwise", global_positions=[0]),
    dict(sharing="kv", local_window=4, global_positions=[0, -1], length_policy="resample", landmark_pooling=True),
]


# T < n = 16: E's first T rows, pooling windows padded to a multiple; T = 2 < k = 4 (and < 8, 12): the T x k slice
# still gives k columns
@pytest.mark.parametrize("T", [16, 12, 2])
@pytest.mark.parametrize("overrides", MODES, ids=lambda o: "-".join(map(str, o.values())))
def test_count_matches_flop_counter_forward_and_backward(overrides, T):
    """Tolerance 1e-9 (exact up to float rounding): both sides count matmul-type ops only, 2 FLOPs per
    multiply-add; what neither counts (bias adds, LayerNorm, softmax, GELU, embedding lookups) is left out of both.
    SDPA runs on the MATH backend, decomposed into matmuls the counter sees (the fused CPU kernel is not counted).
    The backward is 2x the forward: every matmul here has both operands requiring grad (the first layer's input
    is the embedding output), so each gets two same-size gradient products."""
    model = LinformerForMaskedLM(tiny_config(sparse_prediction=True, **overrides))
    ids = torch.randint(4, 64, (B, T))
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = ids[:, ::4]
    fraction = (labels != -100).float().mean().item()  # a quarter of the tokens, half at T = 2
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss = model(ids, labels=labels).loss
        forward = counter.get_total_flops()
        loss.backward()
        total = counter.get_total_flops()
    assert forward == pytest.approx(B * T * forward_flops_per_token(model.config, T, fraction), rel=1e-9)
    assert total == pytest.approx(B * T * training_flops_per_token(model.config, T, fraction), rel=1e-9)


class WindowMix(Projection):
    """A projection of one's own that multiplies: each window of n/k keys mixed by a learned window x window matrix,
    then mean-pooled. Taken for parameter-free pooling, its products would count as none."""

    def __init__(self, n: int, k: int):
        super().__init__()
        self.pool = PoolProjection(n, k, "mean")
        self.mix = nn.Parameter(torch.empty(n // k, n // k))
        self.initialise()

    def reset_parameters(self) -> None:
        init.normal_(self.mix)

    def forward(self, x, mask):
        B, H, T, d = x.shape
        w = self.mix.shape[0]
        x = nn.functional.pad(x, (0, 0, 0, (-T) % w)).view(B, H, -1, w, d)
        return self.pool((self.mix @ x).view(B, H, -1, d)[:, :, :T], mask)


class DeclaredWindowMix(WindowMix):
    def projected_flops(self, T: int, head_dim: int, num_heads: int) -> tuple[int, float]:
        w = self.mix.shape[0]
        windows = -(-T // w)
        return windows, float(2 * windows * w * w * head_dim * num_heads)


@pytest.mark.parametrize("T", [16, 12])
def test_a_registered_projection_is_counted_by_its_own_declaration(registries, T):
    register_projection("window_mix", lambda config, k, heads: DeclaredWindowMix(config.max_seq_len, k))
    model = LinformerForMaskedLM(tiny_config(projection="window_mix", sharing="headwise"))
    ids = torch.randint(4, 64, (B, T))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(ids)
    assert counter.get_total_flops() == pytest.approx(B * T * forward_flops_per_token(model.config, T, 1.0), rel=1e-9)


def test_a_registered_projection_declaring_no_flops_is_refused_by_name(registries):
    register_projection("window_mix", lambda config, k, heads: WindowMix(config.max_seq_len, k))
    config = tiny_config(projection="window_mix")
    with pytest.raises(UncountedProjection, match=r"projection='window_mix' \(WindowMix\) declares no FLOPs: define "
                                                   r"projected_flops\(T, head_dim, num_heads\) on WindowMix"):
        forward_flops_per_token(config, 16)


def test_layer_flops_hand_computed():
    # n=8, D=4, ffn=16, k=2. Full: q+out 2*2*8*16=512, k+v 512, scores+values 2*2*64*4=1024, FFN 2*2*8*4*16=2048.
    assert layer_flops(8, 4, 16, "full") == 512 + 512 + 1024 + 2048
    # Linformer, layerwise: E^T X once 2*8*2*4=128, K/V on k rows 2*2*2*16=128, scores+values 2*2*8*2*4=256.
    assert layer_flops(8, 4, 16, "linformer", 2, "layerwise") == 512 + 128 + 128 + 256 + 2048
    # headwise projects twice (E and F); none projects K and V per head after computing them on n rows.
    assert layer_flops(8, 4, 16, "linformer", 2, "headwise") == 512 + 256 + 128 + 256 + 2048
    assert layer_flops(8, 4, 16, "linformer", 2, "none") == 512 + 512 + 256 + 256 + 2048
    assert flop_ratio(8, 2, 4, 16) == pytest.approx(4096 / 3072)


def test_flop_ratio_favours_linformer_only_when_k_is_small():
    assert flop_ratio(4096, 256, 768, 3072) > 1.5
    assert flop_ratio(512, 512, 768, 3072) < 1.0  # k = n: the projections only add work


def test_peak_flops_reads_the_whole_model_from_the_device_name(monkeypatch):
    from linformer.modeling import flops

    # torch.cuda.get_device_name strings -> the dense bf16 peak (None: not in the table, so no MFU). A model's name
    # inside another's (L4 in L40S, A10 in A10G, H200 in GH200) must not borrow its peak.
    names = {"NVIDIA H100 80GB HBM3": 989e12, "NVIDIA H100 PCIe": 756e12, "NVIDIA H100 NVL": 835e12,
             "NVIDIA H200": 989e12, "NVIDIA H200 NVL": 835e12, "NVIDIA A100-SXM4-80GB": 312e12,
             "NVIDIA A100-PCIE-40GB": 312e12, "Tesla V100-SXM2-16GB": 125e12, "NVIDIA L4": 121e12,
             "NVIDIA L40S": 362.05e12, "NVIDIA L40": 181.05e12, "NVIDIA A10G": None, "NVIDIA A10": 125e12,
             "Tesla T4": 65e12, "NVIDIA GeForce RTX 4090": None, "NVIDIA GH200 480GB": None}
    for name, bf16 in names.items():
        monkeypatch.setattr(flops.torch.cuda, "get_device_name", lambda device=None, name=name: name)
        assert flops.peak_flops(flops.torch.device("cuda"), "bf16") == bf16, name
    for name, fp32 in {"NVIDIA H100 PCIe": 51e12, "NVIDIA L40S": 91.6e12, "NVIDIA L4": 30.3e12}.items():
        monkeypatch.setattr(flops.torch.cuda, "get_device_name", lambda device=None, name=name: name)
        assert flops.peak_flops(flops.torch.device("cuda"), "no") == fp32, name
