"""tools/table2_moved.py: what moved between two pretrained Table 2 reports, rows paired across a row's renaming."""

import json

import pytest

from tests.conftest import load_script


def _tool():
    return load_script("table2_moved", "tools")


def _report(name: str, acc: float, diff: float, p: float) -> dict:
    teacher = {"name": "full attention (teacher)", "tasks": {"imdb": {"acc": 88.0, "examples": 2000}}}
    row = {"name": name, "tasks": {"imdb": {"acc": acc, "examples": 2000, "vs_teacher": {"diff": diff, "p": p}}}}
    return {"rows": [teacher, row]}


@pytest.mark.parametrize("retired", ["paper's slice", "E's first T rows (the paper's)"])
def test_a_row_under_its_retired_label_pairs_with_its_new_name(retired):
    """A report written before "paper's slice", then "E's first T rows (the paper's)", was renamed "E's first T rows
    (fairseq's)" pairs that row with today's, so only its moved figures are listed, not a row gone and a new cell."""
    old = _report(f"linformer k=128, layerwise, {retired} + transfer", 81.5, -6.5, 0.001)
    new = _report("linformer k=128, layerwise, E's first T rows (fairseq's) + transfer", 81.5, -6.5, 0.0025)
    assert _tool().moved(old, new) == [
        "- linformer k=128, layerwise, E's first T rows (fairseq's) + transfer, imdb: p 0.001 -> 0.0025"]
    assert _tool().moved(new, new) == []


def test_the_command_line_reads_both_reports(tmp_path, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_report("linformer k=128, layerwise, paper's slice + transfer", 81.5, -6.5, 0.001)))
    new.write_text(json.dumps(_report("linformer k=128, layerwise, E's first T rows (fairseq's) + transfer", 81.5,
                                      -6.5, 0.001)))
    assert _tool().main([str(old), str(new)]) == 0
    assert capsys.readouterr().out.strip() == "nothing moved"
