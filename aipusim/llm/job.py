"""Compile and simulate a decoder's prefill and decode steps; the per-token figures.

A generation of M tokens after a prompt of N runs the prefill graph once (N tokens: the
time to first token) and the decode graph M times, the k-th with N + k tokens cached.
The compiler plans memory, tiling and tasklists for static shapes (the Softmax row, the
Concat of the cache and the KV buffers all have the past length in them, and the ISA has
no loop bound read at run time), so **each context length is its own decode compile**:
the command compiles the decode graph at the start and the end of the generation and at
each context of ``contexts`` (default 128, 512, 2048), and takes a step's time between
two compiled contexts as linear in the context (what a step adds per cached token is the
KV cache it reads, a fixed number of bytes per token).

Per step and multicore mode the figures are `aipusim.isa.metrics.token_figures` of the
simulation: tokens/s, energy and DDR bytes per token, the DDR bandwidth roofline (the
card's peak DDR bandwidth, from the arch file, over the DDR bytes a token reads) and the
share of it reached, which a DDR link that respects its bandwidth keeps at most 1.

Memory: the int8 weights (one byte per weight) and the KV cache of every sequence in
flight must fit the DDR the compiler may use (`ddr_pool_bytes`: ``ddr_size_used`` less
``ddr_size_reserved``, times ``resources_used``). `kv_capacity_tokens` says how long a
context fits; a model whose weights do not fit, or a context beyond the capacity, is
refused with the sizes before anything is compiled.

Example (``run_llm("tiny_decoder", prompt=32, generate=16)`` compiles and simulates; its
``summary`` holds one record of headline figures per mode):
    >>> MODES["cooperative"].sets()
    ['aipu_cores_used=4', 'multicore_mode=cooperative']
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from aipusim.api.compiled import simulate
from aipusim.api.modelfiles import COMPILED_DIR
from aipusim.api.sources import resolve_config, with_sets
from aipusim.arch import load_arch
from aipusim.base.atomic import swap_into_place, temp_folder_beside
from aipusim.base.errors import ConfigError, MemoryPlanError
from aipusim.base.fileio import folder_error, reporting
from aipusim.base.resources import format_bytes
from aipusim.compiler.backend.memplan.plan import ddr_pool_bytes
from aipusim.compiler.decoder import DecoderPair, check_decoder_pair
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CalibrationMode, CompileRequest
from aipusim.isa.metrics import token_figures
from aipusim.llm.result import LlmResult, Step
from aipusim.run.job import prepare_output_dir
from aipusim.zoo.decoder import (
    DECODE_FILE,
    DECODERS,
    PREFILL_FILE,
    DecoderGraph,
    build_decoder,
    save_graph,
)

#: Context lengths (cached tokens) a decode step is measured at besides the generation's
#: own start and end.
DEFAULT_CONTEXTS = (128, 512, 2048)
#: What a compile refused for the machine's memory tells the ``aipusim llm`` user to
#: change (its own flags, not ``aipusim compile``'s): the weights are most of it.
LLM_MEMORY_REMEDY = (
    "run a smaller decoder, or shorter contexts (--prompt, --generate, --contexts), or "
    "run on a bigger machine"
)
#: Frames simulated per step: one warm-up start (INIT) and two steady ones.
STEP_FRAMES = 3
#: The RoPE table rows a zoo decoder is built with (at least the longest context run).
ZOO_POSITIONS = 4096


@dataclass(frozen=True)
class LlmMode:
    """One way to run the decoder on the chip: its label and the config it sets."""

    name: str
    label: str
    cores: int
    multicore_mode: str

    def sets(self) -> list[str]:
        return [f"aipu_cores_used={self.cores}", f"multicore_mode={self.multicore_mode}"]

    @property
    def sequences_at_once(self) -> int:
        """Frames in flight at once, each with its own KV cache (batch: one per core)."""
        return self.cores if self.multicore_mode == "batch" else 1


#: ``single``: one core; ``batch``: four frames of ``--batch`` sequences at once, one per
#: core; ``cooperative``: every layer split over the four cores (tensor parallelism: heads
#: and FFN columns, one reduction per layer); ``pipeline``: consecutive layers on
#: consecutive cores.
MODES: dict[str, LlmMode] = {
    m.name: m
    for m in (
        LlmMode("single", "1 core", 1, "multiprocess"),
        LlmMode("batch", "batch", 4, "batch"),
        LlmMode("cooperative", "cooperative", 4, "cooperative"),
        LlmMode("pipeline", "pipeline", 4, "pipeline"),
    )
}
DEFAULT_MODES = ("single", "batch", "cooperative")


def select_modes(names: Sequence[str] | None) -> list[LlmMode]:
    """The modes named, in `MODES` order; `DEFAULT_MODES` for None.

    >>> [m.label for m in select_modes(["cooperative", "single"])]
    ['1 core', 'cooperative']
    """
    names = DEFAULT_MODES if names is None else names
    bad = [n for n in names if n not in MODES]
    if bad or not names:
        raise ConfigError(
            f"modes must be some of {', '.join(MODES)}, not {', '.join(bad) or 'none'}"
        )
    return [m for m in MODES.values() if m.name in names]


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, not {value!r}")
    return value


def weight_bytes(pair: DecoderPair) -> int:
    """DDR bytes of the int8 weights (one byte per weight value)."""
    return pair.weight_params


def kv_capacity_tokens(pair: DecoderPair, config: Any, mode: LlmMode, name: str) -> int:
    """The longest context (cached tokens per sequence) whose KV cache fits the DDR left
    beside the int8 weights, for every sequence in flight; `MemoryPlanError` with the
    sizes when the weights alone do not fit.

    >>> from aipusim.zoo import build_decoder
    >>> from aipusim.api.sources import resolve_config
    >>> p = check_decoder_pair(build_decoder("tiny_decoder", tokens=4),
    ...                        build_decoder("tiny_decoder", graph="decode", past=4))
    >>> kv_capacity_tokens(p, resolve_config(None, None), MODES["single"], "tiny_decoder")
    2022656
    """
    pool = ddr_pool_bytes(config)
    weights = weight_bytes(pair)
    if weights > pool:
        reserved = config.ddr_size_reserved
        need = math.ceil(weights / config.resources_used) + reserved
        raise MemoryPlanError(
            f"ddr_size_used must hold {name}'s int8 weights, {weights:,} bytes "
            f"({format_bytes(weights)}; at least {need:,} with ddr_size_reserved "
            f"{reserved:,} and resources_used {config.resources_used:g}), not "
            f"{config.ddr_size_used:,} ({pool:,} usable); raise it with --set "
            f"ddr_size_used=N --set ddr_size_max=N, up to the card's "
            f"{load_arch().ddr.size_bytes:,} bytes"
        )
    per_token = pair.kv_bytes_per_token() * pair.batch * mode.sequences_at_once
    return (pool - weights) // per_token


@dataclass
class Decoder:
    """Where the graphs of one decoder are: a zoo decoder built into ``folder`` (a decode
    graph per context, all pointing at one weights file), or a user's folder with
    ``prefill.onnx`` and ``decode.onnx`` (the decode graph's own context only)."""

    name: str
    folder: Path
    zoo: bool
    pair: DecoderPair
    batch: int
    positions: int
    decode_paths: dict[int, Path] = field(default_factory=dict)

    @property
    def prefill(self) -> Path:
        return self.folder / PREFILL_FILE

    def contexts(self, wanted: Sequence[int]) -> list[int]:
        """The contexts of ``wanted`` this decoder can run (a user's decode graph: its own)."""
        if self.zoo:
            return sorted({c for c in wanted if 1 <= c < self.positions})
        return [c for c in sorted(set(wanted)) if c == self.pair.past_tokens]

    def decode(self, past: int) -> Path:
        """The decode graph with ``past`` tokens cached (built once for a zoo decoder)."""
        if past not in self.decode_paths:
            assert self.zoo, "a user's decoder has one decode graph"
            self.decode_paths[past] = _zoo_decode(
                self.name, self.folder, past, self.batch, self.positions
            )
        return self.decode_paths[past]


def open_decoder(model: str, prompt: int, batch: int, longest: int, work: Path) -> Decoder:
    """The decoder ``model`` (a zoo decoder name or a folder of the two-graph form) for a
    prompt of ``prompt`` tokens, ``batch`` sequences and contexts up to ``longest``."""
    if model in DECODERS:
        positions = max(ZOO_POSITIONS, longest + 1)
        folder = work / "graphs"
        save_graph(
            build_decoder(model, tokens=prompt, batch=batch, positions=positions),
            folder,
            PREFILL_FILE,
        )
        first = _zoo_decode(model, folder, prompt, batch, positions)
        return Decoder(model, folder, True, _pair(folder, first), batch, positions, {prompt: first})
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"MODEL must be a zoo decoder ({', '.join(sorted(DECODERS))}) or a folder with "
            f"{PREFILL_FILE} and {DECODE_FILE}, not {model!r}"
        )
    for name in (PREFILL_FILE, DECODE_FILE):
        if not (folder / name).is_file():
            raise ConfigError(f"decoder folder {model!r} must hold {name}, not lack it")
    pair = _pair(folder, folder / DECODE_FILE)
    for flag, value, graph in (
        ("--prompt", prompt, pair.prompt_tokens),
        ("--batch", batch, pair.batch),
    ):
        if value != graph:
            raise ConfigError(
                f"{flag} must be {graph} for {model!r} (its graphs have static shapes), not {value}"
            )
    return Decoder(
        folder.name,
        folder,
        False,
        pair,
        batch,
        pair.past_tokens + 1,
        {pair.past_tokens: folder / DECODE_FILE},
    )


def _pair(folder: Path, decode: Path) -> DecoderPair:
    """The checked pair of ``folder``'s prefill graph and ``decode`` (graphs only: the
    weights file is not read)."""
    prefill = onnx.load(str(folder / PREFILL_FILE), load_external_data=False)
    return check_decoder_pair(prefill, onnx.load(str(decode), load_external_data=False))


def _zoo_decode(name: str, folder: Path, past: int, batch: int, positions: int) -> Path:
    """Write the decode graph of zoo decoder ``name`` with ``past`` tokens cached into
    ``folder``, pointing at the weights its prefill graph wrote there."""
    reference = onnx.load(str(folder / PREFILL_FILE), load_external_data=False)
    model = build_decoder(
        name,
        graph=DecoderGraph.DECODE,
        past=past,
        batch=batch,
        positions=positions,
        shared=reference,
    )
    return save_graph(model, folder, f"decode_{past}.onnx")


def measure_step(
    graph: Path,
    out: Path,
    config: Any,
    mode: LlmMode,
    phase: str,
    context: int,
    tokens: int,
    batch: int,
    ddr_bytes_per_s: float,
    shown: Callable[[Path], Path] = lambda p: p,
) -> Step:
    """Compile ``graph`` into ``out`` with ``mode`` and simulate `STEP_FRAMES` frames.
    ``shown``: where a path of the work folder ends up (the compile records its input and
    output there)."""
    compile_model(
        CompileRequest(
            model_path=graph,
            output_dir=out,
            config=with_sets(config, mode.sets()),
            calibration=CalibrationMode.RANDOM,
            keep_input_model=False,
            cli_args={"input": str(shown(graph)), "output": str(shown(out))},
            memory_remedy=LLM_MEMORY_REMEDY,
        )
    )
    result = simulate(out, frames=STEP_FRAMES, levels=["B"])
    report = json.loads((out / COMPILED_DIR / "report.json").read_text())
    kv = report.get("kv_cache")
    figures = token_figures(
        result.fps,
        batch,
        tokens,
        result.energy_mj_per_frame_total,
        result.bytes_per_frame["ddr"],
        ddr_bytes_per_s,
    )
    return Step(
        mode=mode.label,
        phase=phase,
        context=context,
        tokens=tokens,
        batch=batch,
        latency_us=result.latency_us_unloaded,
        fps=result.fps,
        **vars(figures),
        compile_bytes_per_step=(
            {**kv["bytes_per_token"], "kv_written": kv["present_written_bytes"]} if kv else None
        ),
    )


def decode_us(steps: Sequence[Step], context: int) -> float:
    """A decode step's unloaded latency at ``context``, linear between the two measured
    contexts around it (beyond them: the nearest two)."""
    points = sorted((s.context, s.latency_us) for s in steps)
    if len(points) == 1:
        return points[0][1]
    i = min(
        max(next((k for k, p in enumerate(points) if p[0] >= context), len(points)), 1),
        len(points) - 1,
    )
    (c0, t0), (c1, t1) = points[i - 1], points[i]
    return t0 + (t1 - t0) * (context - c0) / (c1 - c0)


def summarize(mode: LlmMode, steps: Sequence[Step], prompt: int, generate: int) -> dict[str, Any]:
    """The headline figures of one mode: time to first token, decode tokens/s at the start
    and end of the generation, the generation's whole time and its average rate."""
    prefill = next(s for s in steps if s.phase == "prefill")
    decodes = [s for s in steps if s.phase == "decode"]
    first, last = prompt, prompt + generate - 1
    start = next(s for s in decodes if s.context == first)
    end = next(s for s in decodes if s.context == last)
    decode_total_us = sum(decode_us(decodes, c) for c in range(first, last + 1))
    shares = [s.roofline_share for s in steps if s.roofline_share is not None]
    return {
        "mode": mode.label,
        "ttft_ms": prefill.latency_us / 1e3,
        "prefill_tokens_per_s": prefill.tokens_per_s,
        "decode_tokens_per_s_start": start.tokens_per_s,
        "decode_tokens_per_s_end": end.tokens_per_s,
        "sequence_tokens_per_s_start": start.sequence_tokens_per_s,
        "sequence_tokens_per_s_end": end.sequence_tokens_per_s,
        "generation_ms": (prefill.latency_us + decode_total_us) / 1e3,
        "energy_mj_per_token_start": start.energy_mj_per_token,
        "energy_mj_per_token_end": end.energy_mj_per_token,
        "ddr_bytes_per_token_start": start.ddr_bytes_per_token,
        "ddr_bytes_per_token_end": end.ddr_bytes_per_token,
        "roofline_tokens_per_s_end": end.roofline_tokens_per_s,
        "roofline_share_end": end.roofline_share,
        "roofline_share_max": max(shares) if shares else None,
    }


def zoo_pair(name: str, prompt: int, batch: int) -> DecoderPair:
    """The `DecoderPair` of zoo decoder ``name`` from its geometry, without building it
    (weights: the published parameter count; the built graphs add their RoPE tables).

    >>> zoo_pair("llama_1b", 128, 1).weight_params
    1235814400
    """
    size = DECODERS[name]
    return DecoderPair(
        layers=size.layers, kv_heads=size.kv_heads, head_dim=size.head_dim, vocab=size.vocab,
        batch=batch, prompt_tokens=prompt, past_tokens=prompt, weight_params=size.param_count(),
    )  # fmt: skip


def _check_fits(
    pair: DecoderPair, config: Any, modes: Sequence[LlmMode], last: int, name: str
) -> None:
    """Refuse weights, or a generation's KV cache, that do not fit the DDR in any mode."""
    for mode in modes:
        capacity = kv_capacity_tokens(pair, config, mode, name)
        if last + 1 > capacity:
            raise MemoryPlanError(
                f"--prompt + --generate must be at most the KV cache capacity "
                f"{capacity:,} tokens ({mode.label}: {pair.kv_bytes_per_token():,} bytes "
                f"per token per sequence beside {weight_bytes(pair):,} bytes of weights), "
                f"not {last + 1:,}"
            )


def run_llm(
    model: str | Path,
    *,
    prompt: int,
    generate: int,
    batch: int = 1,
    sets: Sequence[str] = (),
    modes: Sequence[str] | None = None,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
    output_dir: str | Path | None = None,
    progress: bool | Callable[[str, int | None], Callable[[int], None]] = True,
    command: str = "aipusim.run_llm(...)",
) -> LlmResult:
    """Compile and simulate decoder ``model`` (a zoo decoder name or a folder with the
    two-graph form, `aipusim.compiler.decoder`) for a prompt of ``prompt`` tokens and a
    generation of ``generate`` tokens, ``batch`` sequences at once, in each of ``modes``
    (`MODES`; default single, batch, cooperative), with decode steps also measured at
    ``contexts``. ``sets``: ``key=value`` config changes on top of the defaults.
    ``output_dir``: keep the graphs, the compiled steps and the report
    (`aipusim.llm.report.write_report`, showing ``command`` as the way to reproduce it)
    there; default a temporary folder, removed at the end. The folder is built beside its
    place and swapped in whole when everything is written (`aipusim.base.atomic`, as
    `aipusim run` does): a run that fails leaves an earlier folder as it was and no
    temporary folder behind. An existing folder must be empty or an earlier
    ``aipusim llm`` output (it holds ``llm.json``).
    """
    # lazy: aipusim.run.progress is only needed for a progress display; the report loads
    # pandas and matplotlib
    from aipusim.llm.report import JSON_NAME, write_report
    from aipusim.run.progress import Progress

    name = str(model)
    for what, value in (("prompt", prompt), ("generate", generate), ("batch", batch)):
        _positive(what, value)
    contexts = [_positive("contexts", c) for c in contexts]
    chosen = select_modes(modes)
    clash = sorted(
        {s.split("=", 1)[0].strip() for s in sets} & {"aipu_cores_used", "multicore_mode"}
    )
    if clash:
        raise ConfigError(
            f"--set must not name {', '.join(clash)}: each mode sets it (choose with --modes)"
        )
    config = with_sets(resolve_config(None, None), sets)
    arch = load_arch()
    bandwidth = arch.ddr.peak_bw_gb_s * 1e9
    hook = Progress() if progress is True else progress or None
    last = prompt + generate - 1
    if name in DECODERS:
        # a zoo decoder's sizes are known before its graphs are built (llama_1b's take
        # minutes and gigabytes): what does not fit is refused first, before any folder
        _check_fits(zoo_pair(name, prompt, batch), config, chosen, last, name)
    out = Path(output_dir).expanduser() if output_dir is not None else None
    if out is not None:
        prepare_output_dir(out, JSON_NAME, "aipusim llm")
        with reporting(out):
            staged = temp_folder_beside(out)
    try:
        with tempfile.TemporaryDirectory(prefix="aipusim-llm-") as tmp:
            work = staged if out is not None else Path(tmp)

            def shown(path: Path) -> Path:
                return out / path.relative_to(work) if out is not None else path

            decoder = open_decoder(name, prompt, batch, max([last, *contexts]), work)
            pair = decoder.pair
            _check_fits(pair, config, chosen, last, decoder.name)
            skipped: dict[int, str] = {}
            runnable = decoder.contexts(contexts)
            for c in contexts:
                if c not in runnable:
                    skipped[c] = (
                        f"the folder's decode graph is for {pair.past_tokens} cached tokens"
                        if not decoder.zoo
                        else f"beyond the RoPE table ({decoder.positions} positions)"
                    )
            capacity = min(kv_capacity_tokens(pair, config, m, decoder.name) for m in chosen)
            for c in [c for c in runnable if c + 1 > capacity]:
                skipped[c] = f"beyond the KV cache capacity ({capacity:,} tokens)"
                runnable.remove(c)
            wanted = sorted({prompt, last, *runnable})
            if not decoder.zoo:
                wanted = sorted(set(wanted) & {pair.past_tokens})
                if {prompt, last} - set(wanted):
                    raise ConfigError(
                        f"--prompt + --generate - 1 must be {pair.past_tokens} for {name!r} (its "
                        f"decode graph is for {pair.past_tokens} cached tokens, the generation's "
                        f"start and end), not {prompt} .. {last}"
                    )
            step = hook("llm", len(chosen) * (1 + len(wanted))) if hook else None
            steps: list[Step] = []
            summary = []
            for mode in chosen:
                own = [
                    measure_step(
                        decoder.prefill,
                        work / mode.name / "prefill",
                        config,
                        mode,
                        "prefill",
                        0,
                        prompt,
                        batch,
                        bandwidth,
                        shown,
                    )
                ]
                if step:
                    step(1)
                for past in wanted:
                    own.append(
                        measure_step(
                            decoder.decode(past),
                            work / mode.name / f"decode_{past}",
                            config,
                            mode,
                            "decode",
                            past,
                            1,
                            batch,
                            bandwidth,
                            shown,
                        )
                    )
                    if step:
                        step(1)
                steps += own
                summary.append(summarize(mode, own, prompt, generate))
            if isinstance(hook, Progress):
                hook.close()
            result = LlmResult(
                model=decoder.name,
                prompt=prompt,
                generate=generate,
                batch=batch,
                steps=steps,
                summary=summary,
                skipped=skipped,
                config_changes=config.to_dict(only_changed=True),
                ddr_bytes_per_s=bandwidth,
                weight_bytes=weight_bytes(pair),
                kv_bytes_per_token=pair.kv_bytes_per_token(),
                output_dir=Path(output_dir) if output_dir is not None else None,
            )
            if out is not None:
                # the report is part of the folder: written before the swap, never after
                result.files = [shown(f) for f in write_report(result, work, command)]
                with reporting(out, "replace"):
                    swap_into_place(staged, out)
    except OSError as exc:
        if out is not None:
            shutil.rmtree(staged, ignore_errors=True)
            raise folder_error(exc, staged, out) from None
        raise
    except BaseException:
        if out is not None:
            shutil.rmtree(staged, ignore_errors=True)
        raise
    return result


__all__ = [
    "DEFAULT_CONTEXTS",
    "DEFAULT_MODES",
    "MODES",
    "Decoder",
    "LlmMode",
    "LlmResult",
    "Step",
    "kv_capacity_tokens",
    "open_decoder",
    "run_llm",
    "select_modes",
    "zoo_pair",
]
