"""Profiling trace writer: text lines or a Parquet table with the same columns.

The format is docs/architecture.md §8.2 (`aipusim.isa.trace_schema`).

Events are gathered during the run (one tuple per line, in the column order of
`aipusim.isa.trace_schema.COLUMNS`) and written at the end. Each line costs the writing
core's control core ``arch.control.trace_line_cycles`` at the cycle of the event, so enabling
more levels delays dispatch and perturbs the timing, as on the real chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aipusim.isa.trace_schema import (
    COLUMNS,
    ColumnType,
    Tag,
    TraceHeader,
    format_line,
    union_columns,
)
from aipusim.isa.units import UNITS, compute_units
from aipusim.simulator.units import Op

if TYPE_CHECKING:
    from aipusim.simulator.core import CoreRun
    from aipusim.simulator.engine import Replica


#: A layer's ``op`` in [PB] lines is its ONNX operator when the program names it (model.json
#: ``extra.layer_ops``, written by the compiler); otherwise (hand-written tasklists) the unit
#: doing its main work, in this order. Its ``macs`` are the network's (``extra.layer_macs``),
#: -1 when the program does not say.
_OP_RANK = {s.unit.value: s.rank for s in UNITS}
_COMPUTE_UNITS = frozenset(u.value for u in compute_units())
#: Column each tag's rows are sorted by when written.
_TIME_COLUMN = {tag: "t" if cols[0][0] == "t" else "start" for tag, cols in COLUMNS.items()}


class Tracer:
    """Collects trace events of the enabled levels and charges their control-core cost."""

    def __init__(
        self,
        levels: tuple[Tag, ...],
        line_cycles: int,
        layer_ops: Mapping[str, str] | None = None,
        layer_macs: Mapping[str, int] | None = None,
    ) -> None:
        self.levels = tuple(levels)
        self.onnx_ops = dict(layer_ops or {})
        #: Network MACs of each layer in one frame (model.json ``extra.layer_macs``).
        self.layer_macs = dict(layer_macs or {})
        wanted = {t.value for t in levels}
        self.b = "B" in wanted
        self.pb = "PB" in wanted
        self.pe = "PE" in wanted
        self.k = "K" in wanted
        self.m = "M" in wanted
        self.t = "T" in wanted
        self.per_task = self.pb or self.pe or self.k or self.m or self.t
        self.line_cycles = line_cycles
        self.rows: dict[Tag, list[tuple]] = {tag: [] for tag in COLUMNS}
        # (core, phase) -> layer -> [tasks left, latest end]
        self._layers: dict[tuple[int, int], dict[str, list[int]]] = {}
        self._layer_counts: dict[tuple[int, int], dict[str, int]] = {}
        self._layer_ops: dict[tuple[int, int], dict[str, str]] = {}

    @property
    def lines(self) -> int:
        return sum(len(r) for r in self.rows.values())

    def _charge(self, core: CoreRun, t: int) -> None:
        core.ctl.charge(t, self.line_cycles)

    def task(self, core: CoreRun, unit: str, seq: int, op: Op, phase: int, s: int, e: int) -> None:
        """Task ``seq`` of ``phase`` on ``core`` ran ``op`` on ``unit`` over [s, e)."""
        frame = core.frame_of(phase)
        code = core.code.phase(phase)
        layer = core.code.strings[int(code.layers[seq])]
        if op.xfer is not None:
            if self.m:
                x = op.xfer
                self.rows[Tag.M].append(
                    (core.physical, unit, frame, layer, seq, x.src, x.dst, x.nbytes, s, e)
                )
                self._charge(core, e)
        elif self.k and unit in _COMPUTE_UNITS:
            tile = int(code.tiles[seq])
            self.rows[Tag.K].append((core.physical, unit, frame, layer, seq, tile, s, e, op.macs))
            self._charge(core, e)
        if (self.pb or self.pe) and layer:
            self._layer(core, layer, phase, frame, s, e)

    def _layer(self, core: CoreRun, layer: str, phase: int, frame: int, s: int, e: int) -> None:
        key = (core.physical, phase)
        open_layers = self._layers.setdefault(key, {})
        state = open_layers.get(layer)
        if state is None:
            key = (core.physical, 0 if phase >= 0 else -1)
            counts = self._layer_counts.get(key)
            if counts is None:
                counts = self._layer_counts[key] = {}
                units: dict[str, set[str]] = {}
                code = core.code.phase(phase)
                for op, index in zip(code.ops, code.layers.tolist(), strict=True):
                    name = core.code.strings[index]
                    if name:
                        counts[name] = counts.get(name, 0) + 1
                        units.setdefault(name, set()).add(op.unit)
                self._layer_ops[key] = {
                    name: min(us, key=lambda u: _OP_RANK.get(u, len(_OP_RANK)))
                    for name, us in units.items()
                }
            state = open_layers[layer] = [counts[layer], e]
            if self.pb:
                op = self.onnx_ops.get(layer) or self._layer_ops[key][layer]
                macs = int(self.layer_macs.get(layer, -1))
                self.rows[Tag.PB].append((s, core.physical, frame, layer, op, macs))
                self._charge(core, s)
        state[0] -= 1
        if e > state[1]:
            state[1] = e
        if state[0] == 0:
            del open_layers[layer]
            if self.pe:
                self.rows[Tag.PE].append((state[1], core.physical, frame, layer))
                self._charge(core, state[1])

    def token(self, core: CoreRun, t: int, index: int, is_global: bool, op: str, task: int) -> None:
        scope = "global" if is_global else "local"
        self.rows[Tag.T].append((t, core.physical, index, scope, op, task))
        self._charge(core, t)

    def frame(self, rep: Replica, frame: int, start: int, end: int) -> None:
        self.rows[Tag.B].append((frame, rep.index, start, end))
        self._charge(rep.cores[0], end)

    def host(self, rep: Replica, direction: str, s: int, begin: int, end: int, nbytes: int) -> None:
        src, dst = ("host", "ddr") if direction == "h2d" else ("ddr", "host")
        frame = s * len(rep.cores) if rep.frames_per_start > 1 else s
        self.rows[Tag.M].append(
            (
                rep.cores[0].physical,
                f"pcie_{direction}",
                frame,
                "",
                -1,
                src,
                dst,
                nbytes,
                begin,
                end,
            )
        )
        self._charge(rep.cores[0], end)

    # -- writers -----------------------------------------------------------------------
    def _sorted(self, tag: Tag) -> list[tuple]:
        """Rows of ``tag`` in time order (units run ahead, so they are gathered out of it)."""
        names = [name for name, _ in COLUMNS[tag]]
        if _TIME_COLUMN[tag] not in names:
            return self.rows[tag]
        i = names.index(_TIME_COLUMN[tag])
        return sorted(self.rows[tag], key=lambda row: row[i])

    def write(self, path: str | Path, header: TraceHeader) -> Path:
        """Text unless ``path`` ends in ``.parquet``."""
        path = Path(path)
        if path.suffix == ".parquet":
            self._write_parquet(path, header)
        else:
            self._write_text(path, header)
        return path

    def _write_text(self, path: Path, header: TraceHeader) -> None:
        with path.open("w", encoding="utf-8") as fh:
            fh.write(header.format() + "\n")
            for tag in COLUMNS:
                names = [name for name, _ in COLUMNS[tag]]
                for row in self._sorted(tag):
                    fh.write(format_line(tag, dict(zip(names, row, strict=True))) + "\n")

    def _write_parquet(self, path: Path, header: TraceHeader) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        union = union_columns()
        data: dict[str, list] = {"tag": []}
        data.update({name: [] for name in union})
        for tag in COLUMNS:
            rows = self._sorted(tag)
            if not rows:
                continue
            data["tag"] += [tag.value] * len(rows)
            cols = [name for name, _ in COLUMNS[tag]]
            for j, name in enumerate(cols):
                data[name] += [row[j] for row in rows]
            for name in union:
                if name not in cols:
                    data[name] += [None] * len(rows)
        types = {ColumnType.INT: pa.int64(), ColumnType.STR: pa.string()}
        schema = pa.schema(
            [pa.field("tag", pa.string())] + [pa.field(n, types[t]) for n, t in union.items()],
            metadata=header.metadata(),
        )
        pq.write_table(pa.table(data, schema=schema), path)
