"""``aipusim bench``: compile time, simulation wall time, simulated tasks/s and peak RSS.

Each model runs in a fresh process (``spawn``), so its peak resident set is its own and not
the high-water mark of whatever ran before it in the same interpreter.

>>> BENCH_MODELS
('resnet50', 'mobilenetv2', 'yolov8n')
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import resource
import statistics
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from aipusim import zoo
from aipusim.base.errors import ConfigError
from aipusim.base.fileio import write_text
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.pipeline import FRONT
from aipusim.compiler.request import CompileRequest

if TYPE_CHECKING:
    import pandas as pd

#: The models issue #8 asks the benchmark to cover, at their published input sizes.
BENCH_MODELS = ("resnet50", "mobilenetv2", "yolov8n")


def bench_model(
    name: str, frames: int, input_size: int | None = None, quantization_cache: bool = True
) -> dict[str, Any]:
    """Compile and simulate one zoo model in this process (``frames=0``: compile only);
    return the figures, with the seconds of every compiler pass (``passes``) and whether
    the quantization was ``cached`` or ``computed`` (``quantization``)."""
    # lazy: aipusim.simulator loads simpy, not otherwise loaded here
    from aipusim.simulator import simulate

    with tempfile.TemporaryDirectory(prefix="aipusim-bench-") as tmp:
        model_path = Path(tmp) / f"{name}.onnx"
        onnx.save(zoo.build(name, input_size=input_size), model_path)
        t0 = time.perf_counter()
        compiled = compile_model(
            CompileRequest(
                model_path=model_path,
                output_dir=Path(tmp) / "out",
                config=CompilerConfig(),
                quantization_cache=quantization_cache,
            )
        )
        compile_s = time.perf_counter() - t0
        passes = compiled.pass_seconds
        row: dict[str, Any] = {
            "model": name,
            "input": "x".join(str(d) for d in zoo.info(name).input_shape)
            if input_size is None
            else f"{input_size}px",
            "compile_s": round(compile_s, 2),
            "quantization": compiled.results["quantize"]["cache"],
            "slowest_pass": max(passes.items(), key=lambda kv: kv[1])[0],
            "passes": {k: round(v, 3) for k, v in passes.items()},
            # the driver's own work: reading and checking the model, writing the artifacts
            "outside_passes_s": round(max(compile_s - sum(passes.values()), 0.0), 3),
        }
        if frames == 0:
            return row
        t0 = time.perf_counter()
        result = simulate(Path(tmp) / "out" / "compiled_model", frames=frames)
        simulate_s = time.perf_counter() - t0
    tasks = result.event_counts["tasks"]
    return {
        **row,
        "simulate_s": round(simulate_s, 3),
        "frames": frames,
        "tasks": tasks,
        "tasks_per_s": round(tasks / simulate_s) if simulate_s > 0 else None,
        "total_cycles": result.total_cycles,
        "fps": round(result.fps, 1),
        # ru_maxrss is in KiB on Linux.
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


#: Row of `pass_table` for the compile's time outside the passes.
OUTSIDE = "(read, check, write)"


def pass_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Seconds of each compiler pass (rows, pipeline order) per model (columns); passes
    below 5 ms in every model are summed as ``(others)``; then the driver's time outside
    the passes (reading and checking the ONNX file, writing the artifacts) and the whole
    compile.

    >>> rows = [{"model": "m", "passes": {"import": 0.2, "quantize": 1.0, "emit": 0.001},
    ...          "outside_passes_s": 0.3}]
    >>> pass_table(rows)["m"].tolist()
    [0.2, 1.0, 0.001, 0.3, 1.501]
    """
    # lazy: loads pandas, not otherwise loaded here
    import pandas as pd

    table = pd.DataFrame({r["model"]: r["passes"] for r in rows}).fillna(0.0)
    small = (table < 0.005).all(axis=1)
    out = table[~small]
    out.loc["(others)"] = table[small].sum()
    out.loc[OUTSIDE] = [r.get("outside_passes_s", 0.0) for r in rows]
    out.loc["(total)"] = table.sum() + out.loc[OUTSIDE]
    return out.round(3)


def slowest_pass(rows: list[dict[str, Any]]) -> tuple[str, float, float]:
    """(name, seconds, share of all compile seconds) of the pass that took longest over all
    ``rows`` together.

    >>> slowest_pass([{"passes": {"import": 0.2, "quantize": 1.0}, "outside_passes_s": 0.3},
    ...               {"passes": {"import": 0.1, "quantize": 0.4}, "outside_passes_s": 0.0}])
    ('quantize', 1.4, 0.7)
    """
    totals: dict[str, float] = {}
    for r in rows:
        for name, seconds in r["passes"].items():
            totals[name] = totals.get(name, 0.0) + seconds
    name = max(totals, key=totals.__getitem__)
    whole = sum(totals.values()) + sum(r.get("outside_passes_s", 0.0) for r in rows)
    return name, round(totals[name], 3), round(totals[name] / whole, 3) if whole else 0.0


def run_bench(
    models: tuple[str, ...] = BENCH_MODELS,
    frames: int = 8,
    input_size: int | None = None,
    quantization_cache: bool = True,
) -> list[dict[str, Any]]:
    """`bench_model` for each model, each in a fresh spawned process."""
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for name in models:
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            rows.append(
                pool.submit(bench_model, name, frames, input_size, quantization_cache).result()
            )
    return rows


#: The compiles `warm_cold_bench` times: one core, then four cores in each multicore mode.
WARM_COLD_MODES = ("1core", "multiprocess", "batch", "cooperative", "pipeline", "multithread")


def _mode_config(mode: str) -> CompilerConfig:
    """The `CompilerConfig` of one of `WARM_COLD_MODES`."""
    if mode == "1core":
        return CompilerConfig(aipu_cores_used=1)
    return CompilerConfig(aipu_cores_used=4, multicore_mode=mode)


def _timed_compile(model_path: Path, config: CompilerConfig) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of this process, "cached" or "computed") of one
    `compile_model` of ``model_path`` into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="aipusim-bench-") as tmp:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        compiled = compile_model(
            CompileRequest(model_path=model_path, output_dir=Path(tmp) / "out", config=config)
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return wall, cpu, compiled.results["quantize"]["cache"]


def _timed_compile_and_frame(model_path: Path, config: CompilerConfig) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of what a design-space loop does per
    point: `aipusim.compile` of ``model_path`` into a temporary folder, then one simulated
    frame at the program's own trace levels (as a sweep worker simulates a point)."""
    # lazy: the API module loads the simulator, not otherwise loaded here
    import aipusim

    with tempfile.TemporaryDirectory(prefix="aipusim-bench-") as tmp:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        model = aipusim.compile(model_path, config, output_dir=Path(tmp) / "out")
        model.simulate(1, levels=list(config.profiling_levels))
        return time.perf_counter() - wall0, time.process_time() - cpu0


def _cold_then_warm(model_path: Path, mode: str, repeats: int, cache_dir: str) -> dict[str, Any]:
    """In this (fresh) process, with an empty quantization cache in ``cache_dir``: a
    cold compile (it calibrates and fills the cache), then ``repeats`` warm ones, as a
    sweep worker compiles point after point, then ``repeats`` warm compiles each followed
    by one simulated frame; medians of the warm ones."""
    # lazy: the cache module reads the variable at each use
    from aipusim.compiler.quant.cache import DIR_ENV

    os.environ[DIR_ENV] = cache_dir
    config = _mode_config(mode)
    cold = _timed_compile(model_path, config)
    warm = [_timed_compile(model_path, config) for _ in range(repeats)]
    framed = [_timed_compile_and_frame(model_path, config) for _ in range(repeats)]
    return {
        "cold_s": cold[0],
        "cold_cpu_s": cold[1],
        "cold_quantization": cold[2],
        "warm_s": statistics.median(w[0] for w in warm),
        "warm_cpu_s": statistics.median(w[1] for w in warm),
        "warm_quantization": ",".join(sorted({w[2] for w in warm})),
        "warm_frame_s": statistics.median(f[0] for f in framed),
        "warm_frame_cpu_s": statistics.median(f[1] for f in framed),
    }


def _first_warm(model_path: Path, mode: str, cache_dir: str) -> tuple[float, float, str]:
    """In this (fresh) process: the first compile, with the quantization in
    ``cache_dir`` (as ``aipusim compile`` after an earlier compile of the model)."""
    # lazy: the cache module reads the variable at each use
    from aipusim.compiler.quant.cache import DIR_ENV

    os.environ[DIR_ENV] = cache_dir
    return _timed_compile(model_path, _mode_config(mode))


def warm_cold_bench(
    name: str = "resnet50",
    modes: tuple[str, ...] | None = None,
    repeats: int = 3,
    input_size: int | None = None,
) -> list[dict[str, Any]]:
    """Cold against warm compiles of zoo model ``name``, one row per mode (`WARM_COLD_MODES`):
    in a fresh process with an empty quantization cache, a cold compile (``cold_*``:
    it calibrates) then ``repeats`` warm ones (``warm_*``, medians: a sweep worker's
    compiles, the parsed arch and cost models kept); then in another fresh process the
    first compile with the quantization cached (``first_warm_*``: ``aipusim compile``
    run again). Wall and CPU seconds of `compile_model` (Python's start-up and imports
    not counted); ``speedup`` and ``first_speedup``: cold CPU seconds over warm ones;
    ``warm_frame_*``: a warm compile plus one simulated frame in the first process
    (medians of ``repeats``), the figure set against the analytical peers.
    Example: ``warm_cold_bench("tiny_cnn", ("1core",), 1)[0]["speedup"]``."""
    ctx = multiprocessing.get_context("spawn")
    rows = []
    with tempfile.TemporaryDirectory(prefix="aipusim-bench-warm-") as tmp:
        model_path = Path(tmp) / f"{name}.onnx"
        onnx.save(zoo.build(name, input_size=input_size), model_path)
        for i, mode in enumerate(modes or WARM_COLD_MODES):
            cache_dir = str(Path(tmp) / f"cache{i}")  # empty: the first compile is cold
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                timed = pool.submit(_cold_then_warm, model_path, mode, repeats, cache_dir)
                row = timed.result()
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                first = pool.submit(_first_warm, model_path, mode, cache_dir).result()
            rows.append(
                {
                    "model": name,
                    "mode": mode,
                    **{k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()},
                    "first_warm_s": round(first[0], 2),
                    "first_warm_cpu_s": round(first[1], 2),
                    "first_warm_quantization": first[2],
                    "speedup": round(row["cold_cpu_s"] / row["warm_cpu_s"], 2),
                    "first_speedup": round(row["cold_cpu_s"] / first[1], 2),
                }
            )
    return rows


#: The space `sweep_bench` times: a small zoo model on 4 cores, 4 multicore modes x 5 MVM
#: utilization limits x 5 clocks x 2 DDR data rates = 200 points.
SWEEP_MODEL = "tiny_cnn"
SWEEP_INPUT_SIZE = 32
SWEEP_SET = {"aipu_cores_used": 4}
SWEEP_PARAMS = (
    "multicore_mode=batch,cooperative,pipeline,multithread",
    "mvm_utilization_limit=0.2,0.4,0.6,0.8,1.0",
    "frequency=400000000,500000000,600000000,700000000,800000000",
)
SWEEP_ARCH_PARAMS = ("ddr.data_rate_mt_s=3200,4266",)


def _compile_split(point: Any, folder: Path, quantization_cache: bool) -> dict[str, Any]:
    """One compile of ``point`` in this process: seconds of the front end (the passes of
    `compiler.pipeline.FRONT`, quantization included), of the back end (`BACK`) and of the
    driver's reading, checking and writing; and whether the quantization was cached."""
    # lazy: aipusim.sweep.evaluate loads pandas, pyarrow, not otherwise loaded here
    from aipusim.sweep.evaluate import write_arch, write_model

    model_path = write_model(point, folder)
    t0 = time.perf_counter()
    compiled = compile_model(
        CompileRequest(
            model_path=model_path,
            output_dir=folder / "out",
            config=point.config(),
            arch_path=write_arch(point, folder),
            quantization_cache=quantization_cache,
        )
    )
    whole = time.perf_counter() - t0
    front_names = {p.name for p in FRONT}
    passes = compiled.pass_seconds
    front = sum(s for name, s in passes.items() if name in front_names)
    back = sum(s for name, s in passes.items() if name not in front_names)
    return {
        "front_s": front,
        "back_s": back,
        "outside_s": max(whole - front - back, 0.0),
        "quantization": compiled.results["quantize"]["cache"],
    }


class _WorkerMemory:
    """Samples the resident set of this process's child processes (the sweep's pool
    workers) every ``interval_s`` seconds on a thread; Linux only (``/proc``), else no
    samples. `figures` gives the median over workers of each one's RSS in the first and
    the last tenth of the sweep, and the highest sample."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.samples: dict[int, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-rss", daemon=True)

    def __enter__(self) -> _WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for child in multiprocessing.active_children():
                try:
                    status = Path(f"/proc/{child.pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        mb = int(line.split()[1]) / 1024
                        self.samples.setdefault(child.pid, []).append(mb)

    def figures(self) -> dict[str, float | None]:
        series = [s for s in self.samples.values() if len(s) >= 10]
        if not series:
            return {
                "worker_rss_mb_early": None,
                "worker_rss_mb_late": None,
                "worker_rss_mb_peak": None,
            }
        early = statistics.median(max(s[: len(s) // 10]) for s in series)
        late = statistics.median(max(s[-(len(s) // 10) :]) for s in series)
        peak = max(max(s) for s in series)
        return {
            "worker_rss_mb_early": round(early),
            "worker_rss_mb_late": round(late),
            "worker_rss_mb_peak": round(peak),
        }


def _tree_cpu_s() -> float:
    """User + system CPU seconds of this process and its ended, waited-for children."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def sweep_bench(
    workers: int = 2,
    frames: int = 8,
    model: str = SWEEP_MODEL,
    input_size: int | None = SWEEP_INPUT_SIZE,
    quantization_cache: bool = True,
    arch_params: tuple[str, ...] = SWEEP_ARCH_PARAMS,
) -> dict[str, Any]:
    """Run the 200-point `SWEEP_PARAMS` x `SWEEP_ARCH_PARAMS` sweep of ``model`` on a local
    pool of ``workers`` long-lived processes (as ``aipusim sweep`` does) and time it:
    points per second, the mean compile and simulate seconds of a point as its worker
    measured them, and how a compile of the same points splits into front end and back
    end (one compile per multicore mode in this process, after the sweep warmed the
    quantization cache). ``arch_params`` replace the two DDR data rates (``KEY=V1,V2``
    as ``aipusim sweep --arch-param``); simulator-only numbers (`aipusim.sweep.evaluate.
    SIMULATOR_ONLY_ARCH_TABLES`) let points share a compiled program. Also how many
    compiles the points needed, and the workers' resident memory early and late in the
    sweep. Example: ``sweep_bench(workers=2)["points_per_s"]``.
    """
    # lazy: aipusim.sweep loads pandas, pyarrow, not otherwise loaded here
    from aipusim.sweep import ResultStore, build_space, parse_backend, run_sweep

    space = build_space(
        [model],
        SWEEP_PARAMS,
        arch_params,
        frames=frames,
        input_size=input_size,
        base=CompilerConfig(**SWEEP_SET),
        quantization_cache=quantization_cache,
    )
    with tempfile.TemporaryDirectory(prefix="aipusim-bench-sweep-") as tmp:
        t0 = time.perf_counter()
        cpu0 = _tree_cpu_s()
        with _WorkerMemory() as memory:
            summary = run_sweep(
                space, Path(tmp) / "sweep", backend=parse_backend(workers=workers), progress=False
            )
        wall = time.perf_counter() - t0
        # (the pool's workers have ended and been waited for: their seconds are counted)
        cpu = _tree_cpu_s() - cpu0
        rows = ResultStore(Path(tmp) / "sweep").read()
        modes = {dict(p.params)["multicore_mode"]: p for p in space.points}
        splits = []
        for i, point in enumerate(modes.values()):
            folder = Path(tmp) / f"split{i}"
            folder.mkdir()
            splits.append(_compile_split(point, folder, quantization_cache))
    n = len(space.points)
    return {
        "model": model,
        "input": "published" if input_size is None else f"{input_size}px",
        "points": n,
        # points whose worker compiled (the others reused the program of the one before)
        "compiles": int((rows["compile_s"] > 0).sum()),
        "failed": summary.failed,
        "workers": workers,
        "frames": frames,
        "wall_s": round(wall, 2),
        "points_per_s": round(n / wall, 2),
        "s_per_point": round(wall / n, 3),
        # CPU seconds of this process and its workers: on a loaded machine, the figure
        # that wall seconds over the points would be with every worker on a CPU of its own
        "cpu_s": round(cpu, 2),
        "cpu_s_per_point": round(cpu / n, 3),
        "compile_s_mean": round(float(rows["compile_s"].mean()), 3),
        "simulate_s_mean": round(float(rows["simulate_s"].mean()), 3),
        # what the workers' points did not spend compiling or simulating: writing the model
        # and arch files, the pool, storing rows (workers run side by side, hence * workers)
        "other_s_per_point": round(
            max(
                wall * workers / n - rows["compile_s"].mean() - rows["simulate_s"].mean(),
                0.0,
            ),
            3,
        ),
        "compile_front_s": round(sum(s["front_s"] for s in splits) / len(splits), 3),
        "compile_back_s": round(sum(s["back_s"] for s in splits) / len(splits), 3),
        "compile_outside_s": round(sum(s["outside_s"] for s in splits) / len(splits), 3),
        "quantization": ",".join(sorted({s["quantization"] for s in splits})),
        **memory.figures(),
    }


#: Marker lines around a generated block of a Markdown page (``{}``: the block's name).
BLOCK_BEGIN = "<!-- aipusim bench {}: generated, do not edit by hand -->"
BLOCK_END = "<!-- aipusim bench {} end -->"


def measured_note(command: str) -> str:
    """The line that says what a generated table is: the command, when, at which commit,
    and how loaded the machine was (the figures are wall times)."""
    # lazy: aipusim.run.report loads pandas, not otherwise loaded here
    from aipusim.run.report import source_revision

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    return (
        f"Measured by `{command}` on {now} at commit {source_revision()}, load average "
        f"{load:.1f} on {os.cpu_count()} CPUs (a shared machine: compare figures of one "
        f"sitting)."
    )


def replace_block(page: str, name: str, body: str, heading: str) -> str:
    """``page`` with the generated block ``name`` holding ``body``; a page without that
    block gets it appended at its end under ``heading``. Everything outside the markers is
    kept as written.

    >>> page = "# Figures\\n\\nProse.\\n"
    >>> once = replace_block(page, "sweep", "| a |\\n|--|\\n| 1 |", "## Sweep")
    >>> twice = replace_block(once, "sweep", "| a |\\n|--|\\n| 2 |", "## Sweep")
    >>> twice.startswith(page) and "| 2 |" in twice and "| 1 |" not in twice
    True
    >>> twice.count("## Sweep")
    1
    """
    begin, end = BLOCK_BEGIN.format(name), BLOCK_END.format(name)
    block = f"{begin}\n\n{body.strip()}\n\n{end}"
    lines = page.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if not starts and not ends:
        return f"{page.rstrip()}\n\n{heading}\n\n{block}\n"
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ConfigError(
            f"the page must hold the block {name!r} once, between {begin!r} and {end!r}, "
            f"not {len(starts)} begin and {len(ends)} end marker(s)"
        )
    return "\n".join([*lines[: starts[0]], block, *lines[ends[0] + 1 :]])


def write_markdown_block(path: str | Path, name: str, body: str, heading: str) -> None:
    """Put the generated block ``name`` into the Markdown page ``path`` (created if it does
    not exist), atomically."""
    page = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    write_text(path, replace_block(page, name, body, heading))
