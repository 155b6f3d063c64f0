"""SimPy cycle-level simulation of tasklists, power model and profiling traces (DESIGN.md §5).

>>> from aipusim.simulator import simulate, SimResult
"""

from aipusim.simulator.api import simulate
from aipusim.simulator.engine import Simulation
from aipusim.simulator.result import SimResult

__all__ = ["SimResult", "Simulation", "simulate"]
