"""Study 6: every model in every multicore mode and tiling depth, run on data.

Each cell of the matrix compiles the model, simulates it in functional mode (every task
executes on a seeded int8 input, with hazard detection) and compares the output tensors
read back from the output buffers with the int8 reference executor, byte for byte. A cell
is bit-exact, differs (with the first differing layer and element), or failed (a compile
error or a `HazardError`, with its message). The modes are those of the multicore study
plus ``multithread``; the tiling depths are 1 and the model's built-in default.

Example: ``run_functional_study(Path("out"), models=["tiny_cnn"], input_size=32, frames=4)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aipusim import zoo
from aipusim.run.job import model_name
from aipusim.studies.common import (
    RESULTS_DIR,
    RunInfo,
    StudyResult,
    base_config,
    check_models,
    clear_outputs,
    config_changes,
    context_digest,
    design_point,
    md_table,
    prepare_study_dir,
    pyplot,
    run_points,
    save_figure,
    write_readme,
)
from aipusim.studies.multicore import MODES as MULTICORE_MODES
from aipusim.studies.multicore import Mode, mode_keys

STUDY = "functional"
#: The multicore study's four ways to use the chip, plus multithread (one instance on four
#: cores that takes a frame per core, like batch, but started frame by frame).
MODES = (*MULTICORE_MODES, Mode("multithread", 4, 1.0, "multithread"))
#: Verdict of a cell.
BIT_EXACT, DIFFERS, FAILED = "bit-exact", "differs", "failed"


def default_models() -> list[str]:
    """Every zoo model."""
    return list(zoo.names())


def depths_of(model: str) -> tuple[int, ...]:
    """Tiling depth 1 and the model's built-in default (once when they are the same)."""
    return tuple(dict.fromkeys((1, int(base_config(model).tiling_depth))))


def verdict(row: pd.Series) -> str:
    """A cell's result: bit-exact, differs, or failed (no run to compare)."""
    if row["status"] != "ok":
        return FAILED
    return BIT_EXACT if bool(row["bit_exact"]) else DIFFERS


def detail(row: pd.Series) -> str:
    """Why a cell is not bit-exact: the check's one line, or the error; empty if it is."""
    if row["status"] != "ok":
        return str(row["error"])
    return "" if bool(row["bit_exact"]) else str(row["check"])


def measure(
    models: Sequence[str],
    frames: int,
    input_size: int | None,
    directory: Path,
    workers: int,
    progress: bool,
) -> pd.DataFrame:
    """Every (model, mode, tiling depth) cell run on data; one row per cell."""
    digest = context_digest(STUDY)
    points = [
        design_point(
            m, (*mode.params(), ("tiling_depth", d)), frames, input_size, digest, check=True
        )
        for m in models
        for mode in MODES
        for d in depths_of(m)
    ]
    depths = sorted({d for m in models for d in depths_of(m)})
    keys = [*mode_keys(MODES), ("tiling_depth", tuple(depths))]
    rows = run_points(STUDY, points, keys, directory, workers, progress)
    label = {m.multicore_mode: m.label for m in MODES}
    table = pd.DataFrame(
        {
            "model": rows["model"],
            "mode": rows["multicore_mode"].map(label),
            "tiling depth": rows["tiling_depth"].astype(int),
            "result": [verdict(r) for _, r in rows.iterrows()],
            "mismatching elements": rows["mismatches"],
            "detail": [detail(r) for _, r in rows.iterrows()],
        }
    )
    order = {m: i for i, m in enumerate(models)}
    mode_order = {m.label: i for i, m in enumerate(MODES)}
    table = (
        table.assign(_model=table["model"].map(order), _mode=table["mode"].map(mode_order))
        .sort_values(["_model", "_mode", "tiling depth"])
        .drop(columns=["_model", "_mode"])
        .reset_index(drop=True)
    )
    table["mismatching elements"] = table["mismatching elements"].astype("Int64")
    table["model"] = table["model"].map({m: model_name(m) for m in models})
    return table


def conclusions(table: pd.DataFrame) -> list[str]:
    """How many cells are bit-exact, and every one that is not, with its reason."""
    total = len(table)
    exact = table[table["result"] == BIT_EXACT]
    out = [
        f"**{len(exact)} of {total}** cells (model x mode x tiling depth) are bit-exact "
        "against the int8 reference."
    ]
    for model, group in table.groupby("model", sort=False):
        if (group["result"] == BIT_EXACT).all():
            out.append(f"`{model}`: bit-exact in all {len(group)} of its cells.")
    for _, row in table[table["result"] != BIT_EXACT].iterrows():
        out.append(
            f"`{row['model']}`, {row['mode']}, tiling depth {row['tiling depth']}: "
            f"{row['result']}: {row['detail']}"
        )
    return out


def plot(table: pd.DataFrame, path: Path) -> Path:
    """The matrix as a grid of coloured cells: rows models, columns mode x depth."""
    plt = pyplot()
    models = list(dict.fromkeys(table["model"]))
    depth_labels = ["depth 1", "default depth"]
    columns = [(m.label, j) for m in MODES for j in range(2)]
    colors = {BIT_EXACT: "#2ca02c", DIFFERS: "#d62728", FAILED: "#ff7f0e"}
    grid = np.full((len(models), len(columns)), np.nan)
    text = [["" for _ in columns] for _ in models]
    codes = {BIT_EXACT: 0, DIFFERS: 1, FAILED: 2}
    for i, model in enumerate(models):
        rows = table[table["model"] == model]
        for mode, group in rows.groupby("mode", sort=False):
            ordered = group.sort_values("tiling depth")
            for j, (_, row) in enumerate(ordered.iterrows()):
                # one depth only (the default is 1): it fills both columns
                for k in range(j, 2 if len(ordered) == 1 else j + 1):
                    c = columns.index((mode, k))
                    grid[i, c] = codes[row["result"]]
                    text[i][c] = f"{row['tiling depth']}"
    fig, ax = plt.subplots(figsize=(1.0 * len(columns) + 2, 0.5 * len(models) + 1.8))
    # lazy: loads matplotlib, not otherwise loaded here
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap([colors[BIT_EXACT], colors[DIFFERS], colors[FAILED]])
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=2, aspect="auto")
    # white lines between the cells
    ax.set_xticks(np.arange(len(columns) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(models) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    for i in range(len(models)):
        for c in range(len(columns)):
            ax.text(c, i, text[i][c], ha="center", va="center", fontsize=8, color="white")
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_xticks(
        range(len(columns)),
        [f"{mode}\n{depth_labels[k]}" for mode, k in columns],
        rotation=45,
        ha="right",
        fontsize=7,
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[k]) for k in colors]
    ax.legend(handles, list(colors), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.set_title("Run on data vs the int8 reference (cell text: tiling depth)")
    fig.tight_layout()
    return save_figure(fig, path)


def run_functional_study(
    out: Path,
    *,
    models: Sequence[str] | None = None,
    frames: int = 4,
    input_size: int | None = None,
    workers: int = 1,
    command: str = "aipusim.studies.run_functional_study(...)",
    progress: bool = True,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, ``functional.png``, Parquet ``results/``.

    Always from scratch: a result is only worth quoting at one commit, and a new commit
    gives new point ids anyway.
    """
    models = check_models(models if models is not None else default_models(), input_size)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    table = measure(models, frames, input_size, out / RESULTS_DIR, workers, progress)
    found = conclusions(table)
    figure = plot(table, out / "functional.png")
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m) for m in models},
        swept="mode: "
        + "; ".join(m.text() for m in MODES)
        + "; `tiling_depth`: 1 and the model's built-in default",
        extra=[
            "- Every cell runs in functional mode: each task executes on data when its "
            "timing model runs it, with hazard detection (a read or overwrite not ordered by "
            "queue order, tokens or barriers is a `HazardError`). The input is the seeded "
            "random int8 input of `aipusim simulate --functional`; the outputs read back "
            "from the output buffers are compared with the int8 reference executor's, byte "
            "for byte, for every frame. A cell is bit-exact only if every output matches and "
            "no layer was left timed-only (`functional_gaps`)."
        ],
    )
    body = [
        "## Results",
        "",
        md_table(table),
        "",
        f"![functional matrix]({figure.name})",
        "",
        f"Raw results (one row per cell): `{RESULTS_DIR}/part-*.parquet`.",
    ]
    readme = write_readme(
        out,
        "Functional matrix: every model, mode and tiling depth run on data",
        "Does every compiled program compute the network? Each model in each multicore mode "
        "and tiling depth, executed by the functional simulator and compared with the int8 "
        "reference executor.",
        info,
        found,
        body,
    )
    return StudyResult(STUDY, out, table, found, [readme, figure])
