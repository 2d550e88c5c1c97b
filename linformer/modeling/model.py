"""The RoBERTa-shaped encoder: embeddings, post-LN layers, and the LinformerModel base.

Module and parameter names follow Hugging Face's RoBERTa (``roberta.encoder.layer.0.attention.self.query``...),
so RoBERTa checkpoints convert (``from_pretrained_encoder``) with only the projection matrices E, F starting fresh.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.dynamic_module_utils import get_relative_import_files
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.utils import logging
from transformers.utils.generic import can_return_tuple

from .attention import (
    LinformerSelfAttention,
    Projection,
    accepted_masks,
    build_projection,
    initialised_later,
    keep_mask,
    too_long,
)
from .configuration import SHARING, LinformerConfig, check_config_for_weights, check_local_path
from .errors import ConfigError
from .flex import check_available
from .threads import capturing, fitted

logger = logging.get_logger(__name__)

# config.json's auto_map where the model's code is saved beside its weights: each Auto class the code serves, as
# "<the saved code's module (file)>.<class>" (auto.register registers the same classes with the Auto API)
SERVED_CLASSES = {"AutoConfig": "configuration.LinformerConfig", "AutoModel": "model.LinformerModel",
                  "AutoModelForMaskedLM": "task_models.LinformerForMaskedLM",
                  "AutoModelForSequenceClassification": "task_models.LinformerForSequenceClassification"}


# from_pretrained's keywords that say where and how to read a model's files (not its config's fields)
_HUB_KWARGS = ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "subfolder", "token")


class LinformerEmbeddings(nn.Module):
    """Word + learned position + token type embeddings, then LN, dropout.

    Positions start at ``config.position_offset``: RoBERTa/fairseq's pad + 1, where padded tokens take position
    pad (a zero row), or BERT's 0, where every token counts from 0 (see ``LinformerConfig.pads_positions``).
    """

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.padding_idx = config.pad_token_id
        self.offset = config.position_offset
        self.pads_positions = config.pads_positions
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=self.padding_idx)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size,
            padding_idx=self.padding_idx if self.pads_positions else None,
        )
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        if position_ids is None:
            if input_ids is not None and self.pads_positions:  # padded tokens keep position padding_idx
                real = input_ids.ne(self.padding_idx)
                # counted as integers: ONNX's CumSum takes no bool tensor (torch's own cumsum would promote it)
                position_ids = (real.long().cumsum(1) + self.offset - 1).masked_fill(~real, self.padding_idx)
            else:
                T = inputs_embeds.shape[1]
                position_ids = torch.arange(T, device=inputs_embeds.device) + self.offset
                position_ids = position_ids.expand(inputs_embeds.shape[:2])
        embeddings = inputs_embeds + self.position_embeddings(position_ids)
        if token_type_ids is None:
            embeddings = embeddings + self.token_type_embeddings.weight[0]
        else:
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


class LinformerSelfOutput(nn.Module):
    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, residual):
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)  # post-LN, as RoBERTa


class LinformerAttention(nn.Module):
    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__()
        self.self = LinformerSelfAttention(config, layer_idx)
        self.output = LinformerSelfOutput(config)

    def forward(self, hidden, mask=None, shared_projection=None, output_attentions=False, per_forward=None):
        out, probs = self.self(hidden, mask, shared_projection, output_attentions, per_forward)
        return self.output(out, hidden), probs


class LinformerIntermediate(nn.Module):
    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden):
        return self.intermediate_act_fn(self.dense(hidden))


class LinformerOutput(LinformerSelfOutput):
    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)


class LinformerLayer(GradientCheckpointingLayer):
    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__()
        self.attention = LinformerAttention(config, layer_idx)
        self.intermediate = LinformerIntermediate(config)
        self.output = LinformerOutput(config)

    def forward(self, hidden, mask=None, shared_projection=None, output_attentions=False, per_forward=None):
        attn, probs = self.attention(hidden, mask, shared_projection, output_attentions, per_forward)
        return self.output(self.intermediate(attn), attn), probs


class LinformerEncoder(nn.Module):
    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.layer = nn.ModuleList([LinformerLayer(config, i) for i in range(config.num_hidden_layers)])
        # A mode shared across layers (sharing='layerwise'): the encoder owns the projections every layer uses, built
        # as the mode says (one E, or one per head; F apart from E or E itself), as the layers build their own.
        self.E = self.F = None
        sharing = SHARING[config.sharing] if config.projects_keys else None
        if sharing is not None and sharing.across_layers:
            self.E = build_projection(config, config.k_of_layer(0), sharing.per_head)
            if sharing.separate_f:
                self.F = build_projection(config, config.k_of_layer(0), sharing.per_head)
        self.gradient_checkpointing = False

    def forward(self, hidden, mask=None, output_attentions=False, output_hidden_states=False):
        all_hidden = (hidden,) if output_hidden_states else None
        all_probs = () if output_attentions else None
        # what the layers share in this forward: the mask as checked (by the first layer), the local/global masks
        # (ExactKeyLayout), flex's key masks
        per_forward = {}
        shared = self.E if self.F is None else (self.E, self.F)
        for layer in self.layer:
            # hidden goes positionally: gradient checkpointing only tracks positional tensors
            hidden, probs = layer(hidden, mask, shared_projection=shared, output_attentions=output_attentions,
                                  per_forward=per_forward)
            if output_hidden_states:
                all_hidden += (hidden,)
            if output_attentions:
                all_probs += (probs,)
        return hidden, all_hidden, all_probs


# The class a model is loaded as (LinformerForMaskedLM.from_pretrained gives a LinformerForMaskedLM), as
# transformers types its own from_pretrained: typing.Self needs Python 3.11, and typing_extensions is not a
# dependency.
_Model = TypeVar("_Model", bound="LinformerPreTrainedModel")


class LinformerPreTrainedModel(PreTrainedModel):
    config_class = LinformerConfig
    config: LinformerConfig
    base_model_prefix = "roberta"  # RoBERTa's, so RoBERTa checkpoints and ours share parameter names
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flex_attn = True  # every attention path reads it (linformer.modeling.flex)
    _no_split_modules = ["LinformerEmbeddings", "LinformerLayer"]
    copies_classifier_fields = False  # from_pretrained_encoder: whether the source's labels come along
    # The losses average over the batch they are given and take no num_items_in_batch: transformers.Trainer then
    # divides them by its gradient-accumulation steps itself (it would not for a forward with **kwargs).
    accepts_loss_kwargs = False

    def __call__(self, *args, **kwargs):
        """The forward; an eager one of a Linformer on the CPU without gradients with threads fitted to the cores
        other processes leave free (linformer.modeling.threads: full attention and ``model.compile()``'s compiled
        call keep torch's setting)."""
        with fitted(self):
            return super().__call__(*args, **kwargs)

    def __init__(self, config: LinformerConfig, *args, **kwargs):
        # a field set after the config was built (config.sharing = ..., or from_pretrained's keyword overrides on an
        # older path) is checked here, before a model is built from it
        config.validate_architecture()
        super().__init__(config, *args, **kwargs)
        self._built_with = config.built_with()  # what its modules compute with, whatever the config says later

    def save_pretrained(self, save_directory, *args, **kwargs):
        """HF's save; where the model's code goes with it (``auto.register``, or a model loaded through that code),
        it serves every Auto class whose module this code has, not only this model's (a masked-LM checkpoint is also
        an encoder, and a classifier's start): config.json names them and their modules are saved. The config is
        checked first, so a bad field writes nothing."""
        self.config.validate_architecture()
        self._check_built_with()
        if self._auto_class is not None:
            here = Path(__file__).parent  # the package's modeling/, or the saved code this model was loaded from
            served = {auto: where for auto, where in SERVED_CLASSES.items()
                      if (here / f"{where.split('.')[0]}.py").is_file()}
            self.config.auto_map = served
            # transformers saves the saved class's module and the modules it imports; a bare encoder's module does
            # not import the task models' (they import it), so their files are copied here
            os.makedirs(save_directory, exist_ok=True)
            files = {source for module in {where.split(".")[0] for where in served.values()}
                     for source in [here / f"{module}.py", *map(Path, get_relative_import_files(here / f"{module}.py"))]}
            for source in files:  # replacing an earlier save's copies, which may be of older code
                target = Path(save_directory) / source.name
                if not target.exists() or not os.path.samefile(source, target):
                    shutil.copyfile(source, target)
        return super().save_pretrained(save_directory, *args, **kwargs)

    def _check_built_with(self) -> None:
        """ConfigError naming each field the config changed after this model was built (``built_with``): the model
        computes as it was built, so the saved config would describe another model (a reload computing otherwise, or
        refusing the weights), where a field set before the build takes effect."""
        built, now = self._built_with, self.config.built_with()
        layers = self.config.num_hidden_layers
        changed = {name: (was, now[name]) for name, was in built.items()
                   if (was[:layers] if name == "projected_dim" else was) != now[name]}
        if changed:
            words = "; ".join(f"config.{name} is {new!r}, the model was built with {was!r}"
                              for name, (was, new) in changed.items())
            raise ConfigError(f"{words}: a field set after the model is built does not change it, so this save "
                              "would write a config of another model. Set it back, or build the model with it "
                              "(from_pretrained(<folder>, <field>=...) where that keeps the weights' meaning, or a "
                              "new model from the config).")

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """HF's resize; ``new_num_tokens`` is the tokenizer's new size, so where the rows are padded past it (a
        ``pad_to_multiple_of``, or a config whose ``tokenizer_vocab_size`` marks padding rows) the MLM head's
        padding starts there: added tokens are predicted, and rows past the tokenizer's get no probability."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if new_num_tokens is not None:
            rows = self.config.vocab_size
            self.config.tokenizer_vocab_size = new_num_tokens if new_num_tokens < rows else None
        return embeddings

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        """True: the softmax attention reads config._attn_implementation at every forward (eager: matmul, softmax,
        matmul; sdpa: the fused kernel; flex_attention: one flex_attention call, the local/global keys' pattern as
        its block mask), so set_attn_implementation switches it. HF decides this from a heuristic over the module's
        source (its AttentionInterface), which the Linformer's own attention does not use."""
        return True

    def _flex_attn_can_dispatch(self, is_init_check: bool = False) -> bool:
        """flex_attention where the installed torch has it; else an ImportError naming the torch that does (HF's own
        message there speaks of TPUs)."""
        check_available()
        return True

    @classmethod
    def from_pretrained(cls: type[_Model], pretrained_model_name_or_path, *args, **kwargs) -> _Model:
        """HF's, after a missing local folder is named as one (not as a bad hub name), and after a ``config=`` (a
        config, or where to read one) is checked against the folder's own config.json as a keyword override is
        (``check_config_for_weights``): transformers reads no config.json when it is given one."""
        check_local_path(pretrained_model_name_or_path)
        given = kwargs.get("config")
        if given is not None and pretrained_model_name_or_path is not None:
            hub = {key: kwargs[key] for key in _HUB_KWARGS if key in kwargs}
            if not isinstance(given, PreTrainedConfig):  # a path or hub name: read as transformers will read it
                given = cls.config_class.from_pretrained(given, **hub)
            try:  # ({} for a folder without config.json: the given config is all there is to go by)
                fields, _ = cls.config_class.get_config_dict(pretrained_model_name_or_path, **hub)
            except OSError:
                fields = {}
            if fields and getattr(given, "model_type", None) == cls.config_class.model_type:
                check_config_for_weights(cls.config_class.from_dict(fields), given)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    @classmethod
    def from_pretrained_encoder(cls: type[_Model], name_or_path, *, extend_positions: bool = True, **settings) -> _Model:
        """A BERT/RoBERTa-family encoder converted into this class (``convert.from_pretrained_encoder``)."""
        try:  # imported here (convert imports this module), and by name: transformers copies every module that a
            # "from .x import" line names into a saved model's code (auto.register), and convert, which reads source
            # checkpoints and writes cards, belongs to the package, not to that code
            convert = importlib.import_module(".convert", __package__)
        except ImportError as err:
            raise ImportError("from_pretrained_encoder needs the linformer package that made this model: this copy "
                              "of the model's code, saved beside its weights, holds the model only") from err
        return convert.from_pretrained_encoder(cls, name_or_path, extend_positions=extend_positions, **settings)

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # RoBERTa's: normal(0, initializer_range), zero biases, unit LayerNorm
        if isinstance(module, Projection):  # E, F or a conv kernel: config.projection_init, as the module defines it
            module.reset_parameters()
        elif isinstance(module, LinformerLMHead):
            init.zeros_(module.bias)


class LinformerLMHead(nn.Module):
    """RoBERTa's (and BERT's) LM head: dense, activation (``config.lm_head_activation``), LayerNorm, then the
    decoder tied to the word embeddings. Logits of a padded vocabulary's padding rows (``tokenizer_vocab_size``
    onwards) are -inf, so they take no probability whatever their weights."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.lm_head_activation]
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.config = config  # read at every forward: resize_token_embeddings moves tokenizer_vocab_size

    def forward(self, features):
        logits = self.decoder(self.layer_norm(self.activation(self.dense(features))))
        tokens = self.config.tokenizer_vocab_size
        if tokens is not None and tokens < logits.shape[-1]:
            padding = torch.arange(logits.shape[-1], device=logits.device) >= tokens
            logits = logits.masked_fill(padding, float("-inf"))
        return logits


class LinformerPooler(nn.Module):
    """BERT's and RoBERTa's pooler (dense + tanh on the first token): the input of the ``"bert"`` classifier head,
    and kept in LinformerModel so that BertModel and RobertaModel checkpoints load with their pooler."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden):
        return self.activation(self.dense(hidden[:, 0]))


class LinformerModel(LinformerPreTrainedModel):
    """The bare encoder, returning ``last_hidden_state`` (and ``pooler_output`` when it has a pooler)."""

    def __init__(self, config: LinformerConfig, add_pooling_layer: bool = True, reads_first_token: bool | None = None):
        """``reads_first_token``: whether what the model is run for reads the first position (the pooler's output, a
        classifier's [CLS]; None: when it has a pooler), which left padding fills with a pad."""
        super().__init__(config)
        self.embeddings = LinformerEmbeddings(config)
        with initialised_later():  # the projections, by post_init below (HF's init path: loaded weights are skipped)
            self.encoder = LinformerEncoder(config)
        self.pooler = LinformerPooler(config) if add_pooling_layer else None
        self.reads_first_token = add_pooling_layer if reads_first_token is None else reads_first_token
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        extended = attention_mask is not None and attention_mask.dim() == 4  # transformers' (B, 1, 1 or T, T)
        B, T = check_inputs(input_ids, inputs_embeds, None if extended else attention_mask, token_type_ids,
                            position_ids)
        if attention_mask is not None:  # the key padding it expresses, or a ValueError saying why it is not one
            attention_mask = keep_mask(attention_mask, B, T, self.config.attention)
        n = self.config.max_seq_len
        if n < T:
            raise ValueError(too_long(T, n, self.config.projects_keys))
        output_attentions = bool(output_attentions or self.config.output_attentions)
        output_hidden_states = bool(output_hidden_states or self.config.output_hidden_states)
        mask = self._read_inputs(attention_mask, token_type_ids, positions_shift=position_ids is None and not (
            self.config.pads_positions and input_ids is not None))
        hidden = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        hidden, all_hidden, all_probs = self.encoder(hidden, mask, output_attentions, output_hidden_states)
        if all_probs is not None and any(probs is None for probs in all_probs):
            logger.warning_once(
                "output_attentions=True: the attention with exact local and global keys (local_window, "
                "global_positions) computes no probabilities, so `attentions` holds None for its layers, unless the "
                "batch as padded is at most k tokens long and exact_short_inputs is on: then every row is attended "
                "exactly and gets T x T maps (a short row padded in a longer batch gets none, though it is attended "
                "exactly too). For maps, load the model with local_window=0 "
                "and global_positions=[] (the paper's Linformer: T x k maps) or attention='full'.")
        return BaseModelOutputWithPooling(
            last_hidden_state=hidden,
            pooler_output=self.pooler(hidden) if self.pooler is not None else None,
            hidden_states=all_hidden,
            attentions=all_probs,
        )

    def _read_inputs(self, attention_mask, token_type_ids, positions_shift: bool) -> torch.Tensor | None:
        """The forward's one host sync over its inputs -> the boolean mask, None where nothing is padded (no masking
        work). A segment id the embeddings have no row for is a ValueError (an index error deep inside, or a device
        assert, otherwise); padding before a real token is warned where it changes the output (``left_padding``;
        ``positions_shift``: positions count from the sequence's start, not past its padding). A compiled forward
        keeps the mask and reads nothing (the sync would break its graph), as does any captured forward (exported,
        traced: threads.capturing), which would freeze one batch's answer into its graph: callers with unpadded batches
        pass attention_mask=None."""
        mask = None if attention_mask is None else attention_mask.bool()
        if capturing():
            return mask
        checks = {}
        if token_type_ids is not None:
            checks["bad_segment"] = ((token_type_ids < 0) | (token_type_ids >= self.config.type_vocab_size)).any()
        if mask is not None:
            checks["unpadded"] = mask.all()
            checks["masked_before"] = (mask[:, 1:] > mask[:, :-1]).any()
        if not checks:
            return mask
        seen = dict(zip(checks, torch.stack(list(checks.values())).tolist()))
        if seen.get("bad_segment"):
            raise ValueError(segment_error(token_type_ids, self.config.type_vocab_size))
        if seen.get("masked_before"):
            effects = left_padding(self.config, positions_shift, self.reads_first_token)
            if effects:  # a warning, not an error: a mask may hide tokens anywhere on purpose (HF's own tests do)
                logger.warning_once(
                    f"attention_mask masks a position before a real token (left padding?): {'; '.join(effects)}; so "
                    "a left-padded sequence's output differs from its output alone. Pad on the right "
                    "(tokenizer.padding_side = 'right', the BERT and RoBERTa tokenizers' default).")
        return None if seen.get("unpadded") else mask


def left_padding(config: LinformerConfig, positions_shift: bool, reads_first_token: bool) -> list[str]:
    """What padding before a sequence's tokens changes in a model's output, one clause each (none: nothing, as
    full attention with RoBERTa's positions, which skip padding, read by the tokens' own positions)."""
    effects = []
    if config.projects_keys:
        effects.append("the Linformer's E and F project keys by position from the sequence's start")
    if positions_shift:
        effects.append("positions count from the sequence's start (position_offset "
                       f"{config.position_offset}), so each token takes another position embedding")
    if reads_first_token:
        effects.append("the first position, which the pooler or classifier reads, is a pad")
    return effects


def segment_error(token_type_ids: torch.Tensor, rows: int) -> str:
    """A forward's message for segment ids outside the model's ``rows`` (type_vocab_size) token type embeddings."""
    bad = token_type_ids[(token_type_ids < 0) | (token_type_ids >= rows)]
    if rows == 1:
        return (f"token_type_ids holds segment id {int(bad[0])}, but this model has one segment (type_vocab_size=1, "
                "RoBERTa's layout): pass no token_type_ids (or all 0). A tokenizer that gives them (a BERT "
                "tokenizer; a pair's second text is segment 1) should not: tokenizer(..., return_token_type_ids="
                "False), or tokenizer.model_input_names without 'token_type_ids', as this package saves it.")
    return (f"token_type_ids holds segment id {int(bad[0])}, but this model's segment ids run from 0 to {rows - 1} "
            f"(type_vocab_size={rows}).")


def check_inputs(input_ids, inputs_embeds, attention_mask=None, token_type_ids=None, position_ids=None
                 ) -> tuple[int, int]:
    """(batch, tokens) of a forward's inputs; ValueError saying what was expected for anything else: not exactly one
    of input_ids (batch, tokens) and inputs_embeds (batch, tokens, hidden), an empty batch or input, or a mask or id
    tensor whose shape is not (batch, tokens). Shapes only: no host sync, so a compiled forward keeps its graph."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Give exactly one of input_ids or inputs_embeds.")
    given, name, dims = (input_ids, "input_ids", 2) if input_ids is not None else (inputs_embeds, "inputs_embeds", 3)
    shape = tuple(given.shape)
    if len(shape) != dims:
        what = "(batch, tokens)" if dims == 2 else "(batch, tokens, hidden)"
        hint = f": add the batch dimension ({name}[None])" if len(shape) == dims - 1 else ""
        raise ValueError(f"{name} must be {what}; got shape {shape}{hint}.")
    B, T = shape[:2]
    if B == 0 or T == 0:
        raise ValueError(f"{name} is empty (shape {shape}): give at least one sequence of at least one token.")
    if attention_mask is not None and tuple(attention_mask.shape) != (B, T):
        raise ValueError(f"attention_mask must be {accepted_masks(B, T)} ({name} is (batch, tokens) = {(B, T)}); got "
                         f"{tuple(attention_mask.shape)}.")
    if token_type_ids is not None and tuple(token_type_ids.shape) != (B, T):
        raise ValueError(f"token_type_ids must have the shape of {name}'s (batch, tokens) = {(B, T)}; got "
                         f"{tuple(token_type_ids.shape)}.")
    if position_ids is not None and tuple(position_ids.shape) not in ((B, T), (1, T), (T,)):
        raise ValueError(f"position_ids must be (batch, tokens) = {(B, T)}, (1, tokens) or (tokens,); got "
                         f"{tuple(position_ids.shape)}.")
    return B, T


def count_projection_matrices(model: nn.Module) -> int:
    """Number of distinct learned sequence projections (E/F matrices, or conv kernels) in a model."""
    return sum(m.num_matrices for m in model.modules() if isinstance(m, Projection))


__all__ = ["LinformerModel", "LinformerPreTrainedModel", "check_inputs", "count_projection_matrices"]
