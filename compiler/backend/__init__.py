"""The compiler's back half: lower, IMC mapping, tile, memplan, schedule, emit (DESIGN.md §4).

>>> from aipusim.compiler.backend import BACK_PASSES
>>> BACK_PASSES[0][0]
'lower'
"""

from aipusim.compiler.backend.run import BACK_PASSES, BackendResult, BackendState, run_backend

__all__ = ["BACK_PASSES", "BackendResult", "BackendState", "run_backend"]
