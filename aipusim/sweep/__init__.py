"""Design-space sweeps: configurations x models x chip variants, resumable Parquet results.

Build a `SweepSpace` from ``KEY=V1,V2`` texts, run it with `run_sweep` (local process pool
or Dask), and summarise the folder with `write_report` (Pareto fronts, Markdown table).

>>> from aipusim.sweep import build_space
>>> len(build_space(["tiny_cnn"], ["mvm_utilization_limit=0.5,1"]).points)
2
"""

from aipusim.sweep.runner import Backend, SweepSummary, parse_backend, run_point, run_sweep
from aipusim.sweep.space import SweepPoint, SweepSpace, build_space
from aipusim.sweep.store import ResultStore

__all__ = [
    "Backend",
    "ResultStore",
    "SweepPoint",
    "SweepSpace",
    "SweepSummary",
    "build_space",
    "parse_backend",
    "run_point",
    "run_sweep",
]
