"""The geometry of a DPU reduction's groups in memory (`backend.reduction`)."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.compiler.backend.lower.layout_dma import physical_axes
from aipusim.compiler.backend.lower.reduction import (
    Matrices,
    Reduction,
    matrices,
    reduction_geometry,
)


def test_last_axis_of_a_sequence_is_one_row_per_group() -> None:
    assert reduction_geometry((1, 16, 64), (2,)) == Reduction(16, 1, 64, 64, 1, 1)


def test_channels_of_an_nhwc_tensor_are_contiguous_groups() -> None:
    # [1, 8, 4, 5] lies as [1, 4, 5, 8]: each pixel's 8 channels are one group
    assert reduction_geometry((1, 8, 4, 5), (1,)) == Reduction(20, 1, 8, 8, 1, 1)


def test_width_of_attention_scores_interleaves_the_heads() -> None:
    # [1, heads=2, T=3, T=4] lies as [1, 3, 4, 2]: a row of head g steps over the heads
    assert reduction_geometry((1, 2, 3, 4), (3,)) == Reduction(3, 2, 4, 8, 1, 2)


def test_axes_apart_in_memory_have_no_geometry() -> None:
    assert reduction_geometry((1, 8, 4, 4), (1, 2)) is None
    assert reduction_geometry((1, 8, 4, 4), (2, 3)) == Reduction(1, 8, 16, 128, 1, 8)


def test_a_row_tile_takes_its_share_of_outer() -> None:
    geo = reduction_geometry((1, 16, 64), (2,))
    assert geo is not None and geo.rows(5, 16) == Reduction(5, 1, 64, 64, 1, 1)


@pytest.mark.parametrize(
    ("shape", "axes"), [((2, 3, 4, 5), (2,)), ((2, 3, 4, 5), (1,)), ((3, 4, 5), (1, 2))]
)
def test_groups_read_what_numpy_reduces(shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(shape))).reshape(shape)
    memory = np.ascontiguousarray(x.transpose(physical_axes(shape))).reshape(-1)
    geo = reduction_geometry(shape, axes)
    assert geo is not None
    o = np.arange(geo.outer)[:, None, None] * geo.o_stride
    g = np.arange(geo.groups)[None, :, None] * geo.g_stride
    k = np.arange(geo.n)[None, None, :] * geo.k_stride
    sums = memory[o + g + k].sum(axis=2).reshape(-1)
    want = x.sum(axis=axes, keepdims=True)
    assert np.array_equal(sums, want.transpose(physical_axes(want.shape)).reshape(-1))


def test_matrices_of_heads_as_channels_step_over_the_heads() -> None:
    # [1, heads=3, 5, 4] lies as [1, 5, 4, 3]: head h's (r, c) at (r * 4 + c) * 3 + h
    assert matrices((1, 3, 5, 4)) == Matrices(heads=3, head_stride=1, step=3)
    assert matrices((2, 5, 4)) == Matrices(heads=2, head_stride=20, step=1)
    assert matrices((1, 1, 5, 4)) == Matrices(heads=1, head_stride=0, step=1)
    assert matrices((2, 3, 5, 4)) is None  # heads over two axes
