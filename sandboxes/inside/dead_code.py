"""Statements that do nothing, so that adding them cannot raise a quality score (stdlib only; lint.py uses it).

pylint's score is a density, 10 - 10 * weighted messages / statements, so a program padded with clean statements
that do nothing (150 module-level constants, unused functions with docstrings, code after a return) dilutes its
messages: 0.0 became 9.5. quality counts only *live* statements in the denominator; messages in dead code still
count. A statement is dead when, read statically, removing it cannot change what the tests observe:
- `pass`, and expression statements of pure values (`1`, `(A, B)`, `len("x")`);
- code after return/raise/break/continue in its block, and the branch a constant test never takes
  (`if False:`, `while 0:`);
- an assignment of a pure value to names nothing live reads (`PAD_1 = 1`, `_ = (PAD_1, PAD_2)`);
- a top-level definition (function, class, import, assignment) that nothing live reads, when the names the
  tests call (roots) are known; and a top-level statement with effects only on names nothing live reads.
Liveness is a fixpoint: the roots (or, when unknown, every top-level definition; for a script, its top-level
statements) are live, then whatever live code reads. Names are matched without scopes (conservative: a name read
anywhere live keeps every binding of it). Pure: literals, names, operators, containers, comprehensions, lambdas
and calls of side-effect-free builtins; any other call may do something, so it is never dead by purity.
"""

from __future__ import annotations

import ast
import builtins

PURE_BUILTINS = {"abs", "all", "any", "ascii", "bin", "bool", "bytes", "chr", "complex", "dict", "divmod",
                 "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int", "isinstance",
                 "issubclass", "iter", "len", "list", "map", "max", "min", "oct", "ord", "pow", "range", "repr",
                 "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "type", "zip"}
BUILTIN_NAMES = set(dir(builtins))
DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def count_statements(node: ast.AST) -> int:
    """Statements as pylint counts them (astroid: docstrings are not statements; except-handlers are)."""
    if isinstance(node, ast.Module):
        _mark_docstrings(node)
    count = 0
    for n in ast.walk(node):
        if isinstance(n, ast.stmt | ast.ExceptHandler) and not _is_docstring(n):
            count += 1
    return count


def dead_statements(tree: ast.Module, roots: list[str] | None) -> int:
    """How many statements of tree do nothing. roots: the names the tests call ([] for a script that runs
    top to bottom, None when unknown)."""
    _mark_docstrings(tree)
    read: set[str] = set(roots or [])
    while True:
        dead: list[ast.AST] = []
        new_read: set[str] = set()
        for stmt in tree.body:
            if _top_level_live(stmt, read, roots):
                _walk_live(stmt, read, dead, new_read)
            else:
                dead.append(stmt)
        if new_read <= read:
            return sum(count_statements(n) for n in dead)
        read |= new_read


def _top_level_live(stmt: ast.stmt, read: set[str], roots: list[str] | None) -> bool:
    bound = _bound_names(stmt)
    if isinstance(stmt, DEFINITIONS | ast.Import | ast.ImportFrom):
        return roots is None and isinstance(stmt, DEFINITIONS) or bool(bound & read)
    if _is_assignment(stmt):
        if bound & read:
            return True
        # unread: dead when pure; an impure one may matter to a script or unknown tests, never to named roots
        return not roots and not _pure(stmt.value)  # type: ignore[attr-defined]
    if roots == []:
        return True  # a script: its top-level statements are the program
    if roots is None and not _pure_statement(stmt):
        return True
    return bool((bound | _mutated_names(stmt)) & read)


def _walk_live(node: ast.AST, read: set[str], dead: list[ast.AST], new_read: set[str]) -> None:
    """Collect the names a live statement reads, skipping (and recording) its dead sub-statements."""
    if isinstance(node, ast.stmt) and _dead_in_place(node, read):
        dead.append(node)
        return
    if isinstance(node, ast.If | ast.While) and isinstance(node.test, ast.Constant):
        taken, skipped = (node.body, node.orelse) if node.test.value else (node.orelse, node.body)
        dead.extend(skipped)
        for child in taken:
            _walk_live(child, read, dead, new_read)
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        new_read.add(node.id)
    elif isinstance(node, ast.Attribute):
        new_read.add(node.attr)  # class attributes and methods reached through an instance
    for field, value in ast.iter_fields(node):
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            _walk_block(value, read, dead, new_read)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    _walk_live(item, read, dead, new_read)
        elif isinstance(value, ast.AST):
            _walk_live(value, read, dead, new_read)
        del field


def _walk_block(block: list[ast.stmt], read: set[str], dead: list[ast.AST], new_read: set[str]) -> None:
    for i, stmt in enumerate(block):
        _walk_live(stmt, read, dead, new_read)
        if isinstance(stmt, ast.Return | ast.Raise | ast.Break | ast.Continue):
            dead.extend(block[i + 1 :])  # unreachable
            return


def _dead_in_place(stmt: ast.stmt, read: set[str]) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and not _is_docstring(stmt):
        return _pure(stmt.value)
    if _is_assignment(stmt) and stmt.value is not None:  # type: ignore[attr-defined]
        return _pure(stmt.value) and not (_bound_names(stmt) & read)  # type: ignore[attr-defined]
    return False


def _is_assignment(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assign):
        return all(_plain_target(t) for t in stmt.targets)
    return isinstance(stmt, ast.AnnAssign) and stmt.value is not None and _plain_target(stmt.target)


def _plain_target(t: ast.expr) -> bool:
    if isinstance(t, ast.Tuple | ast.List):
        return all(_plain_target(e) for e in t.elts)
    return isinstance(t, ast.Name)


def _pure_statement(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        return _pure(stmt.value)
    return _is_assignment(stmt) and _pure(stmt.value)  # type: ignore[attr-defined]


def _pure(expr: ast.AST) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in PURE_BUILTINS):
                return False
        elif isinstance(n, ast.Await | ast.Yield | ast.YieldFrom | ast.NamedExpr):
            return False
    return True


def _bound_names(stmt: ast.stmt) -> set[str]:
    names: set[str] = set()
    if isinstance(stmt, DEFINITIONS):
        names.add(stmt.name)
    elif isinstance(stmt, ast.Import | ast.ImportFrom):
        names |= {a.asname or a.name.split(".")[0] for a in stmt.names}
    for n in ast.walk(stmt) if not isinstance(stmt, DEFINITIONS) else ():
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            names.add(n.id)
    return names


def _mutated_names(stmt: ast.stmt) -> set[str]:
    """Names whose object a statement may change: receivers of method calls, subscript or attribute stores."""
    names: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            root = n.func.value
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name):
                names.add(root.id)
        elif isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del):
            root = n.value
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name):
                names.add(root.id)
    return names - BUILTIN_NAMES


def _mark_docstrings(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                first._rewardbox_docstring = True  # type: ignore[attr-defined]


def _is_docstring(node: ast.AST) -> bool:
    return getattr(node, "_rewardbox_docstring", False)
