"""Reports from run directories: the offline dashboard, run comparison tables and plots, the attention spectrum,
Table 2 (finetuning accuracy) and pretraining curves.

Run directories are read through linformer.rundir only. Every function takes plain paths and arguments; the
scripts in scripts/ only parse the command line. Each name is imported from its module when first asked for
(``linformer.lazy``): a script's parser reads a light module of the package (``report.measured``) without the rest.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_LAZY = {
    "analyze_spectrum": ".spectrum",
    "compare_runs": ".compare",
    "cumulative_singular_values": ".spectrum",
    "mirror_all": ".dashboard",
    "mirror_run": ".dashboard",
    "serve": ".dashboard",
    "summarize_run": ".compare",
}

__all__ = [
    "analyze_spectrum",
    "compare_runs",
    "cumulative_singular_values",
    "mirror_all",
    "mirror_run",
    "serve",
    "summarize_run",
]

# A type checker reads the names from their modules (the real classes and functions, and a misspelt name is an
# error); at run time they stay lazy. tests/test_imports.py checks that this block, _LAZY and __all__ agree.
if TYPE_CHECKING:
    from .compare import compare_runs, summarize_run
    from .dashboard import mirror_all, mirror_run, serve
    from .spectrum import analyze_spectrum, cumulative_singular_values
else:
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)
