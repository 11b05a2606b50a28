"""JSON in and out for the data files people read: baselines and reports.

Writing: :func:`dumps_stable` sorts keys, indents by two spaces and keeps a list
of plain numbers on one line, so a changed figure is a one-line diff.
:func:`round_sig` gives times a stable precision.

Reading: :func:`parse` turns what ``json.loads`` raises on hostile text (a duplicated
key, a 5,000-digit number, nesting 200,000 deep) into one :class:`DocumentError`.
:class:`Fields` reads typed values out of parsed JSON and raises
:class:`FieldError` naming the field's path (``tests["t"].ops["numpy.add"].count``)
so the caller can name the file around it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator

from pytest_opprof.errors import FieldError, OpprofError

INT64_MAX = 2**63 - 1
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class DocumentError(OpprofError, ValueError):
    """A file's text is no JSON this package reads; the message says why, for a person."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentError(
                    f"the key {json.dumps(key)} appears twice in one object (a merge that "
                    "kept both sides?); keep one, or an update would drop the other silently"
                )
            seen.add(key)
    return data


def parse(text: str) -> object:
    """The JSON value of ``text``; raises :class:`DocumentError` for text that is not JSON,
    a key twice in one object, a number too long for Python to read or nesting deeper
    than its recursion limit."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"not valid JSON (truncated or corrupted?): {exc.msg} at line {exc.lineno}"
        ) from None
    except RecursionError:
        raise DocumentError(
            "nested too deeply to read (deeper than Python's recursion limit); "
            "no baseline or report nests more than a few levels"
        ) from None
    except DocumentError:
        raise
    except ValueError:  # an integer longer than sys.get_int_max_str_digits() allows
        raise DocumentError(
            f"holds a number of more than {sys.get_int_max_str_digits()} digits, too long "
            "to read; no figure of a baseline or report is near that long"
        ) from None


_encode_str = json.encoder.encode_basestring
"""json's own string encoder (its C one), as json.dumps(ensure_ascii=False) calls it."""


def round_sig(value: float, digits: int = 3) -> int:
    """``value`` rounded to ``digits`` significant digits, as an int (for ns figures)."""
    if value == 0:
        return 0
    exponent = math.floor(math.log10(abs(value)))
    return int(round(value, digits - 1 - exponent))


def dumps_stable(data: object, *, flat_objects: bool = False) -> str:
    """JSON text with sorted keys, two-space indent and scalar lists on one line; with
    ``flat_objects``, also each object whose values are scalars or scalar lists (a
    baseline's op: a changed op is a one-line diff, and no line per figure)."""
    return _dump(data, 0, flat_objects) + "\n"


def dumps_nested(value: object, level: int) -> str:
    """``value`` as :func:`dumps_stable` writes it at nesting ``level`` (no newline)."""
    return _dump(value, level)


def _flat(value: object) -> bool:
    return not isinstance(value, dict | list | tuple) or (
        isinstance(value, list | tuple)
        and all(not isinstance(v, dict | list | tuple) for v in value)
    )


def _dump(value: object, level: int, flat_objects: bool = False) -> str:
    pad = "  " * (level + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        keys = sorted(value, key=str)
        if flat_objects and all(_flat(value[key]) for key in keys):
            return "{" + ", ".join(f"{_scalar(str(k))}: {_dump(value[k], 0)}" for k in keys) + "}"
        items = [
            f"{pad}{_scalar(str(key))}: {_dump(value[key], level + 1, flat_objects)}"
            for key in keys
        ]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, list | tuple):
        if all(not isinstance(item, dict | list | tuple) for item in value):
            return "[" + ", ".join(_scalar(item) for item in value) + "]"
        items = [pad + _dump(item, level + 1, flat_objects) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * level + "]"
    return _scalar(value)


def _scalar(value: object) -> str:
    # What json.dumps writes for the common scalars, without building an encoder per
    # value (a detailed report of scipy.signal's test_spectral, A/B: 1.8 s of _dump).
    if isinstance(value, str) and value.isascii():
        return _encode_str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if isinstance(value, str) and not value.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (a key read from a hand-edited file) has no UTF-8 form:
            # as a \uXXXX escape it round-trips, and the file can still be written.
            return json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text


def field_path(parent: str, key: str | int) -> str:
    """``parent.key`` for identifier keys, ``parent["key"]`` otherwise."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _IDENTIFIER.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class Fields:
    """Typed, path-aware reads from one parsed JSON object."""

    def __init__(self, data: object, path: str = "") -> None:
        if not isinstance(data, dict):
            raise FieldError(path, f"expected an object, got {_kind(data)}")
        self.data: dict[str, object] = data
        self.path = path

    def _get(self, key: str) -> object:
        if key not in self.data:
            raise FieldError(field_path(self.path, key), "missing")
        return self.data[key]

    def has(self, key: str) -> bool:
        """Whether ``key`` is present and not null."""
        return self.data.get(key) is not None

    def integer(self, key: str, *, minimum: int | None = 0, maximum: int | None = None) -> int:
        """An integer (not a boolean, not a float) >= ``minimum`` and <= ``maximum``."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(field_path(self.path, key), f"expected an integer, got {_kind(value)}")
        if minimum is not None and value < minimum:
            raise FieldError(field_path(self.path, key), f"expected >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise FieldError(field_path(self.path, key), f"expected <= {maximum}, got {value}")
        if abs(value) > INT64_MAX:  # figures are int64 natively; bigger ones overflow floats
            raise FieldError(
                field_path(self.path, key), f"expected at most {INT64_MAX}, got {value}"
            )
        return value

    def opt_integer(self, key: str, *, minimum: int | None = 0) -> int | None:
        """Like :meth:`integer`, ``None`` when absent or null."""
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def number(self, key: str) -> float:
        """A finite number (NaN and infinities are refused)."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldError(field_path(self.path, key), f"expected a number, got {_kind(value)}")
        if (isinstance(value, int) and abs(value) > INT64_MAX) or not math.isfinite(value):
            raise FieldError(field_path(self.path, key), f"expected a finite number, got {value}")
        return float(value)

    def text(self, key: str) -> str:
        """A string."""
        value = self._get(key)
        if not isinstance(value, str):
            raise FieldError(field_path(self.path, key), f"expected a string, got {_kind(value)}")
        return value

    def opt_text(self, key: str) -> str | None:
        """Like :meth:`text`, ``None`` when absent or null."""
        return self.text(key) if self.has(key) else None

    def obj(self, key: str) -> Fields:
        """A nested object."""
        return Fields(self._get(key), field_path(self.path, key))

    def opt_obj(self, key: str) -> Fields | None:
        """Like :meth:`obj`, ``None`` when absent or null."""
        return self.obj(key) if self.has(key) else None

    def integers(self, key: str) -> list[int]:
        """A list of integers >= 0."""
        value = self._get(key)
        path = field_path(self.path, key)
        if not isinstance(value, list):
            raise FieldError(path, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= INT64_MAX:
                raise FieldError(field_path(path, i), f"expected an integer >= 0, got {item!r}")
        return list(value)

    def int_pair(self, key: str) -> tuple[int, int]:
        """A ``[low, high]`` pair of integers (any sign) with ``low <= high``."""
        value = self._get(key)
        path = field_path(self.path, key)
        if (
            not isinstance(value, list)
            or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in value)
            or any(abs(v) > INT64_MAX for v in value)
            or value[0] > value[1]
        ):
            raise FieldError(
                path, f"expected [low, high], two integers with low <= high, got {value!r}"
            )
        return value[0], value[1]

    def texts(self, key: str) -> list[str]:
        """A list of strings."""
        value = self._get(key)
        path = field_path(self.path, key)
        if not isinstance(value, list):
            raise FieldError(path, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise FieldError(field_path(path, i), f"expected a string, got {_kind(item)}")
        return list(value)

    def objects(self, key: str) -> Iterator[Fields]:
        """Each object of a list of objects."""
        value = self._get(key)
        path = field_path(self.path, key)
        if not isinstance(value, list):
            raise FieldError(path, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            yield Fields(item, field_path(path, i))

    def entries(self) -> Iterator[tuple[str, Fields]]:
        """Each ``(key, object)`` of an object whose values are objects, in key order."""
        for key in sorted(self.data):
            yield key, Fields(self.data[key], field_path(self.path, key))
