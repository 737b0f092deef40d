"""Ctrl-C while ``cluster-bench`` starts ends it with one line and exit code 130.

The command's imports (numpy, numba, scipy, matplotlib) take about a second, before
``baselines.cli.main`` can catch anything: a Ctrl-C then printed an import traceback. Imported
first by ``baselines/__init__.py``, this module holds SIGINT off for that time, only in a process
started as ``cluster-bench`` or ``python -m baselines`` (a library import is left alone), and only
where Ctrl-C has its default action (a process that ignores SIGINT keeps ignoring it);
:func:`started` gives Ctrl-C back to Python once ``main`` runs. Standard library only.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

#: Exit code of a command ended by Ctrl-C (the shell's 128 + SIGINT).
INTERRUPTED = 130


def is_interrupt(exc: "BaseException | None") -> bool:
    """Whether ``exc`` is Ctrl-C: a ``KeyboardInterrupt``, or the ``SystemError`` that a compiled
    (numba) function's dispatcher raises when the interrupt lands while it runs ("CPUDispatcher(...)
    returned a result with an exception set", the ``KeyboardInterrupt`` as its cause)."""
    # Recognised where Ctrl-C is handled rather than prevented: holding SIGINT off around every
    # kernel call would cost a handler swap per decision, and the wrapped interrupt is still the
    # user's Ctrl-C, raised at the same moment a plain one would have been.
    for _ in range(8):                      # a short chain; never loop on a cycle
        if isinstance(exc, KeyboardInterrupt):
            return True
        if not isinstance(exc, SystemError):
            return False
        exc = exc.__cause__ or exc.__context__
    return False


def is_command_line() -> bool:
    """Whether this process was started as ``cluster-bench`` or ``python -m baselines``."""
    if sys.argv and os.path.basename(sys.argv[0]).startswith("cluster-bench"):
        return True
    orig = list(getattr(sys, "orig_argv", []))
    return "-m" in orig and orig[orig.index("-m") + 1:orig.index("-m") + 2] == ["baselines"]


def _interrupted_while_starting(signum, frame) -> None:
    os.write(2, b"\ncluster-bench: interrupted while starting\n")   # not print(): mid-import, mid-write
    os._exit(INTERRUPTED)       # nothing is written yet; no import is left half done to clean up


def guard() -> None:
    """Hold Ctrl-C off the command's imports (see the module's text)."""
    if (is_command_line() and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def started() -> None:
    """The command runs: Ctrl-C raises ``KeyboardInterrupt`` again (which it handles)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


guard()
