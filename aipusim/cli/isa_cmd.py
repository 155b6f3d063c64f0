"""``aipusim isa``: disassemble, assemble, check and inspect tasklist files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from aipusim.base.errors import ConfigError, TasklistError
from aipusim.cli.options import arch_option, json_option, load_arch_option

#: Most frames `isa check` runs: the abstract execution repeats the same frame, so more
#: only costs time and memory.
MAX_CHECK_FRAMES = 1000


@click.group()
def isa() -> None:
    """Tasklists (``core<N>.tasklist``): text form, static checks, size and contents."""


@isa.command("disasm")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), default=None, help="Write the text here."
)
def disasm(file: Path, output: Path | None) -> None:
    """Print FILE as text, one task per line (``aipusim isa asm`` rebuilds the bytes).

    Example: ``aipusim isa disasm compiled_model/core0.tasklist -o core0.txt``
    """
    # lazy: loads numpy; kept off the CLI's start-up
    from aipusim.base.fileio import check_output, write_text
    from aipusim.isa import disassemble, read_tasklist

    if output is not None:
        check_output(output)
    text = disassemble(read_tasklist(file))
    if output is None:
        click.echo(text, nl=False)
    else:
        write_text(output, text)


@isa.command("asm")
@click.argument("text", type=click.Path(path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="Tasklist to write."
)
@json_option
def asm(text: Path, output: Path, as_json: bool) -> None:
    """Assemble the text form TEXT into a binary tasklist. Written into a compiled folder,
    the tasklist's CRC32 in its ``model.json`` is updated, so the edited program runs.

    Example: ``aipusim isa asm core0.txt -o compiled_model/core0.tasklist``
    """
    # lazy: loads numpy; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.isa import assemble, write_tasklist
    from aipusim.isa.program import record_crc

    check_output(output)
    if not text.is_file():
        raise TasklistError(f"TEXT must be an existing text file, not {str(text)!r}")
    try:
        source = text.read_text(encoding="utf-8")
    except OSError as exc:
        raise TasklistError(f"cannot read {str(text)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TasklistError(f"byte {exc.start}: {str(text)!r} must be UTF-8 text") from None
    tasklist = assemble(source)
    size = write_tasklist(output, tasklist)
    program = record_crc(output)
    result: dict[str, Any] = {"path": str(output), "core": tasklist.core_id}
    result |= {"tasks": len(tasklist.tasks), "size_bytes": size}
    result["model_json_updated"] = str(program) if program is not None else None
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"wrote {output}: core {tasklist.core_id}, {len(tasklist.tasks)} tasks, {size} bytes"
        )
        if program is not None:
            click.echo(f"updated the CRC32 of {output.name} in {program}")


@isa.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--frames", default=2, show_default=True, help="Frames of the abstract execution.")
@arch_option
@json_option
def check(paths: tuple[Path, ...], frames: int, arch_path: Path | None, as_json: bool) -> None:
    """Check tasklists that run together: token ranges and balance, barriers, deadlocks.

    PATHS are tasklist files or compiled-model folders (all their ``core<N>.tasklist``).
    Global tokens and barriers are matched across all of them. Exits non-zero on errors.

    Example: ``aipusim isa check compiled_model/``
    """
    # lazy: aipusim.isa loads numpy; kept off the CLI's start-up
    from aipusim.isa import check_paths

    if not 1 <= frames <= MAX_CHECK_FRAMES:
        raise ConfigError(
            f"--frames must be an integer 1-{MAX_CHECK_FRAMES} (frames of the abstract "
            f"execution; 2 already exercise the per-frame balance), not {frames}"
        )
    report = check_paths(paths, load_arch_option(arch_path), frames)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(report.format())
    if not report.ok:
        first = report.errors[0]
        raise TasklistError(
            f"{len(report.errors)} error(s) in the tasklists of cores "
            f"{', '.join(map(str, report.cores))}; first: {first.message}"
        )


@isa.command("info")
@click.argument("file", type=click.Path(path_type=Path))
@arch_option
@json_option
def info(file: Path, arch_path: Path | None, as_json: bool) -> None:
    """Header, task counts per unit, kind and phase, size, and whether FILE fits the
    per-core L2 tasklist window without streaming.

    Example: ``aipusim isa info compiled_model/core0.tasklist --json``
    """
    # lazy: aipusim.isa loads numpy; kept off the CLI's start-up
    from aipusim.isa import fits_l2_window, read_tasklist_header, read_tasklist_table

    header = read_tasklist_header(file)
    # Columns, not Task objects: the same checks as read_tasklist, counted with numpy.
    _, table = read_tasklist_table(file)
    arch = load_arch_option(arch_path)
    window = arch.l2.tasklist_reserved_bytes_per_core
    record: dict[str, Any] = {
        "path": str(file),
        "core": header.core_id,
        "version": header.version,
        "tasks": header.task_count,
        "record_bytes": header.record_bytes,
        "string_table_offset": header.string_table_offset,
        "body_crc32": f"0x{header.body_crc32:08x}",
        "size_bytes": header.file_bytes,
        "l2_window_bytes": window,
        "fits_l2_window": fits_l2_window(header.file_bytes, arch),
        "layers": len(set(table.strings)),
        "by_unit": table.count_by("unit"),
        "by_kind": table.count_by("opcode"),
        "by_phase": table.count_by("phase"),
    }
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    fits = "fits" if record["fits_l2_window"] else "does not fit (streamed)"
    lines = [
        f"{file}: tasklist v{header.version}, core {header.core_id}, {header.task_count} tasks "
        f"of {header.record_bytes} bytes, {record['layers']} layers",
        f"size {header.file_bytes} bytes: {fits} in the {window}-byte L2 tasklist window",
        f"body CRC32 {record['body_crc32']}, string table at byte {header.string_table_offset}",
    ]
    for title in ("by_unit", "by_kind", "by_phase"):
        counts = ", ".join(f"{k} {v}" for k, v in record[title].items()) or "-"
        lines.append(f"{title.replace('_', ' ')}: {counts}")
    click.echo("\n".join(lines))
