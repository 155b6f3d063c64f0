"""``aipusim llm``: a decoder-only language model's prompt and generation on the chip
(`aipusim.llm`): time to first token, decode tokens/s over the context, energy and DDR
bytes per token, the share of the DDR bandwidth roofline."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from aipusim.cli.options import json_option, set_option
from aipusim.cli.report_cmd import _split_list


def _ints(values: tuple[str, ...], flag: str) -> list[int] | None:
    """Comma-separated integers (None when not given); a one-line error for other text."""
    # lazy: aipusim.base.errors is light, but the CLI's modules import nothing up front
    from aipusim.base.errors import ConfigError

    texts = _split_list(values)
    if not values:
        return None
    if not all(t.isdigit() and int(t) > 0 for t in texts):
        raise ConfigError(
            f"{flag} must be positive integers separated by commas, not {','.join(values)!r}"
        )
    return [int(t) for t in texts]


@click.command("llm")
@click.argument("model")
@click.option("--prompt", type=int, required=True, help="Prompt tokens (the prefill).")
@click.option("--generate", type=int, required=True, help="Tokens generated (decode steps).")
@click.option("--batch", type=int, default=1, show_default=True, help="Sequences at once.")
@click.option(
    "--modes",
    multiple=True,
    metavar="M1,M2,...",
    help="Multicore modes: single (one core), batch, cooperative, pipeline "
    "[default: single,batch,cooperative].",
)
@click.option(
    "--contexts",
    multiple=True,
    metavar="C1,C2,...",
    help="Context lengths (cached tokens) to measure a decode step at besides the "
    "generation's start and end [default: 128,512,2048]; --contexts 0 for none.",
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for report.md, llm.json, tokens_per_s.png and the compiled steps, "
    "replaced whole at the end (empty or an earlier llm folder) [default: ./llm_<model>].",
)
@set_option
@json_option
def llm(
    model: str,
    prompt: int,
    generate: int,
    batch: int,
    modes: tuple[str, ...],
    contexts: tuple[str, ...],
    output_dir: Path | None,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Compile and simulate decoder MODEL for a prompt and a generation.

    MODEL is a zoo decoder (llama_1b, tiny_decoder) or a folder with prefill.onnx and
    decode.onnx (the two-graph form of docs/cli.md). The prefill and the decode step at
    each context length are compiled (one compile per context: the shapes are static)
    and simulated in each multicore mode, from the defaults with --set on top. Prints
    time to first token, decode tokens/s at the start and end of the generation, energy
    and DDR bytes per token and the share of the DDR bandwidth roofline; writes
    report.md, llm.json and a plot of tokens/s against the context.

    \b
    Examples:
      aipusim llm tiny_decoder --prompt 32 --generate 16
      aipusim llm llama_1b --prompt 128 --generate 64 --set ddr_size_used=2147483648 \\
        --set ddr_size_max=2147483648
    """
    # lazy: loads numpy, onnx, pandas, simpy; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.llm.job import DEFAULT_CONTEXTS, run_llm
    from aipusim.llm.report import printout

    given = _ints(contexts, "--contexts") if contexts != ("0",) else []
    chosen = _split_list(modes) or None
    slug = Path(model).name if Path(model).is_dir() else model
    out = output_dir or Path.cwd() / f"llm_{slug}"
    check_output(out, folder=True)
    command = ["aipusim", "llm", model, "--prompt", str(prompt), "--generate", str(generate)]
    command += ["--batch", str(batch), "-o", str(out)]
    command += [a for s in overrides for a in ("--set", s)]
    if chosen:
        command += ["--modes", ",".join(chosen)]
    if given is not None:
        command += ["--contexts", ",".join(map(str, given)) or "0"]
    result = run_llm(
        model,
        prompt=prompt,
        generate=generate,
        batch=batch,
        sets=overrides,
        modes=chosen,
        contexts=DEFAULT_CONTEXTS if given is None else given,
        output_dir=out,
        progress=not as_json,
        command=shlex.join(command),
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(printout(result))
    click.echo(f"wrote {', '.join(str(f) for f in result.files)}")
