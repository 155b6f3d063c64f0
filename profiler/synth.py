"""Synthetic trace v1 files for tests, benchmarks and plot previews (no simulator needed).

The trace looks like a batch-mode run: frame f runs on core ``f % cores``, layers run one
after another on that core, and each layer follows a fixed pattern of units (a conv loads
its input and weights, then alternates MVM and DPU tiles, then stores). Durations carry a
seeded random jitter so percentiles are not trivial. Lines are built column-wise with
Arrow string kernels, so millions of lines are written in seconds.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "s.trace"
>>> n = write_synthetic_trace(p, frames=2, cores=2)
>>> p.read_text().splitlines()[0].startswith("# aipusim-trace 1")
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aipusim.isa.trace_schema import (
    COLUMNS,
    POWER_TIMELINE_SUFFIX,
    POWER_TOTAL_COLUMN,
    Component,
    Tag,
    TraceHeader,
    power_column,
)


@dataclass(frozen=True)
class _Step:
    """One event of a layer's pattern; times are fractions of the layer's span."""

    tag: Tag
    unit: str
    begin: float
    end: float
    src: str = ""
    dst: str = ""
    amount: int = 0  # MACs for [K], bytes for [M]


def _conv(tiles: int, macs: int, in_bytes: int, out_bytes: int) -> list[_Step]:
    steps = [
        _Step(Tag.M, "dma0", 0.0, 0.12, "ddr", "l1", in_bytes),
        _Step(Tag.K, "wload", 0.02, 0.10, amount=0),
    ]
    width = 0.76 / tiles
    for i in range(tiles):
        b = 0.12 + i * width
        steps.append(_Step(Tag.K, "mvm", b, b + 0.7 * width, amount=macs // tiles))
        steps.append(_Step(Tag.K, "dpu", b + 0.5 * width, b + 0.95 * width))
    steps.append(_Step(Tag.M, "dma1", 0.88, 1.0, "l1", "l2", out_bytes))
    return steps


#: (layer name, op, base latency in cycles, pattern); ResNet-like shapes, no real model.
_LAYERS: list[tuple[str, str, int, list[_Step]]] = [
    ("conv1", "Conv", 9000, _conv(4, 118_013_952, 150_528, 802_816)),
    (
        "pool1",
        "MaxPool",
        2500,
        [
            _Step(Tag.M, "dma0", 0.0, 0.3, "l2", "l1", 802_816),
            _Step(Tag.K, "dwpu", 0.25, 0.8),
            _Step(Tag.M, "dma1", 0.75, 1.0, "l1", "l2", 200_704),
        ],
    ),
    ("res2a", "Conv", 12000, _conv(6, 231_211_008, 200_704, 802_816)),
    (
        "dw3",
        "DepthwiseConv",
        4000,
        [
            _Step(Tag.M, "dma0", 0.0, 0.2, "l2", "l1", 401_408),
            _Step(Tag.K, "dwpu", 0.15, 0.55, amount=3_612_672),
            _Step(Tag.K, "dwpu", 0.5, 0.9, amount=3_612_672),
            _Step(Tag.M, "dma1", 0.85, 1.0, "l1", "l2", 401_408),
        ],
    ),
    (
        "add3",
        "Add",
        1500,
        [
            _Step(Tag.M, "dma0", 0.0, 0.4, "l2", "l1", 401_408),
            _Step(Tag.K, "dpu", 0.45, 0.85),
            _Step(Tag.M, "dma1", 0.8, 1.0, "l1", "l2", 200_704),
        ],
    ),
    ("fc", "Gemm", 3000, _conv(2, 2_048_000, 8192, 4000)),
]


def _events_per_frame(layers: list) -> int:
    n = 2  # [B] and the frame's last token
    for *_, steps in layers:
        n += 2 + len(steps) + sum(s.tag is Tag.K for s in steps)  # PB/PE, steps, [T]
    return n


def _join(tag: Tag, cols: dict[str, pa.Array]) -> pa.Array:
    """Text lines of ``tag`` (newline included) built with Arrow kernels."""
    pieces: list = []
    for k, (name, _) in enumerate(COLUMNS[tag]):
        prefix = f"[{tag.value}]".ljust(5) if k == 0 else " "
        pieces += [f"{prefix}{name}=", pc.cast(cols[name], pa.string())]
    pieces.append("\n")
    return pc.binary_join_element_wise(*pieces, "")


def write_synthetic_trace(
    path: str | Path,
    frames: int = 8,
    cores: int = 4,
    freq_hz: int = 800_000_000,
    seed: int = 0,
    min_lines: int = 0,
    extra: dict[str, str] | None = None,
) -> int:
    """Write a synthetic text trace; returns the number of event lines written.

    ``min_lines`` raises ``frames`` until at least that many event lines are written.
    """
    per_frame = _events_per_frame(_LAYERS)
    frames = max(frames, -(-min_lines // per_frame))
    rng = np.random.default_rng(seed)
    n_layers = len(_LAYERS)
    base = np.array([lat for _, _, lat, _ in _LAYERS], dtype=np.float64)
    # Warm-up: the first frame of each core is slower (constants loaded), as on hardware.
    jitter = rng.lognormal(0.0, 0.08, size=(frames, n_layers))
    jitter[:cores] *= 1.6
    dur = np.maximum((base * jitter).astype(np.int64), 100)
    gap = 40
    frame_cycles = dur.sum(axis=1) + gap * (n_layers + 1)
    frame_idx = np.arange(frames)
    core = frame_idx % cores
    # Frames on one core run back to back; cores start together.
    start = np.zeros(frames, dtype=np.int64)
    for c in range(cores):
        sel = core == c
        start[sel] = np.concatenate([[0], np.cumsum(frame_cycles[sel])[:-1]])
    layer_begin = (
        start[:, None]
        + gap
        + np.concatenate(
            [np.zeros((frames, 1), np.int64), np.cumsum(dur + gap, axis=1)[:, :-1]], axis=1
        )
    )
    layer_end = layer_begin + dur
    names = np.array([n for n, *_ in _LAYERS])
    ops = np.array([op for _, op, *_ in _LAYERS])

    lines: list[pa.Array] = []
    keys: list[np.ndarray] = []

    def emit(tag: Tag, time: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        lines.append(_join(tag, {k: pa.array(v) for k, v in cols.items()}))
        keys.append(time)

    frame_end = start + frame_cycles
    emit(Tag.B, frame_end, {"frame": frame_idx, "inst": core, "start": start, "end": frame_end})
    fl = np.repeat(frame_idx, n_layers)
    cl = np.repeat(core, n_layers)
    li = np.tile(np.arange(n_layers), frames)
    pb, pe = layer_begin.ravel(), layer_end.ravel()
    # The made-up layers have no padding: their network MACs are their tasks' MACs.
    layer_macs = np.array(
        [sum(s.amount for s in steps if s.tag is Tag.K) for *_, steps in _LAYERS], np.int64
    )
    emit(
        Tag.PB,
        pb,
        {
            "t": pb,
            "core": cl,
            "frame": fl,
            "layer": names[li],
            "op": ops[li],
            "macs": layer_macs[li],
        },
    )
    emit(Tag.PE, pe, {"t": pe, "core": cl, "frame": fl, "layer": names[li]})

    task_base = 0
    for lidx, (lname, _, _, steps) in enumerate(_LAYERS):
        b, e = layer_begin[:, lidx], layer_end[:, lidx]
        for k, step in enumerate(steps):
            s_t = b + ((e - b) * step.begin).astype(np.int64)
            e_t = np.maximum(b + ((e - b) * step.end).astype(np.int64), s_t + 1)
            task = frame_idx * 1000 + task_base + k
            common = {
                "core": core,
                "unit": np.full(frames, step.unit),
                "frame": frame_idx,
                "layer": np.full(frames, lname),
                "task": task,
            }
            if step.tag is Tag.K:
                emit(
                    Tag.K,
                    s_t,
                    {
                        **common,
                        "tile": np.full(frames, k),
                        "start": s_t,
                        "end": e_t,
                        "macs": np.full(frames, step.amount),
                    },
                )
                emit(
                    Tag.T,
                    e_t,
                    {
                        "t": e_t,
                        "core": core,
                        "token": task % 32,
                        "scope": np.full(frames, "local"),
                        "op": np.full(frames, "signal"),
                        "task": task,
                    },
                )
            else:
                emit(
                    Tag.M,
                    s_t,
                    {
                        **common,
                        "src": np.full(frames, step.src),
                        "dst": np.full(frames, step.dst),
                        "bytes": np.full(frames, step.amount),
                        "start": s_t,
                        "end": e_t,
                    },
                )
        task_base += len(steps)
    emit(
        Tag.T,
        frame_end,
        {
            "t": frame_end,
            "core": core,
            "token": np.full(frames, 31),
            "scope": np.full(frames, "global"),
            "op": np.full(frames, "signal"),
            "task": frame_idx * 1000 + 999,
        },
    )

    order = np.argsort(np.concatenate(keys), kind="stable")
    text = pa.concat_arrays(lines).take(pa.array(order))
    header = TraceHeader(
        freq_hz, cores, "synthetic", ("B", "PB", "PE", "K", "M", "T"), dict(extra or {})
    )
    with open(path, "wb") as fh:
        fh.write((header.format() + "\n").encode())
        offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)
        data = text.buffers()[2]
        lo, hi = int(offsets[text.offset]), int(offsets[text.offset + len(text)])
        fh.write(memoryview(data)[lo:hi])
    return len(text)


def write_synthetic_power(
    trace_path: str | Path, bins: int = 200, seed: int = 0, end_cycle: int | None = None
) -> Path:
    """Write a made-up power timeline beside ``trace_path`` (``<name>.power.parquet``):
    a static floor plus component loads that rise and fall, for plots and tests."""
    rng = np.random.default_rng(seed)
    if end_cycle is None:
        with open(trace_path, "rb") as fh:
            fh.readline()
            end_cycle = max(
                (int(tok[4:]) for line in fh for tok in line.split() if tok.startswith(b"end=")),
                default=1,
            )
    edges = np.linspace(0, end_cycle, bins + 1).astype(np.int64)
    phase = np.linspace(0, 6 * np.pi, bins)
    cols: dict[str, np.ndarray] = {"t_start": edges[:-1], "t_end": edges[1:]}
    scale = {
        Component.MVM: 2.0,
        Component.DPU: 0.6,
        Component.DWPU: 0.3,
        Component.L1: 0.4,
        Component.L2: 0.3,
        Component.DDR: 0.8,
        Component.DMA: 0.2,
        Component.CONTROL: 0.15,
        Component.STATIC: 1.2,
    }
    total = np.zeros(bins)
    for comp in Component:
        base = scale.get(comp, 0.05)
        shape = 1.0 if comp is Component.STATIC else 0.55 + 0.45 * np.sin(phase + len(comp))
        watts = base * shape * rng.uniform(0.9, 1.1, bins)
        cols[power_column(comp)] = watts
        total += watts
    cols[POWER_TOTAL_COLUMN] = total
    p = Path(trace_path)
    out = p.with_name(p.name.split(".", 1)[0] + POWER_TIMELINE_SUFFIX)
    # lazy: pyarrow.parquet is for Parquet files only (see `parse.parse_parquet`)
    import pyarrow.parquet as pq

    pq.write_table(pa.table(cols), out)
    return out
