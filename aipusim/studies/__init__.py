"""The studies users come for, each run end to end into a folder of Markdown and PNGs.

- `run_multicore_study`: 4 x Batch-1 vs batch vs cooperative vs pipeline on four cores;
- `run_power_study`: the ``mvm_utilization_limit`` trade-off (FPS, power, FPS/W, Pareto);
- `run_layers_study`: per-layer latency of the zoo models, split by unit;
- `run_sensitivity_study`: every inferred arch number moved across its plausible range;
- `run_functional_study`: every model x multicore mode x tiling depth run on data against
  the int8 reference;
- `run_corpus_study`: the corpus of trained third-party models in every multicore mode:
  compile status, FPS, latency, energy, bit-exactness, int8 accuracy against onnxruntime;
- `run_uncertainty_study`: every inferred arch number sampled jointly: p5/p50/p95 bands
  per model and figure, and the numbers driving them (RBD-FAST indices);
- `run_llm_study`: a decoder's prefill and decode over the context, the batch, the
  multicore modes and ``mvm_utilization_limit``;
- `run_validation`: the model against the published silicon figures (``docs/validation.md``).

Each writes ``README.md`` (what was run, conclusions computed from its tables, the tables,
the figures) and PNGs (the validation: its Markdown page); ``aipusim report STUDY -o DIR``
runs them.

>>> from aipusim.studies import STUDIES
>>> sorted(STUDIES)  # doctest: +NORMALIZE_WHITESPACE
['corpus', 'fidelity', 'functional', 'layers', 'llm', 'multicore', 'power',
 'sensitivity', 'uncertainty', 'validation']
"""

from aipusim.studies.common import StudyResult
from aipusim.studies.corpus import run_corpus_study
from aipusim.studies.fidelity import run_fidelity
from aipusim.studies.functional import run_functional_study
from aipusim.studies.layers import run_layers_study
from aipusim.studies.llm import run_llm_study
from aipusim.studies.multicore import run_multicore_study
from aipusim.studies.power import run_power_study
from aipusim.studies.sensitivity import run_sensitivity_study
from aipusim.studies.uncertainty import run_uncertainty_study
from aipusim.studies.validation import run_validation

#: study name -> the function that runs it.
STUDIES = {
    "multicore": run_multicore_study,
    "power": run_power_study,
    "layers": run_layers_study,
    "sensitivity": run_sensitivity_study,
    "validation": run_validation,
    "functional": run_functional_study,
    "corpus": run_corpus_study,
    "uncertainty": run_uncertainty_study,
    "fidelity": run_fidelity,
    "llm": run_llm_study,
}

__all__ = [
    "STUDIES",
    "StudyResult",
    "run_corpus_study",
    "run_fidelity",
    "run_functional_study",
    "run_layers_study",
    "run_llm_study",
    "run_multicore_study",
    "run_power_study",
    "run_sensitivity_study",
    "run_uncertainty_study",
    "run_validation",
]
