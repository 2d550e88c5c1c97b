"""linformer.report.cls_probe on the tiny pretraining run: uniform attention reads as maximum entropy."""

import math
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel

from linformer.errors import CheckpointError
from linformer.modeling import LinformerModel
from linformer.report.cls_probe import cls_stats, probe, to_markdown

from .conftest import write_sst2_fixture

REPO = Path(__file__).resolve().parents[2]


def _batch(lengths, n, vocab=50):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (len(lengths), n), generator=g)
    mask = torch.zeros(len(lengths), n, dtype=torch.long)
    for i, t in enumerate(lengths):
        mask[i, :t] = 1
    ids[:, 0] = 0  # <s>
    return {"input_ids": ids.masked_fill(mask == 0, 1), "attention_mask": mask}


@pytest.mark.parametrize("attention", ["full", "linformer"])
def test_zero_queries_give_uniform_attention_at_maximum_entropy(pretrained_run, attention):
    config = AutoConfig.from_pretrained(pretrained_run / "model", attention=attention)
    model = LinformerModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.zero_()
            layer.attention.self.query.bias.zero_()
    n = model.config.max_seq_len
    stats = cls_stats(model, _batch([n, n // 2, 5], n))
    assert len(stats["entropy"]) == model.config.num_hidden_layers
    assert stats["entropy"] == pytest.approx(stats["max_entropy"], abs=1e-4)
    k = model.config.projected_dim
    expected = math.log(k) if attention == "linformer" else sum(map(math.log, [n, n // 2, 5])) / 3
    assert stats["max_entropy"][0] == pytest.approx(expected, abs=1e-5)


def test_spread_is_zero_for_identical_inputs_and_probe_reads_a_task(pretrained_run, tmp_path, caplog):
    model = AutoModel.from_pretrained(pretrained_run / "model", add_pooling_layer=False).eval()
    n = model.config.max_seq_len
    b = _batch([n], n)
    same = {k: v.repeat(4, 1) for k, v in b.items()}
    assert cls_stats(model, same)["cls_spread"] == pytest.approx(0.0, abs=1e-5)
    assert cls_stats(model, _batch([n, n, n, n], n))["cls_spread"] > 1e-3

    write_sst2_fixture(tmp_path / "mirror/glue/sst2")
    (row,) = probe([str(pretrained_run)], ["sst2"], data_mirror=str(tmp_path / "mirror"), n_examples=16)
    assert row["examples"] == 16 and len(row["entropy"]) == model.config.num_hidden_layers
    assert all(0 < e <= m + 1e-5 for e, m in zip(row["entropy"], row["max_entropy"], strict=True))
    md = to_markdown([row], "python scripts/cls_probe.py x")
    assert pretrained_run.name in md and "| sst2 | 16 |" in md
    with caplog.at_level("WARNING", logger="linformer.report.cls_probe"):  # more than the split holds: said
        (row,) = probe([str(pretrained_run)], ["sst2"], data_mirror=str(tmp_path / "mirror"), n_examples=1000)
    assert row["examples"] == 40 and "--examples 1000: the sst2 eval split holds 40 examples" in caplog.text
    with pytest.raises(CheckpointError, match="holds no model"):
        probe([str(tmp_path)], ["sst2"], data_mirror=str(tmp_path / "mirror"))


@pytest.mark.parametrize("examples", ["0", "-3", "1"])
def test_fewer_than_two_examples_are_refused_naming_the_flag(examples, tmp_path, capsys):
    """The spread is a standard deviation across inputs: one example has none, none gives no table."""
    from ..conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("cls_probe").main([str(tmp_path), "--examples", examples])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == f"error: argument --examples: must be at least 2, not {examples}"


def test_a_local_global_linformer_gets_no_entropy_and_the_table_says_why(pretrained_run):
    """The converted default (exact local and global keys beside the projected ones) computes no attention
    probabilities: its row keeps its spread, and the entropy column says why it is empty, never a traceback."""
    from linformer.report.cls_probe import NO_MAPS_EXACT_KEYS

    config = AutoConfig.from_pretrained(pretrained_run / "model", attention="linformer", local_window=4,
                                        global_positions=[0, -1])
    model = LinformerModel(config, add_pooling_layer=False).eval()
    n = model.config.max_seq_len
    stats = cls_stats(model, _batch([n, n // 2, 5], n))
    assert stats["entropy"] == [] and stats["no_entropy"] == NO_MAPS_EXACT_KEYS and stats["cls_spread"] > 0
    md = to_markdown([{"run": "lg", "task": "sst2", "examples": 3, **stats}], "cmd")
    assert f"| lg | sst2 | 3 | - ({NO_MAPS_EXACT_KEYS}) |" in md


def test_a_hugging_face_encoder_is_probed_with_attention_that_returns_its_maps(tmp_path):
    """A BERT model loads with SDPA by default, which returns no attention maps (an empty entropy column without a
    word); the probe loads it with eager attention."""
    from transformers import BertConfig, BertModel

    from linformer.report.cls_probe import load_probed

    BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64)).save_pretrained(tmp_path / "bert")
    model = load_probed(str(tmp_path / "bert"))
    stats = cls_stats(model, _batch([8, 5], 8))
    assert len(stats["entropy"]) == 2 and "no_entropy" not in stats


def test_rows_measured_before_an_error_are_written_marked_partial(pretrained_run, tmp_path, monkeypatch, capsys):
    from linformer.report import cls_probe

    from ..conftest import load_script

    write_sst2_fixture(tmp_path / "mirror/glue/sst2")
    sample = cls_probe.eval_sample
    calls = []

    def fails_second(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise CheckpointError("the second run broke")
        return sample(*args, **kw)

    monkeypatch.setattr(cls_probe, "eval_sample", fails_second)
    out = tmp_path / "probe.md"
    with pytest.raises(SystemExit) as stop:
        load_script("cls_probe").main([str(pretrained_run), str(pretrained_run), "--tasks", "sst2", "--examples", "4",
                                       "--data-mirror", str(tmp_path / "mirror"), "--out", str(out)])
    assert stop.value.code == 2 and "the second run broke" in capsys.readouterr().err
    md = out.read_text()
    assert "**Partial: stopped after 1 rows by an error (CheckpointError: the second run broke)" in md
    assert md.count("| sst2 | 4 |") == 1


def test_a_missing_mirror_is_one_line_naming_the_flag_without_transformers_load_report(pretrained_run, tmp_path,
                                                                                        capsys, caplog):
    """transformers' LOAD REPORT table (an MLM head left behind) came before the error, which advised
    task.data_dir=null, a finetuning key cls_probe does not take."""
    missing = tmp_path / "nothere"
    with pytest.raises(FileNotFoundError, match=rf"^task directory {missing}/glue/sst2 not found: .*\(its folder "
                                                rf"under --data-mirror {missing}\)$") as err:
        probe([str(pretrained_run)], ["sst2"], data_mirror=str(missing), n_examples=4)
    assert "task.data_dir" not in str(err.value)
    assert "LOAD REPORT" not in capsys.readouterr().err + caplog.text


def test_a_bar_in_a_run_name_is_escaped_not_a_column_more():
    """The table's cells go through tables.table_row, which escapes a "|" (it would split the row)."""
    row = {"run": "outputs/finetune/a|b", "task": "sst2", "examples": 8, "entropy": [1.0], "max_entropy": [2.0],
           "cls_spread": 0.5}
    assert "| a\\|b | sst2 | 8 | 1.00 [2.00] | 0.500 |" in to_markdown([row], "cmd").splitlines()


def test_a_task_config_of_ones_own_in_a_config_dir_is_probed(pretrained_run, tmp_path, capsys):
    """--tasks took the package's tasks alone (argparse's choices): a task config of one's own, which finetune's
    task= reads from configs/task/ or a --config-dir, is probed too, its files where its data_dir says."""
    from linformer.data import tasks

    from ..conftest import load_script

    mine = tmp_path / "mine" / "task"
    mine.mkdir(parents=True)
    example = (REPO / "configs" / "task" / "_example.yaml").read_text()
    (mine / "hues.yaml").write_text(example.replace("name: colors", "name: hues")
                                    .replace("data_dir: ???", f"data_dir: {tmp_path / 'hues'}"))
    colors = ("red", "green", "blue")
    (tmp_path / "hues").mkdir()
    rows = [(f"a {colors[i % 3]} {colors[i % 3]} thing {i}", i % 3) for i in range(12)]
    (tmp_path / "hues" / "dev.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    saved, titles = dict(tasks.TASKS), dict(tasks.TITLES)
    try:
        code = load_script("cls_probe").main([str(pretrained_run), "--tasks", "hues", "--examples", "4",
                                              "--config-dir", str(tmp_path / "mine")])
    finally:  # in place: modules hold the registries by reference
        tasks.TASKS.clear(), tasks.TASKS.update(saved), tasks.TITLES.clear(), tasks.TITLES.update(titles)
    assert code == 0 and "| hues | 4 |" in capsys.readouterr().out


def test_a_task_that_is_no_task_config_is_one_line_with_a_did_you_mean(capsys, tmp_path):
    from ..conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("cls_probe").main([str(tmp_path), "--tasks", "sst3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and err[-1].startswith("error: ") and "sst2" in err[-1]


def test_a_task_config_with_data_dir_unset_says_what_cls_probe_takes(capsys, tmp_path):
    """--tasks _example gave finetune's advice, "give it on the command line, task.data_dir=...", which cls_probe
    does not take: it takes task configs (--tasks NAME, --config-dir FOLDER)."""
    from ..conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("cls_probe").main([str(tmp_path), "--tasks", "_example"])
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and err.startswith("error: task.data_dir is not set: ")
    assert err.endswith("; cls_probe takes no overrides: set it in a copy of that file, task/<name>.yaml in a folder "
                        "of your own, and give --tasks <name> --config-dir FOLDER (configs/task/_example.yaml)")
    assert "task.data_dir=..." not in err
