"""aipusim.isa: tasks, hardware tokens, binary tasklists, text form and static checks
(docs/architecture.md §4).

>>> from aipusim.isa import Barrier, Tasklist, Unit, assemble, disassemble, encode_tasklist
>>> tl = Tasklist(0, [Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=1)])
>>> encode_tasklist(assemble(disassemble(tl))) == encode_tasklist(tl)
True
"""

from aipusim.base.lazy import lazy_names

#: Public names and the module of each, imported on first use: the profiler reads traces
#: through `aipusim.isa.trace_schema` and needs none of the tasklist codecs and checks
#: (about a tenth of every ``aipusim profile`` process's imports).
_LAZY = {
    **dict.fromkeys(
        (
            "CheckReport",
            "Problem",
            "ProblemKind",
            "Severity",
            "TaskSite",
            "check_paths",
            "check_tasklists",
            "load_tasklists",
        ),
        "aipusim.isa.check",
    ),
    **dict.fromkeys(
        (
            "RECORD_BYTES",
            "check_task",
            "decode_tasks",
            "encode_tasks",
        ),
        "aipusim.isa.encoding",
    ),
    **dict.fromkeys(
        (
            "TaskTable",
            "decode_table",
            "encode_table",
        ),
        "aipusim.isa.table",
    ),
    **dict.fromkeys(
        (
            "FORMAT_VERSION",
            "HEADER_BYTES",
            "MAGIC",
            "TaskChunk",
            "Tasklist",
            "TasklistHeader",
            "decode_tasklist",
            "decode_tasklist_table",
            "encode_tasklist",
            "find_tasklists",
            "fits_l2_window",
            "iter_tasklist_chunks",
            "read_tasklist",
            "read_tasklist_header",
            "read_tasklist_table",
            "tasklist_path",
            "tasklist_size_bytes",
            "write_tasklist",
        ),
        "aipusim.isa.tasklist",
    ),
    **dict.fromkeys(
        (
            "KINDS",
            "MAX_TOKEN_REFS",
            "Barrier",
            "Direction",
            "DmaCopy",
            "DpuKind",
            "DpuOp",
            "DpuThen",
            "DwpuKind",
            "DwpuOp",
            "HostTransfer",
            "LutKind",
            "Mvm",
            "Phase",
            "Pool",
            "PostOp",
            "Task",
            "TokenRef",
            "TokenScope",
            "TokenSignal",
            "TokenWait",
            "Unit",
            "WeightLoad",
        ),
        "aipusim.isa.tasks",
    ),
    **dict.fromkeys(
        (
            "assemble",
            "disassemble",
            "format_task",
            "parse_task",
        ),
        "aipusim.isa.text",
    ),
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "FORMAT_VERSION",
    "HEADER_BYTES",
    "KINDS",
    "MAGIC",
    "MAX_TOKEN_REFS",
    "RECORD_BYTES",
    "Barrier",
    "CheckReport",
    "Direction",
    "DmaCopy",
    "DpuKind",
    "DpuOp",
    "DpuThen",
    "DwpuKind",
    "DwpuOp",
    "HostTransfer",
    "LutKind",
    "Mvm",
    "Phase",
    "Pool",
    "PostOp",
    "Problem",
    "ProblemKind",
    "Severity",
    "Task",
    "TaskChunk",
    "TaskSite",
    "TaskTable",
    "Tasklist",
    "TasklistHeader",
    "TokenRef",
    "TokenScope",
    "TokenSignal",
    "TokenWait",
    "Unit",
    "WeightLoad",
    "assemble",
    "check_paths",
    "check_task",
    "check_tasklists",
    "decode_table",
    "decode_tasklist",
    "decode_tasklist_table",
    "decode_tasks",
    "disassemble",
    "encode_table",
    "encode_tasklist",
    "encode_tasks",
    "find_tasklists",
    "fits_l2_window",
    "format_task",
    "iter_tasklist_chunks",
    "load_tasklists",
    "parse_task",
    "read_tasklist",
    "read_tasklist_header",
    "read_tasklist_table",
    "tasklist_path",
    "tasklist_size_bytes",
    "write_tasklist",
]
