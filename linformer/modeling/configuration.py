"""LinformerConfig: RoBERTa's architecture fields plus the Linformer projection settings.

Each architectural fact lives here (and so in config.json); run settings live in the Hydra YAML.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
from collections.abc import Mapping

from huggingface_hub.dataclasses import strict
from transformers import GenerationConfig, PreTrainedConfig
from transformers.activations import ACT2FN

from .errors import ConfigError, MissingFileError, did_you_mean
from .values import ATTENTION_MODES as ATTENTION_MODES  # the modes and what each computes: one home, values.py
from .values import SHARING as SHARING  # read where the model is built and counted, and by parsers
from .values import Sharing as Sharing
from .values import fits_type, projects_keys

logger = logging.getLogger(__name__)

# the values config.projection takes; attention.register_projection adds one with its builder (a list, so that one
# append reaches every module that imported it)
PROJECTIONS = ["linear", "mean_pool", "max_pool", "conv"]
PROJECTION_INITS = ("mean", "xavier")
CLASSIFIER_HEADS = ("roberta", "bert")
CLASSIFIER_POOLINGS = ("pooler", "cls", "mean")
LENGTH_POLICIES = ("slice", "resample")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")  # HF's, for the loss
# Model types whose learned positions start at pad_token_id + 1 (fairseq's RoBERTa layout); BERT's start at 0
PAD_OFFSET_TYPES = frozenset({"roberta", "xlm-roberta", "camembert", "linformer"})


def _choices(key: str) -> tuple[str, ...] | None:
    """The names field `key` takes where it takes one of a set (projection's: check_projection; attention's:
    projects_keys), read at each call: a mode added to a table (SHARING, say) is taken at once."""
    table = {"sharing": SHARING, "classifier_head": CLASSIFIER_HEADS, "classifier_pooling": CLASSIFIER_POOLINGS,
             "length_policy": LENGTH_POLICIES}
    return tuple(table[key]) if key in table else None


def position_offset_of(config) -> int:
    """The position index of a model config's first token: a Linformer's own ``position_offset`` when set; else
    pad_token_id + 1 for the RoBERTa family (and Linformer config.json files written before the field), 0 for BERT."""
    offset = getattr(config, "position_offset", None)
    if offset is not None:
        return int(offset)
    return (config.pad_token_id or 0) + 1 if config.model_type in PAD_OFFSET_TYPES else 0

# Keyword arguments that are not fields but that PreTrainedConfig.__post_init__ consumes, that to_dict() writes
# (and so config.json and copies feed back), or that from_pretrained passes on.
_HF_KWARGS = frozenset({
    "model_type", "_name_or_path", "name_or_path", "_commit_hash", "num_labels", "torch_dtype", "output_attentions",
    "attn_implementation", "experts_implementation", "per_layer_config",
    "_attn_implementation_internal", "_experts_implementation_internal",
})
# transformers 4's PretrainedConfig arguments, still present in config.json files it wrote.
_HF4_KWARGS = frozenset({
    "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "cross_attention_hidden_size",
    "tie_encoder_decoder", "finetuning_task", "task_specific_params", "tokenizer_class", "prefix", "sep_token_id",
    "decoder_start_token_id", "gradient_checkpointing", "_attn_implementation_autoset",
})


def names_a_path(name: str) -> bool:
    """Whether `name` can only be a local path, never a hub name ('name' or 'owner/name')."""
    return str(name).startswith((".", "/", "~")) or str(name).count("/") > 1


def check_local_path(name_or_path) -> None:
    """MissingFileError (a FileNotFoundError, as transformers raises for a missing model) naming a path that is plainly a
    local one (absolute, ./, ~, or several folders deep) and does not exist: transformers would take it for a hub
    name and say "Repo id must be in the form ...", which names neither the path nor the fix."""
    name = os.fspath(name_or_path) if isinstance(name_or_path, (str, os.PathLike)) else None
    if name is None or os.path.exists(os.path.expanduser(name)):
        return
    if names_a_path(name):
        raise MissingFileError(f"{name} is not a folder here (a hub name is 'name' or 'owner/name'): give the "
                                "directory that save_pretrained wrote, holding config.json.")


# what ``LinformerConfig.built_with`` compares: fields read when the modules are built, not at every forward
BUILT_FIELDS = ("attention", "sharing", "projection", "length_policy", "mask_empty_windows", "exact_short_inputs",
                "local_window", "global_positions", "overlap_columns", "landmark_pooling", "max_seq_len",
                "num_attention_heads", "hidden_size", "intermediate_size", "hidden_act", "layer_norm_eps",
                "max_position_embeddings", "type_vocab_size")


@strict
class LinformerConfig(PreTrainedConfig):
    r"""Configuration of a RoBERTa-shaped Linformer encoder (Wang et al. 2020).

    The RoBERTa fields keep RoBERTa-base's defaults. The Linformer fields:

    - ``attention``: ``"linformer"`` projects keys and values along the sequence axis; ``"full"`` is standard
      softmax attention (the RoBERTa baseline, through ``scaled_dot_product_attention``).
    - ``max_seq_len`` (n): the longest input, and the number of rows of every projection matrix E, F (n x k).
      ``max_position_embeddings`` defaults to n + ``position_offset`` (n + 2 for RoBERTa, whose positions start at
      ``pad_token_id + 1``).
    - ``projected_dim`` (k): an int, or one int per layer (the paper's non-uniform k, in part: the paper also allows
      a different k per head, which is not offered here).
    - ``sharing`` (paper §4): ``"none"`` a separate E and F per head and layer; ``"headwise"`` one E and one F per
      layer shared by its heads; ``"kv"`` one matrix per layer with E = F; ``"layerwise"`` one matrix for every
      layer, head, key and value. For 12 layers x 12 heads that is 288, 24, 12 and 1 matrices.
    - ``projection``: ``"linear"`` (learned E, F), or the paper's general projections ``"mean_pool"``,
      ``"max_pool"`` and ``"conv"``, all with kernel = stride = n / k.
    - ``projection_init``: ``"mean"`` starts each learned E, F (and conv kernel) as a mean over consecutive
      windows of about n/k positions, so a new Linformer attends like mean pooling at T = n tokens (below n, under
      the slice, the columns the tokens do not reach still take part, which mean pooling masks; ``mask_empty_windows``
      masks them too); ``"xavier"`` is fairseq's
      zero-mean xavier_uniform (gain 1/sqrt(2)). With zero-mean E, F and near-uniform attention the projected
      values cancel (sum_j p_j F_tj ~ 0), the attention output starts near zero and small models trained from
      scratch barely learn. The paper does not specify the initialisation.
    - ``mask_empty_windows``: with a learned E, F, keep only the projected columns whose window of positions
      (row t belongs to column floor(t k / n)) holds a real token, so an input shorter than n is not diluted by
      the empty columns' zero keys and values (the pooling and conv projections always mask their empty windows).
      A converted encoder asked for ``length_policy="slice"`` gets it on (its short inputs would otherwise lose
      most of their attention mass to empty columns; ``convert.converted_length_policy``); with resampling every
      column is filled, so it stays off. False, the default, is fairseq's projection of E[:T] (the paper does not
      say how an input shorter than n is projected).
    - ``position_offset``: the position index of the first token. RoBERTa's is ``pad_token_id + 1`` (the default;
      padded tokens then take position ``pad_token_id``, a row kept at zero); BERT's is 0 (every token counts from
      0 and the position table has no padding row).
    - ``classifier_head``: ``"roberta"`` (dense, tanh, out_proj on <s>) or ``"bert"`` (the encoder's pooler, then
      dropout and one linear ``classifier``), so either family's sentence classifier loads under its own names.
    - ``classifier_pooling``: what the sentence classifier reads. ``"pooler"`` is BERT's: the encoder's pooler
      (dense + tanh) on [CLS]; ``"cls"`` is the first token's hidden state itself; ``"mean"`` is the mean over the
      real tokens (sentence-transformers' pooling, which all-MiniLM-L6-v2 was trained for: its pooler is
      untrained). None picks the family's own: ``"pooler"`` for the ``"bert"`` head, ``"cls"`` for the
      ``"roberta"`` head (whose own dense + tanh plays the pooler's part, so ``"pooler"`` does not apply to it).
    - ``length_policy``: how a learned n x k E (F) serves an input of T < n tokens. ``"slice"`` (fairseq's, the
      default; the paper does not say) uses its first T rows, which reach about T k / n of the k columns; ``"resample"``
      integrates E's rows over T windows of n / T rows each (area resampling, column sums kept), so every input
      uses all k columns with windows of about T / k tokens. Each row of a padded batch is resampled to its own
      length (right padding), so its output equals that row alone. Needs ``projection="linear"`` and no
      ``mask_empty_windows`` (resampling fills every column).
    - ``exact_short_inputs``: an input of at most k tokens gets exact softmax attention over its tokens (T^2 <= T k:
      it costs no more than the projection). In a padded batch this is decided per row: a row whose real tokens
      all lie in the first k positions attends exactly, the others through E, F.
    - ``local_window`` (w) and ``global_positions``: exact keys beside the projected ones, in one softmax
      (``linformer.modeling.local_global``): each query also sees the exact keys within w // 2 positions of it
      (2 * (w // 2) + 1 tokens with itself: 129 for w = 128, 127 for w = 127; w = 1 is refused, it holds none), and
      those of the global tokens (a negative position counts from each row's last real token: ``[0, -1]`` is
      [CLS]/<s> and the final separator), which themselves attend to every position. Each projected key's logit is
      raised by the log of the tokens its column stands for. 0 and None (the defaults) are the paper's Linformer.
      Needs ``projection="linear"``.
    - ``landmark_pooling``: with the exact keys above, each projected column pools the keys and values of its
      window of about T / k tokens with attention weights from a landmark query (E's column applied to the queries:
      the window's mean query while E is a window mean) instead of E's fixed weights, so the projection depends on
      the input (Transformer-LS's dynamic projection, Nystromformer's landmarks; ``local_global.landmark_pooling``).
      Needs ``length_policy="resample"``, E = F (``sharing="kv"`` or ``"layerwise"``) and a local window or global
      tokens (its logits carry the log count of the one softmax). False (the default): E's fixed weights.
    - ``overlap_columns``: with exact keys, what a projected column does for a query whose exact keys already hold
      every token it stands for (all inside the query's window, or global tokens): ``"keep"`` (the default) leaves it
      in the softmax, so those tokens count twice; ``"mask"`` masks it for that query (``local_global.overlap_bias``).
      Only such a column: one the exact keys hold part of stays under either, its tokens inside the window (and a
      global token in the first or last column) counted twice. ``"reduce"`` also lowers every other column's
      count by the tokens of it the query's exact keys hold (m - h of a mean over m tokens; a weighted column by the
      share of its weight on them), masking those left with none (``local_global.reduced_count_bias``): no token
      counted twice.
      A column's tokens are the ones its window of E covers: ``(j L / k, (j + 1) L / k)`` of a row's L tokens with
      ``length_policy="resample"``, rows ``j n / k`` to ``(j + 1) n / k`` with the slice.
    - ``lm_head_activation``: the MLM head's activation after its dense layer (RoBERTa's is gelu; BERT's is its
      ``hidden_act``).
    - ``sparse_prediction`` (as ModernBERT's): with ``labels``, ``LinformerForMaskedLM`` runs the vocabulary
      projection only at the labelled positions and returns (num_targets, vocab) logits, the same loss for a
      fraction of the head's cost at 15% masking. False (the default) returns (batch, tokens, vocab) logits.
    - ``tokenizer_vocab_size``: the tokenizer's vocabulary when ``vocab_size`` (the embedding rows) is padded past
      it, to a multiple of 64 as HF's ``pad_to_multiple_of`` does, so that the vocabulary GEMM takes the fast
      kernels. The MLM head gives the padding rows a logit of -inf: they never receive probability. None: every
      row is a token.

    An unknown keyword argument is kept as an attribute the model does not read, as ``PretrainedConfig`` keeps any
    (tools annotate configs); one that looks like a misspelt field gets a warning naming the field, once per name
    and process. Where a person types settings (Hydra's ``model.*``, convert's), a typo is a ConfigError
    (``check_model_fields``).
    """

    model_type = "linformer"

    vocab_size: int = 50265
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float | int = 0.1
    attention_probs_dropout_prob: float | int = 0.1
    max_position_embeddings: int | None = None
    type_vocab_size: int = 1
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-5
    pad_token_id: int | None = 1
    bos_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 2
    classifier_dropout: float | int | None = None
    tie_word_embeddings: bool = True
    is_decoder: bool = False
    add_cross_attention: bool = False
    use_cache: bool = False

    attention: str = "linformer"
    max_seq_len: int = 512
    projected_dim: int | list[int] = 256
    sharing: str = "headwise"
    projection: str = "linear"
    projection_init: str = "mean"
    sparse_prediction: bool = False
    tokenizer_vocab_size: int | None = None
    mask_empty_windows: bool = False

    position_offset: int | None = None
    classifier_head: str = "roberta"
    classifier_pooling: str | None = None
    length_policy: str = "slice"
    exact_short_inputs: bool = False
    local_window: int = 0
    global_positions: list[int] | None = None
    landmark_pooling: bool = False
    overlap_columns: str = "keep"
    lm_head_activation: str = "gelu"

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """HF's (from_pretrained reads config.json through it), refusing another model type's config.json: HF would
        only warn, then build a Linformer from it whose positions or vocabulary do not fit the checkpoint;
        converting is what keeps its weights."""
        check_local_path(pretrained_model_name_or_path)
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        source_type = config_dict.get("model_type")
        if source_type not in (None, cls.model_type):
            where = str(pretrained_model_name_or_path)
            raise ConfigError(f"{where} holds a {source_type!r} model, not a Linformer: convert it with "
                              f"LinformerModel.from_pretrained_encoder({where!r}) or scripts/convert.py "
                              f"model_path={where}.")
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """HF's, checking the fields again after from_pretrained's keyword overrides, which HF sets after the config
        is built. Where the config is read for the weights saved beside it (a model's from_pretrained, directly or
        through an Auto class, asks with ``return_unused_kwargs=True``: the keywords left over go to the model), an
        override of a field the weights depend on (WEIGHT_FIELDS) that differs from the saved value is a
        ConfigError: those weights would load dropped, fresh, or read as something else. attention="full" passes:
        every weight it reads means what it meant (E and F are left unread)."""
        weights_follow = bool(kwargs.get("return_unused_kwargs"))
        kept = {key: kwargs.pop(key) for key in list(kwargs) if weights_follow and key in WEIGHT_FIELDS
                and not (key == "attention" and kwargs[key] == "full")}
        out = super().from_dict(config_dict, **kwargs)
        config = out[0] if isinstance(out, tuple) else out
        for key, asked in kept.items():
            _check_kept(config, key, asked)
        config.validate_architecture()
        return out

    def __setattr__(self, key, value):
        """A tuple given for a field that holds a list (projected_dim, global_positions, eos_token_id) is kept as
        the list config.json gives back, so that a config equals itself saved and read again (whether set when the
        config is built, by from_pretrained's overrides, or afterwards)."""
        if isinstance(value, tuple) and key in _list_fields():
            value = list(value)
        super().__setattr__(key, value)

    def __post_init__(self, **kwargs):
        _warn_near_misses(kwargs)
        self.fill_defaults()
        super().__post_init__(**kwargs)
        # Checked here too, so that a bad value raises ConfigError itself: @strict's own call of the validators
        # wraps their errors in StrictDataclassClassValidationError.
        self.validate_architecture()

    def fill_defaults(self) -> None:
        """The fields whose None means "the default" (documented above) set to the value derived from the others:
        when the config is built, and again where it is checked (a field set to None afterwards)."""
        if self.position_offset is None:  # config.json files written before the field existed are RoBERTa's
            self.position_offset = position_offset_of(self)
        if self.max_position_embeddings is None and fits_type(self.max_seq_len, int) and self.max_seq_len >= 1:
            # (a bad n is left for the checks to name as max_seq_len, not as the field derived from it)
            self.max_position_embeddings = self.max_seq_len + self.position_offset
        if self.classifier_pooling is None:
            self.classifier_pooling = "pooler" if self.classifier_head == "bert" else "cls"

    # ---- derived values -------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def projects_keys(self) -> bool:
        """Whether this model's attention projects keys and values to k rows (``projects_keys``)."""
        return projects_keys(self.attention)

    @property
    def attention_label(self) -> str:
        return attention_label(self.attention, self.projected_dim, self.sharing, self.projection)

    @property
    def pads_positions(self) -> bool:
        """RoBERTa's layout: positions start after pad_token_id, and padded tokens take position pad_token_id."""
        return self.pad_token_id is not None and position_offset_of(self) > self.pad_token_id

    def built_with(self) -> dict:
        """The fields a model's modules read once, when they are built (the attention's form and sizes, the
        projections' policies, the activation, the embeddings' sizes), and each layer's k: a model keeps computing
        with these however its config changes after, so a save checks that the config still says them
        (``LinformerPreTrainedModel.save_pretrained``). The number of layers is not among them: a model cut to its
        first layers, with its config's num_hidden_layers (and a per-layer projected_dim) cut to match, saves as
        that model; each layer left keeps its k."""
        fields = {name: getattr(self, name, None) for name in BUILT_FIELDS}
        ks = [self.k_of_layer(i) for i in range(self.num_hidden_layers)] if self.projects_keys else []
        return {**fields, "projected_dim": ks}

    def k_of_layer(self, layer_idx: int) -> int:
        """k for one layer (projected_dim may be a per-layer list)."""
        k = self.projected_dim
        return int(k[layer_idx]) if isinstance(k, list) else int(k)

    # ---- validation (called by @strict on construction and on from_pretrained) -----------------
    def validate_architecture(self):
        """Reject settings that would build a wrong model, naming the key at fault (a default set to None since the
        config was built derived again first)."""
        self.fill_defaults()
        _check_types(self)
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be a multiple of num_attention_heads "
                f"({self.num_attention_heads})."
            )
        projects_keys(self.attention)  # refuses an unknown mode
        tv = self.tokenizer_vocab_size
        if tv is not None and not 0 < tv <= self.vocab_size:
            raise ConfigError(f"tokenizer_vocab_size ({tv}) must be in 1..vocab_size ({self.vocab_size}): the "
                              "embedding rows past it are padding.")
        check_sharing(self.sharing)
        check_projection(self.projection)
        _check_choice("projection_init", self.projection_init, PROJECTION_INITS)
        _check_choice("classifier_head", self.classifier_head, _choices("classifier_head"))
        _check_choice("lm_head_activation", self.lm_head_activation, tuple(ACT2FN))
        _check_choice("hidden_act", self.hidden_act, tuple(ACT2FN))
        _check_values(self)
        _check_choice("classifier_pooling", self.classifier_pooling, _choices("classifier_pooling"))
        _check_choice("length_policy", self.length_policy, _choices("length_policy"))
        if self.problem_type is not None:
            _check_choice("problem_type", self.problem_type, PROBLEM_TYPES)
        why = ("E and F mix every position into each projected key, so it cannot attend causally"
               if projects_keys(self.attention) else "its full attention takes a padding mask, never a causal one")
        for key in ("is_decoder", "add_cross_attention"):
            if getattr(self, key):
                raise ConfigError(f"{key}=True: the Linformer is an encoder only ({why}); no decoder or "
                                  "cross-attention.")
        if self.classifier_pooling == "pooler" and self.classifier_head == "roberta":
            raise ConfigError(
                "classifier_pooling='pooler' needs classifier_head='bert': RoBERTa's head has its own dense + tanh "
                "on its input; choose classifier_pooling='cls' or 'mean'."
            )
        _validate_local_global(self)
        if self.length_policy == "resample" and (self.projection != "linear" or self.mask_empty_windows):
            cause = f"projection={self.projection!r}" if self.projection != "linear" else "mask_empty_windows=True"
            raise ConfigError(
                f"length_policy='resample' resamples a learned E (projection='linear') to every input's length, "
                f"so it cannot be combined with {cause}; use length_policy='slice'."
            )
        _validate_positions(self)
        _validate_projected_dims(self)


def _validate_positions(config: LinformerConfig) -> None:
    """The position table holds max_seq_len positions after position_offset."""
    n, offset = config.max_seq_len, config.position_offset
    if offset < 0:
        raise ConfigError(f"position_offset ({offset}) must be 0 or more.")
    if config.max_position_embeddings < n + offset:
        raise ConfigError(
            f"max_position_embeddings ({config.max_position_embeddings}) must be at least max_seq_len + "
            f"position_offset = {n + offset}: positions run from position_offset to position_offset + n - 1."
        )


def _validate_projected_dims(config: LinformerConfig) -> None:
    """projected_dim: one k, or one per layer; each in 1..n (dividing n for the pooling and conv projections), and
    the same for every layer where the projection is shared by the layers."""
    n = config.max_seq_len
    per_layer = isinstance(config.projected_dim, list)
    ks = config.projected_dim if per_layer else [config.projected_dim]
    if per_layer and len(ks) != config.num_hidden_layers:
        raise ConfigError(
            f"projected_dim is a per-layer list of {len(ks)} values but num_hidden_layers is "
            f"{config.num_hidden_layers}; give one k per layer or a single int."
        )
    if not config.projects_keys:
        return
    for i, k in enumerate(ks):
        where = f"projected_dim[{i}]" if per_layer else "projected_dim"
        if not 0 < int(k) <= n:
            raise ConfigError(f"{where} (k={k}) must be in 1..max_seq_len (n={n}): E and F are n x k.")
        if config.projection != "linear" and n % int(k):
            raise ConfigError(
                f"projection={config.projection!r} uses kernel = stride = n/k, so max_seq_len (n={n}) must be "
                f"divisible by {where} (k={k})."
            )
    if SHARING[config.sharing].across_layers and len(set(map(int, ks))) > 1:
        raise ConfigError(
            f"sharing={config.sharing!r} uses one projection for every layer, so projected_dim must be the same "
            f"for all layers (got {config.projected_dim})."
        )
    unused = [i for i, k in enumerate(map(int, ks)) if k >= n]
    if config.exact_short_inputs and unused:
        _warn_unused_projections(config, unused if per_layer else None)


def _warn_unused_projections(config: LinformerConfig, layers: list[int] | None) -> None:
    """A warning (once per process and setting) that exact_short_inputs with k = n leaves E and F unused: every
    input has at most n tokens, so each gets exact attention, and those E and F are never read nor trained."""
    where = "every layer" if layers is None or len(layers) == config.num_hidden_layers else f"layers {layers}"
    key = f"unused projections: n={config.max_seq_len}, k={config.projected_dim}"
    if key in _WARNED:
        return
    _WARNED.add(key)
    logger.warning("exact_short_inputs=True with projected_dim k = max_seq_len n = %d in %s: every input (at most n "
                   "tokens) gets exact attention there, so those E and F are never used nor trained; give a k below "
                   "n, or attention='full' for exact attention throughout.", config.max_seq_len, where)


# Whole-number fields may be 0 only here (ids and offsets count from 0; w = 0 is no window); every other one is >= 1.
_ZERO_ALLOWED = ("pad_token_id", "bos_token_id", "position_offset", "local_window")


@functools.cache  # the class's fields: read once, as every field set asks
def _list_fields() -> frozenset[str]:
    """LinformerConfig's fields whose type admits a list."""
    return frozenset(f.name for f in dataclasses.fields(LinformerConfig) if "list[" in str(f.type))


@functools.cache  # the class's fields: read once, as every config built checks its values by them
def _annotated(kind: str) -> tuple[str, ...]:
    """LinformerConfig's own fields annotated `kind` or `kind | None` (its annotations are strings): a 1.5 or a "yes"
    would otherwise be stored in config.json and built as something else (a k of 1, a truthy string)."""
    own = LinformerConfig.__annotations__
    return tuple(f.name for f in dataclasses.fields(LinformerConfig)
                 if f.name in own and f.type.replace(" ", "") in (kind, f"{kind}|None"))


def _check_types(config: LinformerConfig) -> None:
    for key in (*_annotated("int"), *_annotated("bool"), "projected_dim"):
        _check_type(key, getattr(config, key))


def _check_type(key: str, value, name: str | None = None) -> None:
    """ConfigError, naming the value `name` (default `key`), unless `value` has field `key`'s type: a whole number
    (>= 1, or >= 0 where _ZERO_ALLOWED), true/false, or projected_dim's one k or list of them; None passes a whole
    number field (unset: derived or defaulted). Other fields pass (their values are checked with the model's)."""
    name = name or key
    if key in _annotated("int"):
        low = 0 if key in _ZERO_ALLOWED else 1
        if value is not None and not (fits_type(value, int) and value >= low):
            kind = "" if isinstance(value, (int, float, str)) else \
                f" (a Python int; got a {type(value).__module__}.{type(value).__name__}: pass int(value))"
            raise ConfigError(f"{name}={value!r} must be a whole number >= {low}{kind}.")
    elif key in _annotated("bool"):
        if not fits_type(value, bool):
            raise ConfigError(f"{name}={value!r} must be true or false.")
    elif key == "projected_dim":
        ks = value if isinstance(value, list) else [value]
        if not ks or not all(fits_type(k, int) for k in ks):
            raise ConfigError(f"{name}={value!r} must be a whole number (or one per layer).")


def _check_values(config: LinformerConfig) -> None:
    """Values a model cannot run with, named: a dropout outside [0, 1) (dropout of 1 zeroes everything), a layer norm
    eps that is not a positive number (0 or less divides by zero or worse and trains to NaN), a negative init range."""
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
        value = getattr(config, key, None)
        if value is None and key == "classifier_dropout":
            continue
        if not fits_type(value, float) or not 0 <= value < 1:
            raise ConfigError(f"{key}={value!r} must be a probability in [0, 1).")
    eps = config.layer_norm_eps
    if not fits_type(eps, float) or not (eps > 0 and math.isfinite(eps)):
        raise ConfigError(f"layer_norm_eps={eps!r} must be a positive number (e.g. 1e-5).")
    init = config.initializer_range
    if not fits_type(init, float) or not (init >= 0 and math.isfinite(init)):
        raise ConfigError(f"initializer_range={init!r} must be a number >= 0 (the init's standard deviation).")


def _validate_local_global(config: LinformerConfig) -> None:
    w, positions, n = config.local_window, config.global_positions, config.max_seq_len
    if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= n:
        raise ConfigError(f"local_window={w!r} must be a whole number in 0..max_seq_len (n={n}).")
    if w == 1:  # radius w // 2 = 0: no local key at all, the paper's Linformer under another name
        raise ConfigError("local_window=1 gives no window: each query sees the w // 2 tokens on each side of it "
                          "(2 * (w // 2) + 1 with itself), none for w = 1. Give 0 for no window, or at least 2.")
    if positions is not None and not isinstance(positions, list):
        raise ConfigError(f"global_positions={positions!r} must be a list of positions (e.g. [0, -1]), or None.")
    if positions is not None:
        bad = [p for p in positions if isinstance(p, bool) or not isinstance(p, int) or not -n <= p < n]
        if bad:
            raise ConfigError(f"global_positions={list(positions)}: {bad} not a position in -{n}..{n - 1} "
                              f"(max_seq_len n={n}; negative counts from each row's last real token).")
        twice = next((p for i, p in enumerate(positions) if p in positions[:i]), None)
        if twice is not None:  # one key given twice: a second copy of it in every row's softmax, weighed double
            raise ConfigError(f"global_positions={list(positions)}: {twice} is given twice; give each position once.")
    if (w or positions) and (not config.projects_keys or config.projection != "linear"):
        raise ConfigError(
            "local_window and global_positions add exact keys beside a learned projection: they need "
            f"attention='linformer' and projection='linear' (got attention={config.attention!r}, "
            f"projection={config.projection!r}); for this attention pass local_window=0 and global_positions=[] "
            f"too (the model has local_window={w!r}, global_positions={positions!r}).")
    # overlap_columns says what the exact keys do to projected columns: without exact keys it has nothing to mask,
    # and is accepted as it is, so that local_window=0, global_positions=[] alone turn a converted model (saved with
    # "mask") into the paper's Linformer
    _check_choice("overlap_columns", config.overlap_columns, OVERLAP_COLUMNS)
    if config.landmark_pooling:
        needs = []
        if not (w or positions):
            needs.append("a local_window or global_positions (the one softmax that weighs each pooled key by its "
                         "token count)")
        if config.length_policy != "resample":
            needs.append(f"length_policy='resample' (got {config.length_policy!r})")
        if SHARING[config.sharing].separate_f:
            needs.append(f"E = F, sharing='kv' or 'layerwise' (got {config.sharing!r}): keys and values pool with one "
                         "weighting")
        if needs:
            raise ConfigError("landmark_pooling=True pools each projected column's window by attention; it needs "
                              + "; ".join(needs) + ".")


# The exact keys beside the projected ones, and how the projected ones pool (local_global): fields every record and
# conversion carries with k
EXACT_KEY_FIELDS = ("local_window", "global_positions", "landmark_pooling", "overlap_columns")
OVERLAP_COLUMNS = ("keep", "mask", "reduce")  # overlap_columns: a projected column whose tokens the exact keys hold
OVERLAP_LABELS = {"keep": "", "mask": ", covered columns masked", "reduce": ", reduced counts"}  # how reports name each

# The Linformer's attention fields beside the encoder's own shape: what a converted model (a transfer continued, a
# distillation student) takes from its settings, and with `attention` what a run's results record of it.
ATTENTION_FIELDS = ("max_seq_len", "projected_dim", "sharing", "projection", "length_policy", "mask_empty_windows",
                    "exact_short_inputs", *EXACT_KEY_FIELDS)
# The encoder's size: models that differ in one are different models, whatever their attention.
SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
# The model's architecture as a finetuning run's results.json records it: what a report's rows are told apart by.
RECORDED_FIELDS = ("attention", *ATTENTION_FIELDS, "classifier_pooling", *SIZE_FIELDS)
# The encoder's own fields (BERT's and RoBERTa's): what a conversion carries over from its source unchanged.
ENCODER_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "type_vocab_size",
                  "initializer_range", "layer_norm_eps", "pad_token_id", "bos_token_id", "eos_token_id",
                  "classifier_dropout")
# Fields a fresh model takes from its tokenizer (its vocabulary and special ids), never from a model group.
TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "tokenizer_vocab_size")
# Fields that change a weight's shape (or which weights exist): a run cannot continue across them.
SHAPE_FIELDS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                          "max_seq_len", "projected_dim", "sharing", "projection", "attention", "type_vocab_size",
                          "max_position_embeddings"})

# Fields the saved weights depend on: their shapes (SHAPE_FIELDS), which position a row of the position table stands
# for (position_offset, pad_token_id), which head weights exist and what they read (tie_word_embeddings,
# classifier_head, classifier_pooling), what a row of a learned E stands for (length_policy: a position under the
# slice, a share of the input under resampling). from_pretrained keeps them as saved (LinformerConfig.from_dict).
WEIGHT_FIELDS = SHAPE_FIELDS | {"position_offset", "pad_token_id", "tie_word_embeddings", "classifier_head",
                                "classifier_pooling", "length_policy"}


# WEIGHT_FIELDS whose change alters the shape of a saved weight (an embedding, a projection, E and F, the position
# table): transformers' own load finds the mismatch whatever config it is given
SIZE_CHECKED_FIELDS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "max_seq_len", "projected_dim",
                                 "type_vocab_size", "max_position_embeddings"})


def check_config_for_weights(saved: LinformerConfig, given: LinformerConfig) -> None:
    """ConfigError where `given`, the config passed to from_pretrained (``config=``) for the weights saved with the
    config `saved`, differs from it in a field those weights depend on (WEIGHT_FIELDS): transformers builds the model
    from `given` and loads the weights into it without reading config.json, so they would load dropped, fresh, or
    read as something else. The check and the words of a keyword override (``_check_kept``); attention="full"
    passes, as there. A field that changes a weight's shape (SIZE_CHECKED_FIELDS) is left to transformers, whose
    load refuses the mismatch (a RuntimeError) or, with ignore_mismatched_sizes=True, starts that weight fresh and says
    so, as for any Hugging Face model; the fields checked here are those a load would take in silence."""
    for key in sorted(WEIGHT_FIELDS - SIZE_CHECKED_FIELDS):
        asked = getattr(given, key)
        if not (key == "attention" and asked == "full"):
            _check_kept(saved, key, asked, keep=f"give config= the saved {key}")


def _check_kept(config: LinformerConfig, key: str, asked, keep: str | None = None) -> None:
    """ConfigError unless `asked`, an override of a WEIGHT_FIELDS field given to from_pretrained, is the value the
    saved model (`config`) has, naming both, how to `keep` the saved value (leave the keyword out) and the supported
    way to change it where there is one."""
    saved = getattr(config, key)
    if _as_saved(config, key, asked) == saved:
        return
    _check_alone(key, asked)  # a value no model takes is named as such
    if key in ("max_seq_len", "attention", "length_policy"):
        how = {"max_seq_len": "a longer n fills the position table with copies of its learned rows, and E and F "
                              "take it by resampling under length_policy='resample'",
               "attention": "E and F start as window means", "length_policy": "E and F are kept"}[key]
        route = (f"reshape it with LinformerModel.from_pretrained_encoder(path, {key}={asked!r}) ({how}; "
                 f"scripts/convert.py model_path=path model.{key}=...)")
    elif key in ("projected_dim", "sharing", "projection"):
        route = (f"convert the source encoder again with from_pretrained_encoder(source, {key}={asked!r}), whose E "
                 "and F start fresh (this model's are its trained ones)")
    elif key == "max_position_embeddings":
        route = "give max_seq_len to LinformerModel.from_pretrained_encoder(path, max_seq_len=...), which sets it"
    elif key == "num_hidden_layers" and first_layers(saved, asked):
        route = first_layers(saved, asked)
    else:
        route = "another value is another model, to pretrain or convert rather than load"
    raise ConfigError(f"{key}={asked!r} differs from the saved model's {key}={saved!r}, which its weights were saved "
                      f"for: from_pretrained loads them as saved, so {keep or f'leave {key} out'}; or {route}.")


def first_layers(saved: int, asked) -> str | None:
    """How to keep the first `asked` layers of a model saved with `saved` (Hugging Face's way to a shallower model
    from a deeper one), where `asked` is fewer; else None. No load or conversion does it (its config would not
    describe the weights, which are read as saved): the whole model loaded, its layers sliced, does."""
    if not fits_type(asked, int) or not 0 < asked < saved:
        return None
    return (f"to keep its first {asked} layers, load it whole and slice it: model.base_model.encoder.layer = "
            f"model.base_model.encoder.layer[:{asked}]; model.config.num_hidden_layers = {asked} (and, where k is "
            f"given per layer, model.config.projected_dim = model.config.projected_dim[:{asked}])")


def _check_alone(key: str, value) -> None:
    """ConfigError for a value field `key` never takes, whatever the other fields: its type, or one of its names."""
    _check_type(key, value)
    if key == "attention":
        projects_keys(value)
    elif key == "projection":
        check_projection(value)
    elif key == "sharing":
        check_sharing(value)
    elif _choices(key):
        _check_choice(key, value, _choices(key))


def _as_saved(config: LinformerConfig, key: str, value):
    """`value` in the form config.json gives back: a tuple as a list, one k as projected_dim's per-layer list where
    the saved model has one."""
    value = list(value) if isinstance(value, tuple) else value
    if key == "projected_dim" and isinstance(config.projected_dim, list) and fits_type(value, int):
        value = [value] * config.num_hidden_layers
    elif key == "projected_dim" and isinstance(value, list) and not isinstance(config.projected_dim, list) and \
            len(value) == config.num_hidden_layers and len(set(value)) == 1:
        value = value[0]
    return value


def exact_keys_label(local_window: int, global_positions, landmark_pooling: bool = False,
                     overlap_columns: str = "keep") -> str:
    """How reports name the exact local and global keys: 'window 128, global [0, -1]' (', landmarks' when the
    projected keys pool by attention, then OVERLAP_LABELS: ', covered columns masked' when a column whose every token
    the exact keys hold is masked (one they hold part of still counts those tokens again), ', reduced counts' when
    every column's count is also lowered by the tokens of it they hold)."""
    return f"window {local_window}" + (f", global {list(global_positions)}" if global_positions else "") + \
        (", landmarks" if landmark_pooling else "") + OVERLAP_LABELS[overlap_columns]


def exact_key_variants(windows, global_positions, landmarks: bool = False, overlap: bool = False) -> dict[str, dict]:
    """Per window w, {label: fields} of exact local keys of w tokens beside the projected ones with the global tokens
    and, with ``landmarks``, the same with landmark pooling, and with ``overlap`` each of those under every other
    overlap_columns rule (the projected columns the exact keys hold masked, "mask", and their counts lowered,
    "reduce"): the rows the measurement reports add."""
    variants = {}
    for w in windows:
        # "keep" named: a conversion gives every field it is not told its converted default ("mask")
        fields = {"local_window": w, "global_positions": list(global_positions), "overlap_columns": "keep"}
        rows = [fields] + ([{**fields, "landmark_pooling": True}] if landmarks else [])
        rows += [{**row, "overlap_columns": rule} for rule in OVERLAP_COLUMNS[1:] for row in rows] if overlap else []
        for row in rows:
            variants[exact_keys_label(w, global_positions, row.get("landmark_pooling", False),
                                      row.get("overlap_columns", "keep"))] = row
    return variants


def attention_label(attention: str, k: int | list[int] | tuple[int, ...] | None = None, sharing: str | None = None,
                    projection: str = "linear") -> str:
    """How reports name the attention: 'full attention' (no k, no sharing: full attention has no projection), or
    e.g. 'linformer k=256, headwise' ('linformer k=64..256, kv, conv' for per-layer k and a general projection)."""
    if not projects_keys(attention):
        return "full attention"
    ks = sorted(set(k)) if isinstance(k, (list, tuple)) else [k]
    text = f"linformer k={ks[0]}" + (f"..{ks[-1]}" if len(ks) > 1 else "")
    return ", ".join([text] + [x for x in (sharing, None if projection == "linear" else projection) if x])


_WARNED: set[str] = set()


def _warn_near_misses(kwargs: dict) -> None:
    """An attribute LinformerConfig does not know is kept and written back, as PretrainedConfig keeps any (tools
    annotate configs: quantisers, PEFT, exporters, hub metadata); one that looks like a misspelt field changes nothing
    the model reads, so it gets a warning with the field it resembles. Refusing typos is the job of the places a
    person types (``check_model_fields``: Hydra's model.* overrides, convert's settings)."""
    known = _HF_KWARGS | _HF4_KWARGS | GenerationConfig._get_default_generation_params().keys()
    fields = [f.name for f in dataclasses.fields(LinformerConfig)]
    for key in sorted(set(kwargs) - known - _WARNED):
        hint = did_you_mean(key, fields)
        if hint:
            _WARNED.add(key)  # once per process: loading builds a config several times
            logger.warning("LinformerConfig: %r is not a field, kept as an attribute the model does not read%s",
                           key, hint)


def check_model_fields(fields: Mapping, prefix: str = "model.") -> None:
    """ConfigError for the first key of `fields` (a model group, convert's settings) that is neither a LinformerConfig
    field nor an argument PretrainedConfig takes, with the closest field: where a person types the settings, a typo
    must not run silently. A value of the wrong type (``max_seq_len=abc``, ``max_seq_len=0``) is one too, named as
    typed: code that derives other fields from the settings (a conversion's position table) reads them before any
    config checks them. A null value is unset (the default)."""
    known = [f.name for f in dataclasses.fields(LinformerConfig)]
    for key, value in fields.items():
        if key not in known and key not in _HF_KWARGS | _HF4_KWARGS:
            raise ConfigError(f"{prefix}{key} is not a LinformerConfig field{did_you_mean(key, known)}.")
        if value is not None:
            _check_type(key, value, f"{prefix}{key}")


# How a command reaches a name of the user's own (a projection, a sharing mode): the end of the error refusing one
YOUR_OWN_IMPORTED = ("in a module, which a command imports where its config names it, imports=[my_module], and Python "
                     "code before building the model")


def check_projection(name: str) -> None:
    """ConfigError for a projection name that is neither the package's nor registered in this process, saying how a
    command reaches one of the user's own."""
    _check_choice("projection", name, PROJECTIONS,
                  f"; one of your own: linformer.modeling.register_projection {YOUR_OWN_IMPORTED}")


def check_sharing(name: str) -> None:
    """ConfigError for a sharing mode that is neither the package's nor added to SHARING in this process, saying how a
    command reaches one of the user's own (as ``check_projection``)."""
    _check_choice("sharing", name, _choices("sharing"),
                  f"; one of your own: an entry in linformer.modeling.configuration.SHARING {YOUR_OWN_IMPORTED}")


def _check_choice(key: str, value: str, choices, more: str = "") -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is not one of {', '.join(choices)}{more}.")


__all__ = [
    "ATTENTION_MODES",
    "CLASSIFIER_HEADS",
    "CLASSIFIER_POOLINGS",
    "EXACT_KEY_FIELDS",
    "LENGTH_POLICIES",
    "OVERLAP_COLUMNS",
    "PROJECTIONS",
    "PROJECTION_INITS",
    "RECORDED_FIELDS",
    "SHARING",
    "SIZE_FIELDS",
    "LinformerConfig",
    "Sharing",
    "attention_label",
    "check_config_for_weights",
    "check_model_fields",
    "check_projection",
    "check_sharing",
    "exact_key_variants",
    "exact_keys_label",
    "projects_keys",
]
