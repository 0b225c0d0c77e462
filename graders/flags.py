"""Suspicious-construct flags: computed on the host, over the very text that runs. Information, not a verdict.

They used to be computed inside the candidate's process, which a program controls: one that exited or hung while
loading, or broke its channel, came back with none. Here they depend on the source alone, so every outcome carries
them (a load-time exit, a hang, a timeout, even an infra error), and a profile's `flag_penalty` cannot be dodged.

Python:
- exit_call: exit/quit/os._exit/abort/kill, raising SystemExit/KeyboardInterrupt/SkipTest.
- eq_override: a comparison, hash or truth dunder (an always-equal object).
- harness_patch: assigning to (or setattr on) builtins, test modules or the names a harness relies on.
- harness_import: importing unittest, pytest, builtins, ctypes, gc, inspect.
- introspection: frames, globals, code objects, subclasses, the garbage collector's object lists.
- dynamic_code: code run from data, which hides every construct above from a static reading: exec and compile
  anywhere; eval of data the program carries (a constant, a module-level name, a decoding call) rather than of its
  input; __import__/import_module of a computed name; getattr on a module with a computed name; marshal/pickle
  loads; building code or function objects. A payload the program decodes from constants (hex, base64, zlib,
  rot13, reversed or joined characters) is decoded here, within size caps, and scanned in turn: its own
  constructs are flagged too.
JavaScript/TypeScript (comments and string contents ignored): exit_call (process.exit/kill/abort),
dynamic_code (eval, Function, vm, computed require, string timers).
Rust has its own refusal list (graders/rust_tests.py, flag rust_forbidden).
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import functools
import lzma
import re
import zlib
from collections.abc import Callable
from typing import Any

from sandboxes.languages import LANGUAGES

from . import pyast

EXIT_CALLS = {"exit", "quit", "_exit", "abort", "kill", "killpg", "skip", "SkipTest", "SystemExit",
              "KeyboardInterrupt", "GeneratorExit"}
COMPARISON_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__",
                      "__instancecheck__", "__subclasshook__"}
HARNESS_MODULES = {"builtins", "__builtin__", "unittest", "pytest", "_pytest", "doctest", "sys", "gc", "inspect",
                   "ctypes", "importlib", "atexit", "signal", "faulthandler", "traceback"}
IMPORTED_HARNESS = {"unittest", "pytest", "_pytest", "builtins", "ctypes", "gc", "inspect"}
INTROSPECTION_ATTRS = {"_getframe", "f_back", "f_globals", "f_locals", "__globals__", "__code__",
                       "__subclasses__", "get_referrers", "get_objects", "__builtins__"}
INTROSPECTION_CALLS = {"globals", "vars", "locals"}
PATCHABLE = {"AssertionError", "print", "open", "__import__", "isinstance", "type", "len", "abs", "round",
             "sorted", "eval", "exec", "compile", "Exception", "BaseException", "__build_class__"}
CODE_BUILTINS = {"exec", "eval", "compile", "__import__", "breakpoint"}
CODE_LOADERS = {"marshal.loads", "marshal.load", "pickle.loads", "pickle.load", "dill.loads", "dill.load",
                "types.CodeType", "types.FunctionType", "types.LambdaType", "runpy.run_path",
                "runpy.run_module", "importlib.import_module", "code.interact", "code.InteractiveInterpreter"}
PAYLOAD_CAP = 1 << 20  # bytes a folded payload may grow to (decompression bombs, "a" * 10**9)
NESTING = 3  # payloads decoded from payloads, at most
# Calls that make the Python scanner fold constants (and decode and scan payloads), by the last part of their name:
# an alias is imported under that name, so it is in the source either way.
ATTRIBUTE_CALLS = {"getattr", "setattr", "delattr", "hasattr"}  # their name argument is folded (visit_getattr)
FOLDING_CALLS = CODE_BUILTINS | ATTRIBUTE_CALLS | {n.rsplit(".", 1)[-1] for n in CODE_LOADERS}
QUICK_SCAN_CHARS = 4096


def flags_for(language: str, code: str) -> list[str]:
    """The static flags of a program in its language: the scanner its registry entry names (Language.flag_scanner;
    none for most languages; Rust's refusals are flagged where they are refused)."""
    lang = LANGUAGES.get(language)
    scanner = SCANNERS.get(lang.flag_scanner) if lang and lang.flag_scanner else None
    return scanner(code) if scanner else []


def scans_quickly(language: str, code: str) -> bool:
    """Whether flags_for(language, code) is sure to take well under a millisecond: no scanner, or a short ASCII
    Python source that calls nothing the scanner folds (folding may decode a payload of up to PAYLOAD_CAP and scan
    it in turn). ASCII: identifiers are NFKC-normalised, so a full-width `exec` is exec."""
    lang = LANGUAGES.get(language)
    if lang is None or not lang.flag_scanner:
        return True
    return (lang.flag_scanner == "python" and len(code) < QUICK_SCAN_CHARS and code.isascii()
            and not any(name in code for name in FOLDING_CALLS))


def python_flags(code: str) -> list[str]:
    """Flags of a Python program ([] when it does not parse: nothing of it runs)."""
    return sorted(_scan(code, NESTING))


def _scan(code: str | bytes, nesting: int) -> set[str]:
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
        return set()
    try:
        return _Scanner(tree, nesting).flags
    except (RecursionError, MemoryError):
        return {"dynamic_code"}  # a program too deep to read is not given the benefit of the doubt


class NotConstant(Exception):
    """The expression does not fold to a constant payload."""


class _Scanner:
    def __init__(self, tree: ast.Module, nesting: int) -> None:
        self.nesting = nesting
        self.flags: set[str] = set()
        self.aliases = _import_aliases(tree)
        self.module_names = _module_level_names(tree)
        self.constants = _module_constants(tree)
        self.folding: set[str] = set()  # constants being folded (a self-referencing chain cannot loop)
        self.call_funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            self.visit(node)

    def visit(self, node: ast.AST) -> None:
        flags = self.flags
        if isinstance(node, ast.Raise) and node.exc is not None:
            if _name_of(node.exc.func if isinstance(node.exc, ast.Call) else node.exc) in EXIT_CALLS:
                flags.add("exit_call")
        elif isinstance(node, ast.Call):
            self.visit_call(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in COMPARISON_DUNDERS:
            flags.add("eq_override")
        elif isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRS:
            flags.add("introspection")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [
                (node.module or "").split(".")[0]]
            if any(m in IMPORTED_HARNESS for m in mods):
                flags.add("harness_import")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and _root_name(t) in HARNESS_MODULES | PATCHABLE:
                    flags.add("harness_patch")
                if isinstance(t, ast.Subscript) and _root_name(t) in {"__builtins__", "modules", "sys"}:
                    flags.add("harness_patch")
                if isinstance(t, ast.Name) and t.id in PATCHABLE:
                    flags.add("harness_patch")
        elif isinstance(node, ast.Global | ast.Nonlocal) and any(n in PATCHABLE for n in node.names):
            flags.add("harness_patch")
        elif isinstance(node, ast.Name) and node.id in CODE_BUILTINS and isinstance(node.ctx, ast.Load) \
                and id(node) not in self.call_funcs and node.id not in self.aliases:
            flags.add("dynamic_code")  # `run = exec`: code execution through another name

    def visit_call(self, node: ast.Call) -> None:
        flags = self.flags
        name, dotted = _name_of(node.func), self.dotted(node.func)
        if name in EXIT_CALLS:
            flags.add("exit_call")
        if name in {"setattr", "delattr"} and node.args and _name_of(node.args[0]) in HARNESS_MODULES | PATCHABLE:
            flags.add("harness_patch")
        if dotted in INTROSPECTION_CALLS:
            flags.add("introspection")
        if dotted in {"exec", "compile", "builtins.exec", "builtins.compile"} or dotted in CODE_LOADERS:
            flags.add("dynamic_code")
            self.scan_payload(node)
        elif dotted in {"eval", "builtins.eval"} and node.args:
            if self.is_data(node.args[0]):
                flags.add("dynamic_code")
            self.scan_payload(node)
        elif dotted in {"__import__", "builtins.__import__"} and node.args:
            self.imported(node.args[0])
        elif name in ATTRIBUTE_CALLS and len(node.args) >= 2:
            self.visit_getattr(node)

    def visit_getattr(self, node: ast.Call) -> None:
        try:
            attr = self.fold(node.args[1])
        except NotConstant:
            target = node.args[0]
            if self.dotted(target) in self.aliases.values() or _name_of(target) in {"__builtins__", "builtins"}:
                self.flags.add("dynamic_code")  # a computed name looked up on a module
            return
        if isinstance(attr, str):
            if attr in EXIT_CALLS:
                self.flags.add("exit_call")
            if attr in INTROSPECTION_ATTRS:
                self.flags.add("introspection")
            if attr in CODE_BUILTINS:
                self.flags.add("dynamic_code")

    def imported(self, arg: ast.expr) -> None:
        try:
            module = self.fold(arg)
        except NotConstant:
            self.flags.add("dynamic_code")
            return
        if isinstance(module, str) and module.split(".")[0] in IMPORTED_HARNESS:
            self.flags.add("harness_import")

    def is_data(self, arg: ast.expr) -> bool:
        """eval's argument is the program's own data (not its input): constant, module-level or decoded."""
        try:
            self.fold(arg)
            return True
        except NotConstant:
            pass
        for n in ast.walk(arg):
            if isinstance(n, ast.Name) and n.id in self.module_names:
                return True
            if isinstance(n, ast.Call) and _name_of(n.func) in DECODERS_BY_NAME:
                return True
        return False

    def scan_payload(self, node: ast.Call) -> None:
        if not node.args or self.nesting <= 0:
            return
        try:
            payload = self.fold(node.args[0])
        except NotConstant:
            return
        if isinstance(payload, str | bytes):
            self.flags |= _scan(payload, self.nesting - 1)

    def dotted(self, node: ast.AST) -> str:
        """`b64.b64decode` with `import base64 as b64` -> base64.b64decode; a bare name through its from-import."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return ""
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    # -- constant folding of payloads: what decode-and-exec programs build their code from

    def fold(self, node: ast.AST, env: dict | None = None) -> Any:  # any value; misuse raises inside _checked
        env = env or {}
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes | int | float | type(None)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.constants and node.id not in self.folding:
                self.folding.add(node.id)
                try:
                    return self.fold(self.constants[node.id], env)
                finally:
                    self.folding.discard(node.id)
            raise NotConstant
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self.fold(node.operand, env)
            if not isinstance(value, int | float):
                raise NotConstant
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.List | ast.Tuple):
            return [self.fold(e, env) for e in node.elts]
        if isinstance(node, ast.JoinedStr):
            return "".join(str(self.fold(v.value if isinstance(v, ast.FormattedValue) else v, env))
                           for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult | ast.Mod):
            left, right = self.fold(node.left, env), self.fold(node.right, env)
            if isinstance(node.op, ast.Mult):
                n = right if isinstance(right, int) else left
                seq = left if isinstance(right, int) else right
                if not isinstance(n, int) or not isinstance(seq, str | bytes | list):
                    raise NotConstant
                if len(seq) * max(n, 0) > PAYLOAD_CAP:
                    raise NotConstant
            return _checked(lambda: _binop(node.op, left, right))
        if isinstance(node, ast.Subscript):
            value = self.fold(node.value, env)
            index = node.slice
            if isinstance(index, ast.Slice):
                bounds = [None if b is None else self.fold(b, env) for b in (index.lower, index.upper, index.step)]
                return _checked(lambda: value[slice(*bounds)])
            return _checked(lambda: value[self.fold(index, env)])
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and len(node.generators) == 1:
            gen = node.generators[0]
            if not isinstance(gen.target, ast.Name) or gen.ifs:
                raise NotConstant
            items = self.fold(gen.iter, env)
            if not isinstance(items, list | str | bytes) or len(items) > PAYLOAD_CAP:
                raise NotConstant
            return [self.fold(node.elt, {**env, gen.target.id: x}) for x in items]
        if isinstance(node, ast.Call):
            return self.fold_call(node, env)
        raise NotConstant

    def fold_call(self, node: ast.Call, env: dict) -> object:
        if isinstance(node.func, ast.Name) and node.func.id == "map" and len(node.args) == 2:
            fn, items = DECODERS.get(self.dotted(node.args[0])), self.fold(node.args[1], env)
            if fn is None or not isinstance(items, list | str | bytes):
                raise NotConstant
            return [_checked(functools.partial(fn, x)) for x in items]
        args = [self.fold(a, env) for a in node.args]
        kwargs = {k.arg: self.fold(k.value, env) for k in node.keywords if k.arg}
        if isinstance(node.func, ast.Attribute) and self.dotted(node.func) not in DECODERS:
            method = node.func.attr
            if method in STR_METHODS:
                receiver = self.fold(node.func.value, env)
                return _checked(lambda: _bounded(getattr(receiver, method)(*args, **kwargs)))
        decoder = DECODERS.get(self.dotted(node.func))
        if decoder is None:
            raise NotConstant
        return _checked(lambda: _bounded(decoder(*args, **kwargs)))


def _binop(op: ast.operator, left: object, right: object) -> object:
    if isinstance(op, ast.Add):
        return left + right  # type: ignore[operator]
    if isinstance(op, ast.Mult):
        return left * right  # type: ignore[operator]
    return left % right  # type: ignore[operator]


def _checked(fn: Callable[[], object]) -> object:
    try:
        value = fn()
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, zlib.error, OSError, EOFError,
            lzma.LZMAError, binascii.Error):
        raise NotConstant from None
    if isinstance(value, str | bytes | bytearray | list) and len(value) > PAYLOAD_CAP:
        raise NotConstant
    return bytes(value) if isinstance(value, bytearray) else value


def _bounded(value: object) -> object:
    if isinstance(value, str | bytes | bytearray | list) and len(value) > PAYLOAD_CAP:
        raise NotConstant
    return value


def _inflate(data: bytes, wbits: int = zlib.MAX_WBITS) -> bytes:
    d = zlib.decompressobj(wbits)
    out = d.decompress(data, PAYLOAD_CAP + 1)
    if len(out) > PAYLOAD_CAP:
        raise ValueError("payload too large")
    return out


def _bounded_decompress(factory: Callable[[], object]) -> Callable[[bytes], bytes]:
    def run(data: bytes) -> bytes:
        out = factory().decompress(data, max_length=PAYLOAD_CAP + 1)  # type: ignore[attr-defined]
        if len(out) > PAYLOAD_CAP:
            raise ValueError("payload too large")
        return out
    return run


def _bytes(x: Any = b"", *args: Any) -> bytes:
    if isinstance(x, int):  # bytes(10**9): a size, not data
        raise ValueError("not a payload")
    return bytes(x, *args)


def _codecs_decode(data: Any, encoding: str = "utf-8", errors: str = "strict") -> object:
    if str(encoding).lower().replace("-", "_") in {"zlib", "zlib_codec", "zip", "bz2", "bz2_codec"}:
        raise ValueError("compressed codecs are folded through their modules")
    return codecs.decode(data, encoding, errors)


DECODERS: dict[str, Callable[..., object]] = {
    "bytes.fromhex": bytes.fromhex, "bytearray.fromhex": bytearray.fromhex,
    "bytes": lambda x=b"", *a: _bytes(x, *a), "bytearray": lambda x=b"", *a: _bytes(x, *a),
    "str": str, "chr": chr, "ord": ord, "reversed": lambda x: list(reversed(x)), "list": list, "tuple": list,
    "base64.b64decode": base64.b64decode, "base64.standard_b64decode": base64.standard_b64decode,
    "base64.urlsafe_b64decode": base64.urlsafe_b64decode, "base64.b32decode": base64.b32decode,
    "base64.b16decode": base64.b16decode, "base64.a85decode": base64.a85decode,
    "base64.b85decode": base64.b85decode, "base64.decodebytes": base64.decodebytes,
    "binascii.unhexlify": binascii.unhexlify, "binascii.a2b_hex": binascii.a2b_hex,
    "binascii.a2b_base64": binascii.a2b_base64,
    "codecs.decode": _codecs_decode, "codecs.encode": codecs.encode,
    "zlib.decompress": _inflate, "gzip.decompress": lambda d: _inflate(d, 16 + zlib.MAX_WBITS),
    "bz2.decompress": _bounded_decompress(bz2.BZ2Decompressor),
    "lzma.decompress": _bounded_decompress(lzma.LZMADecompressor),
}
DECODERS_BY_NAME = {name.rsplit(".", 1)[-1] for name in DECODERS} - {"str", "list", "tuple", "bytes"} | {
    "decode", "fromhex", "join", "translate"}
STR_METHODS = {"decode", "encode", "join", "replace", "lower", "upper", "strip", "lstrip", "rstrip", "swapcase",
               "translate", "maketrans", "format", "split", "hex"}


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (`import numpy as np`, `from base64 import b64decode`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _module_level_names(tree: ast.Module) -> set[str]:
    """Names the module itself assigns (its data), as opposed to a function's parameters and locals."""
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            names |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, by a plain assignment: the candidates for a payload's parts."""
    bound: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            bound.setdefault(stmt.targets[0].id, []).append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            bound.setdefault(stmt.target.id, []).append(stmt.value)
    return {name: values[0] for name, values in bound.items() if len(values) == 1}


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


# ----------------------------------------------------------------------------------------------- JavaScript

JS_EXIT = re.compile(r"\bprocess\s*(?:\.\s*(?:exit|kill|abort|reallyExit|_kill)\b|\[)")
JS_DYNAMIC = re.compile(r"\beval\s*\(|\bFunction\s*\(|\bnew\s+Function\b|\bconstructor\s*\.\s*constructor\b|"
                        r"\brequire\s*\(\s*[^'\"`\s)]|\b(?:setTimeout|setInterval)\s*\(\s*['\"`]|"
                        r"\bprocess\s*\.\s*(?:binding|dlopen)\b|\bimport\s*\(\s*[^'\"`\s)]")
JS_DYNAMIC_MODULES = re.compile(r"\brequire\s*\(\s*['\"`](?:node:)?(?:vm|child_process|worker_threads|inspector)"
                                r"['\"`]|\bfrom\s+['\"`](?:node:)?(?:vm|child_process|worker_threads)['\"`]")


def js_flags(code: str) -> list[str]:
    """Flags of a JavaScript/TypeScript program, read with comments removed and string contents blanked."""
    without_comments, blanked = _strip_js(code)
    flags = set()
    if JS_EXIT.search(blanked):
        flags.add("exit_call")
    if JS_DYNAMIC.search(blanked) or JS_DYNAMIC_MODULES.search(without_comments):
        flags.add("dynamic_code")
    return sorted(flags)


REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}


def _strip_js(code: str) -> tuple[str, str]:
    """(code without comments, code without comments and with string, template and regex contents blanked).
    Template literals keep their ${...} code."""
    kept, blank = [], []
    i, n = 0, len(code)
    stack: list[int] = []  # brace depth at each open template substitution
    depth = 0
    last = ""
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
            continue
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            kept.append(" ")
            blank.append(" ")
            continue
        if c in "'\"" or c == "`" or (c == "/" and last in REGEX_AFTER):
            j = _end_of_literal(code, i)
            kept.append(code[i:j])
            blank.append(c + c)
            if c == "`" and code[j - 2 : j] == "${":
                stack.append(depth)
                depth += 1
            i = j
            last = "a"
            continue
        if c == "}" and stack and depth - 1 == stack[-1]:
            stack.pop()
            depth -= 1
            j = _end_of_literal(code, i, template_tail=True)
            kept.append(code[i:j])
            blank.append("``")
            if code[j - 2 : j] == "${":
                stack.append(depth)
                depth += 1
            i = j
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        kept.append(c)
        blank.append(c)
        if not c.isspace():
            last = c if not (c.isalnum() or c in "_$)]") else "a"
        i += 1
    return "".join(kept), "".join(blank)


def _end_of_literal(code: str, i: int, template_tail: bool = False) -> int:
    """Index just past the string/template/regex literal starting at i (a template stops after `${`)."""
    quote = "`" if template_tail else code[i]
    j, n = i + 1, len(code)
    in_class = False
    while j < n:
        c = code[j]
        if c == "\\":
            j += 2
            continue
        if quote == "/":
            if c == "[":
                in_class = True
            elif c == "]":
                in_class = False
            elif c == "/" and not in_class:
                j += 1
                while j < n and code[j].isalpha():
                    j += 1
                return j
            elif c == "\n":
                return j
        elif quote == "`" and code.startswith("${", j):
            return j + 2
        elif c == quote:
            return j + 1
        elif c == "\n" and quote in "'\"":
            return j
        j += 1
    return n


# Language.flag_scanner -> the scanner (TypeScript's source is scanned as JavaScript).
SCANNERS: dict[str, Callable[[str], list[str]]] = {"python": python_flags, "javascript": js_flags}
