"""The op registry: every operator the compiler maps, the unit that runs it and its int8 scheme.

The unit of an op is derived from the groups the lowering uses (`ir.MVM_OPS`, `DWPU_OPS`,
`DPU_OPS`, `LAYOUT_OPS`, and `lower.ALIAS_OPS`), so it cannot disagree with the back end;
the int8 scheme is the set of `QStep` kinds the quantizer may give the op, each described
once in `KIND_SCHEMES` (a test checks the quantizer against it). ``compiler/README.md``
holds the table `markdown_table` writes; run ``python -m aipusim.compiler.opregistry --write``
after changing an op, and the test suite fails while the README is stale.

>>> spec("LayerNormalization").unit, spec("LayerNormalization").kinds
('DPU', ('layernorm',))
>>> spec("MatMul").unit
'MVM'
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from aipusim.compiler.backend.lower.units import ALIAS_OPS
from aipusim.compiler.ir import DPU_OPS, DWPU_OPS, LAYOUT_OPS, LUT_OPS, MVM_OPS, Op

#: What each quantizer step kind computes (the int8 reference's definition is in
#: `aipusim.compiler.quant.reference` / `kernels` / `fp_kernels`).
KIND_SCHEMES: dict[str, str] = {
    "mac": "int8 × int8 weights (symmetric, per output channel), int32 bias and sums, "
    "fixed-point requantize per channel",
    "matmul": "two activations: the second is symmetric int8 (no zero point, as IMC weights), "
    "exact int32 sums, one fixed-point requantize",
    "clamp": "integer clamp (fused into the producer's requantize)",
    "lut": "256-entry int8 table of the function between input and output grids",
    "rescale": "fixed-point rescale of each operand to the output grid, one rounding",
    "mul": "int8 × int8 product, fixed-point requantize (a constant divisor as its reciprocal)",
    "mean": "int32 sum, fixed-point multiply by scale / count",
    "pool_avg": "int32 window sums, fixed-point multiply per window size",
    "resize_linear": "fixed-point interpolation weights (Q7 per axis)",
    "softmax": "exp table of (q - max) in Q15, integer sum and division; output grid within [0, 1]",
    "share": "no arithmetic: the output keeps the input's grid",
    "gather": "the constant table stored int8 on the output grid, looked up exactly",
    "layernorm": "int32 row statistics, float18 variance / rsqrt / scale and shift, int8 out",
    "div_fp": "float18 quotient of the two centred operands times one float18 scale",
    "pow_fp": "float18: log2 table of the base × exponent, piecewise exp2 (257-entry table)",
}


@dataclass(frozen=True)
class OpSpec:
    """One operator: the unit that runs it, its quantizer step kinds, and a note."""

    op: Op
    unit: str
    kinds: tuple[str, ...]
    note: str = ""

    @property
    def scheme(self) -> str:
        """The int8 scheme in words (one line per step kind)."""
        return "; ".join(KIND_SCHEMES[k] for k in self.kinds) if self.kinds else "—"


def _unit(op: Op) -> str:
    if op in MVM_OPS:
        return "MVM"
    if op in DWPU_OPS:
        return "DWPU"
    if op in DPU_OPS:
        return "DPU"
    if op in ALIAS_OPS:
        return "none (a view)"
    if op in LAYOUT_OPS:
        return "DMA"
    return "rewritten"


#: op -> (step kinds, note). Kinds are in the order the quantizer tries them.
_TABLE: dict[Op, tuple[tuple[str, ...], str]] = {
    Op.CONV: (("mac",), "groups = input = output channels (depthwise) runs on the DWPU"),
    Op.CONV_TRANSPOSE: (("mac",), "as a stride-1 conv over the zero-upsampled input"),
    Op.GEMM: (("mac",), "constant weights"),
    Op.MATMUL: (
        ("mac", "matmul"),
        "two activations (attention): the second written into an IMC weight set every "
        "frame, or the DPU; the cost model picks per layer. A 2-D constant first operand: "
        "transposed around (rewrite_einsum)",
    ),
    Op.BATCH_NORM: (("mac",), "when not folded into the conv before it"),
    Op.RELU: (("clamp", "lut"), ""),
    Op.CLIP: (("clamp", "lut"), ""),
    Op.PRELU: (
        (),
        "constant slopes (decompose_prelu): one slope -> LeakyRelu (a table); per-channel "
        "-> Relu + Min(x, 0) * slope; a slope computed at run time is refused",
    ),
    Op.MUL: (("lut", "mul"), "a scalar constant operand makes it a table"),
    Op.ADD: (("lut", "rescale"), "outputs read only by adders / LayerNorm are 16-bit"),
    Op.SUB: (("lut", "rescale"), "outputs read only by adders / LayerNorm are 16-bit"),
    Op.DIV: (("lut", "mul", "div_fp"), "scalar: table; constant: reciprocal; tensor: float18"),
    Op.POW: (("lut", "pow_fp"), "scalar exponent: table; tensor exponent: float18"),
    Op.MIN: (("rescale",), ""),
    Op.MAX: (("rescale",), ""),
    Op.SOFTMAX: (("softmax",), "any axis"),
    Op.MASKED_SOFTMAX: (
        ("softmax",),
        "internal: a Softmax after a constant attention mask (fuse_attention_mask); the "
        "masked entries are left out of the max and the sum and come out 0; the task reads "
        "the keep mask (one byte an entry) as its operand 1",
    ),
    Op.LAYER_NORM: (("layernorm",), "also the ReduceMean/Sub/Pow/Sqrt/Div form (fused)"),
    Op.REDUCE_MEAN: (("mean",), ""),
    Op.REDUCE_SUM: (("mean",), ""),
    Op.REDUCE_MAX: (("share",), ""),
    Op.GELU: (("lut",), "erf and tanh forms of element-wise ops are fused into it"),
    Op.MAX_POOL: (("share",), ""),
    Op.GLOBAL_MAX_POOL: (("share",), ""),
    Op.AVERAGE_POOL: (("pool_avg",), ""),
    Op.GLOBAL_AVERAGE_POOL: (("mean",), ""),
    Op.RESIZE: (("share", "resize_linear"), "nearest or linear; opset < 11 coordinates kept"),
    Op.UPSAMPLE: (("share", "resize_linear"), "opsets 7-9 (upgraded to Resize)"),
    Op.CONCAT: (
        ("rescale",),
        "channels of 4-D activations, a constant part, or parts on other grids than the "
        "output (RoPE's rotate_half, a KV cache's past and new rows): DPU, one rescale per "
        "part into its slice of the output (place_concat)",
    ),
    Op.GATHER: (
        ("share", "gather"),
        "constant indices; a lookup by the input's indices runs on the host (graph cleaner)",
    ),
    Op.EXPAND: (("share",), "static shape"),
    Op.TILE: (("share",), "static repeats"),
    Op.EINSUM: ((), "matmul forms become Transpose/Reshape + MatMul (rewrite_einsum)"),
}
for _op in LUT_OPS | {Op.LEAKY_RELU, Op.NEG}:
    _TABLE.setdefault(_op, (("lut",), ""))
for _op in LAYOUT_OPS:
    _TABLE.setdefault(_op, (("share",), ""))

#: Every op the compiler maps, by ONNX type.
REGISTRY: dict[str, OpSpec] = {
    op.value: OpSpec(op, _unit(op), kinds, note)
    for op, (kinds, note) in sorted(_TABLE.items(), key=lambda kv: kv[0].value)
}


def spec(op_type: str) -> OpSpec:
    """The registry entry of an ONNX op type (KeyError for an op the compiler lacks)."""
    return REGISTRY[op_type]


def markdown_table() -> str:
    """The supported-ops table of ``compiler/README.md``."""
    rows = [
        "| op | unit | int8 scheme | notes |",
        "|:---|:-----|:------------|:------|",
    ]
    for name, s in REGISTRY.items():
        rows.append(f"| {name} | {s.unit} | {s.scheme} | {s.note} |")
    return "\n".join(rows)


README = Path(__file__).with_name("README.md")
BEGIN, END = "<!-- ops-table:begin -->", "<!-- ops-table:end -->"


def readme_with_table(text: str) -> str:
    """``text`` with the part between the markers replaced by `markdown_table`."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{markdown_table()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """``--write`` refreshes the README table; without it, exit 1 if it is stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite compiler/README.md")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    fresh = readme_with_table(text)
    if args.write:
        README.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != text:
        print(f"{README} is stale: run python -m aipusim.compiler.opregistry --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["KIND_SCHEMES", "REGISTRY", "OpSpec", "markdown_table", "readme_with_table", "spec"]
