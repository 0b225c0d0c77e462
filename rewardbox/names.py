"""File names that are not UTF-8, as rewardbox sends them: git's C-quoted form.

A file name is bytes; JSON carries text. A name (or any string of a result) that holds bytes which are not
UTF-8 reaches the client C-quoted, exactly as git writes such a path in a diff: in double quotes, with `\\"`,
`\\\\`, `\\n`, `\\t` and three-digit octal escapes for the bytes that are not UTF-8 text or are control
characters, e.g. the name b"\\xff.py" arrives as '"\\377.py"'. A string that is valid UTF-8 arrives as it is.
`unquote` gives back the bytes.

The sandbox side writes diffs with the same rule (sandboxes/inside/repo_diff.py `quote_path`, which also quotes
names holding `"`, `\\` or control characters, as git does); tests/test_names_units.py checks they agree.
"""

from __future__ import annotations

_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r",
            ord("\a"): "\\a", ord("\b"): "\\b", ord("\f"): "\\f", ord("\v"): "\\v"}
_UNESCAPES = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, '"': 34, "\\": 92}


def is_text(s: str) -> bool:
    """Whether s encodes to UTF-8 (a name decoded with surrogateescape does not when it held other bytes)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def quote(s: str) -> str:
    """git's C-quoting of s; surrogate escapes (\\udc80-\\udcff, Python's surrogateescape) become their bytes."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        elif 0xD800 <= code <= 0xDFFF:
            raw = bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else ch.encode("utf-8", "surrogatepass")
            out.extend(f"\\{b:03o}" for b in raw)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def wire(s: str) -> str:
    """s as rewardbox sends it: unchanged when it is UTF-8 text, C-quoted when it holds other bytes."""
    return s if is_text(s) else quote(s)


def unquote(s: str) -> bytes:
    """The bytes a name stands for: a C-quoted name ('"\\377.py"') unescaped, any other one encoded as UTF-8."""
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return s.encode("utf-8", "surrogateescape")
    out = bytearray()
    body, i = s[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1 : i + 2] in _UNESCAPES:
            out.append(_UNESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)
