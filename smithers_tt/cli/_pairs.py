"""``NAME=VALUE`` options given once per name (``--checkpoint NODE=FILE``, ``--skip NODE=JSON``,
``--variant NAME=EDITS.json``): one reading, one set of errors, for every command."""

from __future__ import annotations

from smithers_tt.errors import InvalidArgument


def name_values(pairs: tuple[str, ...], option: str, form: str) -> dict[str, str]:
    """``pairs`` as name -> value, in the order given; ``form`` is what the option takes
    (``"NODE=JSON"``), named in the error when a pair has no ``=`` or no name, or when a name
    is given twice (the second would silently replace the first)."""
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"{option} takes {form}, got {pair!r}")
        if name in found:
            raise InvalidArgument(f"{option} {name!r} is given twice")
        found[name] = value
    return found
