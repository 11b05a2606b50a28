"""Exceptions raised by pytest-opprof; all derive from :class:`OpprofError`."""

from __future__ import annotations


class OpprofError(Exception):
    """Base of every error pytest-opprof raises on purpose."""


class NativeError(OpprofError):
    """A native entry point failed: ``code`` is its ``OPPROF_E_*`` status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class BaselineError(OpprofError):
    """A baseline (or report) file cannot be used; the message names the file and field."""

    def __init__(self, path: object, message: str, *, field: str | None = None) -> None:
        where = f"{path}: {field}" if field else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.field = field
        self.reason = message


class NativeBuildError(OpprofError, ImportError):
    """The compiled core is missing or does not match this Python package."""


class OptionValueError(OpprofError, ValueError):
    """A value does not parse; the message states the accepted forms."""


class MarkerUsageError(OpprofError):
    """A ``profile`` marker with keywords or values it does not accept."""


class FieldError(OpprofError, ValueError):
    """A JSON value is missing or has the wrong type; ``field`` is its path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field or '<top level>'}: {message}")
        self.field = field
        self.reason = message
