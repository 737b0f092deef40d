"""Result files written so that a crash or a full disk never leaves a half-written one behind."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, IO


def atomic_write(path: "str | Path", write: Callable[[IO], None], newline: "str | None" = None,
                 binary: bool = False) -> Path:
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then rename it over
    ``path``: readers see the old file or the complete new one, never a truncated one. On any
    error (a full disk: ``OSError`` ENOSPC) the old file stays and the temporary one is removed.
    ``binary`` opens the file in bytes mode (checkpoints)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _mode_for(path))      # mkstemp's 0600 would hide results from other users
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline=newline)) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _mode_for(path: Path) -> int:
    """The old file's permissions, or what ``open`` would give a new one (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def prepare_output_dir(path: "str | Path") -> Path:
    """Create the output folder ``path`` and check that a file can be written in it, before any
    episode runs; ``OSError`` (a clear message naming the folder) otherwise."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write results to {str(path)!r}: {exc.strerror or exc}") from None
    return path


__all__ = ["atomic_write", "prepare_output_dir"]
