"""The training core in-process: gradient accumulation weighs every target of the step equally, a step's tokens are
every rank's, and the best step is chosen by its rule."""

import copy
import math

import pytest
import torch
from accelerate import Accelerator

from linformer.modeling import LinformerConfig, LinformerForMaskedLM
from linformer.runconfig import TrainerSettings
from linformer.train.task import TrainingTask
from linformer.train.trainer import Trainer


class _FixedBatches(TrainingTask):
    def __init__(self, batches):
        self.batches = batches

    def micro_batch(self, g):
        return self.batches[g % len(self.batches)]


def test_accumulated_micro_batches_weigh_every_target_as_one_batch_does():
    """Two micro-batches with 2 and 10 MLM targets: the step's gradient must be that of one batch holding both (a
    mean over all 12 targets). A mean per micro-batch, or a division by the accumulation count, weighs the 2
    targets 5x too much; only the multi-process DDP test caught that before."""
    torch.manual_seed(0)
    model = LinformerForMaskedLM(LinformerConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_seq_len=8, projected_dim=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    ids = torch.randint(3, 40, (4, 8))
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[1, 2] = ids[0, 1], ids[1, 2]          # 2 targets in the first micro-batch
    labels[2:, 1:6] = ids[2:, 1:6]                             # 10 in the second
    reference = copy.deepcopy(model)
    reference(input_ids=ids, labels=labels).loss.backward()

    batches = [{"input_ids": ids[:2], "labels": labels[:2]}, {"input_ids": ids[2:], "labels": labels[2:]}]
    settings = TrainerSettings(batch_size=2, grad_accum=2, lr=1.0, max_grad_norm=math.inf, mixed_precision="no")
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # one step moves each weight by exactly -grad
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    trainer = Trainer(Accelerator(cpu=True), model, optimizer, scheduler, _FixedBatches(batches), settings,
                      record=None, spec=None, config={})
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer._train_step(0)
    for name, p in reference.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(before[name] - dict(model.named_parameters())[name].detach(), p.grad,
                                       rtol=1e-4, atol=1e-6, msg=name)


class _OtherRank:
    """Stands for the accelerator of rank 0 of 2: `reduce` adds what the other rank counted."""

    device, num_processes, is_main_process = torch.device("cpu"), 2, False

    def __init__(self, other: list[int]):
        self.other = other

    def reduce(self, tensor, reduction):
        assert reduction == "sum"
        return tensor + torch.tensor(self.other, dtype=tensor.dtype)


def test_a_steps_tokens_are_every_ranks_real_tokens():
    """Each rank pads its batch to its own longest example: the run's tokens (and tokens/s) are the sum of every
    rank's real tokens, not this rank's padded count times the processes."""
    torch.manual_seed(0)
    model = LinformerForMaskedLM(LinformerConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_seq_len=8, projected_dim=4))
    ids = torch.randint(3, 40, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0                                            # 13 real tokens of 16 positions
    batch = {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}
    settings = TrainerSettings(batch_size=2, grad_accum=1, lr=1e-3, mixed_precision="no", max_grad_norm=1.0,
                               max_nonfinite_steps=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    trainer = Trainer(Accelerator(cpu=True), model, optimizer, scheduler, _FixedBatches([batch]), settings,
                      record=None, spec=None, config={})
    trainer._pending = [trainer._train_step(0), trainer._train_step(1)]
    assert [p.tokens for p in trainer._pending] == [13, 13]
    trainer.accelerator = _OtherRank([7, 9])                   # the other rank's shorter examples
    trainer.state["tokens"] = 100                              # steps before these

    class _Bar:
        def close(self):
            pass

    row = trainer._read_steps(_Bar())
    assert trainer.state["tokens"] == 100 + 20 + 22
    assert row["tokens"] == 142


def test_a_resume_on_other_processes_advises_overrides_that_the_next_start_accepts(tmp_path):
    """Trained on 2 processes x 8, resumed on 1 x 8: the refusal's overrides (a per-device batch keeping the global
    batch, and the allowance that config change needs) pass both checks a start makes, the record's and the core's."""
    import re
    import shlex

    import pytest

    from linformer.errors import ConfigError
    from linformer.rundir import RunRecord

    model = LinformerForMaskedLM(LinformerConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_seq_len=8, projected_dim=4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    config = {"seed": 0, "trainer": {"batch_size": 8, "allow_config_change": []}}
    record = RunRecord(tmp_path / "run", "pretrain")
    record.claim(config)
    record.start(config, step=0, processes=2)
    record.release()

    def trainer(batch_size, allow):
        settings = TrainerSettings(batch_size=batch_size, grad_accum=1, lr=1e-3, allow_config_change=allow)
        t = Trainer(Accelerator(cpu=True), model, optimizer, scheduler, _FixedBatches([]), settings,
                    record=RunRecord(tmp_path / "run", "pretrain"), spec=None, config={})
        t.state.update(global_batch=16, processes=2)
        return t

    with pytest.raises(ConfigError) as refused:
        trainer(8, [])._check_global_batch()
    advice = re.search(r"keep its global batch here by adding (.+?), or add", str(refused.value)).group(1)
    overrides = dict(o.split("=", 1) for o in shlex.split(advice))
    assert overrides == {"trainer.batch_size": "16", "trainer.allow_config_change": "[trainer.batch_size]"}
    allow = ["trainer.batch_size"]
    assert RunRecord(tmp_path / "run", "pretrain").claim({**config, "trainer": {"batch_size": 16,
                                                                                 "allow_config_change": allow}},
                                                         allow) == "continue"
    trainer(16, allow)._check_global_batch()  # the global batch is the checkpoint's: accepted


def test_an_allowed_change_of_the_batch_on_the_same_processes_keeps_the_place_in_the_data(tmp_path):
    """24 steps at 8 rows per step on one process, resumed with trainer.batch_size=16 (allowed) read epoch 0 from row
    384: rows 192-383 never read, without a word; trainer.grad_accum=2 did the same. Every change of the global batch
    is now refused where it would continue elsewhere, naming the rows and the overrides that keep the checkpoint's
    global batch; a split of the same global batch (4 x grad_accum 2), and a change where both read from an epoch's
    start, go on."""
    import re
    import shlex
    from types import SimpleNamespace

    from linformer.data.streams import EpochOrder
    from linformer.errors import ConfigError
    from linformer.rundir import RunRecord

    model = LinformerForMaskedLM(LinformerConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_seq_len=8, projected_dim=4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    task = _FixedBatches([])
    task.train_stream = SimpleNamespace(order=EpochOrder(849, 8, 0, drop_last=True))  # pretraining's block order
    allow = ["trainer.batch_size", "trainer.grad_accum"]

    def trainer(batch_size, grad_accum, step=24, global_batch_size=None):
        settings = TrainerSettings(batch_size=batch_size, grad_accum=grad_accum, lr=1e-3, allow_config_change=allow,
                                   global_batch_size=global_batch_size)
        t = Trainer(Accelerator(cpu=True), model, optimizer, scheduler, task, settings,
                    record=RunRecord(tmp_path / "run", "pretrain"), spec=None, config={})
        t.state.update(global_batch=8, processes=1, step=step)
        return t

    for batch_size, grad_accum in ((16, 1), (8, 2)):
        with pytest.raises(ConfigError, match=r"trained at 8 sequences per step over every process; this start gives "
                                              r"16 .*its 24 steps of 8 read 192 of epoch 0's 849 rows; 16 per step "
                                              r"reads step 24's from row 384 of epoch 0's: 192 rows would never be "
                                              r"read") as refused:
            trainer(batch_size, grad_accum)._check_global_batch()
        assert "torchrun" not in str(refused.value)  # the processes are the checkpoint's: the batch settings moved
        advice = re.search(r"Keep its global batch by adding (.+?)\.$", str(refused.value)).group(1)
        overrides = dict(o.split("=", 1) for o in shlex.split(advice))
        assert overrides == {"trainer.batch_size": str(8 // grad_accum),
                             "trainer.allow_config_change": "[trainer.batch_size,trainer.grad_accum]"}
        trainer(int(overrides["trainer.batch_size"]), grad_accum)._check_global_batch()  # the advice is accepted
    with pytest.raises(ConfigError, match=r"192 rows would never be read. Keep its global batch by adding "
                                          r"trainer.global_batch_size=8 "):  # the key the run sets its batch with
        trainer(16, 1, global_batch_size=16)._check_global_batch()
    with pytest.raises(ConfigError, match=r"3 per step reads step 24's from row 72 of epoch 0's: 120 rows would be "
                                          r"read twice. Resume it at the global batch it was trained at \(8\)"):
        trainer(1, 3)._check_global_batch()  # 3 sequences per step, which no per-device batch makes 8
    trainer(16, 1, step=0)._check_global_batch()  # both read from the epoch's start: the change goes on from there


def test_a_collective_that_lost_its_peer_is_that_peer_s_failure_not_a_traceback():
    """Rank 0 failed writing the model alone (a full disk) while rank 1 waited for it: rank 1's gloo error ("Connection
    closed by peer") buried rank 0's error line under a traceback. It is a PeerFailed, which leaves the cause to rank 0."""
    from linformer.errors import PeerFailed
    from linformer.train.core import peer_failure

    lost = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:27831")
    assert isinstance(peer_failure(lost, 2), PeerFailed)
    assert peer_failure(lost, 1) is None                      # one process: no peer to blame
    assert peer_failure(RuntimeError("shape mismatch"), 2) is None  # a bug keeps its traceback


def test_a_peer_lost_while_the_run_starts_is_that_peer_s_failure_too(tiny_data, tmp_path, monkeypatch):
    """Rank 0 failed tokenizing a bad task file while rank 1 waited for it (main_process_first): rank 1's gloo error
    reached Hydra as a 40-line traceback, the building of the task being outside the steps' conversion to PeerFailed.
    Every wait of the run, its start's included, is."""
    from linformer.errors import PeerFailed
    from linformer.train import core
    from linformer.train.pretrain import PretrainTask, pretrain

    from .conftest import compose_pretrain

    as_two = core.peer_failure
    monkeypatch.setattr(core, "peer_failure", lambda err, processes: as_two(err, 2))  # as rank 1 of 2 processes

    def waited(*args, **kwargs):
        raise RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:27831")

    monkeypatch.setattr(PretrainTask, "__init__", waited)
    with pytest.raises(PeerFailed):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), tmp_path / "run")


class _ScriptedScores(TrainingTask):
    """Evaluations that give the scores of a script, one per call; records the steps handed to on_best."""

    main_metric = "val_accuracy"

    def __init__(self, scores, greater_is_better):
        self.scores, self.greater_is_better, self.chosen = iter(scores), greater_is_better, []

    def evaluate(self, model, accelerator):
        return {"val_accuracy": next(self.scores)}

    def epoch_of(self, step):
        return step

    def on_best(self, trainer, step):
        self.chosen.append(step)


def test_the_best_step_is_the_first_to_reach_the_best_score_and_never_the_evaluation_at_the_start():
    """Evaluations at steps 0 (eval_at_start, the untrained model), 10, 20, 30: the best is the first evaluation
    that beats every earlier one of training; a later one that only ties it keeps the earlier model, whether the
    metric is better greater or lower, and step 0 is never chosen, however good its score."""
    for scores, greater, chosen in [([0.95, 0.8, 0.9, 0.9], True, [10, 20]), ([0.05, 0.3, 0.2, 0.2], False, [10, 20])]:
        trainer, task = _evaluated(scores, greater, steps=(0, 10, 20, 30))
        assert trainer.state["best"] == {"step": 20, "value": scores[2]} and task.chosen == chosen


def _evaluated(scores: list[float], greater: bool, steps: tuple[int, ...]):
    """A trainer of a tiny model whose task scores `scores` at `steps` in turn (better `greater`), after those
    evaluations: (trainer, task)."""
    model = LinformerForMaskedLM(LinformerConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_seq_len=8, projected_dim=4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    task = _ScriptedScores(scores, greater)
    trainer = Trainer(Accelerator(cpu=True), model, optimizer, scheduler, task,
                      TrainerSettings(batch_size=2, lr=1e-3), record=None, spec=None, config={})
    trainer._log = lambda step, row: None
    for step in steps:
        trainer._evaluate(step, {})
    return trainer, task


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("greater", [True, False])
def test_a_non_finite_evaluation_is_never_best_and_never_blocks_a_finite_one(bad, greater):
    """Evaluations at steps 10-40 score a non-finite value first (a NaN loss, a score of non-finite outputs), then
    finite ones: the first finite one is chosen and the next better one replaces it. A NaN taken as best blocked
    every later one (every comparison with NaN is false); -inf or +inf would beat any finite loss or accuracy."""
    scores = [bad, 0.5, 0.6 if greater else 0.4, bad]
    trainer, task = _evaluated(scores, greater, steps=(10, 20, 30, 40))
    assert trainer.state["best"] == {"step": 30, "value": scores[2]} and task.chosen == [20, 30]
