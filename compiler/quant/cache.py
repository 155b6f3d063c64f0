"""The quantization cache: a model is calibrated once, later compiles reuse its result.

Calibration (the float forward passes and the histograms) is most of a compile's time,
and its result depends on few things. The key of an entry is the SHA-256 of:

1. the graph the ``quantize`` pass receives, by content (nodes, attributes, tensors,
   constant bytes): the ONNX model after import and the front-end passes, so the input
   shape and layout, the opset and every front-end switch count through it;
2. the calibration samples the pass quantizes with, by content, and their source label
   (random data: its seed and count; images: the pixels after reading, colour conversion,
   ``--transform`` and layout, so a changed image or transform script is a new key);
3. the config properties marked ``quant=True`` in the property table (`key_properties`:
   ``quantization_scheme``, ``quantize_dw_channel_wise``, ``remove_io_quantization``);
4. the DPU float format of the arch (the only hardware number quantization reads);
5. the versions of aipusim, onnxruntime (calibration's forward passes) and numpy, of the
   quantization rules (`quantize.RULES_VERSION`: a development tree keeps one aipusim
   version across changes that move the parameters), and the entry format.

The multicore mode, the core count, utilization limits and the other hardware numbers are
not in the key: a sweep over them calibrates once.

Entries live in ``$AIPUSIM_CACHE_DIR/quantization/`` (default: the user cache folder of
``platformdirs``, e.g. ``~/.cache/aipusim``), one ``<key>.qcache`` file each: a magic
line, a JSON header with the SHA-256 and sizes of the body, then the body (the
`artifacts.CORE_FILES` of the quantized model). They are written to a temporary file
beside the entry, flushed to disk and renamed into place, so concurrent compiles never
see half an entry; a corrupt entry is discarded with a warning and computed again. The
cache holds at most ``$AIPUSIM_CACHE_SIZE_MB`` megabytes (default `DEFAULT_SIZE_MB`); the
least recently used entries (reads touch them) are removed when a write exceeds it.
A process also keeps the last `RECENT_ENTRIES` entries it read or wrote in memory
(a sweep worker compiles the same model over and over): an entry whose file holds the
same bytes is not checksummed and split again, and its quantized graph is not rebuilt
(the graph is immutable: the same object serves every compile).
A cache folder that cannot be written is named once in a warning and the compile goes
on without the cache.

>>> "quantization_scheme" in key_properties()
True
>>> "multicore_mode" in key_properties()
False
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aipusim.base import __version__
from aipusim.base.atomic import clean_stale, temp_name
from aipusim.base.errors import ConfigError, QuantizationError
from aipusim.base.mapped import release
from aipusim.base.memo import ArrayMemo
from aipusim.compiler.ir import Graph
from aipusim.compiler.quant.artifacts import (
    CORE_FILES,
    quantized_graph_files,
    quantized_graph_from_files,
    remember_files,
)
from aipusim.compiler.quant.data import CalibrationData
from aipusim.compiler.quant.observers import BLOCK_BYTES
from aipusim.compiler.quant.quantize import RULES_VERSION, QuantizedGraph

if TYPE_CHECKING:
    from aipusim.compiler.config import CompilerConfig

log = logging.getLogger("aipusim.compiler.quant.cache")

#: Environment variable naming the cache folder (entries go to its ``quantization/``).
DIR_ENV = "AIPUSIM_CACHE_DIR"
#: Environment variable with the size limit in megabytes (10^6 bytes).
SIZE_ENV = "AIPUSIM_CACHE_SIZE_MB"
#: Default size limit: about 75 ResNet-50 entries (26 MB each).
DEFAULT_SIZE_MB = 2000
#: Sub-folder of the cache folder holding the quantization entries.
SUBDIR = "quantization"
SUFFIX = ".qcache"
#: First line of every entry; a new layout of the entry or of its key gets a new number.
MAGIC = b"aipusim-quantization-cache 2\n"
#: Entries a process keeps in memory after reading or writing them (26 MB for ResNet-50).
RECENT_ENTRIES = 2
#: Those entries, ``{entry path: (its bytes, its files)}``, the most recently used last.
_recent: dict[str, tuple[bytes, Mapping[str, bytes]]] = {}


#: The quantized graphs rebuilt from those entries, ``{entry path: (its files, the graph)}``:
#: a `QuantizedGraph` never changes, so the next compile of the same entry takes it as is.
_graphs: dict[str, tuple[Mapping[str, bytes], QuantizedGraph]] = {}

#: Entries larger than this are not kept in memory (llama_1b's is 1.3 GB: keeping it, and
#: the files it splits into, would hold two more copies of every weight for the compile).
RECENT_MAX_BYTES = 256 << 20


def _remember(path: Path, data: bytes, files: Mapping[str, bytes]) -> None:
    _recent.pop(str(path), None)
    if len(data) > RECENT_MAX_BYTES:
        return
    _recent[str(path)] = (data, files)
    while len(_recent) > RECENT_ENTRIES:
        del _recent[next(iter(_recent))]
    for gone in set(_graphs) - set(_recent):
        del _graphs[gone]


def _rebuilt(path: Path, files: Mapping[str, bytes]) -> QuantizedGraph:
    """The quantized graph of the entry ``path`` holding ``files``: rebuilt once while the
    entry stays among the recent ones with the same files."""
    kept = _graphs.get(str(path))
    if kept is not None and kept[0] == files:
        return kept[1]
    qgraph = quantized_graph_from_files(files, f"cache entry {path}", checked=True)
    remember_files(qgraph, files)
    if str(path) in _recent:
        _graphs[str(path)] = (files, qgraph)
    return qgraph


#: What `quantize_cached` reports about where the quantized graph came from.
CACHED, COMPUTED = "cached", "computed"


def key_properties() -> tuple[str, ...]:
    """Names of the config properties in the key (the ``quant=True`` rows of the table)."""
    from aipusim.compiler.config import PROPERTIES

    return tuple(name for name, prop in PROPERTIES.items() if prop.quant)


# ---------------------------------------------------------------------------- the key


class _Unkeyable(Exception):
    """A value the key cannot describe by content (the compile goes on without cache)."""


#: Digests of read-only arrays the key hashed, while they live.
_DIGESTS = ArrayMemo()


def _sha256(arr: np.ndarray) -> bytes:
    """SHA-256 of ``arr``'s bytes in C order. A non-contiguous view (a transposed weight:
    1 GB for llama_1b's LM head) is fed in blocks of rows rather than copied whole."""
    if arr.flags.c_contiguous:
        return hashlib.sha256(memoryview(arr).cast("B")).digest()
    # (not contiguous, so it has elements and at least one axis)
    h = hashlib.sha256()
    rows = max(1, BLOCK_BYTES // max(arr.nbytes // arr.shape[0], 1))
    for i in range(0, arr.shape[0], rows):
        h.update(memoryview(np.ascontiguousarray(arr[i : i + rows])).cast("B"))
    return h.digest()


class _Hasher:
    """SHA-256 over length-prefixed, typed frames (so no two values feed the same bytes)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def frame(self, tag: bytes, data: bytes | memoryview) -> None:
        self.h.update(tag + len(data).to_bytes(8, "little"))
        self.h.update(data)

    def text(self, value: str) -> None:
        self.frame(b"s", value.encode())

    def array(self, value: np.ndarray) -> None:
        given = np.asarray(value)
        self.text(f"{given.dtype.str}{given.shape}")
        # (object arrays have no bytes that describe their content)
        if given.dtype.hasobject:
            raise _Unkeyable(f"an array of {given.dtype}")
        # the SHA-256 of its bytes, remembered for a graph's read-only constants: a warm
        # compile of the same imported graph hashes none of its 100 MB again
        self.frame(b"a", _DIGESTS.get((given,), "sha256", lambda: _sha256(given)))
        release(given)  # a weight mapped from its file: hashed once, not needed now

    def value(self, value: Any) -> None:
        if value is None or isinstance(value, bool | int | float | str):
            # repr: exact for floats, and True is not 1
            self.frame(b"v", f"{type(value).__name__}:{value!r}".encode())
        elif isinstance(value, tuple | list):
            self.frame(b"t", str(len(value)).encode())
            for v in value:
                self.value(v)
        elif isinstance(value, np.ndarray):
            self.array(value)
        elif isinstance(value, np.generic):
            self.array(np.asarray(value))
        elif hasattr(value, "SerializeToString"):  # an ONNX object (a sub-graph)
            self.text(type(value).__name__)
            self.frame(b"p", value.SerializeToString(deterministic=True))
        else:
            raise _Unkeyable(f"a {type(value).__name__} value")

    def graph(self, g: Graph) -> None:
        self.value((g.name, g.opset, g.inputs, g.outputs))
        for name, t in g.tensors.items():
            self.value((name, t.shape, t.dtype.value))
            q = t.quant
            self.value(None if q is None else (q.scale, q.zero_point, q.dtype.value, q.axis))
        for name, arr in g.constants.items():
            self.text(name)
            self.array(arr)
        for n in g.nodes:
            self.value((n.name, n.op.value, n.onnx_type, n.domain, n.inputs, n.outputs))
            for k, v in n.attrs.items():
                self.text(k)
                self.value(v)

    def samples(self, samples: Iterable[Mapping[str, np.ndarray]]) -> None:
        for sample in samples:
            for name in sorted(sample):
                self.text(name)
                self.array(np.asarray(sample[name]))


def cache_key(
    graph: Graph, calibration: CalibrationData, config: CompilerConfig, float_format: Any = None
) -> str | None:
    """The key of quantizing ``graph`` with ``calibration`` and ``config`` on a DPU with
    ``float_format`` (None: the default `FloatFormat`), or None when some attribute of the
    graph has no content the key can describe."""
    from aipusim.isa.float18 import FloatFormat

    fmt = float_format or FloatFormat()
    h = _Hasher()
    h.value((MAGIC.decode(), RULES_VERSION, __version__, _version("onnxruntime"), np.__version__))
    try:
        h.graph(graph)
        h.text(calibration.source)
        h.samples(calibration.samples)
    except _Unkeyable as exc:
        log.info("quantization cache not used: the graph holds %s", exc)
        return None
    options = {name: str(getattr(config, name)) for name in key_properties()}
    h.text(json.dumps(options, sort_keys=True))
    h.value((fmt.exponent_bits, fmt.fraction_bits))
    return h.h.hexdigest()


def _version(package: str) -> str:
    """The installed version of ``package`` (read from its metadata: not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


# --------------------------------------------------------------------------- the store


def cache_root() -> Path:
    """The cache folder: ``$AIPUSIM_CACHE_DIR``, else the user cache folder."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("aipusim", appauthor=False))


def size_limit_bytes() -> int:
    """The size limit: ``$AIPUSIM_CACHE_SIZE_MB`` megabytes, else `DEFAULT_SIZE_MB`."""
    text = os.environ.get(SIZE_ENV, "").strip()
    if not text:
        return DEFAULT_SIZE_MB * 10**6
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{SIZE_ENV} must be a whole number of megabytes >= 1, not {text!r}")
    return int(text) * 10**6


#: Cache folders already named in a warning by this process (warn once each).
_warned: set[str] = set()


def _warn_once(folder: Path, exc: OSError) -> None:
    if str(folder) in _warned:
        return
    _warned.add(str(folder))
    reason = exc.strerror or str(exc)
    log.warning(
        "quantization cache %s cannot be used (%s); compiling without it (set %s to a "
        "writable folder)",
        folder,
        reason,
        DIR_ENV,
    )


def _head(files: Mapping[str, bytes]) -> bytes:
    """The magic line and the header of an entry holding ``files`` (the body, their bytes
    in `CORE_FILES` order, follows)."""
    sizes = {name: len(files[name]) for name in CORE_FILES}
    digest = hashlib.sha256()
    for name in CORE_FILES:
        digest.update(files[name])
    header = {"sha256": digest.hexdigest(), "sizes": sizes}
    return MAGIC + json.dumps(header).encode() + b"\n"


def _pack(files: Mapping[str, bytes]) -> bytes:
    return _head(files) + b"".join(files[name] for name in CORE_FILES)


class _Corrupt(Exception):
    """An entry whose bytes are not what was written."""


def _unpack(data: bytes) -> dict[str, bytes]:
    if not data.startswith(MAGIC):
        raise _Corrupt("it does not start with the cache's magic line")
    end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC) : end])
        sizes = {name: int(header["sizes"][name]) for name in CORE_FILES}
        digest = str(header["sha256"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _Corrupt(f"its header is unreadable ({exc})") from None
    body = data[end + 1 :]
    if len(body) != sum(sizes.values()) or hashlib.sha256(body).hexdigest() != digest:
        raise _Corrupt("its checksum does not match its contents")
    files, at = {}, 0
    for name in CORE_FILES:
        files[name] = body[at : at + sizes[name]]
        at += sizes[name]
    return files


@dataclass(frozen=True)
class CacheInfo:
    """What ``aipusim cache info`` shows."""

    folder: Path
    entries: int
    size_bytes: int
    limit_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "entries": self.entries,
            "size_bytes": self.size_bytes,
            "limit_bytes": self.limit_bytes,
        }


class QuantizationCache:
    """The entries under ``root/quantization`` (default root: `cache_root`).

    >>> import tempfile
    >>> cache = QuantizationCache(tempfile.mkdtemp())
    >>> cache.get("0" * 64) is None, cache.info().entries
    (True, 0)
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root()
        self.folder = self.root / SUBDIR
        self.limit_bytes = size_limit_bytes()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def get(self, key: str) -> dict[str, bytes] | None:
        """The `CORE_FILES` stored under ``key``, or None (absent, unreadable, corrupt:
        a corrupt entry is removed, with a warning)."""
        path = self.path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            _warn_once(self.folder, exc)
            return None
        kept = _recent.get(str(path))
        if kept is not None and kept[0] == data:
            # the same bytes as an entry this process checked: its checksum holds
            files = dict(kept[1])
        else:
            try:
                files = _unpack(data)
            except _Corrupt as exc:
                log.warning("quantization cache entry %s is corrupt (%s): removed, computing "
                            "again", path, exc)  # fmt: skip
                self._remove(path)
                return None
        with contextlib.suppress(OSError):  # least recently *used*: a read counts
            os.utime(path)
        _remember(path, data, files)
        return files

    def put(self, key: str, files: Mapping[str, bytes]) -> bool:
        """Store ``files`` under ``key`` (atomically), then keep the cache under its limit;
        False when the folder cannot be written (warned once) or the entry is over the
        limit by itself."""
        head = _head(files)
        size = len(head) + sum(len(files[name]) for name in CORE_FILES)
        if size > self.limit_bytes:
            log.info("quantization cache: an entry of %d bytes is over the limit of %d bytes; "
                     "not stored", size, self.limit_bytes)  # fmt: skip
            return False
        path = self.path(key)
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            clean_stale(path)
            tmp = temp_name(path)
            with open(tmp, "xb") as fh:
                # part by part: the entry is not joined into one more copy in memory
                fh.write(head)
                for name in CORE_FILES:
                    fh.write(files[name])
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            _warn_once(self.folder, exc)
            return False
        if size <= RECENT_MAX_BYTES:
            _remember(path, _pack(files), dict(files))
        self.evict(keep=path)
        return True

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last use, size, path) of every entry; those removed meanwhile are left out."""
        out = []
        try:
            names = os.listdir(self.folder)
        except OSError:
            return out
        for name in names:
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            path = self.folder / name
            with contextlib.suppress(OSError):
                st = path.stat()
                out.append((st.st_mtime, st.st_size, path))
        return out

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove the least recently used entries until the cache fits its limit (never
        ``keep``, the entry just written); returns the removed paths."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        removed = []
        for _, size, path in entries:
            if total <= self.limit_bytes:
                break
            if path == keep:
                continue
            self._remove(path)
            removed.append(path)
            total -= size
        return removed

    @staticmethod
    def _remove(path: Path) -> None:
        with contextlib.suppress(OSError):  # (another process may have removed it first)
            path.unlink()

    def info(self) -> CacheInfo:
        entries = self._entries()
        return CacheInfo(self.folder, len(entries), sum(s for _, s, _ in entries), self.limit_bytes)

    def clear(self) -> int:
        """Remove every entry (and temporary files left by killed writers); returns the
        number of entries removed."""
        entries = self._entries()
        for _, _, path in entries:
            self._remove(path)
        with contextlib.suppress(OSError):
            # a temporary file is ``.<entry name>.tmp-<pid>-<hex>.qcache`` (`temp_name`)
            for name in os.listdir(self.folder):
                if name.startswith(".") and ".tmp-" in name:
                    clean_stale(self.folder / name[1:].split(".tmp-")[0])
        return len(entries)


# ---------------------------------------------------------------------- quantizing


@dataclass(frozen=True)
class CachedQuantization:
    """A quantized graph, its serialized `CORE_FILES`, and where it came from (`CACHED`
    or `COMPUTED`)."""

    qgraph: QuantizedGraph
    files: Mapping[str, bytes]
    source: str


def quantize_cached(
    graph: Graph,
    config: CompilerConfig,
    calibration: CalibrationData,
    compute: Callable[[], QuantizedGraph],
    *,
    arch: Any = None,
    use_cache: bool = True,
) -> CachedQuantization:
    """The quantized graph of ``graph`` through the cache: the stored result of the same
    key when there is one, else ``compute()`` (`calibrate_and_quantize` of the same
    arguments), stored with ``use_cache``."""
    from aipusim.isa.float18 import FloatFormat

    cache = key = None
    if use_cache:
        cache = QuantizationCache()
        fmt = FloatFormat.of(arch) if arch is not None else None
        key = cache_key(graph, calibration, config, fmt)
    if cache is not None and key is not None:
        files = cache.get(key)
        if files is not None:
            try:
                qgraph = _rebuilt(cache.path(key), files)
            except QuantizationError as exc:
                # (an entry of this version that does not rebuild: a bug, not bad input)
                log.warning("%s; computing again", exc)
            else:
                log.info("quantization: cached (%s)", cache.path(key))
                return CachedQuantization(qgraph, files, CACHED)
    qgraph = compute()
    files = quantized_graph_files(qgraph)
    if cache is not None and key is not None:
        cache.put(key, files)
    log.info("quantization: computed")
    return CachedQuantization(qgraph, files, COMPUTED)


__all__ = [
    "CACHED",
    "COMPUTED",
    "DEFAULT_SIZE_MB",
    "DIR_ENV",
    "RECENT_ENTRIES",
    "SIZE_ENV",
    "CacheInfo",
    "CachedQuantization",
    "QuantizationCache",
    "cache_key",
    "cache_root",
    "key_properties",
    "quantize_cached",
    "size_limit_bytes",
]
