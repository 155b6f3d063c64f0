"""The compiled program: what ``compiled_model/model.json`` says about how to run tasklists.

The compiler writes it (with one ``core<N>.tasklist`` per logical core), the simulator and the
runtime read it. It names the multicore mode, the runtime knobs that change execution
(frequency, hardware tokens, double buffering, tasklist streaming, profiling levels), and one
*instance template*: the logical cores of one compiled instance, their tasklist files and the
bytes that cross the host link per frame. The runtime places ``replicas`` copies of the
template on the chip (4 for a 1-core model at ``resources_used`` 0.25).

>>> inst = Instance(cores=(0,), tasklists=("core0.tasklist",), input_bytes=150528,
...                 output_bytes=1000)
>>> prog = Program(model="tiny", multicore_mode=MulticoreMode.MULTIPROCESS,
...                aipu_cores_used=1, resources_used=0.25, instance=inst)
>>> prog.replicas
4
>>> Program.from_json(prog.to_json()) == prog
True
"""

from __future__ import annotations

import enum
import json
import math
import zlib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aipusim.base.errors import ConfigError, TasklistError
from aipusim.base.fileio import write_text
from aipusim.isa.image import MemoryMap
from aipusim.isa.tasks import Pool, Task

if TYPE_CHECKING:
    from aipusim.isa.table import TaskTable

#: Version of the ``model.json`` layout; bump on an incompatible change.
PROGRAM_FORMAT_VERSION = 2
#: File name of the program inside a compiled directory.
PROGRAM_FILE = "model.json"


class MulticoreMode(enum.StrEnum):
    """How the cores share work (the compiler's ``multicore_mode``)."""

    MULTIPROCESS = "multiprocess"
    MULTITHREAD = "multithread"
    BATCH = "batch"
    COOPERATIVE = "cooperative"
    PIPELINE = "pipeline"


#: The share of on-chip memory ``resources_used`` is counted in (the reference: multiples of
#: 0.25); every core of an instance needs one share.
RESOURCE_QUANTUM = 0.25


def check_resources_used(resources_used: float, aipu_cores_used: int) -> None:
    """The one check of ``resources_used`` (the compiler's config and ``model.json`` both
    call it): a multiple of 0.25 in (0, 1], and at least 0.25 for each core of the instance.

    >>> check_resources_used(1.0, 4)
    >>> check_resources_used(0.5, 4)
    Traceback (most recent call last):
    ...
    aipusim.base.errors.ConfigError: resources_used must be at least 0.25 per core \
(aipu_cores_used = 4 needs >= 1.0), not 0.5
    """
    quarters = resources_used / RESOURCE_QUANTUM
    if not 0 < resources_used <= 1 or abs(quarters - round(quarters)) > 1e-9:
        raise ConfigError(
            f"resources_used must be a multiple of {RESOURCE_QUANTUM} in (0, 1], "
            f"not {resources_used}"
        )
    needed = RESOURCE_QUANTUM * aipu_cores_used
    if resources_used < needed - 1e-9:
        raise ConfigError(
            f"resources_used must be at least {RESOURCE_QUANTUM} per core "
            f"(aipu_cores_used = {aipu_cores_used} needs >= {needed}), not {resources_used}"
        )


def tasklist_file_name(core: int) -> str:
    """File name of a logical core's tasklist: ``core0.tasklist``."""
    return f"core{core}.tasklist"


@dataclass(frozen=True)
class Instance:
    """One compiled instance (the template the runtime replicates).

    ``cores`` are logical core ids 0..n-1; ``tasklists[i]`` is the file of ``cores[i]``.
    ``input_bytes`` / ``output_bytes`` cross the host link per frame *per core* in batch mode
    (each core runs its own frame of the batch) and per frame of the instance otherwise.
    ``input_pool`` / ``output_pool`` are where the host's data lands on the card.
    """

    cores: tuple[int, ...]
    tasklists: tuple[str, ...]
    input_bytes: int
    output_bytes: int
    input_pool: Pool = Pool.DDR
    output_pool: Pool = Pool.DDR

    def __post_init__(self) -> None:
        if not self.cores:
            raise ConfigError("instance cores must be a non-empty list of core ids, not []")
        if list(self.cores) != list(range(len(self.cores))):
            raise ConfigError(
                f"instance cores must be the logical ids 0..{len(self.cores) - 1}, "
                f"not {list(self.cores)}"
            )
        if len(self.tasklists) != len(self.cores):
            raise ConfigError(
                f"instance tasklists must name one file per core ({len(self.cores)}), "
                f"not {len(self.tasklists)}"
            )
        for name, value in (("input_bytes", self.input_bytes), ("output_bytes", self.output_bytes)):
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"instance {name} must be an integer >= 0, not {value!r}")


def effective_mode(multicore_mode: str, aipu_cores_used: int) -> MulticoreMode:
    """The mode an instance really runs in: a Batch-1 mode (multiprocess, multithread) on
    several cores runs as a batch (each core its own frame slot); any other mode as itself.

    >>> effective_mode("multithread", 4), effective_mode("multiprocess", 1)
    (<MulticoreMode.BATCH: 'batch'>, <MulticoreMode.MULTIPROCESS: 'multiprocess'>)
    """
    mode = MulticoreMode(multicore_mode)
    batch1 = (MulticoreMode.MULTIPROCESS, MulticoreMode.MULTITHREAD)
    if mode in batch1 and aipu_cores_used > 1:
        return MulticoreMode.BATCH
    return mode


def frames_per_start(multicore_mode: str, aipu_cores_used: int) -> int:
    """Frames one start of an instance processes: one per core when it runs as a batch
    (`effective_mode`), else one.

    >>> frames_per_start("batch", 4), frames_per_start("cooperative", 4)
    (4, 1)
    >>> frames_per_start("multithread", 4), frames_per_start("multiprocess", 1)
    (4, 1)
    """
    if effective_mode(multicore_mode, aipu_cores_used) is MulticoreMode.BATCH:
        return aipu_cores_used
    return 1


@dataclass(frozen=True)
class Program:
    """Everything the simulator needs besides the tasklists themselves.

    ``replicas`` defaults to the runtime's rule
    ``min(chip_cores // aipu_cores_used, floor(1 / resources_used))`` for the Batch-1 modes
    (multiprocess, multithread) and 1 for the multi-core modes, unless given.
    """

    model: str
    multicore_mode: MulticoreMode
    aipu_cores_used: int
    resources_used: float
    instance: Instance
    frequency_hz: int = 800_000_000
    use_hw_tokens: bool = True
    double_buffer: bool = True
    stream_tasklist: bool = True
    mvm_utilization_limit: float = 1.0
    profiling_levels: tuple[str, ...] = ()
    chip_cores: int = 4
    replicas: int = 0
    #: The complete program's memory (constants image, I/O buffers, placed tensors); None
    #: for a timing-only program (hand-written, or compiled from a float graph).
    memory: MemoryMap | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "multicore_mode", MulticoreMode(self.multicore_mode))
        object.__setattr__(self, "profiling_levels", tuple(self.profiling_levels))
        if not isinstance(self.aipu_cores_used, int) or not (
            1 <= self.aipu_cores_used <= self.chip_cores
        ):
            raise ConfigError(
                f"aipu_cores_used must be an integer 1-{self.chip_cores}, "
                f"not {self.aipu_cores_used!r}"
            )
        if len(self.instance.cores) != self.aipu_cores_used:
            raise ConfigError(
                f"instance cores must number aipu_cores_used={self.aipu_cores_used}, "
                f"not {len(self.instance.cores)}"
            )
        check_resources_used(self.resources_used, self.aipu_cores_used)
        if not (0.125 <= self.mvm_utilization_limit <= 1.0):
            raise ConfigError(
                f"mvm_utilization_limit must be in [0.125, 1.0], not {self.mvm_utilization_limit}"
            )
        if not isinstance(self.frequency_hz, int) or self.frequency_hz <= 0:
            raise ConfigError(f"frequency_hz must be a positive integer, not {self.frequency_hz}")
        if self.replicas == 0:
            object.__setattr__(self, "replicas", self.default_replicas())
        if not (1 <= self.replicas * self.aipu_cores_used <= self.chip_cores):
            raise ConfigError(
                f"replicas x aipu_cores_used must fit the {self.chip_cores} cores, not "
                f"{self.replicas} x {self.aipu_cores_used}"
            )

    def default_replicas(self) -> int:
        """How many copies the runtime places on the chip."""
        if self.multicore_mode not in (MulticoreMode.MULTIPROCESS, MulticoreMode.MULTITHREAD):
            return 1
        by_cores = self.chip_cores // self.aipu_cores_used
        by_memory = math.floor(1 / self.resources_used + 1e-9)
        return max(1, min(by_cores, by_memory))

    @property
    def frames_per_start(self) -> int:
        """Frames one start of the instance processes (a batch runs one per core)."""
        return frames_per_start(self.multicore_mode, self.aipu_cores_used)

    def with_overrides(self, **changes: Any) -> Program:
        """A copy with runtime knobs changed (``frequency_hz``, ``double_buffer``, ...)."""
        known = {f.name for f in fields(self)}
        for key in changes:
            if key not in known:
                raise ConfigError(
                    f"program key must be one of {', '.join(sorted(known))}, not {key!r}"
                )
        if "replicas" not in changes and (
            "multicore_mode" in changes
            or "resources_used" in changes
            or "aipu_cores_used" in changes
        ):
            changes["replicas"] = 0
        return replace(self, **changes)

    # -- JSON -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        # (the memory map is left out of asdict: it has its own to_dict, and converting it
        # field by field first was most of the time of writing model.json)
        data = asdict(replace(self, memory=None))
        data["memory"] = self.memory.to_dict() if self.memory is not None else None
        data["instance"]["cores"] = list(self.instance.cores)
        data["instance"]["tasklists"] = list(self.instance.tasklists)
        data["profiling_levels"] = list(self.profiling_levels)
        return {"format": "aipusim-program", "version": PROGRAM_FORMAT_VERSION, **data}

    def to_json(self) -> str:
        """Indented, key-ordered JSON (``model.json``)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "model.json") -> Program:
        if data.get("format") != "aipusim-program":
            raise ConfigError(
                f"{source}: format must be 'aipusim-program', not {data.get('format')!r}"
            )
        if data.get("version") != PROGRAM_FORMAT_VERSION:
            raise ConfigError(
                f"{source}: version must be {PROGRAM_FORMAT_VERSION}, not {data.get('version')!r}"
            )
        body = {k: v for k, v in data.items() if k not in ("format", "version")}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ConfigError(
                f"{source}: key must be one of {', '.join(sorted(known))}, not {unknown[0]!r}"
            )
        try:
            inst = dict(body.pop("instance"))
            inst["cores"] = tuple(inst["cores"])
            inst["tasklists"] = tuple(inst["tasklists"])
            for key in ("input_pool", "output_pool"):
                if key in inst:
                    inst[key] = Pool(inst[key])
            instance = Instance(**inst)
            memory = body.pop("memory", None)
            if memory is not None:
                memory = MemoryMap.from_dict(memory)
            return cls(instance=instance, memory=memory, **body)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"{source}: malformed program: {exc}") from None

    @classmethod
    def from_json(cls, text: str, source: str = "model.json") -> Program:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{source} is corrupt: it must be JSON, not malformed text ({exc})"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source} is corrupt: it must be a JSON object, not {type(data).__name__}"
            )
        return cls.from_dict(data, source)


def read_program(path: str | Path) -> Program:
    """Read a ``model.json`` file; bytes that are not UTF-8 JSON make a `ConfigError` that
    names the file as corrupt (a flipped byte must not surface as a decoding traceback)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is corrupt: it must be UTF-8 JSON, not undecodable bytes "
            f"(byte {exc.start} is {data[exc.start]:#04x})"
        ) from None
    return Program.from_json(text, str(path))


def save_program(program: Program, compiled_dir: str | Path) -> Path:
    """Write ``model.json`` into ``compiled_dir``; returns its path."""
    path = Path(compiled_dir) / PROGRAM_FILE
    write_text(path, program.to_json())
    return path


def record_crc(file: str | Path) -> Path | None:
    """When ``file`` lies in a compiled folder whose ``model.json`` lists its CRC32 (a
    tasklist edited by hand and assembled back), record the file's new CRC there; returns
    the updated ``model.json`` (None: no compiled folder lists the file)."""
    file = Path(file)
    path = file.parent / PROGRAM_FILE
    if not path.is_file():
        return None
    program = read_program(path)
    crcs = dict(program.extra.get("crc32", {}))
    if file.name not in crcs:
        return None
    crcs[file.name] = zlib.crc32(file.read_bytes())
    extra = {**program.extra, "crc32": crcs}
    return save_program(replace(program, extra=extra), file.parent)


#: Bytes of a file read at once to check its CRC.
CRC_BLOCK_BYTES = 16 << 20


def verify_crcs(folder: Path, program: Program) -> None:
    """Check the CRC32 that ``model.json`` records for every file of a compiled folder.

    Raises `TasklistError` naming the first file whose content changed (or is missing).
    """
    for name, expected in sorted(program.extra.get("crc32", {}).items()):
        file = folder / name
        if not file.is_file():
            raise TasklistError(f"{name} must exist in {folder} (model.json lists its CRC)")
        actual = 0
        with open(file, "rb") as fh:  # in blocks: constants.bin of llama_1b is 1.3 GB
            for block in iter(lambda: fh.read(CRC_BLOCK_BYTES), b""):
                actual = zlib.crc32(block, actual)
        if actual != expected:
            raise TasklistError(
                f"{name} must have CRC32 {expected:#010x} as recorded in model.json, "
                f"not {actual:#010x}: the file changed after compilation"
            )


def _tasklist_files(compiled_dir: str | Path) -> tuple[Program, dict[int, Path]]:
    """``model.json`` of a compiled directory and the checked path of each core's tasklist."""
    folder = Path(compiled_dir)
    path = folder / PROGRAM_FILE
    if not path.is_file():
        raise ConfigError(f"compiled_dir must contain {PROGRAM_FILE}, not be without it: {folder}")
    program = read_program(path)
    if program.extra.get("crc_check"):
        verify_crcs(folder, program)
    files: dict[int, Path] = {}
    for core, name in zip(program.instance.cores, program.instance.tasklists, strict=True):
        file = (folder / name).resolve()
        if folder.resolve() not in file.parents:
            raise ConfigError(f"tasklist file must lie inside {folder}, not {name!r}")
        if not file.is_file():
            raise TasklistError(f"tasklist file of core {core} is missing: {file}")
        files[core] = file
    return program, files


def load_program(compiled_dir: str | Path) -> tuple[Program, dict[int, list[Task]]]:
    """Read ``model.json`` and every core's tasklist of a compiled directory.

    Returns the program and ``{logical core: tasks}``. A missing file is a `ConfigError`;
    a malformed tasklist a `TasklistError` (from the tasklist reader), and so is a file whose
    CRC differs from the one ``model.json`` records when the program says ``crc_check``.
    """
    from aipusim.isa.tasklist import read_tasklist

    program, files = _tasklist_files(compiled_dir)
    return program, {core: list(read_tasklist(file).tasks) for core, file in files.items()}


def load_program_tables(compiled_dir: str | Path) -> tuple[Program, dict[int, TaskTable]]:
    """`load_program` with each tasklist as columns (`aipusim.isa.table.TaskTable`): the
    same checks and errors, no `Task` object per task (what the simulator runs from)."""
    from aipusim.isa.tasklist import read_tasklist_table

    program, files = _tasklist_files(compiled_dir)
    return program, {core: read_tasklist_table(file)[1] for core, file in files.items()}
