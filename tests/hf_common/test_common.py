"""transformers' own common model tests (ModelTesterMixin) and config tests (ConfigTester) on the three Linformer
classes, through this project's tester, with RoBERTa under the same harness as the control. The kit comes from the
installed transformers version's source distribution (tests/hf_common/kit.py). Every skip says why."""

import unittest

import pytest
from transformers import RobertaConfig, RobertaForMaskedLM, RobertaForSequenceClassification, RobertaModel

from linformer import LinformerConfig, LinformerForMaskedLM, LinformerForSequenceClassification, LinformerModel

from . import kit

KIT, WHY = kit.load()
if KIT is None:
    pytest.skip(WHY, allow_module_level=True)
common, config_common = KIT
ids_tensor, random_attention_mask = common.ids_tensor, common.random_attention_mask

# transformers' in-tree models are named in its static auto mappings, which the common tests read to tell a base
# model from a head and which labels a head takes; AutoModel.register (linformer/modeling/auto.py) fills the lazy
# mappings only. For the length of this module the Linformer's classes stand where an in-tree model's would.
MAPPINGS = {"MODEL_MAPPING_NAMES": "LinformerModel", "MODEL_FOR_MASKED_LM_MAPPING_NAMES": "LinformerForMaskedLM",
            "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "LinformerForSequenceClassification"}


@pytest.fixture(autouse=True, scope="module")
def _in_tree_names():
    from transformers.models.auto import modeling_auto

    added = [name for name in MAPPINGS if "linformer" not in getattr(modeling_auto, name)]
    for name in added:
        getattr(modeling_auto, name)["linformer"] = MAPPINGS[name]
    yield
    for name in added:
        del getattr(modeling_auto, name)["linformer"]


class EncoderTester:
    """A small encoder and its inputs, as transformers' model testers give them (batch 13 x 7 tokens, width 32)."""

    def __init__(self, parent, config_class, **extra):
        self.parent, self.config_class, self.extra = parent, config_class, extra
        self.batch_size, self.seq_length, self.is_training = 13, 7, True
        self.vocab_size, self.hidden_size, self.num_hidden_layers, self.num_attention_heads = 99, 32, 2, 4
        self.intermediate_size, self.num_labels = 37, 3

    def get_config(self):
        return self.config_class(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                                 num_hidden_layers=self.num_hidden_layers, num_attention_heads=self.num_attention_heads,
                                 intermediate_size=self.intermediate_size, hidden_act="gelu",
                                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
                                 num_labels=self.num_labels, **self.extra)

    def prepare_config_and_inputs_for_common(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


# n = 16 with k = 4 projected positions: the tests' 7-token inputs run through E and F
LINFORMER = dict(max_seq_len=16, projected_dim=4, attention="linformer", sharing="headwise")
ROBERTA = dict(max_position_embeddings=512, type_vocab_size=16)


class RobertaLayout:
    """RoBERTa's positions: from input_ids they skip padding (pad_token_id = 1 can be drawn among the random ids),
    from inputs_embeds they count on; so the equality test passes the positions, as the kit's docstring invites."""

    def test_inputs_embeds_matches_input_ids(self):
        import torch

        positions = torch.arange(self.model_tester.seq_length) + 2  # after pad_token_id, RoBERTa's offset
        super().test_inputs_embeds_matches_input_ids(
            position_ids=positions.expand(self.model_tester.batch_size, -1).to(common.torch_device))


class LinformerModelTest(RobertaLayout, common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = (LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification)
    test_resize_embeddings = True

    def setUp(self):
        self.model_tester = EncoderTester(self, LinformerConfig, **LINFORMER)
        self.config_tester = config_common.ConfigTester(self, config_class=LinformerConfig, hidden_size=32,
                                                        num_attention_heads=4, num_hidden_layers=2)

    def test_config(self):
        self.config_tester.run_common_tests()

    @unittest.skip(reason="the Linformer's attention maps are T x k (keys projected to k positions), not T x T; "
                          "tests/modeling/test_attention.py checks their shape and that each row sums to 1")
    def test_attention_outputs(self):
        pass


# The control tests transformers' RoBERTa, not this package: it tells a harness failure from the Linformer's when one
# fails, so it runs with the slow tests (make test-all), not in every make test
@pytest.mark.slow
class RobertaControlTest(RobertaLayout, common.ModelTesterMixin, unittest.TestCase):
    """RoBERTa through the same harness: what passes here and fails for the Linformer is the Linformer's."""
    all_model_classes = (RobertaModel, RobertaForMaskedLM, RobertaForSequenceClassification)

    def setUp(self):
        self.model_tester = EncoderTester(self, RobertaConfig, **ROBERTA)
        self.config_tester = config_common.ConfigTester(self, config_class=RobertaConfig, hidden_size=32)

    def test_config(self):
        self.config_tester.run_common_tests()
