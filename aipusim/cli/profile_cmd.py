"""``aipusim profile``: tables, plots and a Chrome trace from a simulator trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from aipusim.base.errors import ConfigError

_BY = ("layer", "unit", "frame", "core", "bandwidth", "power")
#: Most time bins: far more than a plot has pixels.
MAX_BINS = 100_000


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--drop-percentile",
    "drop_percentile",
    type=float,
    default=0.0,
    show_default=True,
    help="Drop the top and bottom P % of each group's samples (0.25 = 0.25 %).",
)
@click.option(
    "--drop-by",
    type=click.Choice(["value", "time"]),
    default="value",
    show_default=True,
    help="value: extreme samples per group; time: first and last P % of frames.",
)
@click.option(
    "--by", "by", type=click.Choice(_BY), default=None, help="Table to print (default: layer)."
)
@click.option(
    "--bins",
    type=int,
    default=100,
    show_default=True,
    help="Time bins of the bandwidth table and the bandwidth and utilisation plots.",
)
@click.option(
    "--plot",
    "plot_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write PNG plots into this folder.",
)
@click.option(
    "--chrome",
    "chrome_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write Chrome/Perfetto trace JSON here.",
)
@click.option(
    "--parquet",
    "parquet_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the chosen table as Parquet.",
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the chosen table as CSV.",
)
@click.option(
    "--markdown",
    "md_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the chosen table as Markdown.",
)
@click.option(
    "--compare",
    "compare_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Second trace: print per-layer deltas (TRACE2 - TRACE).",
)
@click.option("--strict", is_flag=True, help="Stop at the first malformed line.")
@click.option(
    "--arch",
    "arch_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Hardware TOML for the roofline's roofs (default: bundled; trace header values win).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the table as a list of records.")
def profile(
    trace_path: Path,
    drop_percentile: float,
    drop_by: str,
    by: str | None,
    bins: int,
    plot_dir: Path | None,
    chrome_path: Path | None,
    parquet_path: Path | None,
    csv_path: Path | None,
    md_path: Path | None,
    compare_path: Path | None,
    strict: bool,
    arch_path: Path | None,
    as_json: bool,
) -> None:
    """Reduce TRACE (text or Parquet) to a table; optionally plot and export it.

    Examples: ``aipusim profile run.trace --by unit``,
    ``aipusim profile run.trace --drop-percentile 5 --drop-by time --plot out/``,
    ``aipusim profile a.trace --compare b.trace --json``.
    """
    from aipusim.profiler.drop import check_percent

    check_percent(drop_percentile)
    if not 1 <= bins <= MAX_BINS:
        raise ConfigError(f"--bins must be an integer 1-{MAX_BINS}, not {bins}")
    # every output is checked before the trace is read (a big trace takes a while)
    outputs = (plot_dir, chrome_path, parquet_path, csv_path, md_path, compare_path)
    if any(o is not None for o in outputs[:-1]):
        # lazy: base.fileio (hashlib, secrets, shutil) only when there is a file to write
        from aipusim.base.fileio import check_output

        for path in (chrome_path, parquet_path, csv_path, md_path):
            if path is not None:
                check_output(path)
        if plot_dir is not None:
            check_output(plot_dir, folder=True)
    if compare_path is not None and by not in (None, "layer"):
        raise ConfigError(f"--compare gives per-layer deltas; --by must be layer, not {by}")
    by = by or "layer"
    if by == "layer" and not as_json and all(o is None for o in outputs) and _is_text(trace_path):
        _lean_layers(trace_path, drop_percentile, drop_by, strict)
        return
    # lazy: loads numpy, pandas, pyarrow, tqdm; kept off the CLI's start-up
    from aipusim import profiler as prof

    trace = prof.load_trace(trace_path, strict=strict, progress=_big(trace_path))
    _warn_lines(trace)
    if compare_path is not None:
        other = prof.load_trace(compare_path, strict=strict, progress=_big(compare_path))
        _warn_lines(other)
        table = prof.compare_layers(trace, other, drop_percentile, drop_by)
    elif by == "bandwidth":
        table = prof.bandwidth_table(trace, bins, drop_percentile, drop_by)
    else:
        reducer = {
            "layer": prof.layer_table,
            "unit": prof.unit_table,
            "frame": prof.frame_table,
            "core": prof.core_table,
            "power": prof.power_table,
        }[by]
        table = reducer(trace, drop_percentile, drop_by)
    for path, kind in ((parquet_path, ".parquet"), (csv_path, ".csv"), (md_path, ".md")):
        if path is not None:
            prof.write_table(table, path, kind)
    if plot_dir is not None:
        peak, ddr = _roofs(trace, arch_path)
        written = prof.plot_all(trace, plot_dir, drop_percentile, drop_by, peak, ddr, bins)
        click.echo(f"plots: {', '.join(str(p) for p in written)}", err=True)
    if chrome_path is not None:
        n = prof.write_chrome_trace(trace, chrome_path)
        click.echo(f"chrome trace: {chrome_path} ({n} events)", err=True)
    if as_json:
        click.echo(json.dumps(prof.to_records(table), indent=1))
        return
    if compare_path is not None:
        # lazy: loads numpy, pandas, pyarrow, tqdm; kept off the CLI's start-up
        from aipusim.profiler.compare import run_line

        click.echo(f"a: {run_line(trace, drop_percentile, drop_by)}")
        click.echo(f"b: {run_line(other, drop_percentile, drop_by)}")
        click.echo("per layer and frame (core-µs: mean per sample x samples per frame), b - a:\n")
        click.echo(prof.to_markdown(table))
        return
    summary = prof.frame_summary(trace, drop_percentile, drop_by)
    _echo_summary(trace, trace_path, summary, len(prof.cores_that_ran(trace)))
    click.echo(prof.to_markdown(table))


def _is_text(path: Path) -> bool:
    """A trace the lean route reads: a text trace (not Parquet by suffix or content)."""
    # lazy: numpy and pyarrow, kept off the CLI's start-up
    from aipusim.profiler.parse import is_parquet

    return path.is_file() and not is_parquet(path)


def _lean_layers(trace_path: Path, drop_percentile: float, drop_by: str, strict: bool) -> None:
    """The default output (the summary line and the layer table) without pandas
    (`aipusim.profiler.lean`): byte-identical to the pandas route, in a third of the time."""
    # lazy: numpy and pyarrow, kept off the CLI's start-up
    from aipusim.profiler import lean
    from aipusim.profiler.tables import to_markdown

    trace = lean.read_trace(trace_path, strict=strict, progress=_big(trace_path))
    _warn_lines(trace)
    rows = lean.layer_rows(trace, drop_percentile, drop_by)
    summary = lean.frame_summary(trace, drop_percentile, drop_by)
    _echo_summary(trace, trace_path, summary, len(lean.cores_that_ran(trace)))
    click.echo(to_markdown(rows))


def _echo_summary(trace, trace_path: Path, summary: dict[str, float], ran: int) -> None:
    h = trace.header
    cores = f"{ran} of {h.cores} cores ran" if ran else f"{h.cores} cores"
    click.echo(
        f"{h.model or trace_path.name}: {trace.events} events, {summary['frames']} frames, "
        f"{summary['fps']:.1f} fps (steady state, {summary['warmup_frames']} warm-up "
        f"frame(s) left out), queued latency p50 {summary['p50_us']:.1f} µs p99 "
        f"{summary['p99_us']:.1f} µs ({cores}, {h.freq_hz / 1e6:g} MHz)\n"
    )


def _big(path: Path) -> bool:
    """Worth a progress bar: a trace over 64 MB (about a million lines). On a terminal the
    reader shows one; elsewhere one plain line says what is being read."""
    if not (path.is_file() and path.stat().st_size > (64 << 20)):
        return False
    if sys.stderr.isatty():
        return True
    size = path.stat().st_size / 1e6
    click.echo(f"aipusim: profile: reading {path} ({size:.0f} MB)", err=True)
    return False


def _warn_lines(trace) -> None:
    """What was left out of ``trace`` (a `Trace` or a lean one), on stderr."""
    if trace.inconsistent:
        # lazy: loads numpy, pandas, pyarrow, tqdm; kept off the CLI's start-up
        from aipusim.profiler.consistency import describe_dropped

        click.echo(describe_dropped(trace.source, trace.inconsistent), err=True)
    if trace.unknown_count:
        click.echo(
            f"{trace.source}: {trace.unknown_count} line(s) of unknown tag kept as [?]", err=True
        )
    cut = trace.cut_line
    if cut is not None:
        click.echo(
            f"{trace.source}: line {cut} (the last) was cut short: the file ends mid-line, "
            "so the trace is incomplete; that line is left out, the rest reduced",
            err=True,
        )
    malformed = trace.malformed
    if not isinstance(malformed, list):  # a Trace's frame (line, text, reason)
        malformed = list(zip(malformed["line"].tolist(), malformed["reason"].tolist(), strict=True))
    malformed = [(n, reason) for n, reason in malformed if n != cut]
    if malformed:
        lines = ", ".join(str(n) for n, _ in malformed[:10])
        more = " ..." if len(malformed) > 10 else ""
        first = malformed[0][1]
        click.echo(
            f"{trace.source}: {len(malformed)} malformed line(s) skipped "
            f"(lines {lines}{more}; first: {first})",
            err=True,
        )


def _roofs(trace, arch_path: Path | None) -> tuple[float | None, float | None]:
    """Per-core compute roof (MACs/cycle) and DDR bytes/cycle: the trace header's values
    where it has them, else the arch's."""
    extra = trace.header.extra
    if "peak_macs_per_cycle" in extra and "ddr_bytes_per_cycle" in extra:
        return None, None  # the plot reads both from the header
    # lazy: kept off the command's start-up (aipusim.arch)
    from aipusim.arch import load_arch

    arch = load_arch(arch_path)
    peak = None if "peak_macs_per_cycle" in extra else float(arch.mvm.macs_per_cycle)
    ddr = (
        None
        if "ddr_bytes_per_cycle" in extra
        else arch.ddr_bw_bytes_per_cycle(trace.header.freq_hz)
    )
    return peak, ddr
