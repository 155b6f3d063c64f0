"""When the int8 model falls short: which layers limit it, and which setting helps.

After an accuracy run (`aipusim.compiler.quant.evaluate` with per-layer SQNR), every output
below `SQNR_TARGET_DB` gets:

- its limiting layers: the nodes whose output SQNR drops most below the SQNR of their
  inputs (the layers that lose the precision, rather than pass on a loss from earlier);
- a suggestion found by measurement: the other quantization schemes (and, for a model
  with depthwise convs quantized per tensor, `DW_CHANNEL_WISE`: per-channel depthwise
  weights) are tried on the same calibration data, and the best one is named if it does
  better than the current setting.

Both go to the accuracy report (``advice``) and, as one line per output, to the compile log.
Outputs that reach the target get one line too: their SQNR and the weakest tensor.

>>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
>>> g = Graph("g", (Node("a", Op.RELU, ("x",), ("y",)), Node("b", Op.SIGMOID, ("y",), ("z",))),
...           {n: Tensor(n, (1, 4)) for n in "xyz"}, {}, ("x",), ("z",))
>>> limiting_layers(g, {"x": 40.0, "y": 38.0, "z": 12.0})
[('b', 12.0, 26.0), ('a', 38.0, 2.0)]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from aipusim.compiler.ir import Graph
from aipusim.compiler.quant.accuracy import LIMITING_COUNT, finite_value, limiting_layers

log = logging.getLogger(__name__)

#: The output SQNR an int8 model should reach (issue 18's target for the zoo transformers).
SQNR_TARGET_DB = 20.0


def _weakest(per_layer: Mapping[str, Any]) -> str:
    """``; weakest tensor `t` (x dB)`` over the per-layer SQNRs ('' without them)."""
    values = {k: finite_value(v) for k, v in per_layer.items()}
    values = {k: v for k, v in values.items() if v is not None}
    if not values:
        return ""
    name = min(values, key=values.__getitem__)
    return f"; weakest tensor `{name}` ({values[name]:.1f} dB)"


#: The alternative that turns on per-channel depthwise weights. Trained depthwise kernels
#: differ by 100x and more between channels; one scale for all of them rounds the small
#: channels' weights to a few levels (PP-LCNet's weights alone, every activation in
#: float, reach 2.5 dB at the logits per tensor and 25.1 dB per channel).
DW_CHANNEL_WISE = "quantize_dw_channel_wise=true"


def setting_text(alternative: str) -> str:
    """The config line of an alternative: a scheme name or a ``key=value`` setting.

    >>> setting_text("per_tensor_min_max"), setting_text(DW_CHANNEL_WISE)
    ('quantization_scheme = per_tensor_min_max', 'quantize_dw_channel_wise = true')
    """
    key, sep, value = alternative.partition("=")
    return f"{key} = {value}" if sep else f"quantization_scheme = {alternative}"


def advise(
    graph: Graph,
    report: dict,
    scheme: str,
    try_scheme: Callable[[str], Mapping[str, float]],
    schemes: list[str],
) -> dict:
    """Add ``advice`` to ``report`` for outputs below the target and log one line each.

    ``graph`` is the quantized graph (names match ``per_layer_sqnr_db``); ``try_scheme``
    quantizes and evaluates with another alternative of ``schemes`` (a scheme name, or a
    ``key=value`` setting such as `DW_CHANNEL_WISE`) and returns output -> SQNR.
    """
    low = {
        name: finite_value(out.get("sqnr_db"))
        for name, out in report.get("outputs", {}).items()
        if (finite_value(out.get("sqnr_db")) or -math.inf) < SQNR_TARGET_DB
    }
    per_layer = report.get("per_layer_sqnr_db", {})
    for name, out in report.get("outputs", {}).items():
        if name not in low:
            log.info(
                "quantization: output `%s` reaches %.1f dB SQNR against fp32 (target %.0f dB)%s",
                name,
                float(out["sqnr_db"]),
                SQNR_TARGET_DB,
                _weakest(per_layer),
            )
    if not low:
        return report
    tried = {s: dict(try_scheme(s)) for s in schemes if s != scheme}
    advice = {}
    for name, sqnr in low.items():
        layers = limiting_layers(graph, per_layer)
        alternatives = {s: finite_value(r.get(name)) for s, r in tried.items()}
        best = max(
            (s for s, v in alternatives.items() if v is not None),
            key=lambda s: alternatives[s] or -math.inf,
            default=None,
        )
        helps = best is not None and (alternatives[best] or -math.inf) > (sqnr or -math.inf) + 0.5
        advice[name] = {
            "sqnr_db": sqnr,
            "target_db": SQNR_TARGET_DB,
            "limiting_layers": [{"node": n, "sqnr_db": v, "drop_db": d} for n, v, d in layers],
            "alternatives_db": alternatives,
            "suggested_scheme": best if helps and "=" not in best else None,
            "suggested_setting": setting_text(best) if helps and best is not None else None,
        }
        named = ", ".join(f"`{n}` ({v:.1f} dB, -{d:.1f} dB)" for n, v, d in layers) or "none"
        if helps:
            tip = f"{setting_text(best)} gives {alternatives[best]:.1f} dB"
        else:
            tip = (
                "no other setting does better ("
                + ", ".join(f"{s}: {v:.1f} dB" for s, v in alternatives.items() if v is not None)
                + ")"
            )
        log.warning(
            "quantization: output `%s` reaches %.1f dB SQNR, below the %.0f dB target; "
            "limiting layers: %s; %s",
            name,
            sqnr if sqnr is not None else -math.inf,
            SQNR_TARGET_DB,
            named,
            tip,
        )
    report["advice"] = advice
    return report


__all__ = [
    "DW_CHANNEL_WISE",
    "LIMITING_COUNT",
    "SQNR_TARGET_DB",
    "advise",
    "limiting_layers",
    "setting_text",
]
