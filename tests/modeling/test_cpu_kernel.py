"""The fused CPU kernel of the local/global attention (linformer.modeling.cpu_kernel): the op-by-op path's numbers
to the bit, used only where it applies (CPU inference, no dropout), and chosen by LINFORMER_CPU_KERNEL."""

import logging
import shutil

import pytest
import torch

from linformer.errors import ConfigError
from linformer.modeling import LinformerConfig, LinformerModel, cpu_kernel
from linformer.modeling import local_global as lg

needs_cpu_kernel = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                      reason="the fused CPU kernel is built with a C++ compiler and ninja")


def _case(lengths: list[int], H: int, d: int, c: int, dtype: torch.dtype, per_head: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, T = len(lengths), max(lengths)
    q, k, v = (torch.randn(B, H, T, d, generator=g).to(dtype) for _ in range(3))
    real = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None])[:, None, :, None]
    k, v = k * real, v * real
    projected = None
    if c:
        log_count = torch.rand(B, H, c, generator=g) if per_head else torch.rand(1, 1, c, generator=g)
        pmask = torch.arange(c)[None, :] < torch.tensor([c, c - 1, 2][:B])[:, None]
        projected = (torch.randn(B, H, c, d, generator=g).to(dtype), torch.randn(B, H, c, d, generator=g).to(dtype),
                     pmask, log_count)
    return q, k, v, torch.tensor(lengths), projected


def _both(monkeypatch, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    outs = []
    for kernel in ("ops", "fused"):
        monkeypatch.setenv(cpu_kernel.KERNEL_ENV, kernel)
        with torch.no_grad():
            outs.append(lg.local_global_attention(*args, **kwargs))
    return outs[0], outs[1]


@needs_cpu_kernel
@pytest.mark.parametrize("chunk_elements", [1 << 18, 200])  # several blocks per chunk, or one
@pytest.mark.parametrize("lengths, radius, positions, c, per_head, dtype", [
    ([40, 33, 5], 4, [0, -1], 5, True, torch.float32),      # padded batch, log counts per head, masked columns
    ([40, 33, 5], 3, [], 0, False, torch.float32),          # the band alone: no keys every query sees
    ([37], 0, [0, 2, -1], 6, False, torch.float32),         # no window: global and projected keys only
    ([64, 50], 8, [0, -1], 16, False, torch.bfloat16),      # bf16 products, float32 softmax
])
def test_the_fused_kernel_gives_the_op_by_op_numbers_to_the_bit(lengths, radius, positions, c, per_head, dtype,
                                                                 chunk_elements, monkeypatch):
    monkeypatch.setattr(lg, "CHUNK_ELEMENTS", chunk_elements)
    q, k, v, L, projected = _case(lengths, H=3, d=8, c=c, dtype=dtype, per_head=per_head)
    ops, fused = _both(monkeypatch, q, k, v, L, radius, positions, projected)
    assert torch.equal(ops, fused)


@needs_cpu_kernel
def test_a_model_gives_the_same_hidden_states_with_either_kernel(monkeypatch):
    config = LinformerConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_seq_len=128, projected_dim=16, local_window=16,
                             global_positions=[0, -1], overlap_columns="mask", length_policy="resample")
    model = LinformerModel(config).eval()
    ids = torch.randint(3, 50, (2, 128))
    mask = torch.ones_like(ids)
    mask[1, 90:] = 0
    outs = []
    for kernel in ("ops", "fused"):
        monkeypatch.setenv(cpu_kernel.KERNEL_ENV, kernel)
        with torch.inference_mode():
            outs.append(model(ids, attention_mask=mask).last_hidden_state)
    assert torch.equal(*outs)


def test_training_dropout_and_gradients_keep_the_op_by_op_path(monkeypatch):
    """The fused kernel has no backward and no dropout: where either is needed it is never asked for."""
    def refuse():
        raise AssertionError("the fused kernel was asked for")

    monkeypatch.setattr(cpu_kernel, "fused_softmax", refuse)
    q, k, v, L, projected = _case([40, 33], H=2, d=8, c=5, dtype=torch.float32, per_head=False)
    q.requires_grad_(True)
    out = lg.local_global_attention(q, k, v, L, 4, [0, -1], projected)
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    with torch.no_grad():
        lg.local_global_attention(q, k, v, L, 4, [0, -1], projected, dropout_p=0.1)


def test_inference_asks_for_the_fused_kernel(monkeypatch):
    asked = []
    monkeypatch.setattr(cpu_kernel, "fused_softmax", lambda: asked.append(1))  # None: then the op-by-op path
    q, k, v, L, projected = _case([40], H=2, d=8, c=5, dtype=torch.float32, per_head=False)
    with torch.no_grad():
        lg.local_global_attention(q, k, v, L, 4, [0, -1], projected)
    assert asked == [1]


def test_the_choice_is_read_from_the_environment(monkeypatch, caplog):
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "gpu")
    with pytest.raises(ConfigError, match="LINFORMER_CPU_KERNEL='gpu' is not one of auto, fused, ops"):
        cpu_kernel.fused_softmax()

    def no_build():
        raise AssertionError("built although ops was chosen")

    monkeypatch.setattr(cpu_kernel, "_built", no_build)
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "ops")
    assert cpu_kernel.fused_softmax() is None

    monkeypatch.setattr(cpu_kernel, "_built", lambda: (None, "CalledProcessError: no compiler (test)"))
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "fused")
    with pytest.raises(ConfigError, match="LINFORMER_CPU_KERNEL=fused but .* did not build: .*no compiler"):
        cpu_kernel.fused_softmax()
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "auto")
    with caplog.at_level(logging.WARNING, logger=cpu_kernel.__name__):
        assert cpu_kernel.fused_softmax() is None
    assert "did not build (CalledProcessError: no compiler (test))" in caplog.text
    assert "LINFORMER_CPU_KERNEL=ops" in caplog.text
