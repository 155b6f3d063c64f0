"""The ``aipusim`` group: its command list comes from `SUMMARIES` and imports no command."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from aipusim.cli.main import COMMANDS, SUMMARIES, cli


def test_every_command_has_its_own_summary() -> None:
    assert sorted(SUMMARIES) == sorted(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and not command.hidden, name
        # at every width click may truncate to, the same words as the command's own help
        for limit in range(20, 300):
            ours = click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)
            assert ours == click.Command(name, help=command.help).get_short_help_str(limit)
        # and the command list shows it whole
        assert command.get_short_help_str(20) == SUMMARIES[name]


@pytest.mark.parametrize("columns", ["60", "200"])
def test_help_lists_the_commands_as_click_would(columns: str) -> None:
    ctx = click.Context(cli, terminal_width=int(columns))
    formatter = ctx.make_formatter()
    cli.format_commands(ctx, formatter)
    ours = formatter.getvalue()
    formatter = ctx.make_formatter()
    click.Group.format_commands(cli, ctx, formatter)
    assert ours == formatter.getvalue()
    assert "bench " in ours and "zoo " in ours
    assert "..." not in ours


def test_help_imports_no_command_nor_pandas() -> None:
    code = (
        "import sys; from aipusim.cli.main import main; main(['--help']); "
        "print(sorted(m for m in sys.modules if m.endswith('_cmd') or "
        "m.split('.')[0] in ('pandas', 'matplotlib', 'numba', 'numpy')), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in out.stdout
    assert out.stderr.strip() == "[]"
