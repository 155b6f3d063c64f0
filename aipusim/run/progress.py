"""Progress of long stages on stderr, on a terminal or not.

On a terminal each stage gets a tqdm bar. When stderr is a file or a pipe (CI logs,
``2> log``), bars would fill it with carriage returns, so plain lines are printed instead:
one every few seconds while a stage advances, one when a stage has shown no sign of life
for a while (a single slow step), and one when a stage that took more than a few seconds
ends. A stage that ends quickly prints nothing.

>>> import io
>>> out = io.StringIO()
>>> p = Progress(out, terminal=False, every_s=0.0)
>>> step = p.stage("compile", 3)
>>> step(1)
>>> p.close()
>>> out.getvalue().splitlines()[0]
'aipusim: compile 1/3 (0 s)'
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

#: Seconds between two plain progress lines of an advancing stage.
EVERY_S = 5.0
#: Seconds without a line after which a stage says it is still running.
QUIET_S = 15.0


class Progress:
    """Stage hooks (``stage(name, total)`` returns ``step(n)``) that report on ``stream``."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        terminal: bool | None = None,
        every_s: float | None = None,
        quiet_s: float | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if terminal is None:
            isatty = getattr(self.stream, "isatty", None)
            terminal = bool(isatty and isatty())
        self.terminal = terminal
        self.every_s = EVERY_S if every_s is None else every_s
        self.quiet_s = QUIET_S if quiet_s is None else quiet_s
        self._bar = None
        self._lock = threading.Lock()
        self._name = ""
        self._note = ""
        self._done = 0
        self._total: int | None = None
        self._start = 0.0
        self._last_line = 0.0
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    # -- hooks -----------------------------------------------------------------------
    def stage(self, name: str, total: int | None) -> Callable[[int], None]:
        """Start stage ``name`` of ``total`` steps (None: unknown); returns ``step(n)``."""
        self._end_stage()
        with self._lock:
            self._name, self._note, self._done, self._total = name, "", 0, total
            self._start = self._last_line = time.monotonic()
        if self.terminal:
            # lazy: loads tqdm; kept off the CLI's start-up
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=f"{name:<8}", file=self.stream, leave=False)
        elif self._watch is None:
            self._watch = threading.Thread(target=self._watchdog, name="progress", daemon=True)
            self._watch.start()
        return self.step

    #: A `Progress` is itself a stage hook (``aipusim.run.job.run_model(stage=...)``).
    __call__ = stage

    def step(self, n: int = 1) -> None:
        """``n`` more steps of the current stage are done."""
        if self._bar is not None:
            self._bar.update(n)
            return
        with self._lock:
            self._done += n
            now = time.monotonic()
            if now - self._last_line >= self.every_s:
                self._line(f"{self._name} {self._count()}{self._detail()} ({self._elapsed()})")

    def note(self, text: str) -> None:
        """What the current stage is doing (a pass name), shown with its next line."""
        with self._lock:
            self._note = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def opening(self, text: str) -> None:
        """One line at once (what the command is about to do): the first sign of life of a
        long command comes before its slow imports, not after them."""
        with self._lock:
            self._line(text)

    def close(self) -> None:
        """End the current stage and stop reporting."""
        self._end_stage()
        self._stop.set()

    # -- plain lines -------------------------------------------------------------------
    def _count(self) -> str:
        return f"{self._done}/{self._total}" if self._total else f"{self._done}"

    def _detail(self) -> str:
        return f" ({self._note})" if self._note else ""

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._start:.0f} s"

    def _line(self, text: str) -> None:
        """One plain line (the lock is held)."""
        self._last_line = time.monotonic()
        # a closed stderr must not stop the work
        with contextlib.suppress(OSError, ValueError):
            print(f"aipusim: {text}", file=self.stream, flush=True)

    def _end_stage(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            return
        with self._lock:
            if self._name and time.monotonic() - self._start >= self.every_s:
                self._line(f"{self._name} done in {self._elapsed()}")
            self._name = ""

    def _watchdog(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                quiet = time.monotonic() - self._last_line
                if self._name and quiet >= self.quiet_s:
                    self._line(
                        f"{self._name} still running, {self._count()}{self._detail()} "
                        f"after {self._elapsed()}"
                    )


#: A stage hook: ``hook(name, total)`` starts a stage and returns its ``step(n)``.
StageHook = Callable[[str, int | None], Callable[[int], None]]


def stderr_lines(progress: bool) -> Callable[[str], None]:
    """A logger of whole progress lines on stderr (nothing when ``progress`` is false), for
    long jobs whose steps are not counted (fits, studies)."""

    def log(line: str) -> None:
        if progress:
            print(line, file=sys.stderr, flush=True)

    return log


def compile_stage(hook: StageHook) -> Callable[[str, Any], None]:
    """Start the ``compile`` stage on ``hook`` with its total fixed (the import and every
    pass of the pipeline) and return the compiler's ``after_pass``. The count is the
    position of the pass just done, so a pass switched off is stepped over and the count
    never passes the total; a hook with ``note`` is told the pass's name.

    >>> import io
    >>> out = io.StringIO()
    >>> after_pass = compile_stage(Progress(out, terminal=False, every_s=0.0))
    >>> after_pass("emit", None)
    >>> out.getvalue().split(" (")[0]
    'aipusim: compile 29/29'
    """
    # lazy: aipusim.compiler.pipeline loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.pipeline import pass_names

    names = pass_names()
    step = hook("compile", len(names))
    note = getattr(hook, "note", None)
    done = 0

    def after_pass(name: str, _ir: Any) -> None:
        nonlocal done
        if note is not None:
            note(f"after {name}")
        position = names.index(name) + 1 if name in names else done
        if position > done:
            step(position - done)
            done = position

    return after_pass


__all__ = ["EVERY_S", "QUIET_S", "Progress", "StageHook", "compile_stage"]
