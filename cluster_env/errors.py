"""Errors raised by ``cluster_env``: every one says what went wrong and where."""
from __future__ import annotations

from typing import Optional


class ClusterEnvError(Exception):
    """Base class of the package's errors."""


class DataError(ClusterEnvError, ValueError):
    """Bad input data; the message names the file, the 1-based data row and the field."""

    def __init__(self, message: str, file: Optional[str] = None, row: Optional[int] = None,
                 field: Optional[str] = None) -> None:
        self.file, self.row, self.field = file, row, field
        where = []
        if file is not None:
            where.append(f"file {file!s}")
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class UnknownGPUTypeError(DataError):
    """A GPU type name that the catalog does not know."""


class InvalidActionError(ClusterEnvError, ValueError):
    """An action that the current action mask forbids."""
