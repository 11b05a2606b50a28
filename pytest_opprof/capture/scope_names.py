"""A ``record_function`` scope's name: a ``str``, checked alike whether anything records.

Checked where a scope is made, with ``--opprof`` or without it and inside a profile or not,
so a name that is no ``str`` (``123``, ``None``, ``b"x"``) fails the same test either way,
never only in the profiled run.  Imports nothing: the plugin's fixture checks names in runs
that load neither numpy nor the native core.  How a ``str`` that a C string cannot hold as
it is (a NUL, a lone surrogate) is named is ``_native.encoded_name``'s.
"""

from __future__ import annotations

__all__ = ["scope_name"]


def scope_name(name: object) -> str:
    """``name`` as a plain ``str``; ``TypeError`` naming its type when it is no ``str``
    (as torch's ``record_function``, which takes a ``str``; nothing is converted, so an
    object whose ``__str__`` raises never runs it)."""
    if type(name) is str:
        return name
    if isinstance(name, str):  # a subclass: its text, whatever its own __str__ does
        return str.__str__(name)
    raise TypeError(
        f"record_function: a scope's name must be a str, not {type(name).__name__}"
        + (" (decode the bytes first)" if isinstance(name, (bytes, bytearray)) else "")
    )
