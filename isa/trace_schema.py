"""Trace format v1: the contract between the simulator (writer) and the profiler (reader).

Text form (docs/architecture.md §8.2): a header line, then one event per line, ``[TAG]`` and
``key=value`` fields in the column order declared here, times in cycles::

    # aipusim-trace 1 freq_hz=800000000 cores=4 model=resnet50 levels=B,PB,PE,K,M,T
    [K]  core=0 unit=mvm frame=0 layer=conv1 task=17 tile=3 start=2000 end=2840 macs=1806336

The Parquet form is one table with a ``tag`` column and the union of all tags' columns
(null where a tag has no such column), so both forms share column names and types.

>>> format_line(Tag.T, {"t": 2840, "core": 0, "token": 3, "scope": "local", "op": "signal",
...                     "task": 17})
'[T]  t=2840 core=0 token=3 scope=local op=signal task=17'
>>> TraceHeader.parse(TraceHeader(800_000_000, 4, "resnet50", ("B", "K")).format()).levels
('B', 'K')
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aipusim.base.errors import TraceFormatError

TRACE_VERSION = 1
HEADER_PREFIX = "# aipusim-trace"


class Tag(enum.StrEnum):
    """Event kinds; also the values of the ``profiling_levels`` knob."""

    FRAME = "B"  # a frame (batch item) on an instance, start to end
    LAYER_BEGIN = "PB"  # a layer starts on a core
    LAYER_END = "PE"  # a layer ends on a core
    COMPUTE = "K"  # a compute task (mvm, wload, dpu, dwpu)
    MEMORY = "M"  # a memory transfer (dma0, dma1, sysdma, host link)
    TOKEN = "T"  # a token wait or signal
    UNKNOWN = "?"  # a line of a tag the reader does not know (counted and kept)

    # Short aliases matching the letters in the format.
    B = "B"
    PB = "PB"
    PE = "PE"
    K = "K"
    M = "M"
    T = "T"


class ColumnType(enum.StrEnum):
    INT = "int64"
    STR = "string"


_I, _S = ColumnType.INT, ColumnType.STR

#: Columns of each tag, in the order they are written.
COLUMNS: dict[Tag, tuple[tuple[str, ColumnType], ...]] = {
    Tag.B: (("frame", _I), ("inst", _I), ("start", _I), ("end", _I)),
    Tag.PB: (("t", _I), ("core", _I), ("frame", _I), ("layer", _S), ("op", _S), ("macs", _I)),
    Tag.PE: (("t", _I), ("core", _I), ("frame", _I), ("layer", _S)),
    Tag.K: (
        ("core", _I),
        ("unit", _S),
        ("frame", _I),
        ("layer", _S),
        ("task", _I),
        ("tile", _I),
        ("start", _I),
        ("end", _I),
        ("macs", _I),
    ),
    Tag.M: (
        ("core", _I),
        ("unit", _S),
        ("frame", _I),
        ("layer", _S),
        ("task", _I),
        ("src", _S),
        ("dst", _S),
        ("bytes", _I),
        ("start", _I),
        ("end", _I),
    ),
    Tag.T: (("t", _I), ("core", _I), ("token", _I), ("scope", _S), ("op", _S), ("task", _I)),
}

#: Columns a reader fills in when a line or row lacks them (traces written before they
#: existed), with the value it fills in. ``[PB] macs`` is the network's multiply-
#: accumulates of the whole layer in one frame (-1: not known, e.g. hand-written
#: tasklists); the padded array MACs are the ``macs`` of its ``[K]`` tasks.
OPTIONAL_COLUMNS: dict[Tag, dict[str, int]] = {Tag.PB: {"macs": -1}}

#: The tags that may be enabled with ``profiling_levels`` (all but UNKNOWN).
LEVELS: tuple[Tag, ...] = (Tag.B, Tag.PB, Tag.PE, Tag.K, Tag.M, Tag.T)


def union_columns() -> dict[str, ColumnType]:
    """Every column of every tag (first declaration wins the order), for the Parquet form."""
    out: dict[str, ColumnType] = {}
    for cols in COLUMNS.values():
        for name, ctype in cols:
            assert out.get(name, ctype) == ctype, f"column {name} has two types"
            out.setdefault(name, ctype)
    return out


def parse_levels(text: str | list[str] | tuple[str, ...]) -> tuple[Tag, ...]:
    """``"B,PB,K"`` or ``["B", "K"]`` -> tags, validated; ``[?]`` is not a level.

    >>> parse_levels("K,B")
    (<Tag.FRAME: 'B'>, <Tag.COMPUTE: 'K'>)
    >>> parse_levels(["?"])  # accepted (a configuration value), records nothing
    ()
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    wanted = {str(item).strip().strip("[]") for item in items if str(item).strip()}
    # ``?``, the tag of lines a reader does not know, is a ProfilingLevel of the compiler
    # configuration (the vendor reference lists it); there is nothing to record for it.
    wanted.discard(Tag.UNKNOWN.value)
    valid = {t.value for t in LEVELS}
    bad = sorted(wanted - valid)
    if bad:
        raise TraceFormatError(
            f"profiling level must be one of {', '.join(t.value for t in LEVELS)}, not {bad[0]!r}"
        )
    return tuple(t for t in LEVELS if t.value in wanted)


def format_line(tag: Tag, values: Mapping[str, Any]) -> str:
    """One text event line; ``values`` must hold every column of ``tag``."""
    fields_text = " ".join(f"{name}={values[name]}" for name, _ in COLUMNS[tag])
    return f"[{tag.value}]".ljust(5) + fields_text


_HEADER_KV = re.compile(r"(\w+)=(\S*)")


@dataclass(frozen=True)
class TraceHeader:
    """The first line of a text trace (and the metadata of a Parquet trace)."""

    freq_hz: int
    cores: int
    model: str
    levels: tuple[str, ...]
    extra: dict[str, str] = field(default_factory=dict)

    def format(self) -> str:
        parts = [
            f"{HEADER_PREFIX} {TRACE_VERSION}",
            f"freq_hz={self.freq_hz}",
            f"cores={self.cores}",
            f"model={self.model}",
            f"levels={','.join(self.levels)}",
        ]
        parts += [f"{k}={v}" for k, v in self.extra.items()]
        return " ".join(parts)

    def metadata(self) -> dict[str, str]:
        """Key/value form, stored as Parquet schema metadata."""
        return {
            "aipusim_trace_version": str(TRACE_VERSION),
            "freq_hz": str(self.freq_hz),
            "cores": str(self.cores),
            "model": self.model,
            "levels": ",".join(self.levels),
            **self.extra,
        }

    @classmethod
    def from_metadata(cls, meta: Mapping[str, str], source: str = "trace") -> TraceHeader:
        version = meta.get("aipusim_trace_version")
        if version != str(TRACE_VERSION):
            raise TraceFormatError(
                f"{source}: trace version must be {TRACE_VERSION}, not {version!r}"
            )
        return cls._from_pairs(dict(meta), source)

    @classmethod
    def parse(cls, line: str, source: str = "trace") -> TraceHeader:
        """Parse a header line; a missing or malformed header is a `TraceFormatError`."""
        if not line.startswith(HEADER_PREFIX):
            raise TraceFormatError(
                f"{source}: line 1 must start with {HEADER_PREFIX!r}, not {line[:40]!r}"
            )
        rest = line[len(HEADER_PREFIX) :].split()
        if not rest or rest[0] != str(TRACE_VERSION):
            got = rest[0] if rest else ""
            raise TraceFormatError(f"{source}: trace version must be {TRACE_VERSION}, not {got!r}")
        return cls._from_pairs(dict(_HEADER_KV.findall(line)), source)

    @classmethod
    def _from_pairs(cls, pairs: dict[str, str], source: str) -> TraceHeader:
        pairs.pop("aipusim_trace_version", None)
        try:
            freq_hz = int(pairs.pop("freq_hz"))
            cores = int(pairs.pop("cores"))
        except KeyError as exc:
            raise TraceFormatError(f"{source}: header must have {exc.args[0]}=...") from None
        except ValueError as exc:
            raise TraceFormatError(
                f"{source}: header freq_hz/cores must be integers: {exc}"
            ) from None
        if freq_hz <= 0 or cores <= 0:
            raise TraceFormatError(
                f"{source}: header freq_hz and cores must be > 0, not {freq_hz} and {cores}"
            )
        model = pairs.pop("model", "")
        levels = tuple(v for v in pairs.pop("levels", "").split(",") if v)
        return cls(freq_hz, cores, model, levels, pairs)


class Component(enum.StrEnum):
    """Energy components of the power model (columns of the power timeline)."""

    MVM = "mvm"
    WLOAD = "wload"
    DPU = "dpu"
    DWPU = "dwpu"
    L1 = "l1"
    L2 = "l2"
    DDR = "ddr"
    DMA = "dma"
    PCIE = "pcie"
    CONTROL = "control"
    STATIC = "static"


#: The simulator writes the power timeline beside a trace ``run.trace`` as
#: ``run.power.parquet``: one row per time bin, columns ``t_start`` and ``t_end`` (cycles,
#: int64), one float64 column of average watts per `Component`, and ``total_w``.
POWER_TIMELINE_SUFFIX = ".power.parquet"
POWER_TIME_COLUMNS = ("t_start", "t_end")
POWER_TOTAL_COLUMN = "total_w"
#: Parquet schema metadata of the power timeline: the bin (µs) and the run's peak power
#: by window (JSON object, window name -> W; `aipusim.isa.metrics.PEAK_WINDOWS`).
POWER_BIN_KEY = "bin_us"
POWER_PEAK_KEY = "peak_power_w"
#: ... and the steady-state average power (W: a steady frame's energy x FPS, report.md's
#: figure), which no average over the timeline's bins gives.
POWER_STEADY_KEY = "steady_avg_power_w"
#: Trace header keys (``extra``) the simulator writes for the profiler's metrics: the cores
#: of one instance (token edges stay inside it) and the token latency (cycles from a
#: signalling task's end to the waiting task's start).
HEADER_INSTANCE_CORES = "instance_cores"
HEADER_TOKEN_LATENCY = "token_latency_cycles"


def power_column(component: Component) -> str:
    """Column name of a component's average power in the power timeline (``mvm_w``)."""
    return f"{component.value}_w"
