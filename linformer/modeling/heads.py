"""Task heads mirroring RoBERTa: a tied MLM head and a classification head on <s>, plus RoBERTa loading."""

from __future__ import annotations

import os
import re

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel, RobertaForMaskedLM, RobertaForSequenceClassification
from transformers.activations import gelu
from transformers.modeling_outputs import MaskedLMOutput, SequenceClassifierOutput
from transformers.utils.generic import can_return_tuple

from .configuration import LinformerConfig
from .model import LinformerModel, LinformerPreTrainedModel

# RoBERTa config fields that carry over unchanged to a LinformerConfig.
_ROBERTA_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "type_vocab_size", "initializer_range",
    "layer_norm_eps", "pad_token_id", "bos_token_id", "eos_token_id", "classifier_dropout",
)
_CLASSIFIER_FIELDS = ("id2label", "label2id", "problem_type")
_PROJECTION_PARAM = re.compile(r"(^|\.)(E|F)\.")  # E/F of a layer, or the encoder's layerwise E


class LinformerLMHead(nn.Module):
    """RoBERTa's LM head: dense, gelu, LayerNorm, then the decoder tied to the word embeddings."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, features):
        return self.decoder(self.layer_norm(gelu(self.dense(features))))


class LinformerClassificationHead(nn.Module):
    """RoBERTa's sentence head on the <s> token: dropout, dense, tanh, dropout, out_proj."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(p)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, features):
        x = self.dropout(features[:, 0])
        x = self.dropout(torch.tanh(self.dense(x)))
        return self.out_proj(x)


class _FromRoberta:
    """``from_roberta``: start a Linformer from a RoBERTa checkpoint; only E/F start fresh."""

    _roberta_class: type[PreTrainedModel]

    @classmethod
    def from_roberta(cls, path_or_model: str | os.PathLike | PreTrainedModel, **overrides):
        """Load a RoBERTa checkpoint (a directory, a hub name, or a model object) into this Linformer class.

        ``overrides`` set Linformer fields (``projected_dim``, ``sharing``, ``attention``, ``max_seq_len``...)
        or any config field. ``max_seq_len`` defaults to RoBERTa's n (max_position_embeddings - pad - 1) and may
        be smaller; the learned positions are then truncated.
        """
        roberta = path_or_model
        if not isinstance(roberta, PreTrainedModel):
            try:
                roberta = cls._roberta_class.from_pretrained(path_or_model)
            except (OSError, ValueError) as err:
                raise ValueError(
                    f"Could not load a RoBERTa checkpoint from {str(path_or_model)!r}: expected a directory holding "
                    f"config.json and model.safetensors (or a hub name when online). Cause: {err}"
                ) from err
        rc = roberta.config
        pad = rc.pad_token_id if rc.pad_token_id is not None else 1
        kwargs = {f: getattr(rc, f) for f in _ROBERTA_FIELDS if hasattr(rc, f)}
        kwargs["max_seq_len"] = rc.max_position_embeddings - pad - 1
        if isinstance(roberta, RobertaForSequenceClassification) or issubclass(cls, LinformerForSequenceClassification):
            kwargs.update({f: getattr(rc, f) for f in _CLASSIFIER_FIELDS if getattr(rc, f, None) is not None})
        kwargs.update(overrides)
        config = LinformerConfig(**kwargs)
        model = cls(config)

        state = roberta.state_dict()
        pos_key = next((k for k in state if k.endswith("embeddings.position_embeddings.weight")), None)
        if pos_key is not None:
            have, need = state[pos_key].shape[0], config.max_position_embeddings
            if have < need:
                raise ValueError(
                    f"max_seq_len={config.max_seq_len} needs {need} position embeddings but the RoBERTa checkpoint "
                    f"has {have}; use max_seq_len <= {have - pad - 1}."
                )
            state[pos_key] = state[pos_key][:need]
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not _PROJECTION_PARAM.search(k)]
        unexpected = [k for k in unexpected if ".pooler." not in k and not k.endswith("position_ids")]
        if missing or unexpected:
            raise ValueError(
                f"{type(roberta).__name__} does not match {cls.__name__}: missing {missing[:8]}, "
                f"unexpected {unexpected[:8]}."
            )
        model.tie_weights()
        return model


class LinformerForMaskedLM(_FromRoberta, LinformerPreTrainedModel):
    """Linformer with RoBERTa's tied MLM head: (batch, tokens, vocab) logits, as every Hugging Face MLM.

    With ``config.sparse_prediction`` and ``labels`` (-100 = not a target), the vocabulary projection runs only at
    the target positions: ``logits`` is then (num_targets, vocab), in the order of ``labels[labels != -100]``, and
    the loss is the same. At 15% masking this skips most of the head's cost (the vocabulary projection is the
    largest matmul of a small model), which is what MLM training wants.
    """

    _roberta_class = RobertaForMaskedLM
    _tied_weights_keys = {
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }

    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.roberta = LinformerModel(config, add_pooling_layer=False)
        self.lm_head = LinformerLMHead(config)
        self.post_init()

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
        )
        hidden = out.last_hidden_state
        if labels is not None:
            labels = labels.to(hidden.device)
            if self.config.sparse_prediction:
                targets = labels != -100
                hidden, labels = hidden[targets], labels[targets]
        logits = self.lm_head(hidden)
        loss = None if labels is None else F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions)


class LinformerForSequenceClassification(_FromRoberta, LinformerPreTrainedModel):
    """Linformer with RoBERTa's classification head on <s>; ``problem_type`` as in Hugging Face."""

    _roberta_class = RobertaForSequenceClassification

    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roberta = LinformerModel(config, add_pooling_layer=False)
        self.classifier = LinformerClassificationHead(config)
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
        )
        logits = self.classifier(out.last_hidden_state)
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
