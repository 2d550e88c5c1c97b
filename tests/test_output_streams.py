"""What goes where (docs/guide.md): a command's summary lines, what it made and what to run next, on stdout;
everything else it says (progress, log records, warnings, Hydra's lines, a runner's job headers, stops, errors) on
stderr. Training printed its summary and next: to stderr, while the data commands' warnings and Hydra's lines went
to stdout in Hydra's default format, and the plans' job headers to stdout, apart from the jobs' output."""

import logging
import sys
from pathlib import Path

import pytest

from linformer.configs import compose
from linformer.jobs import Job, run_jobs
from linformer.logfile import say
from linformer.train.summary import print_summary

from .conftest import hydra_scripts

REPO = Path(__file__).resolve().parents[1]
HYDRA_SCRIPTS = hydra_scripts()


def test_a_training_summary_and_its_next_line_are_on_stdout(capsys):
    print_summary({"stage": "pretrain", "steps": 3, "tokens": 96, "wall_time_s": 1.5, "run_dir": "outputs/r",
                   "model_dir": "outputs/r/model", "next": "python scripts/finetune.py task=sst2"}, None)
    said = capsys.readouterr()
    assert said.err == "" and said.out.splitlines()[0].startswith("pretrain complete: 3 steps")
    assert said.out.splitlines()[-1] == "  next: python scripts/finetune.py task=sst2"


def test_a_summary_line_is_on_stdout_and_a_warning_on_stderr(capsys):
    say("corpus: reusing data/processed/x")
    say("warning: the vocabulary came out small", logging.WARNING)
    said = capsys.readouterr()
    assert said.out == "corpus: reusing data/processed/x\n" and said.err == "warning: the vocabulary came out small\n"


@pytest.mark.parametrize("script", sorted(HYDRA_SCRIPTS))
def test_every_hydra_script_logs_to_stderr_in_one_format(script):
    name = HYDRA_SCRIPTS[script]
    hydra = compose(name, with_hydra=True).hydra
    for logging_config in (hydra.job_logging, hydra.hydra_logging):
        assert logging_config.handlers.console.stream == "ext://sys.stderr", (script, logging_config)
    assert hydra.job_logging.formatters.simple.format == "[%(levelname)s] %(name)s: %(message)s"
    if "file" in hydra.job_logging.handlers:  # a log file read later: each record with its time
        assert "%(asctime)s" in hydra.job_logging.formatters[hydra.job_logging.handlers.file.formatter].format


def test_a_plan_s_job_header_is_on_stderr_with_the_job_s_output(tmp_path, capfd):
    done = tmp_path / "done"
    code = (f"import sys, pathlib; print('progress', file=sys.stderr); pathlib.Path({str(done)!r}).write_text('1'); "
            "print('made it')")
    job = Job("say", [sys.executable, "-c", code], done)
    run_jobs([job])
    said = capfd.readouterr()
    assert said.out == "made it\n"
    header, progress = said.err.splitlines()[-2:]
    assert header.startswith("==> say: ") and progress == "progress"


def test_work_over_many_items_draws_a_bar_on_a_terminal_and_plain_lines_in_a_log_file(monkeypatch, capsys):
    """progress_over (compare_runs' reading, the dashboard's mirror): a bar on stderr where it is a terminal; in a
    log file a plain line every SAID_EVERY_S seconds and none for a quicker pass."""
    from linformer import progress

    monkeypatch.setattr(progress, "progress_to_log_file", lambda: False)
    assert list(progress.progress_over([1, 2, 3], "reading", "runs", delay=0)) == [1, 2, 3]
    said = capsys.readouterr()
    assert said.out == "" and "reading: 100%" in said.err and "3/3" in said.err
    monkeypatch.setattr(progress, "progress_to_log_file", lambda: True)
    assert list(progress.progress_over([1, 2, 3], "reading", "runs")) == [1, 2, 3]  # quick: no line
    assert capsys.readouterr().err == ""


class _Terminal:
    """A stderr that is a terminal of the size `os.get_terminal_size` is faked to report, holding what is written."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return True

    def fileno(self):
        return 2


@pytest.mark.parametrize("reported", [(0, 0), (0, 24), (100, 0)])
def test_a_bar_on_a_terminal_that_reports_no_size_draws_at_the_fallback_width(monkeypatch, reported):
    """A pty no one sized (docker/kubectl exec -t before a resize, ssh -t from a script) reports 0 columns and
    lines: tqdm's dynamic width took them as -1 and drew nothing for a whole run, while the plain progress lines were
    off since stderr is a terminal. The bar now draws at progress.FALLBACK_SIZE's width (COLUMNS where set)."""
    import os

    from linformer import progress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size(reported))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    with progress.progress_bar(total=5, desc="pretrain") as bar:
        bar.update(5)
    last = terminal.text.split("\r")[-1].rstrip("\n")
    assert "pretrain: 100%" in last and "5/5" in last
    assert len(last) <= (reported[0] or progress.FALLBACK_SIZE[0]) - 1
    monkeypatch.setenv("COLUMNS", "120")  # the user's word, as shutil takes it
    assert progress.terminal_size(terminal) == (120, reported[1] or progress.FALLBACK_SIZE[1])


def test_terminal_size_is_the_fallback_where_a_terminal_reports_0_columns_and_none_for_a_file(monkeypatch, tmp_path):
    """compare_runs fits its table to progress.terminal_size's width: 80 columns on a terminal that reports 0 (no
    limit at all would print rows of 300 characters), nothing where stdout is no terminal."""
    import os

    from linformer import progress

    measure = os.get_terminal_size
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)) if fd == 2 else measure(fd))
    monkeypatch.delenv("COLUMNS", raising=False)
    assert progress.terminal_size(_Terminal()).columns == progress.FALLBACK_SIZE[0]
    with tmp_path.joinpath("log").open("w") as log_file:
        assert progress.terminal_size(log_file) is None
