"""The training core's step, in-process: gradient accumulation weighs every target of the step equally."""

import copy
import math

import torch
from accelerate import Accelerator

from linformer.modeling import LinformerConfig, LinformerForMaskedLM
from linformer.runconfig import TrainerSettings
from linformer.train.core import Trainer, TrainingTask


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
