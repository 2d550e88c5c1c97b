"""Reports from run directories: the offline dashboard, run comparison tables and plots, the attention spectrum,
Table 2 (finetuning accuracy) and pretraining curves.

Run directories are read through linformer.rundir only. Every function takes plain paths and arguments; the
scripts in scripts/ only parse the command line.
"""

from .compare import compare_runs, summarize_run
from .dashboard import mirror_all, mirror_run, serve
from .spectrum import analyze_spectrum, cumulative_singular_values

__all__ = [
    "analyze_spectrum",
    "compare_runs",
    "cumulative_singular_values",
    "mirror_all",
    "mirror_run",
    "serve",
    "summarize_run",
]
