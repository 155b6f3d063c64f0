"""Fingerprints of compiled outputs, to prove a speed-up changed nothing the compiler writes.

A fingerprint is the SHA-256 of every file of ``compiled_model/`` and ``quantized_model/``
(JSON with its run-dependent fields taken out: the random ``model_id``, pass timings and
the CRC of the report that holds them), of every array of the quantized model, and of the
int8 reference outputs (`run_int8`) on the held-aside calibration samples. Run it with
the Python of each code tree to compare, on the same ONNX files, then compare the two:

    OLD/.venv/bin/python tests/compile_fingerprint.py run -o old.json --models resnet50
    .venv/bin/python tests/compile_fingerprint.py run -o new.json --models resnet50
    .venv/bin/python tests/compile_fingerprint.py compare old.json new.json

``run`` exports each zoo model once into ``--onnx-dir`` (reused when present, so both
trees compile the very same file) and compiles it on one core and on four in every
multicore mode, and on one core with the two other quantization schemes. ``compare``
prints every difference and exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

#: (label, extra CLI flags) of every compile: one core, then four cores in each mode, then
#: one core with the other two quantization schemes (their observers differ).
MODES: dict[str, list[str]] = {
    "1core": ["--aipu-cores", "1"],
    **{
        f"4core-{m}": ["--aipu-cores", "4", "--set", f"multicore_mode={m}"]
        for m in ("multiprocess", "batch", "cooperative", "pipeline", "multithread")
    },
    **{
        f"1core-{s}": ["--aipu-cores", "1", "--set", f"quantization_scheme={s}"]
        for s in ("per_tensor_min_max", "hybrid_per_tensor_per_channel")
    },
}
#: JSON keys whose values depend on the run, not on the compiled result.
RUN_DEPENDENT_KEYS = frozenset({"model_id", "pass_seconds", "timing_s"})


def _strip(value: Any, ignored: frozenset[str]) -> Any:
    if isinstance(value, dict):
        out = {k: _strip(v, ignored) for k, v in value.items() if k not in ignored}
        crc = out.get("crc32")
        if isinstance(crc, dict):
            # report.json holds the pass timings, so its CRC moves with them
            out["crc32"] = {k: v for k, v in crc.items() if k != "report.json"}
        return out
    if isinstance(value, list):
        return [_strip(v, ignored) for v in value]
    return value


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_hashes(folder: Path, ignored: frozenset[str] = RUN_DEPENDENT_KEYS) -> dict[str, str]:
    """Relative path -> SHA-256 of each file under ``folder`` (JSON without ``ignored``
    keys; an ``.npz`` by the name, dtype, shape and bytes of each array)."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = str(path.relative_to(folder))
        if path.suffix == ".json":
            data = _strip(json.loads(path.read_text()), ignored)
            out[rel] = _sha(json.dumps(data, sort_keys=True).encode())
        elif path.suffix == ".npz":
            with np.load(io.BytesIO(path.read_bytes())) as npz:
                h = hashlib.sha256()
                for key in sorted(npz.files):
                    arr = npz[key]
                    h.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
                    h.update(np.ascontiguousarray(arr).tobytes())
            out[rel] = h.hexdigest()
        else:
            out[rel] = _sha(path.read_bytes())
    return out


def int8_outputs_hash(manifest: Path, onnx_path: Path) -> str:
    """SHA-256 of the int8 reference outputs on the held-aside samples of the default
    calibration data (the bundled photographs for an image input, else seeded random)."""
    import onnx

    from aipusim.compiler.importer import import_model
    from aipusim.compiler.quant import calibration_for, read_quantized_model, run_int8

    graph = import_model(onnx.load(str(onnx_path)))
    qgraph = read_quantized_model(manifest)
    h = hashlib.sha256()
    for sample in calibration_for(graph).held_aside:
        for name, value in sorted(run_int8(qgraph, sample).items()):
            arr = np.ascontiguousarray(value)
            h.update(f"{name}:{arr.dtype.str}:{arr.shape}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


def fingerprint(out: Path, onnx_path: Path, ignored: frozenset[str]) -> dict[str, str]:
    """The fingerprint of one compile output folder."""
    result = {"status": json.loads((out / "compilation_report.json").read_text())["status"]}
    for sub in ("compiled_model", "quantized_model"):
        result.update({f"{sub}/{k}": v for k, v in file_hashes(out / sub, ignored).items()})
    result["int8_outputs"] = int8_outputs_hash(
        out / "quantized_model" / "quantized_model_manifest.json", onnx_path
    )
    return result


def run(models: list[str], modes: list[str], onnx_dir: Path, ignored: frozenset[str]) -> dict:
    import onnx

    from aipusim import zoo
    from aipusim.cli.main import main

    onnx_dir.mkdir(parents=True, exist_ok=True)
    prints: dict[str, dict[str, dict[str, str]]] = {}
    for name in models:
        path = onnx_dir / f"{name}.onnx"
        if not path.is_file():
            onnx.save(zoo.build(name), path)
        prints[name] = {}
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="fingerprint-") as tmp:
                out = Path(tmp) / "out"
                status = main(["compile", "-i", str(path), "-o", str(out), *MODES[mode]])
                if status != 0:
                    prints[name][mode] = {"status": f"exit {status}"}
                else:
                    prints[name][mode] = fingerprint(out, path, ignored)
            print(f"{name} {mode}: {prints[name][mode]['status']}", file=sys.stderr, flush=True)
    return prints


def compare(old: dict, new: dict) -> list[str]:
    """One line per difference between two fingerprint files."""
    diffs = []
    for model in sorted(set(old) | set(new)):
        a, b = old.get(model, {}), new.get(model, {})
        for mode in sorted(set(a) | set(b)):
            fa, fb = a.get(mode, {}), b.get(mode, {})
            for key in sorted(set(fa) | set(fb)):
                if fa.get(key) != fb.get(key):
                    diffs.append(f"{model} {mode} {key}: {fa.get(key)} != {fb.get(key)}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="compile zoo models and write their fingerprints")
    p_run.add_argument("-o", "--output", type=Path, required=True)
    p_run.add_argument("--models", nargs="*", default=None, help="default: the whole zoo")
    p_run.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    p_run.add_argument("--onnx-dir", type=Path, default=Path("fingerprint-onnx"))
    p_run.add_argument(
        "--ignore-key", action="append", default=[], help="a JSON key left out (repeatable)"
    )
    p_cmp = sub.add_parser("compare", help="compare two fingerprint files")
    p_cmp.add_argument("old", type=Path)
    p_cmp.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        from aipusim import zoo

        models = args.models or list(zoo.names())
        ignored = RUN_DEPENDENT_KEYS | frozenset(args.ignore_key)
        prints = run(models, args.modes, args.onnx_dir, ignored)
        args.output.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
        return 0
    old, new = (json.loads(p.read_text()) for p in (args.old, args.new))
    diffs = compare(old, new)
    for line in diffs:
        print(line)
    compared = sum(len(modes) for modes in new.values())
    print(f"{compared} compiles compared, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
