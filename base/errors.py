"""The exception hierarchy of aipusim.

Errors are part of the API: every error a user can cause by bad input is an
`AipuSimError` subclass whose message names the offending thing and what would be
valid, e.g. ``aipu_cores_used must be an integer 1-4, not 5``. The CLI prints the
message on one line and exits with `exit_code`; it never shows a traceback for them.

Example:
    >>> from aipusim.base.errors import ConfigError, AipuSimError
    >>> issubclass(ConfigError, AipuSimError)
    True
"""

from __future__ import annotations


class AipuSimError(Exception):
    """Root of every error aipusim raises on purpose."""

    #: Process exit status the CLI uses for this error (2: bad input, 1: run failure).
    exit_code: int = 2
    #: Status code written to ``compilation_report.json`` when this error stops a compile
    #: (the names of the vendor compiler CLI reference).
    status: str = "INITIALIZE_CLI_ERROR"


class ConfigError(AipuSimError, ValueError):
    """A compiler configuration, arch description or CLI option is invalid."""


class ArchError(ConfigError):
    """The hardware description (``arch/*.toml``) is malformed or inconsistent."""


class InvalidArgument(AipuSimError, ValueError):
    """An argument of the Python API has a wrong type or value (``inputs="str"``,
    ``output_dir=5``, ``model("hello")``); it is a `ValueError` too."""


class FileAccessError(AipuSimError, OSError):
    """A file or folder cannot be read or written: permissions, a missing folder, a full
    disk, a name over 255 bytes, a busy folder. The message names the path and the reason;
    ``errno`` and ``filename`` are those of the operating system's error.

    >>> err = FileAccessError(13, "cannot write 'out/x.csv': Permission denied", "out/x.csv")
    >>> str(err), err.errno, isinstance(err, PermissionError), isinstance(err, OSError)
    ("cannot write 'out/x.csv': Permission denied", 13, False, True)
    """

    def __init__(self, errno: int | None, message: str, filename: str | None = None) -> None:
        super().__init__(errno, message, filename)

    def __str__(self) -> str:
        return str(self.strerror)


class ResourceLimitError(AipuSimError):
    """The work asked for would need more memory (or time) than the machine has; the message
    gives the estimate, what it is made of, and what would fit."""


class OnnxImportError(AipuSimError):
    """An ONNX model cannot be read, checked or given static shapes."""

    status = "ONNX_GRAPH_CLEANER_ERROR"


class DecoderGraphError(OnnxImportError):
    """A decoder's prefill and decode graphs are not the two-graph form the language-model
    flow takes (`aipusim.compiler.decoder`)."""


class UnsupportedOperatorError(AipuSimError):
    """One or more operators cannot run on any unit of the AIPU."""

    status = "LOWER_FRONTEND_ERROR"


class QuantizationError(AipuSimError):
    """Calibration or quantization failed (bad image set, transform script, ...)."""

    status = "QTOOLS_ERROR"


class TilingError(AipuSimError):
    """An operator cannot be tiled into the L1 budget."""

    status = "LOWER_MIDEND_ERROR"


class MemoryPlanError(AipuSimError):
    """Buffers cannot be placed within the memory pools."""

    status = "LOWER_TIR_ERROR"


class TasklistError(AipuSimError):
    """A tasklist (binary or text) is malformed; the message carries the byte offset."""

    status = "TIR_TO_RUNTIME_ERROR"


class CompilerInternalError(AipuSimError):
    """A compiler pass failed on something other than bad input (a bug in aipusim): the
    message names the pass; the traceback is in ``compilation_log.txt``."""

    exit_code = 1
    status = "INTERNAL_ERROR"


class SimulationError(AipuSimError):
    """The simulator cannot run the given tasklists."""

    exit_code = 1


class DeadlockError(SimulationError):
    """Simulation stopped with tasks still waiting on tokens; names the tasks and tokens."""


class HazardError(SimulationError):
    """Functional execution found two tasks touching the same bytes (one of them writing)
    that nothing orders: queue order, tokens, barriers, phases and host transfers; or token
    units signalled and never waited for. Names both tasks, the pool, the range, the
    buffer."""


class FunctionalMismatch(SimulationError):
    """A functional run's outputs differ from the int8 reference's (``--check``): the
    message counts the differing elements and names the first differing layer, element and
    the tasks that wrote it."""

    status = "FUNCTIONAL_MISMATCH"


class TraceFormatError(AipuSimError):
    """A profiling trace is malformed."""


class ZooError(AipuSimError):
    """An unknown zoo model name or bad zoo builder argument."""


class CorpusError(AipuSimError):
    """A bad corpus manifest, an unknown corpus model, a corpus not fetched, or a fetched
    model whose sha256 differs from the manifest's."""


__all__ = [
    "AipuSimError",
    "ArchError",
    "CompilerInternalError",
    "ConfigError",
    "CorpusError",
    "DeadlockError",
    "DecoderGraphError",
    "FileAccessError",
    "FunctionalMismatch",
    "HazardError",
    "InvalidArgument",
    "MemoryPlanError",
    "OnnxImportError",
    "QuantizationError",
    "ResourceLimitError",
    "SimulationError",
    "TasklistError",
    "TilingError",
    "TraceFormatError",
    "UnsupportedOperatorError",
    "ZooError",
]
