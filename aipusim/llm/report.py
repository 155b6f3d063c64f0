"""The outputs of `aipusim llm`: ``report.md``, ``llm.json`` and ``tokens_per_s.png``
(decode tokens/s against the context length, one line per multicore mode), and the
printout. Every number comes from `aipusim.llm.result.LlmResult`; tables and text share the
formats of `aipusim.studies.tables.fmt`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.fileio import write_text
from aipusim.llm.result import LlmResult
from aipusim.studies.tables import md_table, pyplot, save_figure

REPORT_NAME = "report.md"
JSON_NAME = "llm.json"
PLOT_NAME = "tokens_per_s.png"

#: Table column -> (field of a step, format kind of `aipusim.studies.tables.FORMATS`).
STEP_COLUMNS: dict[str, tuple[str, str]] = {
    "mode": ("mode", ""),
    "phase": ("phase", ""),
    "context": ("context", ""),
    "latency (ms)": ("latency_ms", "latency_ms"),
    "tokens/s": ("tokens_per_s", "fps"),
    "tokens/s per sequence": ("sequence_tokens_per_s", "fps"),
    "energy/token (mJ)": ("energy_mj_per_token", "energy_mj"),
    "DDR bytes/token": ("ddr_bytes_per_token", "bytes"),
    "DDR roofline (tokens/s)": ("roofline_tokens_per_s", "fps"),
    "share of roofline": ("roofline_share", "ratio3"),
}


def steps_table(result: LlmResult) -> pd.DataFrame:
    """One row per step (mode, prefill or decode at a context)."""
    rows = []
    for s in result.steps:
        values = vars(s) | {
            "sequence_tokens_per_s": s.sequence_tokens_per_s,
            "latency_ms": s.latency_us / 1e3,
        }
        rows.append({col: values[key] for col, (key, _) in STEP_COLUMNS.items()})
    return pd.DataFrame(rows)


def summary_table(result: LlmResult) -> pd.DataFrame:
    """One row per mode: the headline figures."""
    return pd.DataFrame(
        [
            {
                "mode": s["mode"],
                "time to first token (ms)": s["ttft_ms"],
                "decode tokens/s (start)": s["decode_tokens_per_s_start"],
                "decode tokens/s (end)": s["decode_tokens_per_s_end"],
                "generation (ms)": s["generation_ms"],
                "energy/token (mJ, end)": s["energy_mj_per_token_end"],
                "DDR bytes/token (end)": s["ddr_bytes_per_token_end"],
                "share of DDR roofline (end)": s["roofline_share_end"],
            }
            for s in result.summary
        ]
    )


SUMMARY_KINDS = {
    "time to first token (ms)": "latency_ms",
    "decode tokens/s (start)": "fps",
    "decode tokens/s (end)": "fps",
    "generation (ms)": "latency_ms",
    "energy/token (mJ, end)": "energy_mj",
    "DDR bytes/token (end)": "bytes",
    "share of DDR roofline (end)": "ratio3",
}


def plot_tokens(result: LlmResult, path: Path) -> Path:
    """Decode tokens/s (all sequences) against the context, one line per mode."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    table = steps_table(result)
    decode = table[table["phase"] == "decode"]
    for mode, group in decode.groupby("mode", sort=False):
        g = group.sort_values("context")
        ax.plot(g["context"], g["tokens/s"], "o-", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens cached)")
    ax.set_ylabel("decode tokens/s (all sequences)")
    ax.set_title(f"{result.model}: decode throughput, batch {result.batch}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def markdown(result: LlmResult, command: str, plot: str | None) -> str:
    """``report.md``'s text."""
    changes = ", ".join(f"`{k}={v}`" for k, v in result.config_changes.items()) or "none"
    skipped = [f"- context {c} not run: {why}" for c, why in sorted(result.skipped.items())]
    lines = [
        f"# {result.model}: prompt {result.prompt}, {result.generate} generated, "
        f"batch {result.batch}",
        "",
        f"- command: `{command}`",
        f"- config changes from the defaults: {changes}",
        f"- int8 weights {result.weight_bytes:,} bytes; KV cache "
        f"{result.kv_bytes_per_token:,} bytes per token per sequence",
        f"- DDR peak bandwidth {result.ddr_bytes_per_s / 1e9:.1f} GB/s (arch file); the "
        "roofline is that over the DDR bytes a token reads, and its share is tokens/s over "
        "the roofline (never above 1)",
        "- time to first token: the prefill's unloaded latency; decode tokens/s: all "
        "sequences of all instances at steady state, successive frames taken as independent "
        "requests (a sequence's next step waits for its token: its own rate is the tokens/s "
        "per sequence, one token per step latency); the generation's time adds the decode "
        "steps, each context between two compiled ones taken as linear",
        *skipped,
        "",
        "## Per mode",
        "",
        md_table(summary_table(result), SUMMARY_KINDS),
        "",
        "## Every step",
        "",
        md_table(steps_table(result), {c: k for c, (_, k) in STEP_COLUMNS.items() if k}),
        "",
    ]
    if plot:
        lines += [f"![decode tokens/s against the context]({plot})", ""]
    return "\n".join(lines)


def write_report(result: LlmResult, out: Path, command: str) -> list[Path]:
    """Write ``report.md``, ``llm.json`` and the plot into ``out``; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    plot = plot_tokens(result, out / PLOT_NAME)
    report = out / REPORT_NAME
    write_text(report, markdown(result, command, plot.name))
    data = out / JSON_NAME
    write_text(data, json.dumps(result.to_dict(), indent=2) + "\n")
    return [report, data, plot]


def printout(result: LlmResult) -> str:
    """The lines `aipusim llm` prints: one per mode."""
    lines = [
        f"{result.model}: prompt {result.prompt}, generate {result.generate}, batch "
        f"{result.batch}; weights {result.weight_bytes / 2**20:.1f} MiB int8"
    ]
    for s in result.summary:
        share = s["roofline_share_end"]
        lines.append(
            f"  {s['mode']:<12} first token {s['ttft_ms']:.3f} ms, decode "
            f"{s['decode_tokens_per_s_start']:.1f} -> {s['decode_tokens_per_s_end']:.1f} "
            f"tokens/s, {s['energy_mj_per_token_end']:.4f} mJ/token, "
            f"{s['ddr_bytes_per_token_end']:,.0f} DDR B/token"
            + (f" ({share:.3f} of the DDR roofline)" if share is not None else "")
        )
        over = [
            f"{st.context}: {st.tokens_per_s:.1f}"
            for st in result.steps
            if st.mode == s["mode"] and st.phase == "decode"
        ]
        lines.append(f"  {'':<12} decode tokens/s by context {', '.join(over)}")
    return "\n".join(lines)


def as_json(result: LlmResult) -> dict[str, Any]:
    """The ``--json`` record."""
    return result.to_dict()
