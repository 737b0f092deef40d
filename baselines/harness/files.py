"""Result files written so that a crash, a full disk, a second Ctrl-C or a second run never leaves a
half-written, mixed or misplaced one behind.

* :func:`atomic_write`: one file through a temporary file beside it and a rename.
* :func:`written_together`: the files written inside the block appear together at its end (all
  new, or on any error all old), and Ctrl-C waits until they are written.
* :func:`reserve_folder` / :func:`reserve_file`: before any episode runs, check that an output
  folder (or file) is a real folder (regular file) that can be written, with the room the results
  need, and lock it against a second run writing there at the same time.
"""
from __future__ import annotations

import contextvars
import errno
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator, Optional, Sequence

try:
    import fcntl
except ImportError:             # Windows: no flock; outputs are then not locked
    fcntl = None  # type: ignore[assignment]

#: Name of the lock file in an output folder (kept there: removing it would race with a new run).
LOCK_NAME = ".cluster-bench.lock"
#: Bytes the up-front check writes and syncs: a full disk fails here rather than after the episodes.
PROBE_BYTES = 4096
#: Room reserved per episode (results.csv, results.json) and per plot, for the free-space check.
BYTES_PER_EPISODE = 8 * 1024
BYTES_PER_PLOT = 512 * 1024

# Files staged by the innermost ``written_together`` block: (temporary, final) pairs.
_STAGE: "contextvars.ContextVar[Optional[list[tuple[str, Path]]]]" = contextvars.ContextVar("stage", default=None)


class OutputError(OSError):
    """An output path that cannot be written as asked; one line naming the path, and a hint."""

    def __init__(self, message: str, hint: str = "", code: Optional[int] = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


# ------------------------------------------------------------------ writing
def atomic_write(path: "str | Path", write: Callable[[IO], None], newline: "str | None" = None,
                 binary: bool = False) -> Path:
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then rename it over
    ``path``: readers see the old file or the complete new one, never a truncated one. On any
    error (a full disk: ``OSError`` ENOSPC, whose message then names ``path``) the old file stays
    and the temporary one is removed. ``binary`` opens the file in bytes mode (checkpoints).
    Inside :func:`written_together` the rename waits for the end of the block. A ``path`` that is
    a symbolic link or not a regular file is refused (:class:`OutputError`), never replaced."""
    path = Path(path)
    check_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _mode_for(path))      # mkstemp's 0600 would hide results from other users
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline=newline)) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        stage = _STAGE.get()
        if stage is None:
            os.replace(tmp, path)
        else:
            stage.append((tmp, path))
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError) and exc.errno:
            raise _named(exc, path) from exc
        raise
    return path


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` as an :class:`OutputError` whose message names ``path`` (json and csv do not),
    with its ``errno``."""
    full = " (is the disk full?)" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    named = OutputError(f"cannot write {path}: {exc.strerror or exc}{full}; the previous files are unchanged",
                        "free some space on that disk, or choose another output")
    named.errno = exc.errno
    return named


def _mode_for(path: Path) -> int:
    """The old file's permissions, or what ``open`` would give a new one (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


@contextmanager
def written_together(what: str = "the results") -> Iterator[list]:
    """Files :func:`atomic_write` writes inside the block are renamed into place together at its
    end: after an error in any of them (a full disk) every old file stays and no new one appears.
    While the block runs, Ctrl-C (SIGINT, main thread) only prints that ``what`` are being
    written; the list yielded receives the signals so deferred."""
    stage: list[tuple[str, Path]] = []
    token = _STAGE.set(stage)
    with sigint_deferred(f"\n(Ctrl-C: writing {what} first; they will be complete)\n") as deferred:
        try:
            yield deferred
        except BaseException:
            for tmp, _ in stage:
                Path(tmp).unlink(missing_ok=True)
            raise
        finally:
            _STAGE.reset(token)
        for i, (tmp, path) in enumerate(stage):
            try:
                os.replace(tmp, path)
            except OSError as exc:          # a rename writes no data; still, never leave temporaries
                for left, _ in stage[i:]:
                    Path(left).unlink(missing_ok=True)
                raise _named(exc, path) from exc


@contextmanager
def sigint_deferred(message: str = "") -> Iterator[list]:
    """Hold off Ctrl-C for the block (main thread only; elsewhere signals cannot be handled):
    a SIGINT prints ``message`` and is appended to the list yielded instead of raising
    ``KeyboardInterrupt``. A process that ignores SIGINT keeps ignoring it."""
    deferred: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield deferred
        return

    def note(signum, _frame) -> None:
        deferred.append(signum)
        if message:
            os.write(2, message.encode())   # not print(): the signal may arrive inside a print

    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, note)
    try:
        yield deferred
    finally:
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


# ------------------------------------------------------------------ checking and locking
def check_target(path: Path, flag: str = "") -> None:
    """Refuse to write over ``path`` when it is a symbolic link or exists as something other than
    a regular file (a folder, a device such as /dev/full, a pipe): writing would replace it."""
    name = f"{flag} {path}" if flag else str(path)
    if path.is_symlink():
        raise OutputError(f"{name} is a symbolic link (to {os.readlink(path)}); results are written only as "
                          "regular files, never through or over a link",
                          f"give the real path, e.g. {flag or '--out'} {path.resolve()}")
    if path.exists() and not path.is_file():
        raise OutputError(f"{name} exists and is not a regular file; it would be replaced",
                          "give the name of a new or regular file")


def free_bytes(folder: Path) -> int:
    """Free bytes for this user on the disk of ``folder``."""
    return shutil.disk_usage(folder).free


def check_folder(path: "str | Path", flag: str = "--out", names: Sequence[str] = (), need_bytes: int = 0,
                 hint: str = "") -> Path:
    """Create the output folder ``path`` and check, before any episode runs, that it is a real
    folder (not a link, not a file), that a file can be written and synced in it, that none of
    ``names`` in it is a link or a non-regular file, and that ``need_bytes`` are free.
    :class:`OutputError` (one line naming the folder, ``hint`` or one naming ``flag``) otherwise."""
    path = Path(path)
    hint = hint or f"choose another folder with {flag}"
    if path.is_symlink():
        raise OutputError(f"{flag} {path} is a symbolic link (to {os.readlink(path)}); results are written only "
                          "into a real folder", f"give the folder itself, e.g. {flag} {path.resolve()}")
    if path.exists() and not path.is_dir():
        raise OutputError(f"{flag} {path} is a file, not a folder", hint)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path) as probe:     # a full disk fails here, not at the end
            probe.write(b"\0" * PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise OutputError(f"cannot write results to {str(path)!r}: {exc.strerror or exc}", hint) from None
    for name in names:
        check_target(path / name, flag)
    if need_bytes:
        free = free_bytes(path)
        if free < need_bytes:
            raise OutputError(f"cannot write results to {str(path)!r}: only {free / 1024:,.0f} KiB free on its "
                              f"disk, the results need about {need_bytes / 1024:,.0f} KiB", hint)
    return path


def estimate_bytes(episodes: int, plots: int = 0) -> int:
    """Room to reserve for the files of ``episodes`` episodes and ``plots`` PNG plots."""
    return episodes * BYTES_PER_EPISODE + plots * BYTES_PER_PLOT


class OutputLock:
    """An exclusive ``flock`` on a lock file, held until :meth:`release` (or the process ends).
    Another process (or another lock of this one) asking for it fails at once: two runs never
    write into the same output at the same time."""

    def __init__(self, lock_path: Path, what: Path, flag: str) -> None:
        self.path = lock_path
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise OutputError(f"cannot lock {lock_path}: {exc.strerror or exc}", f"choose another {flag}") from None
            raise OutputError(f"another run (process {holder}) is writing to {str(what)!r} right now "
                              f"({lock_path.name} is locked)",
                              f"wait for it to finish, or choose another {flag}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd: Optional[int] = fd

    def release(self) -> None:
        """Unlock (the file stays: deleting it could let two runs lock two different files)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _umask() -> int:
    """The process's umask (read by setting it, so set back at once)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def reserve_folder(path: "str | Path", flag: str = "--out", names: Sequence[str] = (),
                   need_bytes: int = 0) -> OutputLock:
    """:func:`check_folder`, then lock the folder (``LOCK_NAME`` in it) for this run."""
    path = check_folder(path, flag, names, need_bytes)
    return OutputLock(path / LOCK_NAME, path, flag)


def reserve_file(path: "str | Path", flag: str = "--out", need_bytes: int = 0) -> OutputLock:
    """The same for one output file: it must not be a link or a non-regular file, its folder must
    be writable; the lock is ``.<name>.lock`` beside it."""
    path = Path(path)
    check_target(path, flag)
    folder = check_folder(path.parent, flag, need_bytes=need_bytes, hint=f"choose another file with {flag}")
    return OutputLock(folder / f".{path.name}.lock", path, flag)


__all__ = ["LOCK_NAME", "OutputError", "OutputLock", "atomic_write", "check_folder", "check_target",
           "estimate_bytes", "free_bytes", "reserve_file", "reserve_folder",
           "sigint_deferred", "written_together"]
