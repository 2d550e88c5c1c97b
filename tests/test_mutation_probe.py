"""tools/mutation_probe.py: every deliberate bug points at the code as it is now, and an entry whose text to change
is gone makes the tool refuse, naming the entry, before it changes or runs anything."""

import sys

import pytest

from tests.conftest import load_script


@pytest.fixture
def probe_tool():
    return load_script("mutation_probe", "tools")


def test_every_entry_finds_its_text_once(probe_tool):
    for name, file, old, _, tests in probe_tool.MUTATIONS:
        assert (probe_tool.REPO / file).read_text().count(old) == 1, name
        assert all((probe_tool.REPO / t).is_file() for t in tests), name


def test_a_stale_entry_is_refused_by_name(probe_tool, monkeypatch, capsys):
    gone = ("collator: a text no longer there", "linformer/data/collator.py", "this text is not in the file", "x",
            ["tests/data/test_collator.py"])
    monkeypatch.setattr(probe_tool, "MUTATIONS", [*probe_tool.MUTATIONS[:1], gone])
    monkeypatch.setattr(probe_tool, "probe", lambda *a: pytest.fail("a probe ran despite a stale entry"))
    monkeypatch.setattr(sys, "argv", ["mutation_probe.py"])
    assert probe_tool.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "'collator: a text no longer there'" in err
    assert "found 0 times in linformer/data/collator.py" in err
