"""A saved model carries the model's code (transformers' remote code): `from_pretrained(dir, trust_remote_code=True)`
loads it where this package is not installed, with the outputs the package gives."""

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import AutoModel

from linformer import LinformerForMaskedLM, LinformerForSequenceClassification, LinformerModel

from .conftest import tiny_config

# the only imports the saved code may make besides its own modules: what a transformers install already has
ALLOWED = {"torch", "transformers", "huggingface_hub"}


def _config():
    return tiny_config(max_seq_len=32, projected_dim=8, local_window=8, global_positions=[0, -1])


@pytest.mark.parametrize("cls", [LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification])
def test_a_saved_model_carries_code_that_imports_nothing_of_the_package(tmp_path, cls):
    """Whichever class is saved, config.json names every Auto class and every module it names is saved (a bare
    encoder's own module does not import the task models')."""
    cls(_config()).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map == {"AutoConfig": "configuration.LinformerConfig", "AutoModel": "model.LinformerModel",
                        "AutoModelForMaskedLM": "task_models.LinformerForMaskedLM",
                        "AutoModelForSequenceClassification": "task_models.LinformerForSequenceClassification"}
    saved = {p.stem for p in tmp_path.glob("*.py")}
    assert {entry.split(".")[0] for entry in auto_map.values()} <= saved
    for name in saved:  # every relative import is a sibling that was saved; every absolute one is installed anyway
        for node in ast.walk(ast.parse((tmp_path / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and (node.module or "") in saved, (name, ast.unparse(node))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                tops = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                outside = {t.split(".")[0] for t in tops} - ALLOWED - set(sys.stdlib_module_names)
                assert not outside, (name, ast.unparse(node))
    assert type(AutoModel.from_pretrained(tmp_path)) is LinformerModel  # the package's own classes where imported


# The three checks where the package is missing run their scripts in one interpreter, each in a folder of its own:
# every start imports transformers' model code, seconds of each fast-suite run.
RUNNER = textwrap.dedent("""
    import contextlib, io, json, os, sys, traceback
    sys.modules["linformer"] = None  # as on a machine without the package: any import of it fails
    said = {}
    for name, (folder, script) in json.loads(sys.argv[1]).items():
        os.chdir(folder)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(script, name, "exec"), {"__name__": "__main__"})
            said[name] = [0, out.getvalue()]
        except BaseException:
            said[name] = [1, out.getvalue() + traceback.format_exc()]
    json.dump(said, open(sys.argv[2], "w"))
""")


@pytest.fixture(scope="module")
def without_the_package(tmp_path_factory):
    """{check: (its folder, its expected values, (status, what it printed))}: each check's folder built here with the
    package, its script run once where the package is missing."""
    root = tmp_path_factory.mktemp("without_the_package")
    built = {name: (root / name, *build(root / name)) for name, build in
             (("every class", _every_class), ("bare encoder", _bare_encoder), ("tokenizer", _tokenizer))}
    env = {"HF_MODULES_CACHE": str(root / "modules"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    sections = {name: (str(folder), script) for name, (folder, script, _) in built.items()}
    result = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(sections), str(root / "said.json")],
                            capture_output=True, text=True, env=env, timeout=300, cwd=root, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    said = json.loads((root / "said.json").read_text())
    return {name: (folder, expected, tuple(said[name]), result.stderr) for name, (folder, _, expected) in built.items()}


def _every_class(folder):
    folder.mkdir()
    torch.manual_seed(0)
    ids = torch.randint(4, 64, (2, 32))
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    expected = {}
    for cls, auto in ((LinformerForMaskedLM, "AutoModelForMaskedLM"),
                      (LinformerForSequenceClassification, "AutoModelForSequenceClassification")):
        model = cls(_config()).eval()
        model.save_pretrained(folder / auto)
        with torch.no_grad():
            expected[auto] = model(ids, attention_mask=mask).logits
    with torch.no_grad():
        expected["AutoModel"] = LinformerModel.from_pretrained(folder / "AutoModelForMaskedLM").eval()(
            ids, attention_mask=mask).last_hidden_state
    torch.save({"ids": ids, "mask": mask, "expected": expected}, folder / "io.pt")
    return textwrap.dedent(f"""
        import torch, transformers
        io = torch.load({str(folder / "io.pt")!r})
        for auto, out in io["expected"].items():
            where = {str(folder)!r} + "/" + ("AutoModelForMaskedLM" if auto == "AutoModel" else auto)
            model = getattr(transformers, auto).from_pretrained(where, trust_remote_code=True).eval()
            assert type(model).__module__.startswith("transformers_modules."), type(model)
            with torch.no_grad():
                got = model(io["ids"], attention_mask=io["mask"])
            got = got.last_hidden_state if auto == "AutoModel" else got.logits
            assert torch.equal(got, out), (auto, (got - out).abs().max())
            print("loaded", auto)
    """), list(expected)


def test_without_the_package_trust_remote_code_loads_every_class_with_the_same_outputs(without_the_package):
    _, expected, (status, out), _ = without_the_package["every class"]
    assert status == 0, out[-3000:]
    assert out.split("\n")[:3] == [f"loaded {a}" for a in expected]


def _bare_encoder(folder):
    folder.mkdir()
    torch.manual_seed(0)
    ids = torch.randint(4, 64, (2, 32))
    encoder = LinformerModel(_config()).eval()
    encoder.save_pretrained(folder / "bare")
    LinformerForMaskedLM(_config()).save_pretrained(folder / "mlm")
    with torch.no_grad():
        torch.save({"ids": ids, "hidden": encoder(ids).last_hidden_state}, folder / "io.pt")
    return textwrap.dedent(f"""
        import json, torch, transformers
        io = torch.load({str(folder / "io.pt")!r})
        transformers.AutoModelForMaskedLM.from_pretrained("bare", trust_remote_code=True).save_pretrained("again")
        transformers.AutoModel.from_pretrained("mlm", trust_remote_code=True).save_pretrained("encoder")
        print("encoder serves", *json.load(open("encoder/config.json"))["auto_map"])
        transformers.AutoModel.from_pretrained("encoder", trust_remote_code=True)
        try:  # the saved code keeps the weights' fields as saved, as the package does
            transformers.AutoModel.from_pretrained("bare", trust_remote_code=True, sharing="kv")
        except Exception as err:
            print("refused", type(err).__name__, str(err).split(":")[0])
        config = transformers.AutoConfig.from_pretrained("bare", trust_remote_code=True)
        config.sharing = "kv"  # the same change through config=, which transformers reads in place of config.json
        try:
            transformers.AutoModel.from_pretrained("bare", trust_remote_code=True, config=config)
        except Exception as err:
            print("refused config=", type(err).__name__, str(err).split(":")[0])
        for where in ("bare", "again"):
            for auto in ("AutoModelForMaskedLM", "AutoModelForSequenceClassification", "AutoModel"):
                model = getattr(transformers, auto).from_pretrained(where, trust_remote_code=True).eval()
                assert type(model).__module__.startswith("transformers_modules."), type(model)
                with torch.no_grad():
                    hidden = getattr(model, "roberta", model)(io["ids"]).last_hidden_state
                if where == "bare":
                    assert torch.equal(hidden, io["hidden"]), (auto, (hidden - io["hidden"]).abs().max())
                print("loaded", where, auto)
    """), None


def test_a_bare_encoder_saved_or_saved_again_without_the_package_loads_as_every_class(without_the_package):
    """A bare encoder's directory serves the masked-LM and classifier classes too (each with the encoder's weights),
    and so does a model loaded through the saved code and saved again where the package is missing. A bare encoder
    loaded that way has only its own modules, so its copy names only the classes it can serve. An override of a
    field its weights depend on is refused by the saved code too, as a keyword or through config=."""
    _, _, (status, out), _ = without_the_package["bare encoder"]
    assert status == 0, out[-3000:]
    assert out.count("loaded") == 6, out
    assert "encoder serves AutoConfig AutoModel\n" in out
    assert ("refused ConfigError sharing='kv' differs from the saved model's sharing='headwise', which its weights "
            "were saved for\n") in out
    assert ("refused config= ConfigError sharing='kv' differs from the saved model's sharing='headwise', which its "
            "weights were saved for\n") in out


def test_converting_from_the_saved_code_says_it_needs_the_package(tmp_path, monkeypatch):
    """from_pretrained_encoder is the package's (convert): the saved code holds the model only."""
    monkeypatch.setattr("importlib.import_module", lambda *a: (_ for _ in ()).throw(ModuleNotFoundError("convert")))
    with pytest.raises(ImportError, match="needs the linformer package that made this model"):
        LinformerForMaskedLM.from_pretrained_encoder(tmp_path)


def test_saving_again_into_a_folder_replaces_its_older_copies_of_the_code(tmp_path):
    """A bare encoder's save copies the task models' module beside its own: an older copy there (an earlier save,
    by an older package) is replaced, so the folder's code is all of one version."""
    (tmp_path / "task_models.py").write_text("# an older copy\n")
    LinformerModel(_config()).save_pretrained(tmp_path)
    from linformer.modeling import task_models

    assert (tmp_path / "task_models.py").read_text() == Path(task_models.__file__).read_text()


def _asking_folder(tmp_path) -> Path:
    """A model folder whose config asks to run its own code (a model type transformers does not know, an auto_map
    naming the folder's module); the module leaves a mark when imported."""
    folder = tmp_path / "asks"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "askingmodel",
                                                    "auto_map": {"AutoConfig": "asking.AskingConfig"}}))
    (folder / "asking.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    return folder


def test_a_folder_asking_to_run_its_own_code_is_refused_without_a_prompt(tmp_path, monkeypatch):
    """transformers asks on a terminal whether to run such a folder's code (trust_remote_code left unset), and one
    'y' ran it; read through finetuning's loader, the refusal said the config.json 'cannot be read'."""
    from linformer.errors import CheckpointError
    from linformer.modeling.loading import load_classifier

    folder = _asking_folder(tmp_path)
    monkeypatch.setattr("builtins.input", lambda *a: "y")  # a user who answers yes to whatever is asked
    with pytest.raises(CheckpointError) as err:
        load_classifier(str(folder), ["negative", "positive"], from_scratch=False)
    message = str(err.value)
    assert message.startswith(f"{folder} asks to run its own code") and "linformer does not run" in message
    assert "\n" not in message and not (tmp_path / "ran").exists()


def test_the_package_reads_every_model_config_and_tokenizer_through_load_auto():
    """One home for reading what a user hands over (load_auto: never a folder's own code): nothing else in the
    package or its scripts calls an Auto class's from_pretrained (a model card's usage text may show it)."""
    repo = Path(__file__).resolve().parents[2]
    callers = []
    for path in sorted(p for folder in ("linformer", "scripts") for p in (repo / folder).rglob("*.py")):
        name = str(path.relative_to(repo))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
            if func.endswith(".from_pretrained") and func.split(".")[-2].startswith("Auto") \
                    and name != "linformer/data/io.py":
                callers.append(f"{name}:{node.lineno}")
    assert callers == []


def _tokenizer(folder):
    from transformers import BertTokenizer

    from linformer.modeling.saving import save_model_dir

    folder.mkdir()
    words = ["good", "bad", "film", "is", "."]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])})
    model = LinformerForSequenceClassification(_config())
    save_model_dir(model, tok, folder / "saved")
    expected = tok("good film", "is bad .", return_token_type_ids=False)  # a one-segment model takes no segment ids
    return textwrap.dedent("""
        import json, transformers
        name = json.load(open("saved/tokenizer_config.json"))["tokenizer_class"]
        tok = getattr(transformers, name).from_pretrained("saved")
        print(json.dumps(dict(tok("good film", "is bad ."))), tok.model_max_length)
        auto = transformers.AutoTokenizer.from_pretrained("saved", trust_remote_code=True)
        assert dict(auto("good film", "is bad .")) == dict(tok("good film", "is bad .")), type(auto)
    """), dict(expected)


def test_without_the_package_the_tokenizer_loads_by_its_class_without_asking_to_run_code(without_the_package):
    """AutoTokenizer reads config.json first (transformers 5), whose auto_map makes it ask whether to run the model's
    code; the tokenizer itself is a plain transformers class, named in tokenizer_config.json, whose own from_pretrained
    loads it without that question (what the card's usage says)."""
    folder, expected, (status, out), stderr = without_the_package["tokenizer"]
    saved = json.loads((folder / "saved" / "tokenizer_config.json").read_text())
    assert saved["tokenizer_class"] == "BertTokenizer" and saved["model_max_length"] == 32  # n
    assert status == 0, out[-3000:]
    assert "custom code" not in out + stderr
    ids, n = out.split("\n")[0].rsplit(" ", 1)
    assert json.loads(ids) == expected and n == "32"
