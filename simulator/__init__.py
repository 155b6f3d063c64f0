"""Task-level SimPy simulation of tasklists in cycles, power model and profiling traces.

The model is described in docs/architecture.md §6 and simulator/README.md.

>>> from aipusim.simulator import simulate, SimResult
"""

from aipusim.simulator.api import simulate
from aipusim.simulator.engine import Simulation
from aipusim.simulator.result import SimResult

__all__ = ["SimResult", "Simulation", "simulate"]
