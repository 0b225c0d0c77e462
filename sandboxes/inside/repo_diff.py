"""Unified diffs between two versions of a repository's files (stdlib only), in the git style GNU patch applies.

Used wherever rewardbox itself turns file contents into a patch: the benchmark builder's gold patches
(service/repos/benchmark.py) and, for agent sessions, a workspace's diff against its snapshot. Paths carry git's
`a/` and `b/` prefixes (so `patch -p1` applies them), a created file comes from /dev/null, a deleted one goes
to it, and a last line without a newline is marked as such, so that applying the diff restores the bytes
exactly. Content that is not UTF-8 text cannot be expressed (GNU patch has no binary hunks): it is reported,
never silently dropped.
"""

from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


class NotText(ValueError):
    """A changed file is not UTF-8 text, so no unified diff can carry it."""


def unified_diff(old: dict[str, bytes | None], new: dict[str, bytes | None], context: int = 3) -> str:
    """The patch that turns `old` into `new`. Each maps a relative path to its bytes (None or absent: no file).
    Paths appear in sorted order; unchanged files produce nothing."""
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        out.append(_file_diff(path, before, after, context))
    return "".join(out)


def quote_path(path: str) -> str:
    """A path as git writes it in a diff: as it is, or C-quoted ("\\377.py" for the byte 0xff) when it holds bytes
    that are not UTF-8 (surrogate escapes, as os.scandir decodes them), `"`, `\\` or control characters. GNU patch
    reads both forms. The client's rewardbox/names.py has the same rule for names in results."""
    if all(ch >= " " and ch not in '"\\\x7f' and not "\ud800" <= ch <= "\udfff" for ch in path):
        return path
    out = ['"']
    for ch in path:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        elif 0xD800 <= code <= 0xDFFF:
            raw = bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else ch.encode("utf-8", "surrogatepass")
            out.extend(f"\\{b:03o}" for b in raw)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
            "\f": "\\f", "\v": "\\v"}


def _file_diff(path: str, before: bytes | None, after: bytes | None, context: int) -> str:
    a, b = _lines(path, before), _lines(path, after)
    header = [f"diff --git {quote_path('a/' + path)} {quote_path('b/' + path)}\n"]
    if before is None:
        header.append("new file mode 100644\n")
    elif after is None:
        header.append("deleted file mode 100644\n")
    src = "/dev/null" if before is None else quote_path(f"a/{path}")
    dst = "/dev/null" if after is None else quote_path(f"b/{path}")
    body = []
    for line in difflib.unified_diff(a, b, src, dst, n=context, lineterm="\n"):
        if line.startswith(("---", "+++")):
            body.append(line.rstrip("\n") + "\n")  # difflib ends file headers with lineterm
        elif line.endswith("\n"):
            body.append(line)
        else:  # the file's last line has no newline: say so, as diff(1) does
            body.append(line + "\n" + NO_NEWLINE)
    return "".join(header + body)


def _lines(path: str, data: bytes | None) -> list[str]:
    if data is None:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotText(f"{path}: not UTF-8 text, which a unified diff cannot carry") from None
    return _split_lines(text)


def _split_lines(text: str) -> list[str]:
    """Split on \\n only, as patch does: \\r, form feeds and the like are content (str.splitlines breaks there)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out
