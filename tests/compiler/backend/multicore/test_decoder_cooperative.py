"""A cooperative decode graph: every core moves its share of the layout copies (the KV
cache's GQA expansions, reshapes and transposes), the FFN runs as tensor parallelism (the
down projection split by input channels, one reduction), the attention by query heads (the
output projection split by input channels, one reduction), and the report's
``kv_cache.cores`` says how the step's work is shared by the cores."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import product
from pathlib import Path

import pytest

import aipusim
from aipusim.api.decoder_check import check_decoder_steps
from aipusim.compiler.backend.lower.layout_dma import Copy, copy_heads, copy_part
from aipusim.isa.tasklist import read_tasklist
from aipusim.isa.tasks import DmaCopy, DpuKind, DpuOp, Mvm, Phase, Pool, PostOp
from aipusim.zoo import DecoderGraph, build_decoder

COOPERATIVE = {"aipu_cores_used": 4, "multicore_mode": "cooperative"}


def _pairs(c: Copy) -> set[tuple[int, int]]:
    """Every (source, destination) element offset ``c`` moves."""
    return {
        (c.src_off + p * c.src_plane_stride + r * c.src_row_stride + i,
         c.dst_off + p * c.dst_plane_stride + r * c.dst_row_stride + i)
        for p, r, i in product(range(c.planes), range(c.rows), range(c.run))
    }  # fmt: skip


@pytest.mark.parametrize(
    "copy",
    [
        Copy(0, 3, 7, planes=1, rows=10, run=4, src_row_stride=8, dst_row_stride=4),
        Copy(0, 0, 0, planes=9, rows=2, run=1, src_plane_stride=1, dst_plane_stride=18,
             src_row_stride=9, dst_row_stride=1),
        # a source broadcast over rows (an expansion), and fill bytes
        Copy(0, 0, 5, planes=2, rows=4, run=3, src_plane_stride=3, dst_plane_stride=12,
             dst_row_stride=3),
        Copy(-1, 0, 0, planes=1, rows=3, run=2, dst_row_stride=2),
    ],
)  # fmt: skip
def test_the_parts_of_a_copy_move_its_elements_once_each(copy: Copy) -> None:
    for parts in (2, 3, 4):
        pieces = [p for k in range(parts) if (p := copy_part(copy, parts, k)) is not None]
        moved = [pair for p in pieces for pair in _pairs(p)]
        assert len(moved) == len(set(moved)) and set(moved) == _pairs(copy), (copy, parts)
        assert all(p.src == copy.src and p.run == copy.run for p in pieces)


@pytest.mark.parametrize(("heads", "dim"), [(8, 32), (32, 64)])
def test_each_core_transposes_its_own_heads_once(heads: int, dim: int) -> None:
    """One token's context ``[1, H, 1, d]`` (heads interleaved) transposed to ``[1, 1, H,
    d]``: the cores' parts move every element once, each only its block of heads."""
    whole = Copy(0, 0, 0, planes=heads, rows=dim, run=1, src_plane_stride=1,
                 dst_plane_stride=dim, src_row_stride=heads, dst_row_stride=1)  # fmt: skip
    moved = []
    for core in range(4):
        lo, hi = heads // 4 * core, heads // 4 * (core + 1)
        part = copy_heads(whole, heads, lo, hi)
        assert part is not None
        pairs = _pairs(part)
        assert {src % heads for src, _ in pairs} == set(range(lo, hi))
        # the destination is head-major: the core's heads are its run of context channels
        assert {dst for _, dst in pairs} == set(range(lo * dim, hi * dim))
        moved += pairs
    assert len(moved) == len(set(moved)) and set(moved) == _pairs(whole)
    # a copy that does not step over the heads one by one has no head part
    assert copy_heads(replace(whole, src_plane_stride=2), heads, 0, 2) is None


@pytest.fixture(scope="module")
def decode_step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_decoder's decode graph (32 tokens cached) compiled in cooperative mode."""
    model = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=32, positions=64)
    out = tmp_path_factory.mktemp("coop_decode")
    return aipusim.compile(model, COOPERATIVE, output_dir=out).compiled_dir()


def _tasks(folder: Path) -> dict[int, list[object]]:
    return {c: read_tasklist(folder / f"core{c}.tasklist").tasks for c in range(4)}


def _layout_copies(folder: Path, core: int) -> list[DmaCopy]:
    report = json.loads((folder / "report.json").read_text())
    layout = {r["name"] for r in report["layers"] if r["unit"] == "dma"}
    tasks = read_tasklist(folder / f"core{core}.tasklist").tasks
    return [
        t for t in tasks if isinstance(t, DmaCopy) and t.phase is Phase.FRAME and t.layer in layout
    ]


def test_every_core_moves_a_share_of_the_kv_cache_layout_copies(decode_step: Path) -> None:
    shares = {core: _layout_copies(decode_step, core) for core in range(4)}
    expand = [{t.layer for t in shares[core] if "Expand" in t.layer} for core in range(4)]
    # the GQA expansion of every layer's keys and values: on each of the four cores
    assert all(len(names) == 8 for names in expand), expand
    # the other cores' parts stay between L2 buffers (another core's L1 is not theirs,
    # and a copy from or to DDR stays whole: the parts would share the DDR)
    assert all(t.src_pool is t.dst_pool is Pool.L2 for core in (1, 2, 3) for t in shares[core])
    report = json.loads((decode_step / "report.json").read_text())["kv_cache"]["cores"]
    assert report["layout_copy_bytes"] == [sum(t.bytes for t in shares[c]) for c in range(4)]
    assert min(report["layout_copy_bytes"][1:]) > 0


def test_the_report_says_how_a_decode_step_is_shared_by_the_cores(decode_step: Path) -> None:
    cores = json.loads((decode_step / "report.json").read_text())["kv_cache"]["cores"]
    assert cores["count"] == 4
    # each core streams a quarter of the MVM weights into its IMC every token
    assert len(set(cores["weight_bytes"])) == 1 and cores["weight_bytes"][0] > 1_000_000
    columns = cores["mvm_columns"]
    # FFN gate/up: 1024 columns, 256 per core; q projection: 8 heads x 32, 64 per core;
    # k/v: 2 KV heads x 32, 16 per core (a KV head is cut over two cores)
    assert columns["/model/layers.0/mlp/MatMul_60"] == [256] * 4
    assert columns["/model/layers.0/self_attn/MatMul_13"] == [64] * 4
    assert columns["/model/layers.0/self_attn/MatMul_14"] == [16] * 4
    assert all(sum(c) > 0 for c in columns.values()) and len(columns) == 4 * 7 + 1
    # the attention products run split by heads: two query heads on every core
    heads = cores["product_heads"]
    assert len(heads) == 8 and all(h == [2, 2, 2, 2] for h in heads.values())
    # a split layer's cores pass its output on: q's 256 int8 values, the FFN's 1024
    assert cores["exchange_bytes"]["/model/layers.0/self_attn/MatMul_13"] == 256
    assert cores["exchange_bytes"]["/model/layers.0/mlp/MatMul_60"] == 1024


def test_the_ffn_runs_as_tensor_parallelism(decode_step: Path) -> None:
    report = json.loads((decode_step / "report.json").read_text())
    split = {r["name"]: r["split"]["choice"] for r in report["layers"]}
    mlp = "/model/layers.0/mlp/"
    # gate and up by output columns, SiLU and gate * up on each core's columns, down by
    # input channels (each core its rows of the weights)
    assert [split[mlp + n] for n in ("MatMul_60", "MatMul_61", "Mul_63", "Mul_64")] == [
        "channels"
    ] * 4
    assert split[mlp + "MatMul_65"] == "inputs"
    # the FFN's down projection and the attention's output projection, every layer
    assert list(split.values()).count("inputs") == 2 * 4
    cores = report["kv_cache"]["cores"]
    down = mlp + "MatMul_65"
    ffn = {n: [256] * 4 for n in split if split[n] == "inputs" and "/mlp/" in n}
    assert {n: c for n, c in cores["mvm_input_channels"].items() if "/mlp/" in n} == ffn
    assert cores["mvm_columns"][down] == [256] * 4
    # no hidden column crosses a core: cores 1-3 send core 0 their 256 int32 partial sums,
    # and core 0 stores the 256 int8 results where the residual add reads them
    assert cores["exchange_bytes"][down] == 3 * 256 * 4 + 256
    assert mlp + "Mul_63" not in cores["exchange_bytes"]
    assert set(cores["bytes_per_token_by_split"]) >= {"channels", "inputs", "none"}
    tasks = {c: read_tasklist(decode_step / f"core{c}.tasklist").tasks for c in range(4)}
    psum = {
        c: [t for t in tasks[c] if isinstance(t, DpuOp) and t.kind is DpuKind.PSUM]
        for c in range(4)
    }
    # one reduction per FFN and one per attention block, on core 0: four planes of 256
    # output channels
    assert [len(psum[c]) for c in range(4)] == [8, 0, 0, 0]
    assert all(t.operands == 4 and t.elements == 256 for t in psum[0])
    partial = [t for c in range(4) for t in tasks[c] if isinstance(t, Mvm) and t.layer == down]
    assert len(partial) == 4 and all(t.post is PostOp.NONE and t.rows_used == 256 for t in partial)


@pytest.mark.slow
def test_shared_copies_and_the_head_split_keep_decode_bit_exact(tmp_path: Path) -> None:
    run = check_decoder_steps("tiny_decoder", prompt=32, steps=2, mode="cooperative",
                              workdir=tmp_path)  # fmt: skip
    assert run.bit_exact, run.text()
    folder = tmp_path / "cooperative-decode1" / "compiled_model"
    assert all(_layout_copies(folder, core) for core in (1, 2, 3))
    # what was checked ran split by heads, its output projection by input channels
    report = json.loads((folder / "report.json").read_text())
    split = {r["name"]: r["split"]["choice"] for r in report["layers"]}
    assert list(split.values()).count("heads") == 4 * 5
    assert split["/model/layers.3/self_attn/MatMul_234"] == "inputs"
    assert [s.past_tokens for s in run.steps[1:]] == [32, 33]


def test_the_attention_is_split_by_heads(decode_step: Path) -> None:
    report = json.loads((decode_step / "report.json").read_text())
    split = {r["name"]: r["split"]["choice"] for r in report["layers"]}
    att = "/model/layers.0/self_attn/"
    # Q·Kᵀ, its scale, the softmax and P·V: each core its own block of query heads
    assert [split[att + n] for n in ("MatMul_45", "Mul_46", "Softmax_47", "MatMul_48")] == [
        "heads"
    ] * 4
    assert list(split.values()).count("heads") == 4 * 5  # and the context's transpose
    tasks = _tasks(decode_step)
    for name in ("MatMul_45", "MatMul_48"):
        products = {
            c: [t for t in tasks[c] if isinstance(t, DpuOp) and t.layer == att + name]
            for c in range(4)
        }
        assert all(len(p) == 1 and p[0].outer == 2 for p in products.values())
        # 8 heads, 33 keys, 32 values a head: a quarter of the multiply-accumulates each
        assert all(p[0].elements == 2 * 33 * 32 for p in products.values())
    softmax = [
        t for c in range(4) for t in tasks[c] if getattr(t, "layer", "") == att + "Softmax_47"
    ]
    assert [t.groups for t in softmax if isinstance(t, DpuOp)] == [2] * 4
    # the scores are never exchanged: each core reads the heads it computed
    cores = report["kv_cache"]["cores"]
    assert att + "MatMul_45" not in cores["exchange_bytes"]
    # each core transposes its heads' context (2 heads x 32 values), which is its 64 input
    # channels of the output projection: partial sums of all 256 columns, one reduction
    assert split[att + "Transpose_49"] == "heads" and split[att + "MatMul_51"] == "inputs"
    moved = [
        sum(t.bytes for t in tasks[c] if isinstance(t, DmaCopy) and t.layer == att + "Transpose_49")
        for c in range(4)
    ]
    assert moved == [64] * 4
    assert cores["mvm_input_channels"][att + "MatMul_51"] == [64] * 4
    assert cores["mvm_columns"][att + "MatMul_51"] == [256] * 4


def test_each_core_fetches_the_keys_of_its_kv_head_only(decode_step: Path) -> None:
    """GQA: 8 query heads share 2 KV heads (4 each); with two query heads a core, cores 0
    and 1 read KV head 0's expanded keys, cores 2 and 3 KV head 1's, each its own two
    heads' copies of them: a strided fetch of 2 of every 8 bytes, at its heads' offset."""
    att = "/model/layers.0/self_attn/"
    tasks = _tasks(decode_step)
    fetched = {}
    for c in range(4):
        # the keys (the parameters are one run)
        (dma,) = [
            t for t in tasks[c]
            if isinstance(t, DmaCopy) and t.layer == att + "MatMul_45" and t.rows > 1
        ]  # fmt: skip
        assert dma.src_pool is Pool.L2 and dma.dst_pool is Pool.L1
        assert dma.rows == 32 * 33 and dma.bytes == 2 * 32 * 33
        assert dma.src_stride == dma.dst_stride == 8
        fetched[c] = dma
    base = fetched[0].src_addr
    first_head = {c: fetched[c].src_addr - base for c in range(4)}
    assert first_head == {0: 0, 1: 2, 2: 4, 3: 6}
    kv_head = {c: first_head[c] // 4 for c in range(4)}  # 4 query heads a KV head
    assert kv_head == {0: 0, 1: 0, 2: 1, 3: 1}
