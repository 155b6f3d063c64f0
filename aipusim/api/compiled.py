"""`compile` a model for the AIPU, call it (int8 reference), simulate it, save and `load` it.

>>> import aipusim, numpy as np
>>> m = aipusim.compile("tiny_cnn", inputs={"input": aipusim.InputInfo(((1, 1, 2), 3, 32, 32))})
>>> m.input_names, m.output_names
(('input',), ('logits',))
>>> m(np.zeros((2, 3, 32, 32), np.float32)).shape
(2, 10)
>>> m(np.zeros((3, 3, 32, 32), np.float32))
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: input `input` dim 0 must be within 1..2, not 3
>>> int(m.report["estimated_cycles"].sum()) > 0
True

The output folder (``output_dir``, or a temporary folder that lives as long as the model)
is the compiler's output folder (``compiled_model/``, ``quantized_model/``, host graphs,
reports) plus ``aipusim_model.json`` (the signature, options and, with ``crc_check``, the
CRC32 of every file) and ``shapes/<key>/`` for each extra input shape compiled on demand.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd

from aipusim.api.arguments import path_argument
from aipusim.api.functional_check import attach_check, chip_inputs, run_on_chip
from aipusim.api.inputs import InputInfo, check_finite
from aipusim.api.legacy import write_legacy_artifacts
from aipusim.api.modelfiles import (
    API_FILE,
    API_FORMAT,
    API_VERSION,
    COMPILED_DIR,
    read_meta,
    report_table,
    write_meta,
)
from aipusim.api.optlevels import apply_optimization_level, check_level, level_of
from aipusim.api.overrides import check_overrides
from aipusim.api.sources import (
    apply_layout,
    bind_inputs,
    load_source,
    model_file,
    real_inputs,
    resolve_config,
)
from aipusim.arch import load_arch
from aipusim.base.atomic import check_replaceable, swap_into_place, temp_folder_beside
from aipusim.base.errors import ConfigError, InvalidArgument, QuantizationError
from aipusim.base.fileio import check_name, check_output, folder_error, reporting
from aipusim.calibrate.uncertainty import bands, check_samples
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import REPORT_NAME, compile_model, file_sha256
from aipusim.compiler.export import run_onnx
from aipusim.compiler.quant import read_quantized_model
from aipusim.compiler.quant.artifacts import MANIFEST
from aipusim.compiler.request import CompileRequest
from aipusim.run.job import DEFAULT_RUN_LEVELS, TRACE_NAME

#: Where the compiler keeps the float model it compiled (the source of extra shapes).
SOURCE_MODEL = "input_model/fp32_model.onnx"
#: ... or, when the compile kept no copy, where it is (path, size, SHA-256).
SOURCE_REF = "input_model/source.json"
SHAPES_DIR = "shapes"
#: The copy of the hardware TOML a model was compiled for with ``compile(..., arch=)``.
ARCH_FILE = "arch.toml"
#: The only target of this toolkit (LEIP-style ``target``).
TARGET = "aipu"
#: What executes a `CompiledModel` call: the int8 reference, or the functional simulator.
EXECUTORS = ("reference", "simulator")


@dataclass(frozen=True)
class BuildOptions:
    """What `aipusim.api.leip.compile_` adds to `compile` (LEIP ``CompileOptions``)."""

    layout: str = "NCHW"
    target_host: str | None = None
    model_id: str | None = None
    crc_check: bool = False
    force_int8: bool = False
    legacy_artifacts: bool = False
    #: GraphOptimization(iterations=n): bound of the depth-first fusion search (None: off).
    graph_iterations: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": TARGET,
            "layout": self.layout,
            "target_host": self.target_host,
            "model_id": self.model_id,
            "force_int8": self.force_int8,
            "legacy_artifacts": self.legacy_artifacts,
            "graph_iterations": self.graph_iterations,
        }


# --------------------------------------------------------------------------- compiling


def _shape_key(shapes: Mapping[str, Sequence[int]]) -> str:
    """Folder name of a compiled shape: ``input-2x3x64x64`` (inputs joined by ``_``)."""
    key = "_".join(f"{name}-{'x'.join(map(str, s))}" for name, s in shapes.items())
    return re.sub(r"[^A-Za-z0-9_.x-]+", "-", key)


def _run_compile(
    model_path: Path,
    out: Path,
    config: Any,
    shapes: Mapping[str, tuple[int, ...]],
    model_id: str | None = None,
    arch: Path | None = None,
    cache: bool = True,
) -> None:
    @dataclass(frozen=True)
    class _Request(CompileRequest):
        # emit reads an optional model_id from the request (LEIP ``model_id``)
        model_id: str | None = None

    compile_model(
        _Request(
            model_path=model_path,
            output_dir=out,
            config=config,
            input_shape=dict(shapes),  # type: ignore[arg-type]  # the importer takes a mapping
            cli_args={"input": str(model_path), "output": str(out)},
            model_id=model_id,
            arch_path=arch,
            quantization_cache=cache,
        )
    )


def compile_with(
    model: Any,
    config: Any = None,
    *,
    inputs: Mapping[str, Any] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    optimization_level: int = 3,
    options: BuildOptions | None = None,
    arch: str | os.PathLike[str] | None = None,
    cache: bool = True,
) -> CompiledModel:
    """`compile` with the LEIP-style `BuildOptions` (used by `aipusim.api.leip.compile_`)."""
    options = options or BuildOptions()
    check_level(optimization_level)
    arch_path = path_argument(arch, "arch") if arch is not None else None
    if output_dir is not None:
        output_dir = path_argument(output_dir, "output_dir")
    if arch_path is not None:
        load_arch(arch_path)  # a bad arch file fails here, before anything is written
    proto, name, builtin = load_source(model)
    cfg = resolve_config(config, builtin)
    if str(cfg.compiler_mode) != "quantize_and_lower":
        raise ConfigError(
            "compiler_mode must be quantize_and_lower for aipusim.compile (it calls the int8 "
            f"reference and simulates the tasklists), not {cfg.compiler_mode}"
        )
    cfg = apply_optimization_level(cfg, optimization_level)
    if options.graph_iterations is not None and "dfs_search_constraint" not in cfg.changed():
        cfg.dfs_search_constraint = options.graph_iterations
    bound, signature = bind_inputs(apply_layout(proto, options.layout), inputs)
    owned = output_dir is None
    # a graph name may hold any character; file names get a tame version of it
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "model"
    root = (
        Path(tempfile.mkdtemp(prefix="aipusim-model-")) / stem
        if owned
        else Path(output_dir).expanduser()
    )
    opt = {n: info.shape_bounds.opt for n, info in signature.items()}
    with tempfile.TemporaryDirectory(prefix="aipusim-src-") as tmp:
        source = model_file(model)
        if source is None or inputs or options.layout != "NCHW":
            # (bound differs from the file, or there is no file: the compiler reads a copy)
            source = Path(tmp) / f"{stem}.onnx"
            onnx.save(bound, str(source))
        try:
            _run_compile(source, root, cfg, opt, options.model_id, arch_path, cache)
        except BaseException:
            if owned:
                shutil.rmtree(root.parent, ignore_errors=True)
            raise
    meta = {
        "format": API_FORMAT,
        "version": API_VERSION,
        "model": name,
        "inputs": {n: info.to_dict() for n, info in signature.items()},
        "outputs": [o.name for o in bound.graph.output],
        "constants": [n for n in real_inputs(proto) if n not in signature],
        "optimization_level": optimization_level,
        "options": options.to_dict(),
        "crc_check": options.crc_check,
        "shapes": {},
        "arch": None,
    }
    if arch_path is not None:
        # The model is simulated on the hardware it was compiled for, so it keeps a copy.
        shutil.copyfile(arch_path, root / ARCH_FILE)
        meta["arch"] = ARCH_FILE
    compiled = CompiledModel(root, meta, owned=root.parent if owned else None)
    compiled.quantization_cache = cache
    if options.legacy_artifacts:
        write_legacy_artifacts(root)
    compiled._write_meta()
    return compiled


def compile(  # shadows the builtin on purpose: the name users know from other compilers
    model: Any,
    config: Any = None,
    *,
    inputs: Mapping[str, Any] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    optimization_level: int = 3,
    arch: str | os.PathLike[str] | None = None,
    cache: bool = True,
) -> CompiledModel:
    """Compile ``model`` for the AIPU.

    ``model``: an ONNX path, an ``onnx.ModelProto`` or a zoo name (zoo models start from
    their built-in config). ``config``: a `CompilerConfig`, a mapping of properties or a
    config file. ``inputs`` maps graph inputs to an `InputInfo` (dims an int or a
    ``(min, opt, max)`` triple; compiled for opt) or to a numpy array, which is baked in
    as a constant and leaves the compiled signature. ``optimization_level`` 1-4 selects a
    preset of the scheduling knobs (`aipusim.api.optlevels`). ``output_dir``: where the
    artifacts go (default: a temporary folder that lives as long as the model). ``arch``:
    a hardware TOML (default: the bundled ``arch/metis.toml``); the model keeps a copy and
    `simulate` runs on it. ``cache=False`` calibrates again instead of reusing the
    quantization cache (`aipusim.compiler.quant.cache`; the CLI's ``--no-cache``).

    >>> import aipusim, numpy as np
    >>> m = aipusim.compile("tiny_cnn", optimization_level=1)
    >>> m.config.pipeline_spatial_tiles
    False
    """
    return compile_with(
        model,
        config,
        inputs=inputs,
        output_dir=output_dir,
        optimization_level=optimization_level,
        arch=arch,
        cache=cache,
    )


# ------------------------------------------------------------------------ the model


@dataclass
class _Runtime:
    """The int8 reference of one compiled shape: host graphs around the quantized core."""

    pre: Any
    core: Any
    post: Any

    @classmethod
    def load(cls, folder: Path) -> _Runtime:
        def host(name: str) -> Any:
            path = folder / name
            return onnx.load(str(path)) if path.is_file() else None

        manifest = folder / "quantized_model" / MANIFEST
        return cls(
            host("preprocess.onnx"), read_quantized_model(manifest), host("postprocess.onnx")
        )

    def run(
        self,
        feeds: Mapping[str, np.ndarray],
        outputs: Sequence[str],
        chip: Path | None = None,
    ) -> list[np.ndarray]:
        """The outputs of the host graphs around the int8 core: the reference's, or with
        ``chip`` (a ``compiled_model/`` folder) those of its functional simulation."""
        # lazy: the int8 reference's kernels load numba (about a second of every process
        # that imports the API; a sweep point that only simulates never runs them)
        from aipusim.compiler.quant import run_int8

        env = dict(feeds)
        if self.pre is not None:
            env.update(run_onnx(self.pre, {i.name: env[i.name] for i in self.pre.graph.input}))
        core_feeds = {i: env[i] for i in self.core.graph.inputs}
        env.update(
            run_int8(self.core, core_feeds) if chip is None else run_on_chip(chip, core_feeds)
        )
        if self.post is not None:
            env.update(run_onnx(self.post, {i.name: env[i.name] for i in self.post.graph.input}))
        missing = [o for o in outputs if o not in env]
        if missing:
            raise QuantizationError(
                f"the int8 reference must produce output {missing[0]}, but it did not"
            )
        return [np.asarray(env[o]) for o in outputs]


def _numeric_input(name: str, value: Any, info: InputInfo) -> np.ndarray:
    """``value`` as an array of the input's dtype; NaN and infinity are refused before the
    cast, which would turn them into arbitrary integers with a numpy warning."""

    def bad() -> InvalidArgument:
        return InvalidArgument(
            f"input `{name}` must be a numeric array of shape {info.shape_bounds.opt}, "
            f"not {type(value).__name__} {value!r:.60}"
        )

    try:
        given = np.asarray(value)
    except (TypeError, ValueError):
        raise bad() from None
    check_finite(name, given)
    try:
        return given.astype(info.dtype, copy=False)
    except (TypeError, ValueError):
        raise bad() from None


def run_reference(
    folder: str | os.PathLike[str], feeds: Mapping[str, np.ndarray], outputs: Sequence[str]
) -> list[np.ndarray]:
    """The int8 reference of a compiler output ``folder`` (its host graphs around the
    quantized core; a quantize-only compile is enough) on ``feeds``: ``outputs`` in order."""
    return _Runtime.load(Path(folder)).run(feeds, outputs)


class CompiledModel:
    """A model compiled for the AIPU (made by `compile` or `load`).

    Call it with numpy arrays (in `input_names` order, or by name) to run the int8
    reference; `simulate` runs the tasklists on the simulator; `report` holds the
    compiler's per-layer estimates; `save` copies the artifacts to a folder.
    """

    def __init__(self, root: Path, meta: dict[str, Any], *, owned: Path | None = None) -> None:
        self._root = Path(root)
        self._meta = meta
        self._inputs = {n: InputInfo.from_dict(d) for n, d in meta["inputs"].items()}
        # compile output folder -> its loaded int8 reference
        self._runtimes: dict[str, _Runtime] = {}
        #: Whether compiles of other input shapes use the quantization cache.
        self.quantization_cache = True
        if owned is not None:
            weakref.finalize(self, shutil.rmtree, owned, True)

    # -- description ------------------------------------------------------------------
    @property
    def output_dir(self) -> Path:
        """The folder holding the artifacts."""
        return self._root

    @property
    def name(self) -> str:
        return str(self._meta["model"])

    @property
    def inputs(self) -> dict[str, InputInfo]:
        """Runtime inputs (name -> `InputInfo`), in call order."""
        return dict(self._inputs)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(self._inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(self._meta["outputs"])

    @property
    def _arch(self) -> Path | None:
        """The hardware TOML the model was compiled for (None: the bundled one)."""
        name = self._meta.get("arch")
        return self._root / name if name else None

    @property
    def optimization_level(self) -> int | None:
        """The level (1-4) compiled with; None for a CLI compile whose knobs match none."""
        level = self._meta["optimization_level"]
        return None if level is None else int(level)

    @property
    def config(self) -> Any:
        """The `CompilerConfig` the model was compiled with (level preset applied)."""
        data = json.loads((self._root / "conf.json").read_text())
        return CompilerConfig.from_dict(data)

    @property
    def report(self) -> pd.DataFrame:
        """The compiler's per-layer estimates (``compiled_model/report.json``): one row per
        layer with unit, tiles, MACs, weight bytes, estimated cycles and µs, bytes per pool."""
        return report_table(self._root / COMPILED_DIR)

    def compiled_dir(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Path:
        """The ``compiled_model/`` folder for ``input_shapes`` (default: the opt shapes),
        compiling that shape once if it is new."""
        return self._variant_dir(self._shapes(input_shapes)) / COMPILED_DIR

    # -- running ------------------------------------------------------------------------
    def __call__(self, *arrays: Any, executor: str = "reference", **named: Any) -> Any:
        """Run the int8 reference (host pre/post graphs included); one output as an
        array, several as a tuple. ``executor="simulator"`` executes the compiled tasklists
        in the functional simulator instead (one frame per compiled batch; bit-exact with
        the reference when the program is right, and much slower).

        A shape that differs from the compiled one only in dim 0 (the batch), by a whole
        multiple, runs as compiled-size slices; any other shape inside the bounds is
        compiled once (cached in ``shapes/``)."""
        if executor not in EXECUTORS:
            raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
        on_chip = executor == "simulator"
        feeds = self._feeds(arrays, named)
        shapes = {n: a.shape for n, a in feeds.items()}
        opt = {n: info.shape_bounds.opt for n, info in self._inputs.items()}
        if shapes == opt:
            outputs = self._run_in(self._root, feeds, on_chip)
        else:
            outputs = self._run_batched(feeds, opt, on_chip)
        if outputs is None:  # not a whole number of compiled batches: compile this shape
            outputs = self._run_in(self._variant_dir(shapes), feeds, on_chip)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _run_in(
        self, folder: Path, feeds: Mapping[str, np.ndarray], on_chip: bool
    ) -> list[np.ndarray]:
        """The outputs of the compile output ``folder`` on ``feeds``."""
        chip = folder / COMPILED_DIR if on_chip else None
        return self._runtime(folder).run(feeds, self.output_names, chip)

    def _run_batched(
        self, feeds: Mapping[str, np.ndarray], opt: Mapping[str, tuple[int, ...]], on_chip: bool
    ) -> list[np.ndarray] | None:
        """Outputs from compiled-batch slices, or None when the shapes do not allow it."""
        counts = set()
        for n, a in feeds.items():
            o = opt[n]
            if a.ndim < 2 or a.shape[1:] != o[1:] or a.shape[0] % o[0]:
                return None
            counts.add(a.shape[0] // o[0])
        if len(counts) != 1:
            return None
        parts = []
        for k in range(counts.pop()):
            chunk = {n: a[k * opt[n][0] : (k + 1) * opt[n][0]] for n, a in feeds.items()}
            parts.append(self._run_in(self._root, chunk, on_chip))
        batch = next(iter(opt.values()))[0]
        # Outputs concatenate along the batch only if every one carries it in dim 0.
        if any(p.ndim == 0 or p.shape[0] != batch for p in parts[0]):
            return None
        return [np.concatenate(group, axis=0) for group in zip(*parts, strict=True)]

    def _feeds(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> dict[str, np.ndarray]:
        names = self.input_names
        if len(arrays) > len(names):
            raise ConfigError(
                f"the model takes {len(names)} input(s) ({', '.join(names)}), not {len(arrays)}"
            )
        given = dict(zip(names, arrays, strict=False))
        for key, value in named.items():
            if key not in self._inputs:
                raise ConfigError(
                    f"`{key}` must be an input of the model ({', '.join(names)}), not unknown"
                )
            if key in given:
                raise ConfigError(f"input `{key}` is given twice (by position and by name)")
            given[key] = value
        missing = [n for n in names if n not in given]
        if missing:
            raise ConfigError(f"input `{missing[0]}` must be given; the model takes {names}")
        feeds = {}
        for n in names:
            info = self._inputs[n]
            value = given[n]
            array = _numeric_input(n, value, info)
            info.check(n, array.shape)
            feeds[n] = array
        return feeds

    def _runtime(self, folder: Path) -> _Runtime:
        key = str(folder)
        if key not in self._runtimes:
            self._runtimes[key] = _Runtime.load(folder)
        return self._runtimes[key]

    def _shapes(self, input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple]:
        shapes = {n: info.shape_bounds.opt for n, info in self._inputs.items()}
        for key, shape in (input_shapes or {}).items():
            if key not in self._inputs:
                raise ConfigError(
                    f"input_shapes names `{key}`, which must be an input of the model "
                    f"({', '.join(self.input_names)})"
                )
            shapes[key] = self._inputs[key].check(key, shape)
        return shapes

    def _variant_dir(self, shapes: Mapping[str, tuple[int, ...]]) -> Path:
        """The compile output folder for ``shapes`` (the root for the opt shapes)."""
        if shapes == {n: info.shape_bounds.opt for n, info in self._inputs.items()}:
            return self._root
        key = _shape_key(shapes)
        folder = self._root / SHAPES_DIR / key
        if key not in self._meta["shapes"] or not folder.is_dir():
            # the source already takes the chosen layout (its Transpose is in the graph)
            _run_compile(
                source_model(self._root),
                folder,
                self.config,
                shapes,
                None,
                self._arch,
                self.quantization_cache,
            )
            self._meta["shapes"][key] = {n: list(s) for n, s in shapes.items()}
            self._write_meta()
        return folder

    def simulate(
        self,
        frames: int = 8,
        *,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        levels: Sequence[str] | None = None,
        arch: Any = None,
        functional: bool = False,
        inputs: Mapping[str, Any] | None = None,
        energy_model: str = "cycles",
        uncertainty: int | None = None,
        detail: str = "fast",
        **overrides: Any,
    ) -> Any:
        """Simulate ``frames`` frames of the compiled tasklists; returns a `SimResult`.

        ``functional=True`` also executes every task on data (the cycles stay the same):
        ``inputs`` by core input name (int8, or float quantized with the input's scale;
        default: a seeded random input); the result's ``outputs`` are the int8 outputs and
        ``functional["bit_exact"]`` says whether they equal the int8 reference's.
        ``energy_model="value_aware"`` adds ``energy_value_aware``.

        ``overrides`` change what the runtime applies (``frequency``, ``voltage``,
        ``double_buffer``, ``replicas`` of a Batch-1 model, ``profiling_levels``); a
        compiler decision such as ``multicore_mode`` is refused with a hint to recompile.
        ``input_shapes`` picks another compiled shape (compiled once); ``levels`` are the
        trace tags (default: frames, layers, compute and memory tasks, which the profile
        needs). ``uncertainty=N`` adds ``bands`` (`aipusim.calibrate.uncertainty`): FPS, energy per
        frame and average power as p5-p95 over N joint samples of the inferred arch numbers.
        ``detail="cycle"`` runs the detailed reference model of L1 and the links
        (`aipusim.simulator.detail`), slower; the fast model is the default.
        """
        if arch is None and uncertainty is not None:
            # the samples are drawn from the arch file's ranges: hand over its path
            arch = self._arch
        elif arch is None and self._arch is not None:
            arch = load_arch(self._arch)
        return simulate(
            self.compiled_dir(input_shapes),
            frames=frames,
            levels=levels,
            arch=arch,
            functional=functional,
            inputs=inputs,
            energy_model=energy_model,
            uncertainty=uncertainty,
            detail=detail,
            **overrides,
        )

    # -- saving -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, crc_check: bool | None = None) -> Path:
        """Copy the artifacts to the new or empty folder ``path``; returns it. With
        ``crc_check`` (default: as compiled) `load` verifies every file's CRC32."""
        target = path_argument(path, "path")
        check_name(target)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise ConfigError(f"save path must be a new or empty folder, not {str(target)!r}")
        check_output(target, folder=True)
        if target.resolve() == self._root.resolve():
            raise ConfigError(f"save path must differ from the model's own folder {target}")
        check_replaceable(target, "save path")
        with reporting(target):
            tmp = temp_folder_beside(target)
        try:
            shutil.copytree(self._root, tmp, dirs_exist_ok=True)
            meta = dict(self._meta)
            if crc_check is not None:
                meta["crc_check"] = bool(crc_check)
            write_meta(tmp, meta)
            swap_into_place(tmp, target)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise folder_error(exc, tmp, target) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target

    def _write_meta(self) -> None:
        write_meta(self._root, self._meta)

    def __repr__(self) -> str:
        sig = ", ".join(f"{n}: {info!r}" for n, info in self._inputs.items())
        return f"CompiledModel({self.name!r}, inputs={{{sig}}}, output_dir={str(self._root)!r})"


def source_model(root: Path) -> Path:
    """The float ONNX model a compile folder was compiled from: its kept copy
    (``input_model/fp32_model.onnx``), else the file its ``input_model/source.json``
    names, if it is still there with the recorded SHA-256 (`ConfigError` otherwise)."""
    copy = root / SOURCE_MODEL
    if copy.is_file():
        return copy
    ref_path = root / SOURCE_REF
    try:
        ref = json.loads(ref_path.read_text(encoding="utf-8"))
        path, digest = Path(ref["path"]), str(ref["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(
            f"model folder must hold {SOURCE_MODEL} or {SOURCE_REF} (where the float model "
            f"is), not neither: {root}"
        ) from None

    if not path.is_file() or file_sha256(path) != digest:
        raise ConfigError(
            f"the model {root} was compiled from, {path}, must still exist with SHA-256 "
            f"{digest[:12]}..., not be {'changed' if path.is_file() else 'gone'}; recompile "
            "it (--keep-input-model keeps a copy in the folder)"
        )
    return path


def load(path: str | os.PathLike[str]) -> CompiledModel:
    """A `CompiledModel` saved with `CompiledModel.save`, an ``output_dir`` of `compile`,
    or a folder of ``aipusim compile -o DIR``. When it was saved with ``crc_check``, every
    file's CRC32 is verified and a changed, missing or added file is refused by name
    (`TasklistError`); a CLI folder's ``compiled_model/`` is checked when it is simulated."""
    root = path_argument(path, "path")
    if not (root / API_FILE).is_file() and (root / COMPILED_DIR).is_dir():
        return CompiledModel(root, _cli_meta(root))
    return CompiledModel(root, read_meta(root))


def _cli_meta(root: Path) -> dict[str, Any]:
    """What ``aipusim_model.json`` would say of a folder ``aipusim compile`` wrote: the
    signature of the float model it compiled (fixed shapes), its config's level, no
    extra shapes yet. Nothing is written into the folder until a new shape is compiled."""
    report = root / REPORT_NAME
    try:
        status = json.loads(report.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        status = None
    if status != "SUCCEEDED":
        raise ConfigError(
            f"model folder must hold a whole compile ({REPORT_NAME} status SUCCEEDED), not "
            f"status {status!r}: {root}"
        )
    source = source_model(root)
    proto = onnx.load(str(source), load_external_data=False)
    cli_args: Any = {}
    with contextlib.suppress(OSError, ValueError):
        cli_args = json.loads((root / "cli_args.json").read_text(encoding="utf-8"))
    if not isinstance(cli_args, dict):
        cli_args = {}
    given = None
    if cli_args.get("input_shape"):
        # (``--input-shape`` fixed the dynamic dims of the model's one input)
        shape = cli_args["input_shape"]
        dims = [int(d) for d in shape.split(",")] if isinstance(shape, str) else list(shape)
        given = {real_inputs(proto)[0]: InputInfo(dims)}
    _, signature = bind_inputs(proto, given)
    arch = cli_args.get("arch")
    config = CompilerConfig.from_dict(json.loads((root / "conf.json").read_text()))
    return {
        "format": API_FORMAT,
        "version": API_VERSION,
        "model": proto.graph.name or root.name,
        "inputs": {n: info.to_dict() for n, info in signature.items()},
        "outputs": [o.name for o in proto.graph.output],
        "constants": [],
        "optimization_level": level_of(config),
        "options": BuildOptions().to_dict(),
        "crc_check": False,
        "shapes": {},
        # (an absolute path stays itself when joined to the root)
        "arch": str(Path(arch).resolve()) if arch else None,
    }


# ------------------------------------------------------------------------- simulating


def simulate(
    model: CompiledModel | str | os.PathLike[str],
    frames: int = 8,
    *,
    levels: Sequence[str] | None = None,
    arch: Any = None,
    functional: bool = False,
    inputs: Mapping[str, Any] | None = None,
    energy_model: str = "cycles",
    uncertainty: int | None = None,
    detail: str = "fast",
    **overrides: Any,
) -> Any:
    """Simulate a `CompiledModel`, a ``compiled_model/`` folder or the output folder that
    holds one; returns an `aipusim.SimResult` whose trace (frames,
    layers, compute and memory tasks by default) feeds its profile. ``functional``,
    ``inputs``, ``energy_model``, ``uncertainty`` and ``detail`` as in
    `CompiledModel.simulate`; ``arch``
    is an `Arch`, or an arch file's path (which ``uncertainty`` needs for other than the
    bundled file).

    >>> import aipusim
    >>> r = aipusim.simulate(aipusim.compile("tiny_cnn"), frames=2, frequency=400_000_000)
    >>> r.frequency_hz
    400000000
    """
    # lazy: loads simpy, not otherwise loaded here
    from aipusim.api.results import SimResult, temporary_trace_dir
    from aipusim.simulator import simulate as run_simulation

    if isinstance(model, CompiledModel):
        return model.simulate(
            frames,
            levels=levels,
            arch=arch,
            functional=functional,
            inputs=inputs,
            energy_model=energy_model,
            uncertainty=uncertainty,
            detail=detail,
            **overrides,
        )
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ConfigError(f"frames must be an integer >= 1, not {frames!r}")
    compiled = path_argument(model, "model")
    if (compiled / COMPILED_DIR).is_dir():
        # a whole output folder (of `compile`, `save` or ``aipusim compile -o``)
        compiled = compiled / COMPILED_DIR
    arch_path = None
    if isinstance(arch, str | os.PathLike):
        arch_path, arch = arch, load_arch(arch)
    if uncertainty is not None:
        check_samples(uncertainty, "uncertainty")
        if arch is not None and arch_path is None:
            raise ConfigError(
                "uncertainty samples an arch file's inferred numbers: arch must be the file's "
                "path (or None for the bundled one), not an Arch object"
            )
    chip, how = None, ""
    if functional is True:
        chip, how = chip_inputs(compiled, inputs)
    folder = temporary_trace_dir()
    try:
        sim = run_simulation(
            compiled,
            arch=arch,
            frames=frames,
            levels=list(levels) if levels is not None else list(DEFAULT_RUN_LEVELS),
            trace_path=folder / TRACE_NAME,
            overrides=check_overrides(overrides, compiled),
            functional=functional,
            # (the simulator refuses inputs without functional=True itself)
            inputs=chip if chip is not None else inputs,
            energy_model=energy_model,
            detail=detail,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    result = SimResult.of(sim, owned_dir=folder)
    if chip is not None:
        attach_check(result, compiled, chip, how)
    if uncertainty is not None:
        result.bands = bands(
            compiled, uncertainty, frames=frames, arch_path=arch_path, progress=False, **overrides
        )
    return result


__all__ = [
    "BuildOptions",
    "CompiledModel",
    "compile",
    "compile_with",
    "load",
    "simulate",
]
