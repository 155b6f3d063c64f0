"""Accuracy of the int8 model against the fp32 model: SQNR, max abs error, top-1 agreement.

SQNR (dB) = 10 log10( sum(ref**2) / sum((ref - test)**2) ) over all held-aside samples of
an output; infinite when the outputs are identical. Top-1 agreement is reported for
classifier outputs (rank 2, more than one class): the share of samples whose arg-max
class is the same in both models.

>>> import numpy as np
>>> round(sqnr_db(np.array([3.0, 4.0]), np.array([3.0, 4.5])), 2)
20.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

Outputs = Mapping[str, np.ndarray]


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``test`` against ``ref`` in dB."""
    r = np.asarray(ref, np.float64)
    noise = float(((r - np.asarray(test, np.float64)) ** 2).sum())
    signal = float((r**2).sum())
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def is_classifier_output(shape: tuple[int, ...]) -> bool:
    """A (batch, classes) output with more than one class."""
    return len(shape) == 2 and shape[1] > 1


def output_report(refs: Sequence[np.ndarray], tests: Sequence[np.ndarray]) -> dict:
    """SQNR, max abs error (and top-1 agreement for classifiers) of one output."""
    ref = np.concatenate([np.asarray(r).reshape(1, *np.shape(r)) for r in refs])
    test = np.concatenate([np.asarray(t).reshape(1, *np.shape(t)) for t in tests])
    out: dict = {
        "sqnr_db": _json_float(sqnr_db(ref, test)),
        "max_abs_error": float(np.abs(ref.astype(np.float64) - test).max()),
        "fp32_max_abs": float(np.abs(ref).max()),
        "samples": len(refs),
    }
    if is_classifier_output(tuple(np.shape(refs[0]))):
        r = ref.reshape(-1, ref.shape[-1]).argmax(axis=1)
        t = test.reshape(-1, test.shape[-1]).argmax(axis=1)
        out["top1_agreement"] = float((r == t).mean())
    return out


def _json_float(v: float) -> float | str:
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


def accuracy_report(
    fp32: Sequence[Outputs],
    int8: Sequence[Outputs],
    *,
    fp32_source: str = "",
    per_layer: Mapping[str, float] | None = None,
) -> dict:
    """The ``report.json`` accuracy section: per output, over the held-aside samples.

    >>> r = accuracy_report([{"y": np.array([[1.0, 2.0]])}], [{"y": np.array([[1.0, 2.0]])}])
    >>> r["outputs"]["y"]["sqnr_db"], r["outputs"]["y"]["top1_agreement"]
    ('inf', 1.0)
    """
    names = list(fp32[0]) if fp32 else []
    report: dict = {
        "fp32_reference": fp32_source,
        "samples": len(fp32),
        "outputs": {n: output_report([f[n] for f in fp32], [q[n] for q in int8]) for n in names},
    }
    if per_layer is not None:
        report["per_layer_sqnr_db"] = {k: _json_float(v) for k, v in per_layer.items()}
    return report


def per_layer_sqnr(
    fp32_values: Sequence[Outputs], int8_values: Sequence[Outputs]
) -> dict[str, float]:
    """SQNR of every tensor both runs kept (graph order of the int8 run)."""
    acc = SqnrAccumulator()
    for f, q in zip(fp32_values, int8_values, strict=True):
        acc.add(f, q)
    return acc.result()


class SqnrAccumulator:
    """Per-tensor SQNR over samples added one at a time (so a big model's every activation
    of every sample need not be held at once). Same value as `sqnr_db` over all samples.

    >>> acc = SqnrAccumulator()
    >>> acc.add({"y": np.array([3.0])}, {"y": np.array([3.5])})
    >>> acc.add({"y": np.array([4.0])}, {"y": np.array([4.0])})
    >>> round(acc.result()["y"], 2)
    20.0
    """

    def __init__(self) -> None:
        self.signal: dict[str, float] = {}
        self.noise: dict[str, float] = {}

    def add(self, fp32: Outputs, int8: Outputs) -> None:
        for name, test in int8.items():
            if name not in fp32:
                continue
            ref = np.asarray(fp32[name], np.float64)
            err = ref - np.asarray(test, np.float64)
            self.signal[name] = self.signal.get(name, 0.0) + float((ref * ref).sum())
            self.noise[name] = self.noise.get(name, 0.0) + float((err * err).sum())

    def result(self) -> dict[str, float]:
        out = {}
        for name, signal in self.signal.items():
            noise = self.noise[name]
            if noise == 0:
                out[name] = math.inf
            elif signal == 0:
                out[name] = -math.inf
            else:
                out[name] = 10.0 * math.log10(signal / noise)
        return out


__all__ = [
    "SqnrAccumulator",
    "accuracy_report",
    "is_classifier_output",
    "output_report",
    "per_layer_sqnr",
    "sqnr_db",
]
