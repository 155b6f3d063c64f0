"""Study: a decoder-only language model on the chip (`aipusim.run_llm` per design point).

Four questions, each one table: prefill against decode (tokens/s and energy per token of
the prompt and of one generated token, per multicore mode); decode over the context
length (where tokens/s falls and where the step turns DDR-bound, its DDR roofline share
at least `MEMORY_BOUND_SHARE`); the batch, 1 to 8 sequences at once; and the
``mvm_utilization_limit``. The conclusions are computed from those tables.

Example: ``run_llm_study(Path("reports/llm"), models=["tiny_decoder"], contexts=(64,),
batches=(1, 2), limits=(0.5,), modes=("single",))``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import write_text
from aipusim.llm.job import DEFAULT_CONTEXTS, MODES, LlmResult, run_llm, select_modes
from aipusim.studies.common import (
    BUILT_IN,
    STUDY_MARKER,
    StudyBase,
    StudyResult,
    clear_outputs,
    fmt,
    md_table,
    prepare_study_dir,
    pyplot,
    save_figure,
    source_state,
)

STUDY = "llm"
DEFAULT_MODELS = ("tiny_decoder",)
DEFAULT_PROMPT = 32
DEFAULT_BATCHES = (1, 2, 4, 8)
DEFAULT_LIMITS = (0.25, 0.5, 1.0)
LIMIT = "mvm_utilization_limit"
#: A decode step counts as DDR-bound when it draws at least this share of the DDR
#: bandwidth roofline (the DDR link busy at least this share of the step).
MEMORY_BOUND_SHARE = 0.5

KINDS = {
    "latency (ms)": "latency_ms",
    "tokens/s": "fps",
    "tokens/s per sequence": "fps",
    "energy/token (mJ)": "energy_mj",
    "DDR bytes/token": "bytes",
    "share of DDR roofline": "ratio3",
    "prefill/decode tokens/s": "ratio",
    "u": "limit",
}


def _rows(result: LlmResult, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            **extra,
            "mode": s.mode,
            "phase": s.phase,
            "context": s.context,
            "latency (ms)": s.latency_us / 1e3,
            "tokens/s": s.tokens_per_s,
            "tokens/s per sequence": s.sequence_tokens_per_s,
            "energy/token (mJ)": s.energy_mj_per_token,
            "DDR bytes/token": s.ddr_bytes_per_token,
            "share of DDR roofline": s.roofline_share,
        }
        for s in result.steps
    ]


def measure(
    model: str,
    prompt: int,
    contexts: Sequence[int],
    batches: Sequence[int],
    limits: Sequence[float],
    modes: Sequence[str],
    sets: Sequence[str],
    progress: bool,
) -> dict[str, pd.DataFrame]:
    """The study's tables: ``context`` (every mode, prefill and decode over the contexts,
    batch 1), ``batch`` (decode at the prompt's context per batch and mode) and ``limit``
    (prefill and decode at the prompt's context per limit, one core)."""
    base = run_llm(model, prompt=prompt, generate=1, sets=sets, modes=modes,
                   contexts=contexts, progress=progress)  # fmt: skip
    context = pd.DataFrame(_rows(base))
    batch_rows = [
        r for r in _rows(base, batch=1) if r["phase"] == "decode" and r["context"] == prompt
    ]
    for b in [b for b in batches if b != 1]:
        r = run_llm(model, prompt=prompt, generate=1, batch=b, sets=sets, modes=modes,
                    contexts=(), progress=progress)  # fmt: skip
        batch_rows += [row for row in _rows(r, batch=b) if row["phase"] == "decode"]
    limit_rows = []
    if "single" in modes and not any(s.split("=", 1)[0].strip() == LIMIT for s in sets):
        # u = 1 (the default) on one core is what the base run measured already
        limit_rows += [
            r for r in _rows(base, u=1.0) if r["mode"] == MODES["single"].label
            and r["context"] in (0, prompt)
        ]  # fmt: skip
    for u in [u for u in sorted(set(limits) | {1.0}) if u not in {r["u"] for r in limit_rows}]:
        r = run_llm(model, prompt=prompt, generate=1, sets=[*sets, f"{LIMIT}={u}"],
                    modes=["single"], contexts=(), progress=progress)  # fmt: skip
        limit_rows += _rows(r, u=u)
    skipped = "; ".join(f"{c}: {why}" for c, why in base.skipped.items())
    meta = {
        "weight_bytes": base.weight_bytes,
        "kv_bytes_per_token": base.kv_bytes_per_token,
        "ddr_gb_s": base.ddr_bytes_per_s / 1e9,
        "skipped": skipped,
    }
    return {
        "context": context,
        "batch": pd.DataFrame(batch_rows),
        "limit": pd.DataFrame(limit_rows),
        "meta": pd.DataFrame([meta]),
    }


def conclusions(tables: dict[str, pd.DataFrame], prompt: int) -> list[str]:
    """What the tables say, each figure quoted as its table shows it."""
    out: list[str] = []
    ctx = tables["context"]
    decode = ctx[ctx["phase"] == "decode"]
    prefill = ctx[ctx["phase"] == "prefill"]
    for c, group in decode.groupby("context"):
        best = group.loc[group["tokens/s"].idxmax()]
        thrifty = group.loc[group["energy/token (mJ)"].idxmin()]
        out.append(
            f"Decode at context {c}: **{best['mode']}** generates the most tokens/s "
            f"({fmt(best['tokens/s'], 'fps')}); {thrifty['mode']} spends the least energy per "
            f"token ({fmt(thrifty['energy/token (mJ)'], 'energy_mj')} mJ)."
        )
    for mode, group in decode.groupby("mode", sort=False):
        g = group.sort_values("context")
        first, last = g.iloc[0], g.iloc[-1]
        bound = g[g["share of DDR roofline"].fillna(0) >= MEMORY_BOUND_SHARE]
        shares = g["share of DDR roofline"].dropna()
        where = (
            f"it is DDR-bound (at least {fmt(MEMORY_BOUND_SHARE, 'ratio')} of the DDR roofline) "
            f"from context {int(bound.iloc[0]['context'])} on "
            f"({fmt(bound.iloc[0]['share of DDR roofline'], 'ratio3')})"
            if len(bound)
            else f"it never becomes DDR-bound up to context {int(last['context'])} (highest "
            "share of the DDR roofline "
            + (fmt(shares.max(), "ratio3") if len(shares) else "n/a: no DDR bytes per token")
            + ")"
        )
        out.append(
            f"{mode}: decode tokens/s goes {fmt(first['tokens/s'], 'fps')} -> "
            f"{fmt(last['tokens/s'], 'fps')} from context {int(first['context'])} to "
            f"{int(last['context'])}; {where}."
        )
        pre = prefill[prefill["mode"] == mode]
        at_prompt = g[g["context"] == prompt]
        if len(pre) and len(at_prompt):
            ratio = pre.iloc[0]["tokens/s"] / at_prompt.iloc[0]["tokens/s"]
            out.append(
                f"{mode}: the prefill processes {fmt(pre.iloc[0]['tokens/s'], 'fps')} prompt "
                f"tokens/s, {fmt(ratio, 'ratio')} x the decode's "
                f"{fmt(at_prompt.iloc[0]['tokens/s'], 'fps')} at context {prompt}."
            )
    batch = tables["batch"]
    for mode, group in batch.groupby("mode", sort=False):
        g = group.sort_values("batch")
        lo, hi = g.iloc[0], g.iloc[-1]
        if lo["batch"] != hi["batch"]:
            out.append(
                f"{mode}: batch {int(lo['batch'])} -> {int(hi['batch'])} takes decode from "
                f"{fmt(lo['tokens/s'], 'fps')} to {fmt(hi['tokens/s'], 'fps')} tokens/s "
                f"({fmt(hi['tokens/s'] / lo['tokens/s'], 'ratio')} x) and each sequence from "
                f"{fmt(lo['tokens/s per sequence'], 'fps')} to "
                f"{fmt(hi['tokens/s per sequence'], 'fps')} tokens/s."
            )
    lim = tables["limit"]
    for phase, group in lim.groupby("phase", sort=False):
        g = group.sort_values("u")
        lo, hi = g.iloc[0], g.iloc[-1]
        if lo["u"] != hi["u"]:
            out.append(
                f"{LIMIT} {fmt(hi['u'], 'limit')} -> {fmt(lo['u'], 'limit')} (one core): "
                f"{phase} tokens/s {fmt(hi['tokens/s'], 'fps')} -> {fmt(lo['tokens/s'], 'fps')}, "
                f"energy per token {fmt(hi['energy/token (mJ)'], 'energy_mj')} -> "
                f"{fmt(lo['energy/token (mJ)'], 'energy_mj')} mJ."
            )
    return out


def plot(tables: dict[str, pd.DataFrame], path: Path) -> Path:
    """Decode tokens/s against the context per mode, and against the batch."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    ctx = tables["context"]
    for mode, g in ctx[ctx["phase"] == "decode"].groupby("mode", sort=False):
        g = g.sort_values("context")
        axes[0].plot(g["context"], g["tokens/s"], "o-", label=mode)
    for mode, g in tables["batch"].groupby("mode", sort=False):
        g = g.sort_values("batch")
        axes[1].plot(g["batch"], g["tokens/s"], "o-", label=mode)
    for ax, xlabel, title in (
        (axes[0], "context (tokens cached)", "Decode throughput over the context (batch 1)"),
        (axes[1], "sequences at once (batch)", "Decode throughput over the batch"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("decode tokens/s (all sequences)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def _check(values: Sequence[Any], flag: str, ok: Any, valid: str) -> list[Any]:
    out = sorted(set(values))
    bad = [v for v in out if not ok(v)]
    if bad or not out:
        raise ConfigError(f"{flag} must be {valid}, not {bad or 'none'}")
    return out


def run_llm_study(
    out: Path,
    *,
    models: Sequence[str] = DEFAULT_MODELS,
    prompt: int = DEFAULT_PROMPT,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
    batches: Sequence[int] = DEFAULT_BATCHES,
    limits: Sequence[float] = DEFAULT_LIMITS,
    modes: Sequence[str] = tuple(MODES)[:3],
    command: str = "aipusim.studies.run_llm_study(...)",
    progress: bool = True,
    base: StudyBase = BUILT_IN,
) -> StudyResult:
    """Run the study on one decoder into ``out``: ``README.md``, ``llm.png`` and the
    tables as CSV (``base``: ``--set`` changes on top of the defaults; decoders have no
    built-in config, so ``--defaults`` changes nothing)."""
    if len(models) != 1:
        raise ConfigError(f"--models must name one decoder, not {len(models)}")
    (model,) = models
    batches = _check(batches, "batches", lambda b: isinstance(b, int) and b >= 1, "integers >= 1")
    limits = _check(limits, "--limits", lambda u: 0 < u <= 1, "in (0, 1]")
    select_modes(modes)
    base.check([], STUDY, [LIMIT, "multicore_mode", "aipu_cores_used"], "the study sweeps them")
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    start = time.perf_counter()
    tables = measure(model, prompt, contexts, batches, limits, modes, base.sets, progress)
    seconds = time.perf_counter() - start
    found = conclusions(tables, prompt)
    figure = plot(tables, out / "llm.png")
    files = [figure]
    for name in ("context", "batch", "limit"):
        path = out / f"{name}.csv"
        write_text(path, tables[name].to_csv(index=False))
        files.append(path)
    meta = tables["meta"].iloc[0]
    revision, dirty = source_state()
    lines = [
        f"# LLM decode on the chip: {model}",
        "",
        "Prefill against decode, the context length, the batch, the multicore modes and the "
        f"`{LIMIT}`, each step compiled and simulated by `aipusim llm` (one compile per "
        "context length: the shapes are static).",
        "",
        "## What was run",
        "",
        f"- command: `{command}`",
        f"- decoder `{model}`: int8 weights {int(meta['weight_bytes']):,} bytes, KV cache "
        f"{int(meta['kv_bytes_per_token']):,} bytes per token per sequence; prompt {prompt} "
        f"tokens; contexts {', '.join(map(str, sorted({prompt, *contexts})))}; batches "
        f"{', '.join(map(str, batches))}; {LIMIT} "
        + ", ".join(fmt(u, "limit") for u in sorted(set(limits) | {1.0})),
        f"- modes: {', '.join(MODES[m].label for m in modes)}; config: the defaults"
        + "".join(f", `--set {s}`" for s in base.sets),
        f"- DDR peak bandwidth {meta['ddr_gb_s']:.1f} GB/s (arch file); a step is DDR-bound "
        f"when it draws at least {fmt(MEMORY_BOUND_SHARE, 'ratio')} of the DDR roofline "
        "(tokens/s over peak DDR bandwidth / DDR bytes per token)",
        *([f"- contexts not run: {meta['skipped']}"] if meta["skipped"] else []),
        f"- {seconds:.0f} s; commit `{revision}`"
        + (" with uncommitted source changes" if dirty else ""),
        "",
        "## Conclusions (computed from the tables below)",
        "",
        *[f"- {c}" for c in found],
        "",
        "## Prefill and decode over the context (batch 1)",
        "",
        md_table(tables["context"], KINDS),
        "",
        "## Batch (decode at the prompt's context)",
        "",
        md_table(tables["batch"], KINDS),
        "",
        f"## {LIMIT} (one core, at the prompt's context)",
        "",
        md_table(tables["limit"], KINDS),
        "",
        f"![decode tokens/s over context and batch]({figure.name})",
        "",
    ]
    readme = out / "README.md"
    write_text(readme, "\n".join(lines))
    write_text(out / STUDY_MARKER, json.dumps({"study": STUDY, "command": command}) + "\n")
    return StudyResult(STUDY, out, tables["context"], found, [readme, *files])
