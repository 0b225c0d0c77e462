"""JavaScript/TypeScript quality: eslint (pinned recommended config) run warm inside the real sandbox."""

from __future__ import annotations

from graders.quality import QualityGrader

CLEAN_JS = "function add(a, b) {\n  return a + b;\n}\n"
SLOPPY_JS = ("var unused = 1;\nfunction add(a, b) {\n  let t = 0;\n  if (a == b) { return undefinedName; }\n"
             "  debugger;\n  return a + b;\n}\n")


async def test_clean_javascript_scores_higher_than_sloppy_javascript(pool):
    grader = QualityGrader(pool)
    clean, sloppy = await grader.grade(CLEAN_JS, "javascript"), await grader.grade(SLOPPY_JS, "javascript")
    assert clean.score == 1.0
    assert sloppy.score < 0.7
    assert {"no-undef", "no-debugger"} <= {m["id"] for m in sloppy.messages}


async def test_eslint_disable_comments_do_not_raise_the_score_and_are_counted(pool):
    grader = QualityGrader(pool)
    sloppy = await grader.grade(SLOPPY_JS, "javascript")
    hidden = await grader.grade("/* eslint-disable */\n// eslint-disable-next-line no-debugger\n" + SLOPPY_JS,
                                "javascript")
    assert hidden.score <= sloppy.score
    assert hidden.suppressions == 2


async def test_typescript_is_linted_with_the_typescript_rules(pool):
    grader = QualityGrader(pool)
    report = await grader.grade("function f(x: any): number {\n  // @ts-ignore\n  return x;\n}\n", "typescript")
    ids = {m["id"] for m in report.messages}
    assert "@typescript-eslint/no-explicit-any" in ids and "@typescript-eslint/ban-ts-comment" in ids
    assert report.suppressions == 1
    assert report.score < 1.0


async def test_a_program_that_does_not_parse_scores_zero(pool):
    report = await QualityGrader(pool).grade("function ( {\n", "javascript")
    assert report.score == 0.0


async def test_a_repeated_program_is_linted_once(pool):
    grader = QualityGrader(pool)
    code = CLEAN_JS.replace("add", "plus")
    first, second = await grader.grade(code, "javascript"), await grader.grade(code, "javascript")
    assert not first.cached and second.cached and grader.hits == 1
    assert second.score == first.score
