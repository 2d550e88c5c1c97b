"""transformers.Trainer drives the Linformer classes as it drives RoBERTa's, and logs the right loss."""

import torch
from torch.utils.data import Dataset

from linformer import LinformerConfig, LinformerForSequenceClassification


class _Rows(Dataset):
    def __init__(self, n: int = 8, T: int = 12):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(4, 60, (n, T), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def _logged_loss(tmp_path, batch: int, accumulation: int) -> float:
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LinformerForSequenceClassification(LinformerConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_seq_len=16, projected_dim=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2))
    args = TrainingArguments(output_dir=str(tmp_path / f"b{batch}"), per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accumulation, max_steps=1, logging_steps=1, report_to=[],
                             use_cpu=True, save_strategy="no", learning_rate=1e-3, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=_Rows())
    trainer.train()
    return next(entry["loss"] for entry in trainer.state.log_history if "loss" in entry)


def test_gradient_accumulation_logs_the_loss_of_the_whole_batch(tmp_path):
    """A forward that takes **kwargs tells Trainer it scales its loss by num_items_in_batch itself; ours does not,
    so with 2 accumulation steps Trainer logged twice the loss (accepts_loss_kwargs = False: Trainer divides)."""
    whole = _logged_loss(tmp_path, batch=4, accumulation=1)
    accumulated = _logged_loss(tmp_path, batch=2, accumulation=2)
    assert abs(accumulated - whole) < 1e-4 * abs(whole), (whole, accumulated)
