"""Calibration's float forward passes in onnxruntime.

Calibration runs the float graph on every calibration sample and hands the observers each
tensor whose range sets quantization parameters. `OrtFloatSession` exports the IR graph
to ONNX (`aipusim.compiler.export.to_onnx`), makes those tensors extra graph outputs and
runs it in onnxruntime's CPU executor: the field's standard float executor, many times
faster than the numpy executor (`float_exec.run_fp32`), which stays the fallback for a
graph onnxruntime cannot load and the oracle the tests compare against.

Only the observed tensors are exposed, so onnxruntime still fuses e.g. a Conv with the
Relu whose output is observed. The session is deterministic (a fixed thread count,
sequential execution, ``use_deterministic_compute``); idle threads do not spin. Its float32
results differ from the numpy executor's by summation-order rounding (a few ulps, growing
with depth); ``docs/decisions.md`` (compiler) says what that does to the chosen scales.

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)), Node("n", Op.NEG, ("y",), ("z",))),
    ...           {n: Tensor(n, (2,)) for n in "xyz"}, {}, ("x",), ("z",))
    >>> s = OrtFloatSession(g, ["x", "y"])
    >>> {k: v.tolist() for k, v in s.run({"x": np.array([-1.0, 2.0], np.float32)}).items()}
    {'x': [-1.0, 2.0], 'y': [0.0, 2.0]}
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx

from aipusim.base.errors import QuantizationError
from aipusim.base.mapped import is_mapped
from aipusim.compiler.ir import Graph
from aipusim.compiler.quant.data import float_inputs

#: Threads onnxruntime may use inside one operator. One: calibration already runs the
#: forward pass in a worker thread beside the observers (`OrtFloatSession.run_all`), so on
#: the 2-core machines this runs on a second operator thread only competes with them. On
#: ResNet-50's 16 samples one thread gave every observed tensor bit for bit as two did, with
#: 10-25 % less CPU time.
DEFAULT_THREADS = 1
#: Constants of at least this many bytes are handed to onnxruntime as arrays.
EXTERNAL_MIN_BYTES = 1024


class OrtFloatSession:
    """An onnxruntime session computing ``tensors`` of ``graph`` (inputs included) from
    one sample. Raises `QuantizationError` if onnxruntime cannot load the graph."""

    def __init__(
        self, graph: Graph, tensors: Collection[str], *, threads: int = DEFAULT_THREADS
    ) -> None:
        import onnxruntime as ort

        from aipusim.compiler.export import to_onnx

        self.graph = graph
        wanted = list(dict.fromkeys(tensors))
        self._fed = [t for t in wanted if t in graph.inputs]
        computed = [t for t in wanted if t not in graph.inputs and not graph.is_constant(t)]
        # Weights reach onnxruntime as arrays, not serialized into the model (a copy of
        # every weight less, twice: to protobuf and back).
        model = to_onnx(graph, external_min_bytes=EXTERNAL_MIN_BYTES)
        weights = [t.name for t in model.graph.initializer if t.external_data]
        # Weights mapped from their file (`aipusim.base.mapped`, llama_1b's 4.95 GB) are
        # fed as graph inputs with every run: onnxruntime reads an input where it is, but
        # copies every initializer into its own memory (a second copy of all weights).
        mapped = [w for w in weights if is_mapped(graph.const(w))]
        self._weights = {w: np.ascontiguousarray(graph.const(w)) for w in mapped}
        if mapped:
            stubs = {t.name: t for t in model.graph.initializer}
            kept = [t for t in model.graph.initializer if t.name not in self._weights]
            del model.graph.initializer[:]
            model.graph.initializer.extend(kept)
            for w in mapped:
                stub = stubs[w]
                model.graph.input.append(
                    onnx.helper.make_tensor_value_info(w, stub.data_type, list(stub.dims))
                )
            weights = [w for w in weights if w not in self._weights]
        outputs = {o.name for o in model.graph.output}
        info = {v.name: v for v in model.graph.value_info}
        for t in computed:
            if t not in outputs:
                model.graph.output.append(info[t])
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.use_deterministic_compute = True
        options.log_severity_level = 3  # errors only: no warnings on stderr
        # Idle worker threads sleep instead of spinning: on a shared 2-core machine spinning
        # burnt ~40 % more CPU for a slower run.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_external_initializers(
            weights,
            [
                ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(graph.const(w)))
                for w in weights
            ],
        )
        try:
            self._session = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            raise QuantizationError(
                f"graph {graph.name} must load in onnxruntime, not fail: {_first_line(exc)}"
            ) from None
        self._computed = computed
        self._inputs = [i.name for i in self._session.get_inputs()]

    def run(self, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Tensor name -> float32 value for one calibration sample."""
        feeds = float_inputs(self.graph, sample)
        out = {t: feeds[t] for t in self._fed}
        if not self._computed:  # onnxruntime reads no names as "every output"
            return out
        try:
            feeds.update(self._weights)
            values = self._session.run(self._computed, {k: feeds[k] for k in self._inputs})
        except Exception as exc:  # onnxruntime raises its own exception types
            raise QuantizationError(
                f"graph {self.graph.name} must run in onnxruntime, not fail: {_first_line(exc)}"
            ) from None
        out.update(zip(self._computed, values, strict=True))
        return out

    def run_all(
        self, samples: Sequence[Mapping[str, np.ndarray]]
    ) -> Iterator[dict[str, np.ndarray]]:
        """`run` of each sample in order, each computed while the caller still works on the
        one before: onnxruntime releases the GIL, so the observers of sample i (numpy, in
        the caller's thread) overlap the forward pass of sample i + 1 (in a worker). At most
        two samples' tensors are alive at once.

        >>> import numpy as np
        >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
        >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
        ...           {n: Tensor(n, (1,)) for n in "xy"}, {}, ("x",), ("y",))
        >>> xs = [{"x": np.array([v], np.float32)} for v in (-1.0, 2.0)]
        >>> [out["y"].tolist() for out in OrtFloatSession(g, ["y"]).run_all(xs)]
        [[0.0], [2.0]]
        """
        if not samples:
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aipusim-calibration") as pool:
            pending = pool.submit(self.run, samples[0])
            for sample in samples[1:]:
                done = pending.result()
                pending = pool.submit(self.run, sample)
                yield done
            yield pending.result()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["DEFAULT_THREADS", "OrtFloatSession"]
