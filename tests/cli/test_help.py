"""--help says what is valid: enumerated values, the common --set keys, the base config."""

from __future__ import annotations

import pytest

from aipusim.cli.main import main
from aipusim.compiler.config import MulticoreMode, QuantizationScheme


@pytest.mark.parametrize("command", ["run", "compile", "sweep"])
def test_help_lists_the_common_set_keys_and_the_base_config(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Base config:" in out and "--generate-" in out  # (wrapped at its hyphen)
    assert "zoo model" in out and "aipusim config show" in out
    for mode in MulticoreMode:
        assert mode.value in out
    for scheme in QuantizationScheme:
        assert scheme.value in out
    assert "aipu_cores_used an integer 1-4" in out
    assert "B, PB, PE, K, M, T" in out


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_levels_say_what_they_record(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "B frames, PB/PE layer begin/end, K compute tasks, M memory transfers, T token" in out


def test_choices_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--help"]) == 0
    out = capsys.readouterr().out
    assert "[NCHW|NHWC]" in out and "[RGB|BGR|GRAY]" in out and "[PIL|OPENCV]" in out
    assert main(["profile", "--help"]) == 0
    out = capsys.readouterr().out
    assert "[layer|unit|frame|core|bandwidth|power]" in out and "[value|time]" in out


def test_help_is_plain_text_and_the_command_list_is_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from aipusim.cli.main import COMMANDS, SUMMARIES

    for command in sorted(COMMANDS):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "``" not in out, command  # no RST markup
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split("Commands:")[1].split())
    assert "..." not in out
    for summary in SUMMARIES.values():
        assert " ".join(summary.replace("``", "").split()) in out
