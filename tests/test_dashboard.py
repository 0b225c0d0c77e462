"""The dashboard in a real headless browser (Debian's chromium driven by Playwright), on real rollouts."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def test_dashboard_shows_real_rollouts_without_console_errors(api, server):
    tests = {"kind": "assert", "test_code": "assert f(1) == 2\n"}
    failing = api.post("/reward", json={"code": "def f(x):\n    return x\n", "tests": tests}).json()["rollout_id"]
    api.post("/reward", json={"code": "def f(x):\n    return 2 * x\n", "tests": tests})
    errors: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server + "/dashboard")
        page.wait_for_selector("body[data-ready=true]", timeout=30_000)
        assert page.locator("canvas").count() == 5
        assert failing[:12] in page.inner_text("#failures")
        assert "rollouts" in page.inner_text("#summary")
        row = page.locator("#failures tr", has_text=failing[:12])
        row.locator("button").click()
        page.wait_for_function("document.getElementById('replay-output').textContent.includes('identical')",
                               timeout=30_000)
        href = row.locator("a.rollout-link").get_attribute("href")
        assert href == f"/rollouts/{failing}"
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        browser.close()
    assert not errors, errors
    assert api.get(href).json()["id"] == failing
