"""``aipusim report fidelity``: the fast model against the detailed reference, layer by layer.

The fast model prices each task and burst in closed form (`aipusim.isa.cost`); the detailed
mode (``simulate(detail="cycle")``, `aipusim.simulator.detail`) models some parts at the
grain of their mechanism. The study runs the same compiled tasklists both ways:

- a generated suite of micro-benchmarks (`MICROBENCHMARKS`), single- or two-layer models
  that each pin one mechanism (the MVM and its L1 stream, PWORD padding of a 3-channel
  input, the DWPU, a layer-4-sized weight load, a residual add and a concat on the output
  stream, an L2-L1 DMA, a DDR weight stream, host transfers);
- the zoo models at a small input size, in their built-in configs.

Per layer of one steady frame it takes the layer's span (first start to last end of its
tasks on the device) and per frame the host transfers, in both models, and the difference.
A micro-benchmark agrees when every row is within `AGREE` of the detailed figure.

Example: ``run_fidelity(Path("reports/fidelity"), models=["tiny_cnn"])``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import aipusim
from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.run.progress import stderr_lines
from aipusim.studies.common import (
    RunInfo,
    StudyResult,
    base_config,
    check_models,
    config_changes,
    md_table,
    prepare_study_dir,
    pyplot,
    save_figure,
    write_readme,
)
from aipusim.zoo.builder import GraphBuilder

STUDY = "fidelity"
#: The largest difference (share of the detailed figure) that counts as agreement.
AGREE = 0.05
#: Frames per run: the first carries the weights' first fetch, the last is compared.
FRAMES = 3
#: Input side of the zoo models (the detailed mode is the slower one).
ZOO_SIDE = 64


@dataclass(frozen=True)
class MicroBench:
    """A generated model that pins one mechanism."""

    name: str
    mechanism: str
    input_shape: tuple[int, int, int, int]
    body: Callable[[Any], dict[str, str]]

    def build(self) -> Any:
        """The ONNX model (seeded weights)."""
        b = GraphBuilder(input_shape=self.input_shape, seed=0, name=self.name)
        return b.finish(self.body(b))


def _wide_1x1(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 512, 1)}


def _first_conv(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 32, 3)}


def _depthwise(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 64, 3, groups=64)}


def _weight_load(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 512, 3)}


def _residual(b: Any) -> dict[str, str]:
    with b.scope("a"):
        y = b.conv(b.input_name, 64, 3)
    return {"out": b.add(y, b.input_name)}


def _concat(b: Any) -> dict[str, str]:
    with b.scope("a"):
        y = b.conv(b.input_name, 32, 1)
    with b.scope("b"):
        z = b.conv(b.input_name, 32, 3)
    return {"out": b.concat([y, z])}


def _l2_dma(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 64, 1)}


def _ddr_stream(b: Any) -> dict[str, str]:
    return {"out": b.gemm(b.flatten(b.input_name), 4096)}


def _host_io(b: Any) -> dict[str, str]:
    return {"out": b.conv(b.input_name, 3, 1)}


MICROBENCHMARKS: tuple[MicroBench, ...] = (
    MicroBench("wide_1x1", "a wide 1x1 conv: the MVM and its L1 stream", (1, 512, 28, 28),
               _wide_1x1),
    MicroBench("first_conv", "a 3-channel first conv: PWORD padding", (1, 3, 112, 112),
               _first_conv),
    MicroBench("depthwise", "a 3x3 depthwise layer: the DWPU", (1, 64, 56, 56), _depthwise),
    MicroBench("weight_load", "a layer-4-sized 3x3 conv: the weight-load path",
               (1, 512, 7, 7), _weight_load),
    MicroBench("residual_add", "a residual add on the output stream", (1, 64, 56, 56),
               _residual),
    MicroBench("concat", "a concat of two convs", (1, 64, 28, 28), _concat),
    MicroBench("l2_dma", "feature maps larger than L1: L2-L1 DMA", (1, 64, 224, 224), _l2_dma),
    MicroBench("ddr_stream", "a 16 MB Gemm: weights streamed from DDR", (1, 4096, 1, 1),
               _ddr_stream),
    MicroBench("host_io", "a 512 x 512 image in and out: host transfers", (1, 3, 512, 512),
               _host_io),
)  # fmt: skip
BY_NAME = {m.name: m for m in MICROBENCHMARKS}


def layer_cycles(result: Any) -> pd.DataFrame:
    """Per layer of the last frame: its span on the device (first start to last end of its
    tasks), and the host transfers of that frame (``host h2d``/``host d2h``)."""
    log = result.task_log
    frame = int(log["frame"].max())
    part = log[log["frame"] == frame]
    host = part["unit"].str.startswith("pcie")
    device = part[~host & (part["layer"] != "")]
    spans = device.groupby("layer", sort=False).agg(start=("start", "min"), end=("end", "max"))
    rows = [(str(k), int(r.end - r.start)) for k, r in spans.iterrows()]
    for unit, grp in part[host].groupby("unit"):
        rows.append((f"host {str(unit).removeprefix('pcie_')}", int((grp.end - grp.start).sum())))
    return pd.DataFrame(rows, columns=["layer", "cycles"])


def busiest_units(result: Any, top: int = 2) -> str:
    """The device units busiest in the last frame, with their share of its device busy
    time (``"dma0 67 %, mvm 33 %"``): what a micro-benchmark really exercises."""
    log = result.task_log
    part = log[(log["frame"] == log["frame"].max()) & ~log["unit"].str.startswith("pcie")]
    busy = (part["end"] - part["start"]).groupby(part["unit"]).sum()
    busy = busy[busy > 0].sort_values(ascending=False)
    total = busy.sum()
    return ", ".join(f"{u} {100 * v / total:.0f} %" for u, v in busy.head(top).items())


def unit_busy(result: Any) -> dict[str, int]:
    """Busy cycles of each unit (host transfers included) in the last frame."""
    log = result.task_log
    part = log[log["frame"] == log["frame"].max()]
    busy = (part["end"] - part["start"]).groupby(part["unit"]).sum()
    return {str(u): int(v) for u, v in busy.items() if v > 0}


def explain(fast: dict[str, int], detailed: dict[str, int], l1_waits: dict | None) -> str:
    """Why two runs differ, from their tables: the unit whose busy cycles in the last frame
    moved most (``fast``/``detailed``: `unit_busy`) and what held it up in the detailed run
    (its waits in the banked L1, `SimResult.l1_waits`, over the whole run; or, with none,
    the detailed DDR or PCIe timing).

    >>> explain({"mvm": 100, "dma0": 50}, {"mvm": 125, "dma0": 50},
    ...         {"mvm": {"bank_waits": 75, "port_waits": 0, "accesses": 900}})
    'mvm busy 100 -> 125 cycles (+25.0 %); in the banked L1 mvm waited 75 cycles for a bank and 0 for a port (900 accesses, all frames)'
    >>> explain({"dma1": 200}, {"dma1": 170},
    ...         {"dma1": {"bank_waits": 9, "port_waits": 0, "accesses": 90}})
    'dma1 busy 200 -> 170 cycles (-15.0 %); faster in the cycle-level DDR or PCIe timing of its transfers'
    """  # noqa: E501
    units = sorted(set(fast) | set(detailed))
    if not units:
        return ""
    unit = max(units, key=lambda u: (abs(detailed.get(u, 0) - fast.get(u, 0)), u))
    a, b = fast.get(unit, 0), detailed.get(unit, 0)
    pct = f" ({100 * (b / a - 1):+.1f} %)" if a else ""
    text = f"{unit} busy {a} -> {b} cycles{pct}"
    w = (l1_waits or {}).get(unit)
    if b < a:
        # waits only ever add cycles: a unit that got faster owes it to a part whose
        # detailed timing is quicker than the fast model's closed form, never to L1 waits
        if unit.startswith("pcie"):
            return f"{text}; faster on the detailed PCIe line than in the closed form"
        if unit.startswith("dma"):
            return f"{text}; faster in the cycle-level DDR or PCIe timing of its transfers"
        return f"{text}; faster: the units that feed it deliver sooner in the detailed run"
    if w and w["bank_waits"] + w["port_waits"]:
        return (
            f"{text}; in the banked L1 {unit} waited {w['bank_waits']} cycles for a bank and "
            f"{w['port_waits']} for a port ({w['accesses']} accesses, all frames)"
        )
    if unit.startswith("pcie"):
        return f"{text}; the detailed PCIe line (the other direction's DLLPs)"
    if unit.startswith("dma"):
        return f"{text}; no L1 waits: the cycle-level DDR or PCIe timing of its transfers"
    return f"{text}; no L1 waits of its own: it waits for the units that feed it"


def compare(model: Any, config: Any, frames: int = FRAMES) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Compile ``model`` (an ONNX proto) with ``config`` and simulate it fast and detailed:
    per-layer cycles of both and the difference, and the run totals."""
    with tempfile.TemporaryDirectory(prefix="aipusim-fidelity-") as tmp:
        compiled = aipusim.compile(model, config, output_dir=Path(tmp) / "m")
        runs, seconds = {}, {}
        for detail in ("fast", "cycle"):
            started = time.perf_counter()
            runs[detail] = compiled.simulate(frames, levels=(), detail=detail)
            seconds[detail] = time.perf_counter() - started
    fast, cycle = (layer_cycles(runs[d]) for d in ("fast", "cycle"))
    table = fast.merge(cycle, on="layer", suffixes=("_fast", "_detailed"), how="outer")
    table["diff_pct"] = 100 * (table["cycles_fast"] / table["cycles_detailed"] - 1)
    totals = {
        "device_cycles_fast": int(runs["fast"].device_latency_cycles[-1]),
        "device_cycles_detailed": int(runs["cycle"].device_latency_cycles[-1]),
        # the whole run, host transfers included (a steady-state FPS over a few frames
        # would hinge on which frame a small delay lands in)
        "run_cycles_fast": int(runs["fast"].total_cycles),
        "run_cycles_detailed": int(runs["cycle"].total_cycles),
        "busiest": busiest_units(runs["fast"]),
        "busy_fast": unit_busy(runs["fast"]),
        "busy_detailed": unit_busy(runs["cycle"]),
        "l1_waits": runs["cycle"].l1_waits,
        "seconds_fast": seconds["fast"],
        "seconds_detailed": seconds["cycle"],
    }
    return table, totals


#: L1Access patterns of the L1 alone (name -> (requester, start, bytes, address, rate, write)
#: per stream): the MVM's input stream and a weight load, aligned and half a port apart;
#: more readers than ports; slow readers; the MVM's results against a reader.
L1_PATTERNS: dict[str, tuple[tuple[int, int, int, int, float, bool], ...]] = {
    "two readers, aligned": ((0, 0, 65536, 0, 64.0, False), (1, 0, 65536, 0, 64.0, False)),
    "two readers, half a port apart": ((0, 0, 65536, 0, 64.0, False),
                                       (1, 0, 65536, 32, 64.0, False)),
    "three readers on two ports": tuple((i, 0, 65536, 64 * i, 64.0, False) for i in range(3)),
    "four readers at half a port": tuple((i, 0, 65536, 1000 * i, 32.0, False)
                                         for i in range(4)),
    "a reader and a writer on the same banks": ((0, 0, 65536, 0, 64.0, False),
                                                (1, 0, 65536, 0, 64.0, True)),
}  # fmt: skip


def l1_alone(arch: Any) -> pd.DataFrame:
    """Each `L1_PATTERNS` stream's cycles in the fast model's fluid ports and in the banked
    L1 of the detailed mode (`aipusim.simulator.detail.l1`), with the difference."""
    # lazy: aipusim.simulator.detail.l1 loads numba, simpy, not otherwise loaded here
    from aipusim import BankedL1, L1Access, compare_l1_with_ports

    l1 = BankedL1.of(arch)
    rows = []
    for name, streams in L1_PATTERNS.items():
        for row in compare_l1_with_ports(l1, [L1Access(*s) for s in streams]):
            rows.append({"pattern": name, **row})
    table = pd.DataFrame(rows)
    table["diff_pct"] = (100 * (table["cycles_fast"] / table["cycles_detailed"] - 1)).round(1)
    return table


def _verdict(table: pd.DataFrame) -> tuple[float, str]:
    worst = float(table["diff_pct"].abs().max()) if len(table) else 0.0
    return worst, "agrees" if worst <= 100 * AGREE else "differs"


def run_fidelity(
    out: Path,
    *,
    models: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    frames: int = FRAMES,
    input_size: int | None = None,
    progress: bool = True,
    command: str = "aipusim report fidelity",
    **_: Any,
) -> StudyResult:
    """Run the micro-benchmarks and ``models`` (default: every zoo model) fast and detailed;
    write ``out/README.md``, ``out/layers.csv`` and ``out/fidelity.png``."""
    # lazy: loads simpy, not otherwise loaded here
    from aipusim import DETAILED_PARTS, CompilerConfig, zoo

    picked = list(benchmarks) if benchmarks is not None else list(BY_NAME)
    unknown = [b for b in picked if b not in BY_NAME]
    if unknown:
        raise ConfigError(f"benchmarks must be among {', '.join(BY_NAME)}, not {unknown}")
    side = input_size or ZOO_SIDE
    chosen = list(models) if models is not None else list(zoo.names())
    chosen = check_models(chosen, side) if chosen else []
    prepare_study_dir(out)
    log = stderr_lines(progress)
    rows, summary = [], []
    single = CompilerConfig(aipu_cores_used=1, multicore_mode="multiprocess")
    cases = [(b, "micro-benchmark", BY_NAME[b].build(), single) for b in picked]
    cases += [(m, "zoo", zoo.build(m, input_size=side), base_config(m)) for m in chosen]
    for i, (name, kind, proto, config) in enumerate(cases, start=1):
        log(f"fidelity: {i}/{len(cases)} {name}")
        table, totals = compare(proto, config, frames)
        worst, verdict = _verdict(table)
        table.insert(0, "model", name)
        table.insert(1, "kind", kind)
        rows.append(table)
        what = BY_NAME[name].mechanism if name in BY_NAME else f"zoo model at {side} px"
        worst_pct = round(worst, 2)
        busy = (totals.pop("busy_fast"), totals.pop("busy_detailed"), totals.pop("l1_waits"))
        why = explain(*busy) if verdict != "agrees" else ""
        summary.append({"model": name, "kind": kind, "what": what, "layers": len(table),
                        "worst_diff_pct": worst_pct, "verdict": verdict, **totals,
                        "why": why})  # fmt: skip

    l1 = l1_alone(load_arch())
    l1.to_csv(out / "l1.csv", index=False)
    layers = pd.concat(rows, ignore_index=True)
    layers.to_csv(out / "layers.csv", index=False)
    table = pd.DataFrame(summary)
    files = [out / "README.md", out / "layers.csv", out / "l1.csv",
             _figure(table, out / "fidelity.png")]  # fmt: skip
    conclusions = _conclusions(table) + _l1_conclusions(l1)
    info = RunInfo(
        study=STUDY,
        command=command,
        models=chosen,
        input_size=side,
        frames=frames,
        config_changes={m: config_changes(m) for m in chosen},
        swept="the simulator's detail (fast, cycle)",
        extra=[f"- micro-benchmarks: {', '.join(picked)} (1 core)"],
    )
    shown = table.assign(
        slowdown=(table["seconds_detailed"] / table["seconds_fast"]).round(2),
    ).drop(columns=["seconds_fast", "seconds_detailed"])
    body = [
        "## What the detailed mode models",
        "",
        *[f"- **{part}**: {text}." for part, text in DETAILED_PARTS.items()],
        "- Every other part runs as in the fast model; where a row agrees, the reason may be "
        "that the part it pins has no detailed model yet (above).",
        "",
        "## Per run",
        "",
        f"Per-layer cycles of frame {frames - 1} (the last), fast against detailed; "
        f"`worst_diff_pct` is the largest difference of a row, agreement within "
        f"{100 * AGREE:.0f} %. `busiest`: the device units busiest in that frame (share of its "
        "device busy time), what a run really exercises; the host link's own share is in "
        "the `host` rows of `layers.csv`. `slowdown`: the detailed run's wall time over "
        "the fast one's. `why` (a run that differs): the unit whose busy cycles in that "
        "frame moved most between the two models, and what held it up in the detailed run "
        "(its bank and port waits in the banked L1 over the whole run, or the cycle-level "
        "DDR/PCIe timing).",
        "",
        md_table(shown),
        "",
        "![fast against detailed](fidelity.png)",
        "",
        "## The L1 alone",
        "",
        "The banked L1 of the detailed mode (`simulator/detail/l1.py`: "
        f"{arch_l1_text(load_arch())}), cycle by cycle, against the fast model's fluid ports "
        "on access patterns of the units that share them; each stream's cycles from its "
        "start (`l1.csv`). The same banks and ports time every L1 access of the detailed "
        "runs above (there booked stream by stream, `L1Calendar`).",
        "",
        md_table(l1),
        "",
        "## Per layer",
        "",
        "Every row in `layers.csv`; the micro-benchmarks' here:",
        "",
        md_table(layers[layers["kind"] == "micro-benchmark"].drop(columns=["kind"]).round(2)),
        "",
    ]
    write_readme(out, "Fidelity: the fast model against the detailed reference",
                 __doc__.split("\n\n")[1], info, conclusions, body)  # fmt: skip
    return StudyResult(STUDY, out, table, conclusions, files)


def _conclusions(table: pd.DataFrame) -> list[str]:
    micro = table[table["kind"] == "micro-benchmark"]
    agree = micro[micro["verdict"] == "agrees"]
    lines = [
        f"{len(agree)} of {len(micro)} micro-benchmarks agree within {100 * AGREE:.0f} % on "
        "every layer."
    ]
    for r in micro[micro["verdict"] != "agrees"].itertuples():
        lines.append(f"`{r.model}` ({r.what}) differs by up to {r.worst_diff_pct:.1f} %: {r.why}.")
    zoo_rows = table[table["kind"] == "zoo"]
    if len(zoo_rows):
        worst = zoo_rows.loc[zoo_rows["worst_diff_pct"].idxmax()]
        lines.append(
            f"Zoo models: the largest per-layer difference is {worst['worst_diff_pct']:.1f} % "
            f"(`{worst['model']}`); device latency differs by at most "
            + f"{(100 * (zoo_rows['device_cycles_fast'] / zoo_rows['device_cycles_detailed'] - 1)).abs().max():.1f} %."  # noqa: E501
        )
    return lines


def arch_l1_text(arch: Any) -> str:
    """The banked L1's numbers in words."""
    l1 = arch.l1
    return (
        f"{l1.banks} banks of {l1.bank_bytes} B, {l1.read_ports} read and {l1.write_ports} "
        f"write ports of {l1.port_bytes_per_cycle} B, {l1.arbitration} arbitration"
    )


def _l1_conclusions(l1: pd.DataFrame) -> list[str]:
    lines = []
    for name, part in l1.groupby("pattern", sort=False):
        fast, banked = int(part["cycles_fast"].max()), int(part["cycles_detailed"].max())
        if abs(fast / banked - 1) > AGREE:
            lines.append(
                f"L1 alone, {name}: the last stream ends after {banked} cycles in the banks, "
                f"{fast} in the fluid ports ({100 * (fast / banked - 1):+.1f} %)."
            )
    agree = l1["pattern"].nunique() - len(lines)
    return [f"L1 alone: {agree} of {l1['pattern'].nunique()} access patterns agree within "
            f"{100 * AGREE:.0f} %.", *lines]  # fmt: skip


def _figure(table: pd.DataFrame, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(table) + 1.5))
    diff = 100 * (table["device_cycles_fast"] / table["device_cycles_detailed"] - 1)
    ax.barh(table["model"], diff, color=["C0" if k == "zoo" else "C1" for k in table["kind"]])
    for edge in (-100 * AGREE, 100 * AGREE):
        ax.axvline(edge, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("device latency, fast / detailed - 1 (%)")
    ax.invert_yaxis()
    ax.set_title("Fast model against the detailed reference (dashed: agreement band)")
    fig.tight_layout()
    return save_figure(fig, path)


__all__ = [
    "L1_PATTERNS",
    "MICROBENCHMARKS",
    "MicroBench",
    "compare",
    "explain",
    "l1_alone",
    "layer_cycles",
    "run_fidelity",
    "unit_busy",
]
