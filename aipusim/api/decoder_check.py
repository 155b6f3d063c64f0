"""A decoder's generation executed on data: the prefill graph, then decode steps with the
KV cache carried from each step to the next, every step against the int8 reference.

Each graph is compiled on its own (static shapes: the decode graph of step ``t`` reads a
cache of ``prompt + t`` tokens). The first decode graph's ``past_key_values`` inputs take
the grids the prefill compile gave ``present`` (`pin_cache_grids`), and a decode graph's
present shares its past's grid, so the cache's int8 bytes go from one step to the next
unchanged: the functional simulator's present of step ``t`` is the past of step ``t + 1``,
and so is the reference's own. The next token is the chip's greedy choice (argmax of the
last position's logits); the reference is given the same token.

Bit-exact means: at every step every output (logits and each layer's present key and
value) of the functional simulator equals the int8 reference's byte for byte, the
functional run had no layer it could not execute, and the present's first rows are the
past the step was given (the step appended its rows).

>>> import tempfile
>>> run = check_decoder_steps("tiny_decoder", prompt=4, steps=1,
...                           workdir=tempfile.mkdtemp())  # doctest: +SKIP
>>> run.bit_exact  # doctest: +SKIP
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aipusim.base.errors import ConfigError

#: Multicore modes a check runs in: one core, or four in batch or cooperative mode.
MODES = ("1core", "batch", "cooperative")


@dataclass(frozen=True)
class StepCheck:
    """One graph of a generation: its outputs' mismatching elements against the reference."""

    graph: str  # "prefill" or "decode"
    past_tokens: int
    mismatches: dict[str, int]
    #: Layers the functional run could not execute (model.json's gaps): none when exact.
    gaps: tuple[str, ...]
    #: Elements of the present's first ``past_tokens`` rows that differ from the past given.
    past_changed: int
    #: Cache inputs compiled on another grid than the step before wrote them on.
    regridded: tuple[str, ...]
    token: int  # the next token the chip chose (sequence 0)

    @property
    def bit_exact(self) -> bool:
        return (
            not any(self.mismatches.values())
            and not self.gaps
            and not self.past_changed
            and not self.regridded
        )


@dataclass(frozen=True)
class DecoderCheck:
    """A generation checked step by step (`check_decoder_steps`)."""

    model: str
    mode: str
    steps: list[StepCheck] = field(default_factory=list)

    @property
    def bit_exact(self) -> bool:
        return bool(self.steps) and all(s.bit_exact for s in self.steps)

    def text(self) -> str:
        lines = [f"{self.model} ({self.mode}):"]
        for s in self.steps:
            bad = {k: v for k, v in s.mismatches.items() if v}
            verdict = "bit-exact" if s.bit_exact else f"differs: {bad}, gaps {list(s.gaps)}"
            lines.append(f"  {s.graph} (past {s.past_tokens}): {verdict}; next token {s.token}")
        return "\n".join(lines)


def _config(mode: str) -> dict[str, Any]:
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "1core":
        return {"aipu_cores_used": 1}
    return {"aipu_cores_used": 4, "multicore_mode": mode}


def _grid(graph: Any, name: str) -> tuple[float, int]:
    q = graph.tensor(name).quant
    return float(q.scale), int(q.zero_point)


def _host_names(post: Any) -> dict[str, str]:
    """``{graph output: chip tensor}`` of a postprocess graph of Identity nodes (the
    cleaner leaves a present that renames a chip tensor to the host); others refused."""
    names = {}
    for node in [] if post is None else post.graph.node:
        if node.op_type != "Identity":
            raise ConfigError(
                f"a decoder's postprocess graph must hold only Identity nodes (names of the "
                f"cache), not {node.op_type}: the KV cache must come from the chip"
            )
        names[node.output[0]] = node.input[0]
    return names


def _run_step(
    folder: Path, feeds: dict[str, np.ndarray], reference_feeds: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, tuple[float, int]], tuple]:
    """(chip outputs, reference outputs, grid of every output and cache input, functional
    gaps) of one compiled graph: the host's preprocess (the embedding and RoPE table
    Gathers) on the tokens, the chip (or the int8 reference) on the rest, int8 cache
    tensors as they are."""
    # lazy: the simulator and numba load only when a check runs
    import onnx

    from aipusim.api.functional_check import chip_inputs, load_reference
    from aipusim.compiler.export import run_onnx
    from aipusim.compiler.quant.reference import run_int8
    from aipusim.isa.program import load_program_tables
    from aipusim.simulator import simulate

    def host(name: str) -> Any:
        path = folder.parent / name
        return onnx.load(str(path)) if path.is_file() else None

    pre, post = host("preprocess.onnx"), host("postprocess.onnx")
    reference = load_reference(folder)
    graph = reference.graph
    renamed = _host_names(post)

    def core_feeds(given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = dict(given)
        if pre is not None:
            env.update(run_onnx(pre, {i.name: env[i.name] for i in pre.graph.input}))
        return {i: env[i] for i in graph.inputs}

    def named(core: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {n: np.asarray(core[n]).reshape(graph.shape(n)) for n in graph.outputs}
        out.update({host: out[chip] for host, chip in renamed.items()})
        return {n: out[n] for n in [*graph.outputs, *renamed] if n not in renamed.values()}

    program, tasklists = load_program_tables(folder)
    inputs, _ = chip_inputs(folder, core_feeds(feeds), program=program)
    result = simulate(
        program, tasklists, frames=1, functional=True, inputs=inputs, constants=folder
    )
    ref_inputs, _ = chip_inputs(folder, core_feeds(reference_feeds), program=program)
    want = run_int8(reference, ref_inputs, raw=True)
    grids = {n: _grid(graph, renamed.get(n, n)) for n in named(want)}
    grids.update({n: _grid(graph, n) for n in graph.inputs if n.startswith("past_key_values.")})
    gaps = tuple(sorted(dict(result.functional.get("functional_gaps") or {})))
    return named(result.outputs), named(want), grids, gaps


def check_decoder_steps(
    name: str = "tiny_decoder",
    *,
    prompt: int = 8,
    steps: int = 4,
    mode: str = "1core",
    workdir: str | Path,
    seed: int = 0,
) -> DecoderCheck:
    """Compile decoder ``name``'s prefill graph (``prompt`` tokens) and ``steps`` decode
    graphs into ``workdir`` in multicore ``mode`` (`MODES`), run them one after the other
    on the functional simulator carrying the KV cache, and compare every step with the int8
    reference (module docstring). The prompt is seeded random tokens.
    """
    # lazy: compiling loads the whole compiler
    import aipusim
    from aipusim.compiler.decoder import pin_cache_grids
    from aipusim.zoo.decoder import DecoderGraph, build_decoder, decoder_size

    config = _config(mode)
    for what, value in (("prompt", prompt), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} must be an integer >= 1, not {value!r}")
    size = decoder_size(name)
    root = Path(workdir)
    positions = prompt + steps
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, size.vocab, (1, prompt)).astype(np.int64)
    feeds = {"input_ids": ids, "position_ids": np.arange(prompt, dtype=np.int64)[None]}
    ref_feeds = dict(feeds)
    grids: dict[str, tuple[float, int]] = {}
    out = DecoderCheck(name, mode)
    for step in range(steps + 1):
        past = prompt + step - 1 if step else 0
        if step == 0:
            model = build_decoder(name, tokens=prompt, positions=positions, seed=seed)
        else:
            model = build_decoder(
                name, graph=DecoderGraph.DECODE, past=past, positions=positions, seed=seed
            )
            model = pin_cache_grids(model, grids)
        folder = root / f"{mode}-{'prefill' if step == 0 else f'decode{step}'}"
        compiled = aipusim.compile(model, config, output_dir=folder)
        got, want, stepgrids, gaps = _run_step(compiled.compiled_dir(), feeds, ref_feeds)
        mismatches = {n: int(np.count_nonzero(got[n] != want[n])) for n in sorted(want)}
        presents = sorted(n for n in want if n.startswith("present."))
        regridded = tuple(
            p
            for p in sorted(stepgrids)
            if p.startswith("past_key_values.")
            and stepgrids[p] != grids["present." + p.removeprefix("past_key_values.")]
        )
        changed = 0
        for n in presents:
            if step:
                given = feeds["past_key_values." + n.removeprefix("present.")]
                changed += int(np.count_nonzero(got[n][:, :, :past] != given))
            grids[n] = stepgrids[n]
        scale, zero = stepgrids["logits"]
        token = int(np.argmax((got["logits"][0, -1].astype(np.float64) - zero) * scale))
        out.steps.append(StepCheck(
            "prefill" if step == 0 else "decode", past, mismatches, gaps, changed, regridded,
            token,
        ))  # fmt: skip
        position = np.array([[prompt + step]], np.int64)
        feeds = {"input_ids": np.array([[token]], np.int64), "position_ids": position}
        ref_feeds = dict(feeds)
        for n in presents:
            cache = "past_key_values." + n.removeprefix("present.")
            feeds[cache], ref_feeds[cache] = got[n], want[n]
    return out


__all__ = ["MODES", "DecoderCheck", "StepCheck", "check_decoder_steps"]
