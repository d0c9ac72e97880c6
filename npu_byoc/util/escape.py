"""Escaping of model-supplied strings, one function per place they are written.

A model file is untrusted input: its tensor, layer and node names — and the file's own name —
are data chosen by whoever made it. Every writer that puts such a string into generated code
or a report passes it through the function for that target here, and nothing else:

================  ==============================================================================
``c_comment``     text inside a ``//`` comment: a strict whitelist, every other byte as ``%XX``
``c_string``      the body of a C/C++ string literal: printable ASCII, the rest octal-escaped
``c_identifier``  a C identifier: ``[A-Za-z0-9_]`` only, never a leading digit
``text``          a cell of a terminal table: control characters made visible
``markdown``      a Markdown table cell: no HTML, no table or inline syntax
``csv_cell``      a CSV cell: no spreadsheet formula (``=+-@`` first), control characters visible
``file_name``     one path component: ``[A-Za-z0-9._-]``, no leading dot
================  ==============================================================================

JSON needs no function of its own: ``json.dumps`` escapes everything, and :func:`normalize`
(which every function here applies first) turns undecodable bytes into visible escapes.

Every function caps the length (a 100,000-character name stays one short line) and is
total: any ``str`` or ``bytes`` in, an inert ``str`` out.
"""

from __future__ import annotations

import re
import string

MAX_LENGTH = 160  # characters kept of one name; the rest is elided with "..."

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def normalize(value: object, limit: int = MAX_LENGTH) -> str:
    """``value`` as valid Unicode of at most ``limit`` characters: bytes that are not UTF-8
    and lone surrogates (what ``errors="surrogateescape"`` leaves) become ``\\xNN`` text."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    s = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def clean(value: object, limit: int = MAX_LENGTH) -> str:
    """:func:`normalize`, and control or bidirectional-override characters as visible
    ``\\xNN`` / ``\\uNNNN`` escapes: a printable, single-line ``str``."""
    return _CONTROL.sub(_visible, normalize(value, limit))


def _visible(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


# ---------------------------------------------------------------------------------------------
# Generated C++


# Kept as they are inside a // comment. Everything else (backslash: a line continuation at
# the end of a // comment; '?': trigraphs such as ??/; '*': block comments; '%': our escape;
# newlines, NUL, non-ASCII) becomes %XX of its UTF-8 bytes.
_COMMENT_SAFE = frozenset(string.ascii_letters + string.digits + " _-+=.,:;/()[]{}<>#@!&|^~'\"$")


def c_comment(value: object) -> str:
    """Text that stays inside one ``//`` comment line whatever ``value`` holds."""
    s = normalize(value)
    return "".join(ch if ch in _COMMENT_SAFE else "".join(f"%{b:02X}" for b in ch.encode()) for ch in s)


_STRING_SAFE = frozenset(string.ascii_letters + string.digits + " _-+=.,:;/()[]{}<>#@!&|^~'$*%")


def c_string(value: object) -> str:
    """The body of a C++ string literal that denotes ``value`` (as :func:`normalize` leaves it).

    Printable ASCII but ``"``, ``\\`` and ``?`` (trigraphs) is kept; every other byte is a
    three-digit octal escape, which, unlike ``\\x``, never swallows the characters after it.
    """
    s = normalize(value)
    return "".join(ch if ch in _STRING_SAFE else "".join(f"\\{b:03o}" for b in ch.encode()) for ch in s)


_IDENT_BAD = re.compile(r"[^A-Za-z0-9_]")


def c_identifier(value: object, prefix: str = "n_") -> str:
    """A C identifier made from ``value``: unsafe characters become ``_``, and ``prefix`` is
    put in front when the result would start with a digit or be empty."""
    s = _IDENT_BAD.sub("_", clean(value, 64))
    return s if s and not s[0].isdigit() else prefix + s


def is_c_identifier(value: str) -> bool:
    """Whether ``value`` may be pasted into C++ as an identifier as it is. Any length (g++ and
    clang have no limit): TVM's MergeCompositeFunctions names a partition after all its ops,
    1,273 characters for tiny_cnn_int8's one partition."""
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value))


# ---------------------------------------------------------------------------------------------
# Reports


def text(value: object, limit: int = MAX_LENGTH) -> str:
    """A cell of a plain-text table: one line, no terminal control sequences."""
    return clean(value, limit)


def text_column(value: object, width: int) -> str:
    """:func:`text` elided on the left to ``width`` characters (the end of a layer name is the
    part that tells layers apart)."""
    s = text(value, 4 * width)
    return s if len(s) <= width else "…" + s[-(width - 1):]


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~!])")


def markdown(value: object) -> str:
    """A Markdown table cell that shows ``value`` literally: no raw HTML, no links, code
    spans, emphasis or column breaks."""
    s = clean(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet evaluates: a string starting with ``= + - @`` (or a tab
    or carriage return) gets a leading ``'``. Numbers pass unchanged."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    s = clean(value)
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


_FILE_BAD = re.compile(r"[^A-Za-z0-9._-]")


def file_name(value: object, default: str = "model") -> str:
    """One safe path component made from ``value`` (no separators, no leading dot)."""
    s = _FILE_BAD.sub("_", clean(value, 96)).lstrip(".")
    return s or default
