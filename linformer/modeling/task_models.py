"""The task models: LinformerForMaskedLM (a tied MLM head) and LinformerForSequenceClassification (a sentence
classifier in RoBERTa's or BERT's form, reading [CLS] with or without the pooler, or the mean of real tokens)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput, SequenceClassifierOutput
from transformers.utils.generic import can_return_tuple

from .attention import keep_mask
from .configuration import LinformerConfig
from .model import LinformerLMHead, LinformerModel, LinformerPreTrainedModel


def _classifier_dropout(config: LinformerConfig) -> nn.Dropout:
    p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return nn.Dropout(p)


def pool(config: LinformerConfig, out, attention_mask: torch.Tensor | None, input_ids: torch.Tensor | None):
    """The (batch, hidden) features the classifier reads (``config.classifier_pooling``)."""
    if config.classifier_pooling == "pooler":
        return out.pooler_output
    hidden = out.last_hidden_state
    if config.classifier_pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        if input_ids is None or (config.pad_token_id is not None and bool((input_ids == config.pad_token_id).any())):
            raise ValueError(
                "classifier_pooling='mean' averages the real tokens, so it needs the attention_mask: "
                + ("these input_ids hold padding (pad_token_id="
                   f"{config.pad_token_id})" if input_ids is not None else "inputs_embeds were given")
                + " but attention_mask is None."
            )
        return hidden.mean(1)
    attention_mask = keep_mask(attention_mask, *hidden.shape[:2], config.attention)  # as the model read it
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


class LinformerClassificationHead(nn.Module):
    """RoBERTa's sentence head: dropout, dense, tanh, dropout, out_proj, on the pooled features (<s> by default)."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = _classifier_dropout(config)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, features):
        x = self.dropout(torch.tanh(self.dense(self.dropout(features))))
        return self.out_proj(x)


class LinformerPooledClassifier(nn.Linear):
    """BERT's sentence head: dropout, then one linear layer, on the pooled features (by default the pooler's output,
    the encoder's dense + tanh on [CLS]). A Linear itself, so that BERT's ``classifier.weight`` loads under its own
    name."""

    def __init__(self, config: LinformerConfig):
        super().__init__(config.hidden_size, config.num_labels)
        self.dropout = _classifier_dropout(config)

    def forward(self, features):
        return super().forward(self.dropout(features))


# With untied word embeddings the MLM head still reads one bias under both its names (RoBERTa's head has two: bias,
# and decoder.bias tied to it), saved as lm_head.decoder.bias, the one an untied head has always read.
_UNTIED_BIAS = {"lm_head.bias": "lm_head.decoder.bias"}


def two_head_biases(names) -> bool:
    """Whether weights saved under `names` hold an untied head's two biases, as this head had before its bias names
    were one parameter: lm_head.bias, which it never read, beside lm_head.decoder.bias (saved now as one name only,
    tied or not). Such a model loads (``tie_weights``) or exports with the one it read; its optimizer state holds
    one parameter more than this model has, so its checkpoints cannot be resumed."""
    return {*_UNTIED_BIAS, *_UNTIED_BIAS.values()} <= set(names)


class LinformerForMaskedLM(LinformerPreTrainedModel):
    """Linformer with RoBERTa's tied MLM head: (batch, tokens, vocab) logits, as every Hugging Face MLM.

    With ``config.sparse_prediction`` and ``labels`` (-100 = not a target), the vocabulary projection runs only at
    the target positions: ``logits`` is then (num_targets, vocab), in the order of ``labels[labels != -100]``, and
    the loss is the same. At 15% masking this skips most of the head's cost (the vocabulary projection is the
    largest matmul of a small model), which is what MLM training wants.

    ``prediction_slots`` (with sparse prediction) fixes the number of rows the head runs on, for a compiled model
    whose shapes must not change from batch to batch: the labelled positions come first, in order, and the rest
    of the slots are positions labelled -100, which the loss ignores. The caller guarantees that the batch has at
    most that many labelled positions (``PretrainTask`` counts them on the host).
    """
    _tied_weights_keys = {
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }

    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        if not config.tie_word_embeddings:  # HF's save keeps, of two tied names, the one not named here
            self._tied_weights_keys = _UNTIED_BIAS
        # A BERT-layout model carries its pooler through MLM training (frozen: MLM never uses it), so that a
        # sentence classifier finetuned from this checkpoint starts from the source's pooler, not a fresh one.
        keeps_pooler = config.classifier_head == "bert"
        self.roberta = LinformerModel(config, add_pooling_layer=keeps_pooler, reads_first_token=False)
        if keeps_pooler:
            self.roberta.pooler.requires_grad_(False)
        self.lm_head = LinformerLMHead(config)
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """HF's ties, and with untied word embeddings the head's two bias names made one parameter too (HF ties
        nothing then, which would leave ``lm_head.bias`` a parameter the head never reads)."""
        tied = super().get_expanded_tied_weights_keys(all_submodels)
        if not self.config.tie_word_embeddings:
            tied.update(_UNTIED_BIAS)
        return tied

    def tie_weights(self, missing_keys=None, recompute_mapping: bool = True):
        """HF's; a folder whose untied head was saved with both biases (a second one it never read, as this head
        had before its bias names were one parameter) loads with the one it read, so its outputs stay the same
        (HF leaves two tied names that load different values untied)."""
        if missing_keys is not None and not self.config.tie_word_embeddings \
                and not {*_UNTIED_BIAS, *_UNTIED_BIAS.values()} & set(missing_keys):
            with torch.no_grad():
                self.lm_head.bias.copy_(self.lm_head.decoder.bias)
        return super().tie_weights(missing_keys=missing_keys, recompute_mapping=recompute_mapping)

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels: torch.LongTensor | None = None,
        output_attentions=None,
        output_hidden_states=None,
        prediction_slots: int | None = None,
        **kwargs,
    ) -> MaskedLMOutput:
        out = self.roberta(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,  # a ModelOutput whatever config.return_dict says; can_return_tuple converts ours
        )
        hidden = out.last_hidden_state
        if labels is not None:
            labels = labels.to(hidden.device)
            if self.config.sparse_prediction and prediction_slots is not None:
                hidden, labels = target_slots(hidden, labels, prediction_slots)
            elif self.config.sparse_prediction:
                targets = labels != -100
                hidden, labels = hidden[targets], labels[targets]
        logits = self.lm_head(hidden)
        loss = None if labels is None else F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions)


def target_slots(hidden: torch.Tensor, labels: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(slots, hidden) rows and their labels: the labelled positions first, in order (a stable sort puts them
    before the -100s), then unlabelled ones, whose -100 the loss ignores. A fixed shape, unlike boolean indexing."""
    flat = labels.reshape(-1)
    if slots > flat.numel():
        raise ValueError(f"prediction_slots={slots} is more than the batch's {flat.numel()} positions.")
    order = torch.argsort((flat == -100).to(torch.uint8), stable=True)[:slots]
    return hidden.reshape(-1, hidden.shape[-1])[order], flat[order]


class LinformerForSequenceClassification(LinformerPreTrainedModel):
    """Linformer with a sentence classifier, RoBERTa's or BERT's (``config.classifier_head``), reading the features
    ``config.classifier_pooling`` names; ``problem_type`` as in Hugging Face."""

    copies_classifier_fields = True

    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        bert_head = config.classifier_head == "bert"
        reads_pooler = config.classifier_pooling == "pooler"
        if bert_head and not reads_pooler:  # the pooler a BERT-layout checkpoint carries is left out, as expected
            self._keys_to_ignore_on_load_unexpected = [r"roberta\.pooler\."]
        self.roberta = LinformerModel(config, add_pooling_layer=reads_pooler,
                                      reads_first_token=config.classifier_pooling != "mean")
        self.classifier = LinformerPooledClassifier(config) if bert_head else LinformerClassificationHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels: torch.Tensor | None = None,
        output_attentions=None,
        output_hidden_states=None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        out = self.roberta(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,  # a ModelOutput whatever config.return_dict says; can_return_tuple converts ours
        )
        logits = self.classifier(pool(self.config, out, attention_mask, input_ids))
        loss = None
        if labels is not None:
            loss = self._loss(logits, labels.to(logits.device))
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
        )

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.config.problem_type is None:  # inferred as Hugging Face does
            if self.num_labels == 1:
                self.config.problem_type = "regression"
            elif labels.dtype in (torch.long, torch.int):
                self.config.problem_type = "single_label_classification"
            else:
                self.config.problem_type = "multi_label_classification"
        if self.config.problem_type == "regression":
            if self.num_labels == 1:
                logits, labels = logits.squeeze(-1), labels.squeeze(-1)
            return F.mse_loss(logits, labels.to(logits.dtype))
        if self.config.problem_type == "single_label_classification":
            return F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


__all__ = ["LinformerForMaskedLM", "LinformerForSequenceClassification", "LinformerLMHead"]
