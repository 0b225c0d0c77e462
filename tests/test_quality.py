"""Quality (pylint + radon MI) computed by the warm linter inside the real sandbox."""

from __future__ import annotations

import pytest

from graders.quality import MAX_MESSAGES_IN_RESPONSE, QualityGrader, combine

MESSY = ("import os, sys\n"
         "def F(X,Y):\n"
         "    unused = 1\n"
         "    if X == None:\n"
         "        return Y\n"
         "    return eval('X+Y')\n")
PRAGMAS = {
    "pylint_disable_all": lambda code: "# pylint: disable=all\n" + code,
    "pylint_skip_file": lambda code: "# pylint: skip-file\n" + code,
    "pylint_disable_next": lambda code: code.replace("    unused = 1\n",
                                                     "    # pylint: disable-next=unused-variable\n    unused = 1\n"),
    "pylint_disable_per_line": lambda code: code.replace("\n", "  # pylint:disable=C,W,R,E\n"),
    "noqa_per_line": lambda code: code.replace("\n", "  # noqa\n"),
    "type_ignore_per_line": lambda code: code.replace("\n", "  # type: ignore[misc]\n"),
    "uppercase_and_spacing": lambda code: "#PYLINT:DISABLE=all\n" + code,
    "flake8_noqa_file": lambda code: "# flake8: noqa\n" + code,
}


async def test_comments_do_not_raise_the_maintainability_index(quality):
    plain = await quality.grade(MESSY)
    padded = await quality.grade(MESSY.replace("\n", "  # explains everything, at length\n"))
    assert padded.maintainability_index == plain.maintainability_index
    assert padded.score <= plain.score


@pytest.fixture(scope="session")
def quality(pool) -> QualityGrader:
    return QualityGrader(pool)


@pytest.mark.parametrize("form", sorted(PRAGMAS))
async def test_suppression_pragmas_do_not_raise_quality_and_are_counted(quality, form):
    plain = await quality.grade(MESSY)
    hidden = await quality.grade(PRAGMAS[form](MESSY))
    assert hidden.score is not None and plain.score is not None
    assert hidden.score <= plain.score + 1e-9, (hidden.details(), plain.details())
    assert hidden.pylint_score <= plain.pylint_score
    assert hidden.suppressions >= 1
    assert plain.suppressions == 0


async def test_score_is_the_documented_combination_of_pylint_and_maintainability(quality):
    report = await quality.grade(MESSY)
    assert report.score == combine(report.pylint_score, report.maintainability_index)
    assert 0 <= report.score < 1


async def test_lint_messages_carry_id_line_and_text_and_are_capped(quality):
    many = "def f():\n" + "".join(f"    v{i} = {i}\n" for i in range(120)) + "    return 0\n"
    report = await quality.grade(many)
    assert len(report.messages) == MAX_MESSAGES_IN_RESPONSE
    assert report.message_count > MAX_MESSAGES_IN_RESPONSE
    assert all({"id", "line", "text"} <= set(m) for m in report.messages)
    unused = next(m for m in report.messages if m["id"] == "W0612")
    assert unused["line"] == 2 and "v0" in unused["text"]


async def test_repeated_program_is_linted_once(quality):
    code = "def g(a):\n    '''Twice a.'''\n    return 2 * a\n"
    first = await quality.grade(code)
    hits = quality.hits
    again = await quality.grade(code)
    assert not first.cached and again.cached and quality.hits == hits + 1
    assert again.score == first.score


async def test_program_that_does_not_parse_scores_zero(quality):
    report = await quality.grade("def f(:\n    return 1\n")
    assert report.score == 0.0


async def test_cyclomatic_complexity_is_reported_as_information(quality):
    code = ("def branchy(x):\n    if x > 1:\n        return 1\n    if x > 2:\n        return 2\n"
            "    for _ in range(x):\n        x -= 1\n    return x\n")
    report = await quality.grade(code)
    assert report.cyclomatic == [{"name": "branchy", "complexity": 4}]


# The pylint server lints one program after another in one process: nothing one program leaves in the linter
# (astroid's module cache, its inference cache) may shape the lint of the next.
POISONERS = {
    "defines_the_names_of_the_next": "def total(n):\n    return 'not a number'\n\n\nclass Helper:\n    x = 1\n",
    "imports_solution_itself": "import solution\nfrom solution import *\nx = solution.total(1)\n",
    "shadows_the_stdlib": "import os\nos = 3\nmath = None\ndef sqrt(x):\n    return x\n",
    "does_not_parse": "def broken(:\n",
    "linter_bomb": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
}
VICTIM = ("import math\nfrom solution import Helper\n\n\ndef total(n):\n    helper = Helper()\n"
          "    return math.sqrt(n) + helper.x + os.sep\n")


@pytest.mark.parametrize("name", sorted(POISONERS))
async def test_a_program_linted_before_does_not_change_the_next_program_s_lint(pool, name):
    from graders.quality import LINT_LIMITS
    from sandboxes import LintJob

    def job(code: str) -> LintJob:
        return LintJob(code=code, language="python", roots=["total"], limits=LINT_LIMITS)

    alone = [(await pool.run(job(VICTIM))).stdout for _ in range(pool.size)]  # every sandbox, no cache on the way
    for _ in range(pool.size):
        await pool.run(job(POISONERS[name]))
    after = [(await pool.run(job(VICTIM))).stdout for _ in range(pool.size)]
    assert len(set(alone)) == 1 and '"ok": true' in alone[0], alone
    assert set(after) == set(alone), (after, alone)
