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


def test_the_guide_s_python_pipeline_calls_each_stage_with_what_it_takes(monkeypatch):
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
    assert called == list(STAGES)
