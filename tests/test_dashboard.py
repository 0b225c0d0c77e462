"""The dashboard in a real headless browser (Debian's chromium driven by Playwright), on real rollouts of a real
server: status colours, latency percentiles, pass rate and reward by language, profile and test kind, filters kept
in the address, and a failed rollout opened from the page (from its table, from the chart of rollouts, from a link)
and replayed. Each test leaves a screenshot in artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
GREEN, RED, GREY = "#2e9e5b", "#d64541", "#8c939d"  # passed, failed, infra_error (service/static/dashboard.js)

DOUBLE = {"kind": "assert", "test_code": "assert f(1) == 2\nassert f(3) == 6\n"}
ECHO = {"kind": "io", "cases": [{"stdin": "hi\n", "stdout": "hi\n"}]}


@pytest.fixture(scope="module")
def rollouts(api) -> dict[str, str]:
    """Rollouts of each kind the page tells apart, by name: their ids."""
    def post(body: dict) -> str:
        r = api.post("/reward", json=body)
        assert r.status_code == 200, r.text
        return r.json()["rollout_id"]

    return {
        "failed": post({"code": "def f(x):\n    return x\n", "tests": DOUBLE}),
        "passed": post({"code": "def f(x):\n    return 2 * x\n", "tests": DOUBLE}),
        "syntax": post({"code": "def f(x)\n    return x\n", "tests": DOUBLE, "profile": "binary"}),
        "io": post({"code": "print(input())\n", "tests": ECHO, "profile": "binary"}),
        "bash": post({"language": "bash", "code": "read x; echo \"$x\"\n", "tests": ECHO, "profile": "binary"}),
        "bash_failed": post({"language": "bash", "code": "echo no\n", "tests": ECHO, "profile": "binary"}),
    }


@pytest.fixture(scope="module")
def page(server, rollouts):
    errors: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.server = server  # type: ignore[attr-defined]
        yield page
        browser.close()
    assert not errors, errors


def open_board(page: Page, path: str = "/dashboard") -> None:
    page.goto(page.server + path)  # type: ignore[attr-defined]
    ready(page)


def ready(page: Page) -> None:
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)


def address(page: Page) -> str:
    """The page's address as it is now (page.url may lag behind a history.pushState)."""
    return page.evaluate("location.href")


def chart(page: Page, name: str) -> dict:
    """What a chart draws: its labels and datasets (label, data, colours), as Chart.js holds them."""
    return page.evaluate("""(name) => { const c = Chart.getChart(name); return { labels: c.data.labels,
        datasets: c.data.datasets.map((d) => ({ label: d.label, data: d.data, colour: d.backgroundColor })) }; }""",
                         name)


def test_outcomes_read_passed_green_failed_red_and_latency_shows_percentiles(page, api):
    open_board(page)
    outcomes = chart(page, "statuses")
    colours = dict(zip(outcomes["labels"], outcomes["datasets"][0]["colour"], strict=True))
    assert colours["passed"] == GREEN and colours["failed"] == RED
    assert colours.get("infra_error", GREY) == GREY
    assert [d["label"] for d in chart(page, "latency")["datasets"]] == ["p50", "p90", "p99"]
    data = api.get("/dashboard/data").json()
    assert page.inner_text("#kpi-p99") != "–" and data["latency"]["p99_ms"] >= data["latency"]["p50_ms"]
    assert page.inner_text("#kpi-count") == str(data["count"])
    badge = page.locator("#failures .badge", has_text="failed").first
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(214, 69, 65)"
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)


def test_pass_rate_and_reward_are_drawn_by_language_profile_and_test_kind(page, api):
    open_board(page)
    data = api.get("/dashboard/data").json()
    for name in ("by_language", "by_profile", "by_kind"):
        drawn = chart(page, name)
        assert [d["label"] for d in drawn["datasets"]] == ["pass rate", "mean reward"]
        assert drawn["datasets"][0]["data"] == [g["pass_rate"] for g in data[name]]  # drawn as the store says
    languages = chart(page, "by_language")["labels"]
    assert any(label.startswith("bash (") for label in languages) and any(x.startswith("python (") for x in languages)
    assert {"assert", "io"} <= {g["key"] for g in data["by_kind"]}


def test_filters_select_rollouts_and_stay_in_the_address(page, api, rollouts):
    open_board(page)
    page.select_option("#filters select[name=language]", "bash")
    ready(page)
    assert "language=bash" in address(page)
    assert [x.split(" (")[0] for x in chart(page, "by_language")["labels"]] == ["bash"]
    assert page.inner_text("#kpi-count") == str(api.get("/dashboard/data", params={"language": "bash"}).json()["count"])
    page.select_option("#filters select[name=status]", "!passed")
    ready(page)
    assert "passed" not in chart(page, "statuses")["labels"]
    assert rollouts["bash_failed"][:12] in page.inner_text("#failures")
    assert rollouts["failed"][:12] not in page.inner_text("#failures")  # python: filtered out
    page.reload()
    ready(page)
    assert page.input_value("#filters select[name=language]") == "bash"  # the address keeps the filters
    page.select_option("#filters select[name=range]", "900")
    ready(page)
    assert "range=900" in address(page) and int(page.inner_text("#kpi-count")) >= 1
    page.click("#clear")
    ready(page)
    assert "?" not in address(page) and page.input_value("#filters select[name=language]") == ""


def click_chart(page: Page, name: str, index: int, dataset: int = 0) -> None:
    """A real mouse click on one element (bar, slice, point) of a chart that reloads the page's data. Chart.js
    handles a click on the next animation frame, after mouse.click returns: the ready mark is cleared first, so
    that ready() waits for the load the click starts, not the one before it."""
    x, y = page.evaluate("""([name, d, i]) => { const c = Chart.getChart(name); c.canvas.scrollIntoView();
        document.body.dataset.ready = "";
        const r = c.canvas.getBoundingClientRect(), p = c.getDatasetMeta(d).data[i].getCenterPoint();
        return [r.left + p.x, r.top + p.y]; }""", [name, dataset, index])
    page.mouse.click(x, y)


def test_clicking_a_status_or_a_bar_of_time_filters_by_it(page):
    open_board(page)
    click_chart(page, "statuses", chart(page, "statuses")["labels"].index("failed"))
    ready(page)
    assert "status=failed" in address(page) and chart(page, "statuses")["labels"] == ["failed"]
    assert page.input_value("#filters select[name=status]") == "failed"
    bars = chart(page, "throughput")["datasets"][1]["data"]  # not passed, per bucket
    click_chart(page, "throughput", max(range(len(bars)), key=lambda i: bars[i]), dataset=1)
    ready(page)
    assert "since=" in address(page) and "until=" in address(page)
    assert page.input_value("#filters select[name=range]") == "custom" and page.inner_text("#range-note")
    page.click("#clear")
    ready(page)


def test_a_failed_rollout_opens_from_its_table_and_replays_identical(page, rollouts):
    open_board(page)
    failing = rollouts["failed"]
    page.locator("#failures tr", has_text=failing[:12]).click()
    page.wait_for_selector("#rollout[data-loaded=true]")
    assert address(page).endswith(f"#rollout={failing}")
    assert page.inner_text("#rollout-status") == "failed"
    assert "return x" in page.inner_text("#rollout-code") and "assert" in page.inner_text("#rollout-tests")
    page.click("#replay")
    page.wait_for_selector("#replay-status[data-verdict]", timeout=60_000)
    assert page.get_attribute("#replay-status", "data-verdict") == "identical"
    assert "identical" in page.inner_text("#replay-status")
    page.screenshot(path=str(ARTIFACTS / "dashboard-rollout.png"), full_page=False)
    page.click("#rollout-close")
    assert page.locator("#rollout").is_hidden() and "#rollout" not in address(page)


def test_a_rollout_opens_from_the_chart_of_rollouts(page, rollouts):
    open_board(page, "/dashboard?language=bash&status=%21passed")
    target = rollouts["bash_failed"]
    x, y = page.evaluate("""(id) => { const c = Chart.getChart("points"); c.canvas.scrollIntoView();
        for (const [d, set] of c.data.datasets.entries()) {
          const meta = c.getDatasetMeta(d);
          for (const [i, el] of meta.data.entries()) {
            const tip = c.options.plugins.tooltip.callbacks.label({ datasetIndex: d, dataIndex: i });
            if (tip.startsWith(id.slice(0, 12))) { const r = c.canvas.getBoundingClientRect();
              return [r.left + el.x, r.top + el.y]; } } }
        return null; }""", target)
    page.mouse.click(x, y)
    page.wait_for_selector("#rollout[data-loaded=true]")
    assert page.get_attribute("#rollout", "data-rollout") == target
    assert page.inner_text("#rollout-status") == "failed"


def test_a_link_to_a_rollout_opens_it(page, rollouts):
    open_board(page, f"/dashboard#rollout={rollouts['syntax']}")
    page.wait_for_selector("#rollout[data-loaded=true]")
    assert page.inner_text("#rollout-status") == "syntax_error"
    assert page.inner_text("#rollout-title") == rollouts["syntax"][:16]


def test_the_data_route_takes_the_filters_and_names_a_bad_time(api, rollouts):
    bash = api.get("/dashboard/data", params={"language": "bash", "failed": "true"}).json()
    assert {p["id"] for p in bash["points"]} >= {rollouts["bash_failed"]}
    assert all(p["status"] != "passed" for p in bash["points"]) and bash["by_language"][0]["key"] == "bash"
    assert api.get("/dashboard/data", params={"until": "1"}).json()["count"] == 0
    bad = api.get("/dashboard/data", params={"since": "yesterday"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "since"]
