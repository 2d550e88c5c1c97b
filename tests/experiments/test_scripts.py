"""The reproduction scripts' command line: a bad --jobs is one error line and exit 2, before any job starts."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["reproduce_mini", "reproduce_pretrained"])
def test_bad_jobs_is_one_error_line(capsys, script):
    sys.path.insert(0, str(REPO / "scripts"))
    main = __import__(script).main
    with pytest.raises(SystemExit) as stop:
        main(["--jobs", "0", "--dry-run"])
    out = capsys.readouterr()
    assert stop.value.code == 2 and out.out == ""
    assert out.err == "error: --jobs 0: at least one job must run at a time\n"
