"""Entry point of the ``aipusim`` command: a click group whose subcommands load lazily.

Each subcommand lives in its own module of this package (``aipusim/cli/<name>_cmd.py``) and
is imported only when used, so ``aipusim --help`` stays fast and a heavy dependency of one
command (numba, matplotlib) never slows the others.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys

import click

from aipusim.base import __version__
from aipusim.base.errors import AipuSimError

#: subcommand name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "arch": "aipusim.cli.arch_cmd:arch",
    "bench": "aipusim.cli.bench_cmd:bench",
    "compile": "aipusim.cli.compile_cmd:compile_command",
    "config": "aipusim.cli.config_cmd:config",
    "isa": "aipusim.cli.isa_cmd:isa",
    "sweep": "aipusim.cli.sweep_cmd:sweep",
    "sweep-report": "aipusim.cli.sweep_cmd:sweep_report",
    "profile": "aipusim.cli.profile_cmd:profile",
    "report": "aipusim.cli.report_cmd:report",
    "run": "aipusim.cli.run_cmd:run",
    "simulate": "aipusim.cli.simulate_cmd:simulate",
    "zoo": "aipusim.cli.zoo_cmd:zoo",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when it is invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
        return _fail(str(exc), exc.exit_code)
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
