"""Reports from run directories: the offline dashboard, run comparison tables and plots, the attention spectrum,
Table 2 (finetuning accuracy) and pretraining curves.

Every function takes plain paths and arguments; the scripts in scripts/ only parse the command line.
"""

from .compare import compare_runs, summarize_run
from .dashboard import mirror_all, mirror_run, serve
from ..rundir import Run, find_runs, load_run, read_metrics
from .spectrum import analyze_spectrum, cumulative_singular_values

__all__ = [
    "Run",
    "analyze_spectrum",
    "compare_runs",
    "cumulative_singular_values",
    "find_runs",
    "load_run",
    "mirror_all",
    "mirror_run",
    "read_metrics",
    "serve",
    "summarize_run",
]
