"""The MLM head's two speed paths: fixed prediction slots (static shapes for a compiled model) and a padded
vocabulary whose padding rows take no probability."""

import pytest
import torch
import torch.nn.functional as F

from linformer.modeling import LinformerConfig, LinformerForMaskedLM
from linformer.modeling.task_models import target_slots

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_seq_len=16,
             projected_dim=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _batch(vocab: int, batch: int = 3, n: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (batch, n), generator=g)
    labels = torch.where(torch.rand(batch, n, generator=g) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    return ids, labels


def test_target_slots_put_the_targets_first_in_order_and_pad_with_ignored_rows():
    hidden = torch.randn(2, 5, 3)
    labels = torch.tensor([[-100, 7, -100, 9, -100], [4, -100, -100, -100, 5]])
    rows, slot_labels = target_slots(hidden, labels, 6)
    targets = labels != -100
    assert slot_labels[:4].tolist() == labels[targets].tolist()
    assert torch.equal(rows[:4], hidden[targets])
    assert slot_labels[4:].tolist() == [-100, -100]
    with pytest.raises(ValueError, match="prediction_slots=11"):
        target_slots(hidden, labels, 11)


def test_prediction_slots_give_the_same_loss_and_gradients_as_boolean_indexing():
    torch.manual_seed(0)
    model = LinformerForMaskedLM(LinformerConfig(vocab_size=50, sparse_prediction=True, **SMALL))
    ids, labels = _batch(50)
    targets = int((labels != -100).sum())

    def run(**kwargs):
        model.zero_grad()
        out = model(input_ids=ids, labels=labels, **kwargs)
        out.loss.backward()
        return out, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    eager, eager_grads = run()
    slotted, slot_grads = run(prediction_slots=targets + 7)
    assert slotted.logits.shape == (targets + 7, 50)
    torch.testing.assert_close(slotted.logits[:targets], eager.logits)
    torch.testing.assert_close(slotted.loss, eager.loss)
    for a, b in zip(slot_grads, eager_grads):
        torch.testing.assert_close(a, b)


def test_padded_vocabulary_rows_get_no_probability_and_leave_the_loss_unchanged():
    torch.manual_seed(0)
    plain = LinformerForMaskedLM(LinformerConfig(vocab_size=50, **SMALL))
    padded = LinformerForMaskedLM(LinformerConfig(vocab_size=64, tokenizer_vocab_size=50, **SMALL))
    state = plain.state_dict()
    for name, tensor in padded.state_dict().items():  # the same weights, and padding rows that would win
        if tensor.shape == state[name].shape:
            tensor.copy_(state[name])
        else:
            tensor[:50] = state[name]
            tensor[50:] = 10.0
    ids, labels = _batch(50)
    a, b = plain(input_ids=ids, labels=labels), padded(input_ids=ids, labels=labels)
    probs = F.softmax(b.logits, -1)
    assert probs[..., 50:].max().item() == 0.0
    torch.testing.assert_close(b.logits[..., :50], a.logits)
    torch.testing.assert_close(b.loss, a.loss)
    assert torch.equal(b.logits.argmax(-1), a.logits.argmax(-1))  # the same MLM accuracy


def test_tokenizer_vocab_size_must_fit_the_embedding():
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match="tokenizer_vocab_size"):
        LinformerConfig(vocab_size=50, tokenizer_vocab_size=51, **SMALL)


def test_resizing_to_a_larger_tokenizer_predicts_the_added_tokens_and_keeps_padding_rows_out(tmp_path):
    """resize_token_embeddings takes the tokenizer's new size: the head's padding starts there, wherever it was."""
    model = LinformerForMaskedLM(LinformerConfig(vocab_size=64, tokenizer_vocab_size=50, **SMALL)).eval()
    model.resize_token_embeddings(55)  # five tokens added: the rows hold exactly the tokenizer
    ids = torch.tensor([[5, 6, 52, 54, 7]])
    out = model(input_ids=ids, labels=ids)
    assert model.config.tokenizer_vocab_size is None and out.logits.shape[-1] == 55
    assert out.logits.isfinite().all() and out.loss.isfinite()
    model.resize_token_embeddings(60, pad_to_multiple_of=32)  # rows 60..63 pad to the multiple: no probability
    assert (model.config.vocab_size, model.config.tokenizer_vocab_size) == (64, 60)
    logits = model(input_ids=ids).logits
    assert logits[..., :60].isfinite().all() and (logits[..., 60:] == float("-inf")).all()
    model.resize_token_embeddings(40)  # below the old tokenizer size: still a valid config, saved and loaded
    model.save_pretrained(tmp_path)
    assert LinformerForMaskedLM.from_pretrained(tmp_path).config.vocab_size == 40


def test_an_untied_head_reads_one_bias_under_both_names_and_trains_it(tmp_path):
    """tie_word_embeddings=False unties the decoder's weight from the word embeddings, not the head's two bias
    names: lm_head.bias was a parameter the head never read (no gradient, changing it changed nothing), saved beside
    the one it read."""
    torch.manual_seed(0)
    model = LinformerForMaskedLM(LinformerConfig(vocab_size=50, tie_word_embeddings=False, **SMALL))
    head = model.lm_head
    assert head.bias is head.decoder.bias and head.decoder.weight is not model.get_input_embeddings().weight
    ids, labels = _batch(50)
    model(input_ids=ids, labels=labels).loss.backward()
    assert head.bias.grad is not None and head.bias.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        head.bias.normal_()
        logits = model(input_ids=ids).logits
    model.save_pretrained(tmp_path)
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "model.safetensors")
    assert "lm_head.decoder.bias" in saved and "lm_head.bias" not in saved  # the name an untied head always read
    again = LinformerForMaskedLM.from_pretrained(tmp_path).eval()
    assert again.lm_head.bias is again.lm_head.decoder.bias and torch.equal(again(input_ids=ids).logits, logits)
    model.resize_token_embeddings(60)  # a new decoder: the head's bias follows it
    assert model.lm_head.bias is model.lm_head.decoder.bias and model.lm_head.bias.shape == (60,)


@pytest.mark.parametrize("tie", [True, False])
def test_a_folder_saved_with_both_head_biases_loads_with_the_one_the_head_read(tmp_path, tie, caplog):
    """The layout an earlier head saved: untied, lm_head.bias (never read, here zeros) beside lm_head.decoder.bias
    (the one read); tied, lm_head.bias alone. Both load with the outputs they gave, without a warning."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    model = LinformerForMaskedLM(LinformerConfig(vocab_size=50, tie_word_embeddings=tie, **SMALL)).eval()
    with torch.no_grad():
        model.lm_head.decoder.bias.normal_()
    ids, _ = _batch(50)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    model.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    if tie:
        state = {k: v for k, v in state.items() if k != "lm_head.decoder.bias"}
        state["lm_head.bias"] = model.lm_head.decoder.bias.detach().clone()
    else:
        state["lm_head.decoder.bias"] = model.lm_head.decoder.bias.detach().clone()
        state["lm_head.bias"] = torch.zeros(50)
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with caplog.at_level("WARNING"):
        again = LinformerForMaskedLM.from_pretrained(tmp_path).eval()
    assert again.lm_head.bias is again.lm_head.decoder.bias
    assert torch.equal(again(input_ids=ids).logits, logits)
    assert "NOT tie" not in caplog.text
