"""trainer.compile: the model compiled in place, one graph per mode for pretraining (fixed shapes, no graph break,
no recompile from step to step), the same losses as the eager run, and the counts in metrics.jsonl and the summary."""

import json

import pytest
import torch

from linformer.modeling import LinformerConfig, LinformerModel
from linformer.train.pretrain import prediction_slots, pretrain

from .conftest import compose_pretrain

NO_DROPOUT = ("model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0")


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _losses(run_dir):
    return [r["loss"] for r in _rows(run_dir) if "loss" in r]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_pretraining_captures_one_graph_per_mode_and_matches_eager(tiny_data, tmp_path):
    """Dynamo's graph capture alone (backend eager: the same kernels as eager mode), so the losses must agree to
    float rounding while the counts show what a real compile would build."""
    eager = tmp_path / "eager"
    pretrain(compose_pretrain(tiny_data, *NO_DROPOUT), eager)
    compiled = tmp_path / "compiled"
    summary = pretrain(compose_pretrain(tiny_data, *NO_DROPOUT, "trainer.compile=true",
                                        "trainer.compile_backend=eager"), compiled)
    torch.testing.assert_close(_losses(compiled), _losses(eager), rtol=1e-5, atol=1e-6)
    assert summary["compile"] == {"backend": "eager", "mode": "default", "graphs": 2, "graph_breaks": 0}  # train, eval
    steps = [r for r in _rows(compiled) if "loss" in r]
    assert [r["compiled_graphs"] for r in steps[1:6]] == [steps[0]["compiled_graphs"]] * 5  # no recompiles
    assert all(r["graph_breaks"] == 0 for r in steps)
    assert summary["tokens_per_s_steady"] > 0 and summary["mfu"] > 0


def test_model_forward_has_no_graph_break_with_a_padding_mask():
    """fullgraph=True raises at any graph break: the mask checks must not sync to the host under compile."""
    for extra in ({}, {"exact_short_inputs": True}, {"attention": "full"}):
        torch.manual_seed(0)
        model = LinformerModel(LinformerConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=32, max_seq_len=16,
                                               projected_dim=4, **extra)).eval()
        ids = torch.randint(3, 40, (2, 16))
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[1, 5:] = 0
        expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(input_ids=ids, attention_mask=mask).last_hidden_state, expected)


def test_prediction_slots_cover_the_binomial_draw_in_multiples_of_64():
    assert prediction_slots(128 * 512, 0.15) % 64 == 0
    assert 128 * 512 * 0.15 + 6 * (128 * 512 * 0.15 * 0.85) ** 0.5 <= prediction_slots(128 * 512, 0.15) < 10_500
    assert prediction_slots(10, 0.9) == 10  # never more than every position


def test_a_batch_with_more_targets_than_slots_raises_them_and_says_so(tiny_data, tmp_path, caplog, monkeypatch):
    import linformer.train.pretrain as pretrain_module

    monkeypatch.setattr(pretrain_module, "prediction_slots", lambda positions, p: 1)
    summary = pretrain(compose_pretrain(tiny_data, *NO_DROPOUT, "trainer.compile=true",
                                        "trainer.compile_backend=eager", "trainer.max_steps=3"), tmp_path)
    assert "more than the 1 prediction slots" in caplog.text
    assert summary["final_val_loss"] is not None


def test_a_short_last_validation_batch_with_fewer_positions_than_the_slots_is_evaluated(tiny_data, tmp_path):
    """The slots are sized from the training batch; 9 held-out blocks at batch 8 end with a 1-block batch, fewer
    positions than the slots: it is scored (every position a slot), not refused, and the loss is the eager run's."""
    short = ("trainer.eval_blocks=9", "trainer.max_steps=3")
    eager = pretrain(compose_pretrain(tiny_data, *NO_DROPOUT, *short), tmp_path / "eager")
    compiled = pretrain(compose_pretrain(tiny_data, *NO_DROPOUT, *short, "trainer.compile=true",
                                         "trainer.compile_backend=eager"), tmp_path / "compiled")
    assert compiled["final_val_loss"] == pytest.approx(eager["final_val_loss"], rel=1e-5)


@pytest.mark.slow
def test_inductor_compiled_pretraining_matches_eager_on_cpu(tiny_data, tmp_path):
    """The real compiler (inductor, C++ kernels on CPU): its fused kernels round differently, so the losses of 12
    steps agree to 1e-3 relative, not bitwise."""
    eager = tmp_path / "eager"
    pretrain(compose_pretrain(tiny_data, *NO_DROPOUT), eager)
    compiled = tmp_path / "compiled"
    summary = pretrain(compose_pretrain(tiny_data, *NO_DROPOUT, "trainer.compile=true"), compiled)
    torch.testing.assert_close(_losses(compiled), _losses(eager), rtol=1e-3, atol=1e-4)
    assert summary["compile"]["graph_breaks"] == 0 and summary["compile"]["graphs"] == 2


def test_prefetched_batches_give_the_same_run_bitwise(tiny_data, tmp_path, monkeypatch):
    """On a GPU the next step's batches are built in a background thread; the data is a function of the step, so
    the losses, evaluations and weights are the same as building them in turn (forced on here, on the CPU)."""
    from linformer.train import trainer

    plain = tmp_path / "plain"
    pretrain(compose_pretrain(tiny_data), plain)
    monkeypatch.setattr(trainer, "prefetches", lambda device: True)
    threads = []
    build = trainer.Trainer._host_batches

    def recording(self, step):
        import threading

        threads.append(threading.current_thread() is threading.main_thread())
        return build(self, step)

    monkeypatch.setattr(trainer.Trainer, "_host_batches", recording)
    prefetched = tmp_path / "prefetched"
    pretrain(compose_pretrain(tiny_data), prefetched)
    assert threads[0] and not any(threads[1:])  # the first step's batches in turn, every later one prefetched
    for key in ("loss", "grad_norm", "val_loss"):
        assert [r.get(key) for r in _rows(prefetched)] == [r.get(key) for r in _rows(plain)], key
    from safetensors.torch import load_file

    a, b = load_file(plain / "model" / "model.safetensors"), load_file(prefetched / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
