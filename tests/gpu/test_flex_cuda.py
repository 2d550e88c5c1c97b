"""attn_implementation="flex_attention" on CUDA: the compiled kernel (forward and backward) against the blocked
local/global path, on a padded batch with overlap masking and with lowered counts."""

import pytest
import torch

from linformer.modeling import LinformerConfig, LinformerModel, flex

from ..modeling.test_flex import SMALL

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not flex.available(), reason="this torch has no flex_attention")]


@pytest.mark.parametrize("rule", ["mask", "reduce"])
def test_compiled_flex_on_the_gpu_equals_the_blocked_path_and_trains(rule):
    torch.manual_seed(0)
    config = LinformerConfig(**{**SMALL, "max_seq_len": 1024, "projected_dim": 64}, local_window=128,
                             global_positions=[0, -1], overlap_columns=rule, length_policy="resample")
    model = LinformerModel(config).cuda()
    ids = torch.randint(3, 50, (2, 1024), device="cuda")
    mask = torch.ones_like(ids)
    mask[1, 700:] = 0
    outs = []
    for impl in ("sdpa", "flex_attention"):
        model.set_attn_implementation(impl)
        model.zero_grad()
        out = model(ids, attention_mask=mask).last_hidden_state
        out[mask.bool()].square().mean().backward()
        outs.append((out[mask.bool()].detach(), model.embeddings.word_embeddings.weight.grad.clone()))
    torch.testing.assert_close(outs[1][0], outs[0][0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(outs[1][1], outs[0][1], atol=1e-4, rtol=1e-3)
