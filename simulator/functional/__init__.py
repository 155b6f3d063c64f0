"""Functional mode of the simulator: the tasklists executed on real data.

`run_functional` takes a finished timing run and executes every task in the order the timing
model ran it (memory of every pool, the IMC weight sets, numba kernels per unit), checking
that every pair of tasks touching the same bytes is ordered (`hazards`). The timing is never
changed. `aipusim.simulator.simulate(..., functional=True)` is the way in.

| file | job |
|---|---|
| `memory.py` | pools as byte arrays, IMC weight sets, replica and I/O-slot relocation, bounds |
| `footprint.py` | the bytes a task touches, as sorted runs |
| `context.py` | `TaskRun`: one task executing, its operands and counters |
| `dma.py`, `mvm.py`, `dwpu.py`, `dpu.py` | the kernels of each unit (numba) |
| `kernels.py` | kind -> kernel |
| `order.py` | the run's nodes and happens-before edges, the run order |
| `hazards.py` | vector clocks, the hazard sweeps, `HazardError` messages |
| `io.py` | inputs, outputs and tensors between logical shape and memory layout |
| `energy.py` | value-aware MVM energy |
| `execute.py` | `run_functional`: the whole execution |

Import `aipusim.simulator.functional.execute.run_functional` where data runs: the kernels
load numba's compiler, which a timing-only run never needs.
"""
