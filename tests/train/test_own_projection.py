"""A projection or sharing mode of one's own reaches the commands through the config's ``imports`` key
(hydra_start.import_modules): pretraining imports the module that registers it, trains with it and saves a model that
loads where it is imported; what the run prints to run next, and its export, import it too."""

import shlex
import sys

import pytest
import torch

from linformer.errors import ConfigError
from tests.conftest import run_script

from .test_pretrain import _script_args

MODULE = '''
from linformer.modeling import Projection, register_projection


class Strided(Projection):
    """Every (n/k)-th key or value kept."""

    def __init__(self, n, k):
        super().__init__()
        self.stride = n // k
        self.initialise()

    def projected_flops(self, T, head_dim, num_heads):
        return -(-T // self.stride), 0.0

    def forward(self, x, mask):
        return x[:, :, ::self.stride], None if mask is None else mask[:, ::self.stride]


register_projection("cc_strided", lambda config, k, heads: Strided(config.max_seq_len, k))

from linformer.modeling.configuration import SHARING
from linformer.modeling.values import Sharing

SHARING["cc_layerwise_heads"] = Sharing(per_head=True, separate_f=False, across_layers=True)
'''


@pytest.fixture
def own_module(tmp_path, monkeypatch, registries):
    """A module registering the projection cc_strided, in the folder the command starts in (not on sys.path)."""
    (tmp_path / "cc_strided_projection.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    sys.modules.pop("cc_strided_projection", None)


def _forget_module():
    """The process as a new command's: the module not imported, nothing it registered known."""
    from linformer.modeling import attention, configuration

    sys.modules.pop("cc_strided_projection", None)
    configuration.SHARING.pop("cc_layerwise_heads", None)
    attention.PROJECTION_BUILDERS.pop("cc_strided", None)
    configuration.PROJECTIONS[:] = [name for name in configuration.PROJECTIONS if name != "cc_strided"]


def test_a_projection_named_in_imports_pretrains_saves_and_loads(tiny_data, tmp_path, own_module, monkeypatch):
    run = tmp_path / "run"
    steps = ["trainer.max_steps=2", "trainer.warmup_steps=0", "trainer.save_every=2", "trainer.eval_every=2"]
    argv = _script_args(tiny_data, run, "imports=[cc_strided_projection]", "model.projection=cc_strided", *steps)[2:]
    assert run_script("pretrain", argv, monkeypatch) == 0
    from linformer.modeling import LinformerForMaskedLM

    model = LinformerForMaskedLM.from_pretrained(str(run / "model")).eval()
    assert model.config.projection == "cc_strided"
    ids = torch.tensor([[5, 6, 7, 8] * 8])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[..., :model.config.tokenizer_vocab_size]  # not the padding rows' -inf
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("override, refusal", [
    ("model.projection=cc_strided", "error: model: projection='cc_strided' is not one of linear"),
    # the projection's refusal said how to reach one of one's own (imports=); the sharing mode's did not
    ("model.sharing=cc_layerwise_heads", "error: model: sharing='cc_layerwise_heads' is not one of none, headwise"),
])
def test_an_unregistered_name_is_refused_first_naming_imports(tiny_data, tmp_path, monkeypatch, capsys, override,
                                                               refusal):
    """Refused before the warmup that is as long as the run: the fix is a module to import, not another number."""
    argv = _script_args(tiny_data, tmp_path / "run", override, "trainer.max_steps=1")[2:]
    assert run_script("pretrain", argv, monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(refusal)
    assert "imports=[my_module]" in err[-1]
    assert not (tmp_path / "run").exists()


def test_a_module_not_found_is_one_error_line(tiny_data, tmp_path, monkeypatch, capsys):
    argv = _script_args(tiny_data, tmp_path / "run", "imports=[no_such_module_here]")[2:]
    assert run_script("pretrain", argv, monkeypatch) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "error: imports: no module 'no_such_module_here' is found here")


def test_a_sharing_mode_named_in_imports_is_built_as_it_says_and_what_follows_the_run_imports_it(
        tiny_data, tmp_path, own_module, monkeypatch, capsys):
    """A mode shared across layers with one E per head was trained as plain layerwise (one E for all heads); the
    run's next: finetuning command left imports= out, so that pasted it failed on the unknown mode, and its export,
    which takes no imports=, could not rebuild the model at all."""
    from linformer.configs import compose
    from linformer.modeling import LinformerForMaskedLM
    from linformer.train.export import export_run

    run = tmp_path / "run"
    steps = ["trainer.max_steps=2", "trainer.warmup_steps=0", "trainer.save_every=2", "trainer.eval_every=2"]
    argv = _script_args(tiny_data, run, "imports=[cc_strided_projection]", "model.sharing=cc_layerwise_heads",
                        *steps)[2:]
    assert run_script("pretrain", argv, monkeypatch) == 0
    model = LinformerForMaskedLM.from_pretrained(str(run / "model"))
    config = model.config
    assert model.roberta.encoder.E.weight.shape == (config.num_attention_heads, config.max_seq_len,
                                                   config.k_of_layer(0))
    (line,) = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("next: ")]
    words = shlex.split(line.removeprefix("next: "))
    assert "imports=[cc_strided_projection]" in words
    assert list(compose("finetune", words[2:]).imports) == ["cc_strided_projection"]

    _forget_module()
    with pytest.raises(ConfigError, match=r"records imports=\['cc_strided_projection'\] .*give (--imports "
                                          r"cc_strided_projection|imports=\['cc_strided_projection'\]) to import"):
        export_run(run, tmp_path / "exported", step=2)  # a run folder names no code that export runs by itself
    done = export_run(run, tmp_path / "exported", step=2, imports=["cc_strided_projection"])
    assert LinformerForMaskedLM.from_pretrained(str(done["out"])).config.sharing == "cc_layerwise_heads"
    from linformer.files.runs import export_command

    # the package's own advice to export the run (prune's, a resume's, a load's) names what export must import
    assert shlex.split(export_command(run, "--step", 2))[-2:] == ["--imports", "cc_strided_projection"]
