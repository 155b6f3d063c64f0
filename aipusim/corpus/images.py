"""The real images the corpus is calibrated and evaluated on: scikit-image's sample
photographs (shipped in its wheel), or face and non-face crops of its LFW subset for the
models that classify face crops; calibrate on one half, evaluate on the other.

>>> split_images(["a", "b", "c", "d"])
(['a', 'c'], ['b', 'd'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aipusim.base.errors import CorpusError

#: scikit-image's sample photographs (shipped in its wheel): natural scenes, documents,
#: microscopy, astronomy; grey ones are given three equal channels.
PHOTOS = (
    "astronaut",
    "brick",
    "camera",
    "cell",
    "chelsea",
    "clock",
    "coffee",
    "coins",
    "colorwheel",
    "grass",
    "gravel",
    "horse",
    "hubble_deep_field",
    "immunohistochemistry",
    "logo",
    "moon",
    "page",
    "retina",
    "rocket",
    "text",
)
#: Face crops for the MTCNN refinement and output nets: faces and non-faces of scikit-image's
#: LFW subset (its first 100 images are faces, the next 100 are not), alternating.
FACES = 10


def _rgb(image: np.ndarray) -> np.ndarray:
    a = np.asarray(image)
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    elif a.dtype.kind == "f":
        a = np.clip(np.round(a * 255.0), 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.ascontiguousarray(a[:, :, :3], dtype=np.uint8)


def study_images(kind: str = "photos") -> list[tuple[str, np.ndarray]]:
    """The real images of the study as (name, HxWx3 uint8 RGB), in a fixed order.

    ``photos``: `PHOTOS`; ``faces``: `FACES` face and as many non-face crops, alternating.
    """
    try:
        import skimage.data as data
    except ImportError:
        raise CorpusError(
            "the corpus study needs scikit-image for its real images, not a missing package: "
            "pip install scikit-image"
        ) from None
    if kind == "faces":
        lfw = data.lfw_subset()
        out = []
        for i in range(FACES):
            out += [(f"face_{i:02d}", _rgb(lfw[i])), (f"nonface_{i:02d}", _rgb(lfw[100 + i]))]
        return out
    return [(name, _rgb(getattr(data, name)())) for name in PHOTOS]


def split_images(images: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Calibrate on one half, evaluate on the other: even positions, odd positions.

    >>> split_images([0, 1, 2, 3, 4])
    ([0, 2, 4], [1, 3])
    """
    return list(images[0::2]), list(images[1::2])


__all__ = ["FACES", "PHOTOS", "split_images", "study_images"]
