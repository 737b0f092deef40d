"""A checked CSV reader shared by every loader of ``cluster_env``.

Every problem in an input file becomes a :class:`~cluster_env.errors.DataError` whose message
names the file, the 1-based *data row* (the header is row 0; blank lines are skipped and not
counted) and the field (the header name as written in the file). No exception of the ``csv``,
``gzip`` or ``numpy`` modules escapes, except ``FileNotFoundError``/``OSError`` for a file that
cannot be opened at all (those already name the path).

What the reader accepts:

* a path (``str`` or ``pathlib.Path``) to a ``.csv`` file, or a gzip-compressed one (detected by
  its magic bytes, whatever the suffix);
* UTF-8 text, with or without a byte-order mark;
* comma-separated values only: a header that has no comma but contains ``;`` or a tab is refused
  with a message that says so;
* header names matched case-insensitively after stripping spaces; cell values are stripped of
  surrounding spaces; a name that appears twice, and two accepted names of one field (say
  ``job_class`` and ``class``) unless the column mapping chooses one, are refused.

Documented limits on numbers (anything beyond is "absurd" and refused, since it is almost always
a unit mistake or a corrupt file):

* :data:`MAX_SECONDS`: a duration or a time span of more than 10 years;
* :data:`MAX_TIMESTAMP`: an absolute time value above 1e11 seconds (year ~5000 as a Unix time);
* :data:`MAX_GPUS`: more than 100,000 GPUs in a job or a machine;
* :data:`MAX_COUNT`: more than 1,000,000 identical machines in one row (or machines in a file).
"""
from __future__ import annotations

import csv
import gzip
import io
import math
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import DataError

PathLike = Union[str, Path]

#: Longest accepted duration or time span, in seconds (10 years of 365.25 days).
MAX_SECONDS: float = 10 * 365.25 * 86400.0
#: Largest accepted absolute time value in seconds (e.g. a Unix timestamp).
MAX_TIMESTAMP: float = 1e11
#: Largest accepted GPU count (of a job or of a machine).
MAX_GPUS: int = 100_000
#: Largest accepted number of identical machines described by one row.
MAX_COUNT: int = 1_000_000
#: Shortest accepted job duration, in seconds (a positive duration below it is an error). The
#: simulator finishes a job once its remaining work takes under a microsecond, so a 1e-300 s job
#: "ran" with JCT 0; a millisecond is a thousand times that tolerance (every JCT resolved to
#: 0.1 %) and far below any GPU job (starting a CUDA context alone takes ~0.1 s).
MIN_DURATION: float = 1e-3

_EPOCH = datetime(1970, 1, 1)


def normalize_header(name: str) -> str:
    """The form used to compare header names: stripped of spaces, lower case."""
    return name.strip().lower()


def _decode(raw: bytes, display: str) -> str:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"corrupt gzip data: {exc}", file=display) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", file=display) from None


@dataclass
class CsvTable:
    """The parsed text of a CSV file: header, rows and the resolved canonical fields.

    ``rows[i]`` is data row ``i + 1`` (blank lines are skipped and not counted); ``fields`` maps
    each resolved canonical field to its column index and ``field_names`` to the header name as
    written in the file. Cells are stripped of surrounding spaces when a column is read.
    """

    file: str
    header: list[str]
    rows: list[list[str]]
    fields: dict[str, int] = field(default_factory=dict)
    field_names: dict[str, str] = field(default_factory=dict)
    mapped: set = field(default_factory=set)    # fields read from a column the user's mapping named
    text: str = ""                     # the decoded file, to find line numbers for messages
    has_header: bool = True
    _columns: dict[int, list[str]] = field(default_factory=dict, repr=False)
    _lines: Optional[list[int]] = field(default=None, repr=False)

    # ------------------------------------------------------------------ basics
    @property
    def num_rows(self) -> int:
        return len(self.rows)

    @property
    def row_numbers(self) -> range:
        """The 1-based data row of each entry of ``rows``."""
        return range(1, len(self.rows) + 1)

    def has(self, canonical: str) -> bool:
        return canonical in self.fields

    def name_of(self, canonical: str) -> str:
        """The header name (as in the file) of a resolved canonical field."""
        return self.field_names[canonical]

    def line_of(self, index: int) -> int:
        """The 1-based line of the file where data row ``index + 1`` starts."""
        if self._lines is None:
            self._lines = _record_lines(self.text)[1 if self.has_header else 0:]
        return self._lines[index] if index < len(self._lines) else index + 1

    def where(self, index: int) -> str:
        """`` (line N of the file)`` when the line differs from what the row number suggests."""
        line = self.line_of(index)
        expected = index + 2 if self.has_header else index + 1
        return "" if line == expected else f" (line {line} of the file)"

    def error(self, message: str, index: Optional[int] = None, canonical: Optional[str] = None,
              cls: type = DataError) -> DataError:
        """A DataError for row ``index`` (0-based position in ``rows``) and a canonical field."""
        row = None if index is None else index + 1
        if index is not None:
            message += self.where(index)
        fname = None if canonical is None else self.field_names.get(canonical, canonical)
        if canonical in self.mapped and normalize_header(fname) != normalize_header(canonical):
            # blame the field the mapping asked for, and say which column it read
            message += f" (read from column {fname!r}, as the column mapping says)"
            fname = canonical
        return cls(message, file=self.file, row=row, field=fname)

    def strings(self, canonical: str) -> list[str]:
        """The text of one column, stripped of surrounding spaces (do not modify the list)."""
        j = self.fields[canonical]
        col = self._columns.get(j)
        if col is None:
            col = [r[j].strip() for r in self.rows]
            self._columns[j] = col
        return col

    # ------------------------------------------------------------------ numbers
    def floats(self, canonical: str, *, allow_negative: bool = False,
               max_value: Optional[float] = None, what: str = "value",
               allow_empty: bool = False, hint: str = "") -> np.ndarray:
        """Column ``canonical`` as float64; checks numbers, finiteness, sign and the maximum.

        With ``allow_empty`` an empty cell becomes NaN (the caller decides what it means);
        otherwise an empty cell is an error.
        """
        col = self.strings(canonical)
        values = None
        if not any("_" in c for c in col):          # numpy would read "1_000" as 1000
            try:
                if allow_empty:
                    values = np.array([c if c else "nan" for c in col], dtype=np.float64)
                else:
                    values = np.array(col, dtype=np.float64)
            except (ValueError, TypeError, OverflowError):
                values = None
        if values is None:                          # slow path: find the first bad cell
            values = np.empty(len(col), dtype=np.float64)
            for i, c in enumerate(col):
                if not c:
                    if allow_empty:
                        values[i] = np.nan
                        continue
                    raise self.error(f"empty {what}; a number is required", i, canonical)
                if not _plain_number(c):
                    raise self.error(f"{what} {c!r} is not a number{hint}", i, canonical)
                values[i] = float(c)
        isnan = np.isnan(values)
        if allow_empty:
            present = np.array([bool(c) for c in col], dtype=bool)
            isnan &= present
        else:
            present = np.ones(len(values), dtype=bool)
        bad = np.flatnonzero(isnan)
        if bad.size:
            i = int(bad[0])
            raise self.error(f"{what} {col[i]!r} is NaN (not a number)", i, canonical)
        bad = np.flatnonzero(np.isinf(values))
        if bad.size:
            i = int(bad[0])
            raise self.error(f"{what} {col[i]!r} is infinite", i, canonical)
        if not allow_negative:
            bad = np.flatnonzero(present & (values < 0))
            if bad.size:
                i = int(bad[0])
                raise self.error(f"negative {what} {col[i]!r}; it must be >= 0", i, canonical)
        if max_value is not None:
            bad = np.flatnonzero(present & (np.abs(values) > max_value))
            if bad.size:
                i = int(bad[0])
                raise self.error(f"{what} {col[i]!r} is absurdly large (limit {max_value:g})",
                                 i, canonical)
        return values

    def ints(self, canonical: str, *, allow_negative: bool = False,
             max_value: Optional[float] = None, what: str = "value") -> np.ndarray:
        """Column ``canonical`` as int64; a value with a fractional part is an error."""
        values = self.floats(canonical, allow_negative=allow_negative, max_value=max_value,
                             what=what)
        return self.check_integral(values, canonical, what=what)

    def check_integral(self, values: np.ndarray, canonical: str, what: str = "value",
                       mask: Optional[np.ndarray] = None) -> np.ndarray:
        """``values`` as int64 after checking they are whole numbers (where ``mask`` is set)."""
        frac = values != np.floor(values)
        if mask is not None:
            frac &= mask
        bad = np.flatnonzero(frac)
        if bad.size:
            i = int(bad[0])
            text = self.strings(canonical)[i] if canonical in self.fields else repr(values[i])
            raise self.error(f"{what} {text!r} is not a whole number", i, canonical)
        return values.astype(np.int64)

    def times(self, canonical: str, *, what: str = "time") -> tuple[np.ndarray, bool]:
        """Column as seconds: plain numbers (>= 0), or ISO-8601 date-times.

        Returns ``(seconds, was_datetime)``. Date-times are converted to seconds since the Unix
        epoch; naive ones are taken as UTC (only differences matter to the loaders). A column
        that mixes numbers and date-times, or naive and zone-aware date-times, is an error.
        """
        col = self.strings(canonical)
        first = next((c for c in col if c), "")
        if not first or _plain_number(first):
            return self.floats(canonical, max_value=MAX_TIMESTAMP, what=what,
                               hint=" (a column of seconds may not mix in ISO-8601 date-times)"
                               ), False
        out = np.empty(len(col), dtype=np.float64)
        aware: Optional[bool] = None
        for i, c in enumerate(col):
            if not c:
                raise self.error(f"empty {what}", i, canonical)
            try:
                dt = datetime.fromisoformat(c)
            except ValueError:
                if _plain_number(c):
                    raise self.error(f"{what} {c!r} is a number but earlier rows hold "
                                     f"date-times; use one format in the whole column",
                                     i, canonical) from None
                raise self.error(f"{what} {c!r} is neither a number of seconds nor an ISO-8601 "
                                 f"date-time such as '2017-10-09 07:01:55'", i, canonical) from None
            is_aware = dt.tzinfo is not None
            if aware is None:
                aware = is_aware
            elif aware != is_aware:
                raise self.error(f"{what} {c!r} mixes date-times with and without a time zone",
                                 i, canonical)
            try:
                out[i] = dt.timestamp() if is_aware else (dt - _EPOCH).total_seconds()
            except (OverflowError, ValueError, OSError):
                raise self.error(f"{what} {c!r} is out of the representable range", i,
                                 canonical) from None
        return out, True


def _plain_number(text: str) -> bool:
    """True when ``text`` reads as a decimal number (digits, sign, point, exponent, nan, inf)."""
    if not text or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _reader(text: str):
    return csv.reader(io.StringIO(text, newline=""), delimiter=",", quotechar='"', strict=True)


def _blank(rec: list[str]) -> bool:
    return not rec or (len(rec) == 1 and not rec[0].strip())


def _record_lines(text: str) -> list[int]:
    """The starting line of each non-blank record (header included), for messages."""
    out = []
    reader = _reader(text)
    start = 1
    try:
        for rec in reader:
            if not _blank(rec):
                out.append(start)
            start = reader.line_num + 1
    except csv.Error:
        pass
    return out


def _locate_csv_error(text: str, has_header: bool) -> tuple[int, int]:
    """(line of a csv.Error, number of complete data rows before it; -1 within the header)."""
    reader = _reader(text)
    n = 0
    try:
        for rec in reader:
            if not _blank(rec):
                n += 1
    except csv.Error:
        pass
    return reader.line_num, n - 1 if has_header else n


def _read_text(path: PathLike, display: str) -> str:
    p = Path(path)
    raw = p.read_bytes()          # FileNotFoundError / IsADirectoryError name the path
    return _decode(raw, display)


def check_column_map(columns: object, argument: str = "columns") -> dict:
    """A user's column mapping (canonical field -> header name, or None to ignore a field) as a
    dict; ``TypeError`` naming ``argument`` (e.g. ``workload_columns=``) for anything else."""
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise TypeError(f"{argument}= must be a dict of field -> column name, got {columns!r} "
                        f"({type(columns).__name__})")
    for key, value in columns.items():
        if not isinstance(key, str):
            raise TypeError(f"{argument}= keys must be field names (str), got {key!r} ({type(key).__name__})")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{argument}={{{key!r}: {value!r}}}: a column name must be a str (or None to "
                            f"ignore an optional field), got {type(value).__name__}")
    return dict(columns)


def read_csv(path: PathLike, *, required: Mapping[str, Sequence[str]],
             optional: Optional[Mapping[str, Sequence[str]]] = None,
             columns: Optional[Mapping[str, str]] = None,
             fieldnames: Optional[Sequence[str]] = None,
             display: Optional[str] = None, columns_arg: str = "columns") -> CsvTable:
    """Read and check a CSV file; resolve canonical fields from aliases.

    Args:
        path: the file (``.csv`` or gzip-compressed).
        required: canonical field -> accepted header names (aliases), all must be found.
        optional: canonical field -> aliases, resolved when present.
        columns: user mapping canonical field -> header name in the file; it overrides the
            aliases of that field (a mapped name that is not in the header is an error). Mapping
            an optional field to ``None`` or ``""`` tells the reader to ignore that field.
        fieldnames: column names for a file without a header row (every line is data).
        display: how the file is named in error messages (default: the path).

    Raises:
        DataError: empty file, header only, wrong delimiter, missing or duplicated column, two
            aliases of one field not chosen between by ``columns``, a row with the wrong number of
            fields, a malformed line.
    """
    display = str(path) if display is None else display
    optional = dict(optional or {})
    columns = check_column_map(columns)
    known = set(required) | set(optional)
    unknown = sorted(set(columns) - known)
    if unknown:
        raise DataError(f"column mapping names unknown field(s) {unknown}; known fields are "
                        f"{sorted(known)}", file=display)
    text = _read_text(path, display)
    if not text.strip():
        raise DataError("the file is empty", file=display)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DataError(f"NUL byte on line {line}: the file is binary or corrupt", file=display)

    try:
        recs = list(_reader(text))
    except csv.Error as exc:
        line, n_data = _locate_csv_error(text, fieldnames is None)
        raise DataError(f"malformed CSV on line {line}: {exc}", file=display,
                        row=n_data + 1 if n_data >= 0 else None) from None
    if any(len(r) <= 1 for r in recs):
        recs = [r for r in recs if not _blank(r)]
    if fieldnames is not None:
        header = [str(f).strip() for f in fieldnames]
        rows = recs
    else:
        header = [h.strip() for h in recs[0]]
        rows = recs[1:]
        if len(header) == 1 and (";" in header[0] or "\t" in header[0]):
            delim = "';'" if ";" in header[0] else "a tab"
            raise DataError(f"the header {header[0]!r} is separated by {delim}, not by commas: "
                            f"only comma-separated files are accepted", file=display, row=0)
    norm = [normalize_header(h) for h in header]
    seen: dict[str, int] = {}
    for j, h in enumerate(norm):
        if h and h in seen:
            raise DataError(f"column {header[j]!r} appears twice in the header", file=display,
                            row=0, field=header[j])
        seen[h] = j
    if not rows:
        raise DataError("the file has a header but no data rows", file=display, row=0)

    table = CsvTable(file=display, header=header, rows=rows, text=text,
                     has_header=fieldnames is None)
    width = len(header)
    if any(len(r) != width for r in rows):
        i = next(k for k, r in enumerate(rows) if len(r) != width)
        n = len(rows[i])
        kind = "truncated row" if n < width else "row with extra fields"
        name = header[n] if n < width else None
        raise DataError(f"{kind}: {n} fields where the header has {width}{table.where(i)}",
                        file=display, row=i + 1, field=name)
    found = ", ".join(repr(h) for h in header)
    missing: list[tuple[str, Sequence[str]]] = []
    for canonical, aliases in list(required.items()) + list(optional.items()):
        is_required = canonical in required
        if canonical in columns and not columns[canonical]:
            if is_required:
                raise DataError(f"required field {canonical!r} cannot be mapped to nothing",
                                file=display)
            continue
        if canonical in columns:
            want = normalize_header(columns[canonical])
            if want not in seen:
                raise DataError(f"column {columns[canonical]!r} (mapped to field {canonical!r}) is "
                                f"not in the header; columns found: {found}", file=display, row=0,
                                field=columns[canonical])
            j = seen[want]
            table.mapped.add(canonical)
        else:
            present = list(dict.fromkeys(seen[normalize_header(a)] for a in aliases
                                         if normalize_header(a) in seen))
            if len(present) > 1:    # reading one and dropping the other would lose data unseen
                a, b = (header[k] for k in sorted(present)[:2])
                flag = f" (cluster-bench: --{columns_arg.replace('_', '-')} {canonical}={b})" \
                    if columns_arg.endswith("_columns") else ""
                raise DataError(f"columns {a!r} and {b!r} are both names of field {canonical!r}: keep one, or "
                                f"choose one with {columns_arg}={{{canonical!r}: {b!r}}}{flag}", file=display,
                                row=0, field=b)
            j = present[0] if present else None
            if j is None:
                if is_required:
                    missing.append((canonical, aliases))
                continue
        other = next((f for f, k in table.fields.items() if k == j), None)
        if other is not None:   # one column read as two fields: one of them is surely wrong
            mapped = [f for f in (other, canonical) if f in columns]
            raise DataError(f"fields {other!r} and {canonical!r} both read column {header[j]!r}"
                            f"{' (mapped by ' + columns_arg + '=)' if mapped else ''}; map each field to its "
                            f"own column", file=display, row=0, field=header[j])
        table.fields[canonical] = j
        table.field_names[canonical] = header[j]
    if missing:     # every missing column at once, and the argument that maps them
        what = "; ".join(f"{c!r} (accepted names: {', '.join(repr(a) for a in al)})" for c, al in missing)
        example = ", ".join(f"{c!r}: 'your header'" for c, _ in missing)
        raise DataError(f"missing required column{'s' if len(missing) > 1 else ''} {what}; or map "
                        f"{'them' if len(missing) > 1 else 'it'} with {columns_arg}={{{example}}}; "
                        f"columns found: {found}", file=display, row=0, field=missing[0][0])
    return table


def round_half_up(x: float) -> int:
    """``floor(x + 0.5)``: the rounding used where the loaders round counts."""
    return int(math.floor(x + 0.5))
