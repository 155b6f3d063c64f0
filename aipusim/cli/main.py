"""Entry point of the ``aipusim`` command: a click group whose subcommands load lazily.

Each subcommand lives in its own module of this package (``aipusim/cli/<name>_cmd.py``) and
is imported only when used, so ``aipusim --help`` stays fast and a heavy dependency of one
command (numba, matplotlib) never slows the others.
"""

from __future__ import annotations

import importlib
import logging
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
    """Run the CLI; an `AipuSimError` becomes one line on stderr and a non-zero exit."""
    try:
        # With standalone_mode=False click returns the code of `ctx.exit(code)` (and the
        # command's own return value, None for ours) instead of exiting the process.
        code = cli.main(args=argv, prog_name="aipusim", standalone_mode=False)
    except AipuSimError as exc:
        click.echo(f"aipusim: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aipusim: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
