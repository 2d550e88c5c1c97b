"""The guide's "From Python (a notebook)" snippet: its imports are the package's names, and each call it makes is
given arguments the functions take, the configs composed and read into specs as written (the training itself is
run by the tests of each stage; here the stage functions record their arguments)."""

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
STAGES = ("train_tokenizer", "prepare_corpus", "pretrain", "finetune", "export_run", "compare_runs")


def _snippet() -> str:
    text = GUIDE.read_text()
    start = text.index("**From Python (a notebook).**")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def _run_snippet(monkeypatch) -> tuple[list[str], dict]:
    """The snippet run with each stage recording its call: the stages called in order, and the folder each wrote
    (its out_dir or run directory, as the stage function is given it) with the namespace it ran in."""
    import inspect

    from linformer.runconfig import data

    monkeypatch.setattr(data, "resolve_sources", lambda sources: list(sources))  # the data mirror need not be here
    code = _snippet()
    imports, _, calls = code.partition("\n\n")
    namespace: dict = {}
    exec(imports, namespace)
    called = []
    for name in STAGES:
        signature = inspect.signature(namespace[name])

        def record(*args, _name=name, _signature=signature, **kwargs):
            _signature.bind(*args, **kwargs)  # a TypeError where the guide's call does not fit the function
            called.append(_name)
            return {}
        namespace[name] = record
    exec(calls, namespace)
    return called, namespace


def test_the_guide_s_python_pipeline_calls_each_stage_with_what_it_takes(monkeypatch):
    called, _ = _run_snippet(monkeypatch)
    assert called == list(STAGES)


def test_the_guide_s_python_pipeline_writes_no_folder_of_the_demo_or_of_its_groups_defaults(monkeypatch):
    """The snippet's settings are not the demo's: a tokenizer, corpus or run folder the two shared would be refused
    to whichever ran second ("holds an earlier train_tokenizer output with other settings"), and so would one of a
    documented command that keeps its groups' names (`pretrain.py model=tiny`)."""
    from linformer.cli import compose
    from linformer.experiments import demo
    from linformer.files.locations import resolve_path

    _, ns = _run_snippet(monkeypatch)
    ours = {"tokenizer": compose("tokenizer", ns["data"]).out_dir, "corpus": compose("corpus", ns["data"]).out_dir,
            "pretrain": ns["run"], "finetune": ns["ft_run"]}
    groups = [a for a in ns["pre"] if a.split("=")[0] in ("data", "model")]  # the groups it chooses, nothing else
    defaults = {"tokenizer": compose("tokenizer", groups[:1]).out_dir, "corpus": compose("corpus", groups[:1]).out_dir,
                "pretrain": compose("pretrain", groups, with_hydra=True).hydra.run.dir}
    theirs = {*(job.done.parent for job in demo.plan([], demo.Places.of(None))), *map(resolve_path, defaults.values())}
    shared = {stage: folder for stage, folder in ours.items() if resolve_path(str(folder)) in theirs}
    assert not shared
