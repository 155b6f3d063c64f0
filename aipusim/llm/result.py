"""What `aipusim.llm.job.run_llm` measures: each compiled and simulated step, and the
result of a run (the report, `aipusim.llm.report`, reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Step:
    """One compiled and simulated step: the prefill, or a decode step at ``context``."""

    mode: str
    phase: str
    #: Tokens cached before the step (0 for the prefill).
    context: int
    #: New tokens per sequence (the prompt for the prefill, 1 for a decode step).
    tokens: int
    batch: int
    latency_us: float
    fps: float
    tokens_per_s: float
    energy_mj_per_token: float
    ddr_bytes_per_token: float
    roofline_tokens_per_s: float | None
    roofline_share: float | None
    #: A decode step's compile report ``kv_cache.bytes_per_token`` (the compiler's count
    #: of weights, KV read and appended, activations per step; `aipusim.compiler.decoder`)
    #: and ``kv_written``, the bytes the step writes into the cache (``kv_write`` when it
    #: grows in place, the whole present when it is copied).
    compile_bytes_per_step: dict[str, int] | None = None

    @property
    def sequence_tokens_per_s(self) -> float:
        """Tokens/s one sequence sees (one token per step latency; prefill: its prompt)."""
        return self.tokens * 1e6 / self.latency_us


@dataclass
class LlmResult:
    """What `run_llm` measured: every step (`steps`) and one summary per mode."""

    model: str
    prompt: int
    generate: int
    batch: int
    steps: list[Step]
    summary: list[dict[str, Any]]
    #: Context lengths asked for but not run, with why.
    skipped: dict[int, str]
    config_changes: dict[str, Any]
    ddr_bytes_per_s: float
    weight_bytes: int
    kv_bytes_per_token: int
    output_dir: Path | None = None
    #: The report's files in ``output_dir`` (`aipusim.llm.report.write_report`).
    files: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": self.prompt,
            "generate": self.generate,
            "batch": self.batch,
            "ddr_bytes_per_s": self.ddr_bytes_per_s,
            "weight_bytes": self.weight_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "config_changes": self.config_changes,
            "summary": self.summary,
            "steps": [
                vars(s) | {"sequence_tokens_per_s": s.sequence_tokens_per_s} for s in self.steps
            ],
            "skipped": {str(k): v for k, v in self.skipped.items()},
        }


__all__ = ["LlmResult", "Step"]
