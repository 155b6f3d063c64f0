"""Pass 3a, ``rewrite_einsum``: Einsum in its matmul forms -> Transpose/Reshape + MatMul.

Transformers written with ``torch.einsum`` export equations such as ``bhqd,bhkd->bhqk``
(Q·Kᵀ), ``bhqk,bhkd->bhqd`` (attention·V), ``bld,dk->blk`` (a projection) or
``...ij,...jk->...ik``. Every two-operand equation whose letters are each either

- a batch index (in both operands and the output, same size in both),
- a contracted index (in both operands, not in the output), or
- a free index of one operand (in that operand and the output),

is a batched matrix product: operand A is transposed to (batch, free-A, contracted) and
reshaped to [batch..., M, K], operand B to [batch..., K, N], one MatMul, then the result is
reshaped and transposed to the output's letter order. A constant operand is rearranged at
compile time (a weight), and the computed operand is put first so that a constant ends up as
MatMul's weight input. One-operand equations that only permute become a Transpose. Anything
else (a diagonal ``ii->i``, a sum over a letter of one operand, three operands) is left as it
is, and `einsum_form` says why, which `validate_operators` reports.

A MatMul whose first operand is a 2-D constant (``W @ x``, e.g. ``torch.matmul(W, x)``) is
the same problem: it is rewritten as the equation ``ik,...kj->...ij``, so that x comes first
and W (transposed at compile time) is the MVM's weight.

>>> einsum_form("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 7, 8)]).contracted
('d',)
>>> einsum_form("ii->i", [(3, 3)]).reason
'letter `i` repeats within operand 1 (a diagonal)'
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext


@dataclass(frozen=True)
class EinsumForm:
    """The letters of a matmul-form equation (``reason`` says why one is not)."""

    inputs: tuple[str, ...]
    output: str
    batch: tuple[str, ...] = ()
    contracted: tuple[str, ...] = ()
    free: tuple[tuple[str, ...], ...] = ()
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


def _expand_ellipsis(term: str, rank: int, fill: str) -> str:
    """``term`` with ``...`` replaced by the last letters of ``fill`` it covers (numpy
    broadcasting aligns ellipsis dims from the right)."""
    if "..." not in term:
        return term
    covered = rank - (len(term) - 3)
    return term.replace("...", fill[len(fill) - covered :] if covered > 0 else "")


def einsum_form(equation: str, shapes: list[tuple[int, ...]]) -> EinsumForm:
    """Parse ``equation`` for operands of ``shapes`` (see the module docstring)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        return EinsumForm(
            tuple(terms), out, reason=f"it has {len(terms)} terms for {len(shapes)} operands"
        )
    spare = "".join(c for c in string.ascii_uppercase if c not in eq)
    ellipsis = max(
        (len(s) - (len(t) - 3) for t, s in zip(terms, shapes, strict=True) if "..." in t), default=0
    )
    fill = spare[: max(0, ellipsis)]
    terms = [_expand_ellipsis(t, len(s), fill) for t, s in zip(terms, shapes, strict=True)]
    if not arrow:  # implicit output: ellipsis dims, then the letters used once, sorted
        letters = "".join(terms)
        out = fill + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fill)
        )
    else:
        out = out.replace("...", fill)
    form = EinsumForm(tuple(terms), out)
    for k, (t, s) in enumerate(zip(terms, shapes, strict=True)):
        if len(t) != len(s):
            return _why(form, f"operand {k + 1} has rank {len(s)}, not {len(t)} as `{t}` says")
        for c in t:
            if t.count(c) > 1:
                return _why(form, f"letter `{c}` repeats within operand {k + 1} (a diagonal)")
    if len(terms) == 1:
        if sorted(terms[0]) != sorted(out):
            return _why(form, "a one-operand equation must only permute its letters")
        return form
    if len(terms) != 2:
        return _why(form, f"only one or two operands are matmul forms, not {len(terms)}")
    a, b = terms
    size = {}
    for t, s in zip(terms, shapes, strict=True):
        for c, d in zip(t, s, strict=True):
            if size.setdefault(c, d) != d:
                return _why(form, f"letter `{c}` has sizes {size[c]} and {d}")
    for c in out:
        if c not in a and c not in b:
            return _why(form, f"output letter `{c}` is in no operand")
    batch = tuple(c for c in a if c in b and c in out)
    contracted = tuple(c for c in a if c in b and c not in out)
    free_a = tuple(c for c in a if c not in b)
    free_b = tuple(c for c in b if c not in a)
    summed = [c for c in free_a + free_b if c not in out]
    if summed:
        return _why(form, f"letter `{summed[0]}` is summed within one operand")
    return EinsumForm(form.inputs, out, batch, contracted, (free_a, free_b))


def _why(form: EinsumForm, reason: str) -> EinsumForm:
    return EinsumForm(form.inputs, form.output, reason=reason)


class _Rewriter:
    def __init__(self, graph: Graph, ed: GraphEditor, node: Node) -> None:
        self.g, self.ed, self.node = graph, ed, node

    def transpose(self, x: str, letters: str, order: str) -> str:
        """``x`` (its dims named by ``letters``) permuted to ``order``."""
        if letters == order:
            return x
        perm = tuple(letters.index(c) for c in order)
        shape = self.shape(x)
        arr = self.ed.constants.get(x)
        if arr is not None:
            return self.ed.add_constant(f"{x}_perm", np.ascontiguousarray(arr.transpose(perm)))
        y = self.ed.new_tensor(f"{self.node.name}/{x}_t", tuple(shape[p] for p in perm))
        self.ed.add(Node(self.ed.unique_name(f"{self.node.name}/Transpose"), Op.TRANSPOSE,
                         (x,), (y,), {"perm": perm}))  # fmt: skip
        return y

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        if self.shape(x) == shape:
            return x
        arr = self.ed.constants.get(x)
        if arr is not None:
            return self.ed.add_constant(f"{x}_2d", np.ascontiguousarray(arr.reshape(shape)))
        target = self.ed.add_constant(f"{self.node.name}/shape", np.array(shape, np.int64))
        y = self.ed.new_tensor(f"{self.node.name}/{x}_r", shape)
        self.ed.add(Node(self.ed.unique_name(f"{self.node.name}/Reshape"), Op.RESHAPE,
                         (x, target), (y,)))  # fmt: skip
        return y

    def shape(self, x: str) -> tuple[int, ...]:
        return self.ed.tensors[x].shape

    def run(self, form: EinsumForm) -> None:
        node, out = self.node, self.node.outputs[0]
        if len(form.inputs) == 1:
            perm = tuple(form.inputs[0].index(c) for c in form.output)
            self.ed.replace(node, Node(node.name, Op.TRANSPOSE, (node.inputs[0],), (out,),
                                       {"perm": perm}))  # fmt: skip
            return
        (a, b), (ta, tb) = node.inputs, form.inputs
        free_a, free_b = form.free
        if self.g.is_constant(a) and not self.g.is_constant(b):
            (a, ta, free_a), (b, tb, free_b) = (b, tb, free_b), (a, ta, free_a)
        size = dict(zip(ta + tb, self.shape(a) + self.shape(b), strict=True))
        batch = "".join(form.batch)
        k = "".join(form.contracted)
        left, right = "".join(free_a), "".join(free_b)
        dims = [size[c] for c in batch]
        m, n, kk = (math.prod(size[c] for c in s) for s in (left, right, k))
        a2 = self.reshape(self.transpose(a, ta, batch + left + k), (*dims, m, kk))
        b2 = self.reshape(self.transpose(b, tb, batch + k + right), (*dims, kk, n))
        prod_letters = batch + left + right
        full = tuple(size[c] for c in prod_letters)
        if (left + right) and (*dims, m, n) == full and prod_letters == form.output:
            y = out
        else:
            y = self.ed.new_tensor(f"{node.name}/matmul", (*dims, m, n))
        self.ed.replace(node, Node(node.name, Op.MATMUL, (a2, b2), (y,)))
        if y == out:
            return
        z = self.reshape(y, full)
        if prod_letters == form.output:
            self._rename(z, out)
            return
        perm = tuple(prod_letters.index(c) for c in form.output)
        self.ed.add(Node(self.ed.unique_name(f"{node.name}/Transpose"), Op.TRANSPOSE, (z,),
                         (out,), {"perm": perm}))  # fmt: skip

    def _rename(self, z: str, out: str) -> None:
        """Make the node producing ``z`` write ``out`` instead (the graph's tensor name)."""
        maker = next(n for n in self.ed.nodes.values() if z in n.outputs)
        outs = tuple(out if o == z else o for o in maker.outputs)
        self.ed.replace(maker, maker.with_(outputs=outs))


#: Letters for the batch dims of a constant-first MatMul's second operand (not i, j, k).
_BATCH_LETTERS = "abcdefghlmnopqrstuvwxyz"


def constant_first_equation(graph: Graph, node: Node) -> str | None:
    """The equation of ``MatMul(W, x)`` with a 2-D constant W and a computed x of rank >= 2
    (``ik,kj->ij``, ``ik,akj->aij``, ...), or None for any other node.

    >>> from aipusim.compiler.ir import Tensor
    >>> g = Graph("g", (Node("mm", Op.MATMUL, ("w", "x"), ("y",)),),
    ...           {"w": Tensor("w", (4, 8)), "x": Tensor("x", (2, 8, 5)),
    ...            "y": Tensor("y", (2, 4, 5))}, {"w": np.ones((4, 8), np.float32)},
    ...           ("x",), ("y",))
    >>> constant_first_equation(g, g.nodes[0])
    'ik,akj->aij'
    """
    if node.op is not Op.MATMUL or len(node.inputs) != 2:
        return None
    w, x = node.inputs
    if not graph.is_constant(w) or graph.is_constant(x):
        return None
    rank = len(graph.shape(x))
    if len(graph.shape(w)) != 2 or not 2 <= rank <= len(_BATCH_LETTERS) + 2:
        return None
    batch = _BATCH_LETTERS[: rank - 2]
    return f"ik,{batch}kj->{batch}ij"


def einsum_to_matmul(graph: Graph, ctx: PassContext | None) -> Graph:
    """Rewrite every matmul-form Einsum and constant-first MatMul (see the module
    docstring); others stay."""
    todo = []
    for node in graph.nodes:
        if node.op is Op.EINSUM:
            equation: str | None = str(node.attr("equation", ""))
        else:
            equation = constant_first_equation(graph, node)
        if equation is not None:
            form = einsum_form(equation, [graph.shape(i) for i in node.inputs])
            if form.ok:
                todo.append((node, form))
    if not todo:
        return graph
    ed = graph.edit()
    for node, form in todo:
        _Rewriter(graph, ed, node).run(form)
    if ctx is not None:
        ctx.log.info(
            "rewrite_einsum: %d Einsum / constant-first MatMul node(s) -> MatMul/Transpose",
            len(todo),
        )
    return ed.build()


__all__ = ["EinsumForm", "constant_first_equation", "einsum_form", "einsum_to_matmul"]
