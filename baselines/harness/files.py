"""Result files written so that a crash, a full disk, a second Ctrl-C or a second run never leaves a
half-written, mixed or misplaced one behind.

* :func:`atomic_write`: one file through a temporary file beside it and a rename.
* :func:`written_together`: the files written inside the block appear together at its end (all
  new, or on any error all old), and Ctrl-C waits until they are written.
* :func:`open_append`: a log appended row by row, never through a link.
* :func:`json_text`: standard JSON (NaN and infinities written as ``null``).
* :func:`reserve_folder` / :func:`reserve_file`: before any episode runs, check that an output
  folder (or file) is a real folder (regular file) that can be written, with the room the results
  need, and lock it against a second run writing there at the same time.

Every file the package writes goes through this module: a path that is a symbolic link or not a
regular file is refused, never written through or replaced; a file written in place (a lock, a
log) with other hard links is refused too (a rename never writes into another link's file).
"""
from __future__ import annotations

import contextvars
import errno
import json
import math
import os
import re
import stat
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
#: Bytes of the process id in a lock file (padded with spaces, so that it is never truncated).
LOCK_BYTES = 24
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


def _named(exc: OSError, path: Path, appended: bool = False) -> OSError:
    """``exc`` as an :class:`OutputError` whose message names ``path`` (json and csv do not),
    with its ``errno``."""
    full = " (is the disk full?)" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    kept = "the rows written before are kept" if appended else "the previous files are unchanged"
    named = OutputError(f"cannot write {path}: {exc.strerror or exc}{full}; {kept}",
                        "free some space on that disk, or choose another output")
    named.errno = exc.errno
    return named


def _mode_for(path: Path) -> int:
    """The old file's permissions, or what ``open`` would give a new one (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def json_text(data: object, indent: Optional[int] = 2, **kwargs) -> str:
    """``data`` as standard JSON: a float NaN or infinity (not a JSON value; most parsers refuse
    Python's bare ``NaN`` token) is written as ``null``. Readers of our files take ``null`` where a
    number may be undefined (:func:`number`)."""
    return json.dumps(_finite(data), indent=indent, allow_nan=False, **kwargs)


def _finite(x: object) -> object:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if type(x).__module__ == "numpy":          # numpy scalars and arrays, without importing numpy here
        return _finite(x.tolist()) if hasattr(x, "tolist") else x
    return x


def number(value: object) -> float:
    """A metric read back from one of our JSON files: ``null`` (written for NaN) is NaN."""
    return math.nan if value is None else float(value)  # type: ignore[arg-type]


class _AppendFile:
    """A text file opened by :func:`open_append`; write errors name the file."""

    def __init__(self, fh: IO, path: Path) -> None:
        self._fh, self.path = fh, path

    def write(self, text: str) -> int:
        try:
            return self._fh.write(text)
        except OSError as exc:
            raise _named(exc, self.path, appended=True) from exc

    def flush(self) -> None:
        try:
            self._fh.flush()
        except OSError as exc:
            raise _named(exc, self.path, appended=True) from exc

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError as exc:
            raise _named(exc, self.path, appended=True) from exc

    def __enter__(self) -> "_AppendFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_append(path: "str | Path", newline: "str | None" = None) -> _AppendFile:
    """``path`` opened to append text (a log written row by row; created if missing). Refused
    (:class:`OutputError`) when it is a symbolic link, not a regular file, or a file with other
    hard links: a row is never written into another file. Write errors name ``path``."""
    path = Path(path)
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND, "a log")
    return _AppendFile(os.fdopen(fd, "a", newline=newline), path)


def _open_regular(path: Path, flags: int, what: str) -> int:
    """``os.open`` of ``path`` (created when missing) that never follows a link nor blocks on a
    pipe, and refuses anything but a regular file with one link; the descriptor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.is_symlink():
            raise OSError(errno.ELOOP, "a symbolic link")
        fd = os.open(path, flags | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise OutputError(f"{path} is a symbolic link; {what} is never written through a link",
                              "remove the link, or choose another output folder") from None
        raise OutputError(f"cannot open {path} ({what}): {exc.strerror or exc}",
                          "choose another output folder") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        why = "has other hard links" if stat.S_ISREG(info.st_mode) else "is not a regular file"
        raise OutputError(f"{path} {why}; {what} is written only into a regular file of its own",
                          "remove it, or choose another output folder")
    return fd


#: ``os.O_NOFOLLOW`` (0 where the platform lacks it: the link is then refused by a check first).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@contextmanager
def written_together(what: str = "the results", replaces: "Sequence[Path] | Callable[[], Sequence[Path]]" = ()
                     ) -> Iterator[list]:
    """Files :func:`atomic_write` writes inside the block are renamed into place together at its
    end: after an error in any of them (a full disk) every old file stays and no new one appears.
    ``replaces``: files of the previous set (or a function giving them, called at the end) that
    are removed once the new files are in place, unless the block wrote them: a folder never
    holds a mix of two runs. While the block runs, Ctrl-C (SIGINT, main thread) only prints that
    ``what`` are being written; the list yielded receives the signals so deferred."""
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
        written = {os.path.abspath(p) for _, p in stage}
        for old in (replaces() if callable(replaces) else replaces):
            if os.path.abspath(old) not in written and (Path(old).is_file() or Path(old).is_symlink()):
                Path(old).unlink()


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
        _probe_name(path, name, flag)
    if need_bytes:
        free = free_bytes(path)
        if free < need_bytes:
            raise OutputError(f"cannot write results to {str(path)!r}: only {free / 1024:,.0f} KiB free on its "
                              f"disk, the results need about {need_bytes / 1024:,.0f} KiB", hint)
    return path


def _probe_name(folder: Path, name: str, flag: str) -> None:
    """Create and remove the temporary file :func:`atomic_write` would use for ``folder/name``: a
    name too long for the file system fails here, before any episode, not after them."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    except OSError as exc:
        long = " (the name is too long for the file system)" if exc.errno == errno.ENAMETOOLONG else ""
        raise OutputError(f"cannot write {folder / name}: {exc.strerror or exc}{long}",
                          f"choose shorter policy names or another {flag}") from None
    os.close(fd)
    os.unlink(tmp)


def estimate_bytes(episodes: int, plots: int = 0) -> int:
    """Room to reserve for the files of ``episodes`` episodes and ``plots`` PNG plots."""
    return episodes * BYTES_PER_EPISODE + plots * BYTES_PER_PLOT


class OutputLock:
    """An exclusive ``flock`` on a lock file, held until :meth:`release` (or the process ends).
    Another process (or another lock of this one) asking for it fails at once: two runs never
    write into the same output at the same time.

    The lock file is opened without following a link and never truncated: a link, a hard link, a
    non-regular file, or a file that holds anything but a process id is refused
    (:class:`OutputError`), never written. The holder's id is written padded to
    :data:`LOCK_BYTES`, over the previous one."""

    def __init__(self, lock_path: Path, what: Path, flag: str) -> None:
        self.path = lock_path
        try:
            fd = _open_regular(lock_path, os.O_RDWR, "a lock")
        except OutputError as exc:
            raise OutputError(f"cannot lock {what}: {exc}", f"remove {lock_path}, or choose another {flag}") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.read(fd, 2 * LOCK_BYTES)
        except OSError as exc:
            holder = (os.read(fd, LOCK_BYTES).decode(errors="replace").split() or ["?"])[0]
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise OutputError(f"cannot lock {lock_path}: {exc.strerror or exc}", f"choose another {flag}") from None
            raise OutputError(f"another run (process {holder}) is writing to {str(what)!r} right now "
                              f"({lock_path.name} is locked)",
                              f"wait for it to finish, or choose another {flag}") from None
        if len(held) > LOCK_BYTES or not re.fullmatch(rb"\s*\d*\s*", held):
            os.close(fd)
            raise OutputError(f"{lock_path} is not a cluster-bench lock file (it holds other data); it is left "
                              "as it is", f"move it away, or choose another {flag}")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid():<{LOCK_BYTES - 1}}\n".encode())     # over the old id: no truncation
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


def reserve_file(path: "str | Path", flag: str = "--out", need_bytes: int = 0,
                 beside: Sequence[str] = ()) -> OutputLock:
    """The same for one output file (and the files named ``beside`` it): it must not be a link or
    a non-regular file, its folder must be writable; the lock is ``.<name>.lock`` beside it."""
    path = Path(path)
    check_target(path, flag)
    folder = check_folder(path.parent, flag, names=[path.name, *beside], need_bytes=need_bytes,
                          hint=f"choose another file with {flag}")
    return OutputLock(folder / f".{path.name}.lock", path, flag)


__all__ = ["LOCK_BYTES", "LOCK_NAME", "OutputError", "OutputLock", "atomic_write", "check_folder", "check_target",
           "estimate_bytes", "free_bytes", "json_text", "number", "open_append", "reserve_file", "reserve_folder",
           "sigint_deferred", "written_together"]
