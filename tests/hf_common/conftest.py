"""The markers transformers' common tests carry, registered (the suite runs with --strict-markers): every
``pytest.mark.<name>`` / ``mark.<name>`` in transformers.testing_utils and in the kit's files."""

import inspect
import re

from . import kit

_MARK = re.compile(r"\bmark\.([A-Za-z_]\w*)")
_BUILTIN = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}


def pytest_configure(config):
    import transformers.testing_utils

    kit.ensure()  # fetched now, if it can be, not imported: its files carry markers of their own
    sources = [inspect.getsource(transformers.testing_utils)]
    package = kit.cache_root() / kit.PACKAGE
    sources += [(package / name).read_text() for name in kit.FILES if (package / name).is_file()]
    for name in sorted({m for text in sources for m in _MARK.findall(text)} - _BUILTIN):
        config.addinivalue_line("markers", f"{name}: a marker of transformers' common tests (tests/hf_common)")
