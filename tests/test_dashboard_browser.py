"""The dashboard in a real headless Chromium (Debian's, driven by Playwright; no download).

Skipped with a reason where /usr/bin/chromium is absent (`.ci/install-browser` installs
it). Every test saves a screenshot under results/screenshots/ to look at.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dashboard_support import REPO, build_results, offline_live_config

CHROMIUM = Path(os.environ.get("TERSETALK_CHROMIUM", "/usr/bin/chromium"))
SHOTS = REPO / "results" / "screenshots"
ORDER = ["agent_a", "compression", "keys", "judge", "agent_b"]
#: how long a page may take to show what a step produced (the real model included)
WAIT_MS = 300_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM}: run .ci/install-browser (apt-get install chromium)",
    ),
]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from tersetalk.pipeline.config import load_config

    root = tmp_path_factory.mktemp("browser-site")
    build_results(load_config(REPO / "config" / "config.yaml"), root)
    return root


def serve(site, make_live=None, attach=None):
    from tersetalk.dashboard.app import DashboardSettings, create_app
    from tersetalk.dashboard.serve import ServerThread

    settings = DashboardSettings(
        results=site / "results", figures=site / "figures", attach=attach, poll_s=0.1
    )
    return ServerThread(create_app(settings, make_live))


@pytest.fixture
def offline_server(site):
    from tersetalk.dashboard.live import LiveMediator

    with serve(site, lambda pub: LiveMediator(offline_live_config(), pub)) as url:
        yield url


class Page:
    """A page that records console errors and uncaught exceptions."""

    def __init__(self, browser, width=1280, height=800):
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def shot(self, name: str, full_page: bool = False) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.evaluate("window.scrollTo(0, 0)")  # a sticky header stays on top
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def close(self):
        self.context.close()


def wait_js(pg, expression: str, timeout_ms: int = WAIT_MS) -> None:
    """Wait until ``expression`` is truthy in the page (an error in it counts as false).

    Not ``page.wait_for_function``: it evaluates its predicate with ``eval`` inside the
    page, which the dashboard's Content-Security-Policy (no ``'unsafe-eval'``) refuses.
    ``page.evaluate`` goes through the DevTools protocol, outside the page's CSP.
    """
    probe = f"(() => {{ try {{ return !!({expression}); }} catch (e) {{ return false; }} }})()"
    deadline = time.monotonic() + timeout_ms / 1000
    while not pg.evaluate(probe):
        if time.monotonic() > deadline:
            raise AssertionError(f"never true in the page: {expression}")
        pg.wait_for_timeout(50)


@pytest.fixture
def page(browser):
    p = Page(browser)
    yield p
    p.close()


def test_page_loads_with_no_console_errors(page, offline_server):
    pg = page.page
    pg.goto(offline_server)
    pg.wait_for_selector("#conn.up")
    for view in ("live", "workflow", "results"):
        pg.click(f"#tab-{view}")
        pg.wait_for_selector(f"#view-{view}", state="visible")  # hashchange is asynchronous
    pg.wait_for_selector(".conv")
    wait_js(
        pg,
        "document.querySelectorAll('#figures img').length > 0 && "
        "document.querySelector('#figures img').naturalWidth > 0",
    )
    pg.click("#tab-live")
    page.shot("page-loads")
    assert page.errors == []


@pytest.mark.integration
def test_a_message_lights_every_stage_in_order_on_the_real_mediator(page, site):
    """The default live view: the embedded model compresses, rule keys, MiniLM judges."""
    pg = page.page
    with serve(site) as url:
        pg.goto(url)
        pg.wait_for_selector("#conn.up")
        pg.click("#demo-button")
        assert len(pg.input_value("#message-input")) > 200
        pg.click("#send-button")
        pg.wait_for_selector('.stage[data-stage="agent_b"].done', timeout=WAIT_MS)
        assert pg.evaluate("window.__stageLog") == ORDER
        for stage in ORDER:
            assert "done" in pg.get_attribute(f'.stage[data-stage="{stage}"]', "class")
        keys = pg.locator("#keys-body tr td:first-child").all_inner_texts()
        assert keys and all(
            k in {"INSTRUCTION", "STATE", "GOAL", "CONTEXT", "CONSTRAINT"} for k in keys
        )
        assert pg.inner_text("#judge-result").split()[0] in {"PASS", "FAIL"}
        assert pg.locator("#timeline-body tr[data-pass]").count() >= 1
        assert pg.inner_text("#m-messages") == "1"
        assert pg.inner_text("#text-agent_b") != "–"
        page.shot("live-pipeline")
        page.shot("live-pipeline-full", full_page=True)
    assert page.errors == []


def test_dark_mode_toggles_and_is_remembered(page, offline_server):
    pg = page.page
    pg.goto(offline_server)
    pg.wait_for_selector("#conn.up")
    start = pg.get_attribute("html", "data-theme")
    other = "dark" if start == "light" else "light"
    pg.click("#theme-toggle")
    assert pg.get_attribute("html", "data-theme") == other
    bg = pg.evaluate("getComputedStyle(document.body).backgroundColor")
    pg.reload()
    pg.wait_for_selector("#conn.up")
    assert pg.get_attribute("html", "data-theme") == other  # remembered (localStorage)
    assert pg.evaluate("getComputedStyle(document.body).backgroundColor") == bg
    if other == "light":
        pg.click("#theme-toggle")
    assert pg.get_attribute("html", "data-theme") == "dark"
    page.shot("dark-mode")
    pg.click("#theme-toggle")
    assert pg.get_attribute("html", "data-theme") == "light"
    assert page.errors == []


def test_results_browser_shows_two_systems_side_by_side(page, offline_server):
    pg = page.page
    pg.goto(offline_server + "#results")
    pg.wait_for_selector(".conv")
    convs = pg.locator(".conv")
    assert convs.count() == 2
    assert [convs.nth(i).get_attribute("data-system") for i in range(2)] == ["freeform", "mediator"]
    boxes = [convs.nth(i).bounding_box() for i in range(2)]
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 1 and boxes[0]["x"] < boxes[1]["x"]  # side by side
    for i in range(2):
        text = convs.nth(i).inner_text()
        assert "prediction" in text and "gold" in text and "tok" in text
        assert convs.nth(i).locator(".msg").count() >= 1
    # the other example of the task
    options = pg.locator("#example-select option")
    assert options.count() == 2
    pg.select_option("#example-select", index=1)
    wait_js(
        pg,
        "document.querySelector('.example-head .small').textContent.includes("
        f"'{options.nth(1).get_attribute('value')}')",
    )
    # the summary sorts by a clicked column, both ways
    pg.wait_for_selector("#summary-table th[data-col='system']")
    pg.click("#summary-table th[data-col='system']")
    assert pg.get_attribute("#summary-table th[data-col='system']", "aria-sort") == "ascending"
    col = pg.locator("#summary-table tbody tr td:nth-child(3)").all_inner_texts()
    assert col == sorted(col)
    pg.click("#summary-table th[data-col='system']")
    col = pg.locator("#summary-table tbody tr td:nth-child(3)").all_inner_texts()
    assert col == sorted(col, reverse=True)
    pg.select_option("#example-select", index=0)
    pg.wait_for_selector(".conv")
    page.shot("results-browser", full_page=True)
    assert page.errors == []


def test_one_click_from_a_summary_row_to_its_conversation_and_a_link_to_share(
    browser, offline_server
):
    page = Page(browser)
    pg = page.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    pg.goto(offline_server + "#results")
    pg.wait_for_selector(".conv")
    assert pg.locator(".conv").count() == 2
    # the mediator's row on the other task: one click shows that run's conversation
    rows = pg.locator("#summary-table tbody tr")
    cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
             for i in range(rows.count())]  # fmt: skip
    first_task = pg.input_value("#task-select")
    # another task's mediator row when there is one (the click then changes the task too)
    mediator = [i for i, c in enumerate(cells) if c[2] == "mediator"]
    target = next((i for i in mediator if cells[i][1] != first_task), mediator[0])
    task = cells[target][1]
    rows.nth(target).locator("a.open-conv").click()
    wait_js(pg, "document.querySelectorAll('.conv').length === 1 && "
                "document.querySelector('.conv').dataset.system === 'mediator' && "
                f"document.getElementById('task-select').value === '{task}'")  # fmt: skip
    assert "show=mediator" in pg.evaluate("location.hash") and f"task={task}" in pg.evaluate(
        "location.hash"
    )
    # the conversations are in view below the sticky top bar: no scrolling by hand
    top, bar = pg.evaluate(
        "[document.getElementById('results-conversations').getBoundingClientRect().top, "
        "document.querySelector('.topbar').getBoundingClientRect().bottom]"
    )
    assert bar - 1 <= top < bar + 100
    # copy link: the clipboard holds this view, and the link opens it in a fresh page
    pg.click("#copy-link")
    wait_js(pg, "document.getElementById('copy-link').textContent === 'link copied'")
    link = pg.evaluate("navigator.clipboard.readText()")
    assert link == pg.evaluate("location.href") and "show=mediator" in link
    other = Page(browser)
    other.page.goto(link)
    one_mediator = ("document.querySelectorAll('.conv').length === 1 && "
                    "document.querySelector('.conv').dataset.system === 'mediator'")  # fmt: skip
    wait_js(other.page, one_mediator)
    assert page.errors == [] and other.errors == []
    other.close()
    page.close()


def test_workflow_view_follows_a_run_and_fits_a_narrow_window(browser, site, tmp_path):
    from tersetalk.core.events import RunPublisher
    from tersetalk.dashboard.live import LiveMediator

    attach = tmp_path / "attached"
    pub = RunPublisher(
        attach / "runs/hotpotqa/tersetalk/default.events.jsonl",
        task="hotpotqa",
        system="tersetalk",
        variant="default",
    )
    pub.run_started(n_examples=2)
    p = Page(browser, width=420, height=860)
    try:
        with serve(site, lambda pub_: LiveMediator(offline_live_config(), pub_), attach) as url:
            pg = p.page
            pg.goto(url + "#workflow")
            pg.wait_for_selector("tr[data-run='runs/hotpotqa/tersetalk/default']")
            pub.example_started({"example_id": "ex-1", "position": 0})
            pub.message(
                {
                    "turn": 0,
                    "sender": "M",
                    "receiver": "W",
                    "kind": "brief",
                    "content": '["g","Answer the question"]',
                    "tokens_cl100k": 9,
                }
            )
            row = "tr[data-run='runs/hotpotqa/tersetalk/default']"
            wait_js(pg, f"document.querySelector(\"{row}\").textContent.includes('M→W')")
            assert "running" in pg.inner_text(row)
            width = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], "the page scrolls sideways on a narrow window"
            p.shot("workflow-narrow", full_page=True)
            pg.click("#tab-live")
            direction = pg.evaluate(
                "getComputedStyle(document.getElementById('diagram')).flexDirection"
            )
            assert direction == "column"
            width = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1]
            p.shot("live-narrow", full_page=True)
        assert p.errors == []
    finally:
        pub.close()
        p.close()


def test_a_torn_run_file_is_a_warning_on_the_page_not_a_blank_view(page, site, tmp_path):
    """The results view names the skipped file and still shows the other runs, and the
    page's Content-Security-Policy blocks nothing it uses (no console error)."""
    import shutil

    from tersetalk.dashboard.live import LiveMediator

    shutil.copytree(site / "results", tmp_path / "results")
    shutil.copytree(site / "figures", tmp_path / "figures")
    torn = tmp_path / "results" / "runs" / "hotpotqa" / "torn" / "default.parquet"
    torn.parent.mkdir()
    data = (
        tmp_path / "results" / "runs" / "hotpotqa" / "freeform" / "default.parquet"
    ).read_bytes()
    torn.write_bytes(data[: len(data) // 2])
    with serve(tmp_path, lambda pub: LiveMediator(offline_live_config(), pub)) as url:
        pg = page.page
        pg.goto(url + "#results")
        pg.wait_for_selector(".conv")
        pg.wait_for_selector("#results-warnings", state="visible")
        warning = pg.inner_text("#results-warnings")
        assert "runs/hotpotqa/torn/default.parquet" in warning and "unreadable" in warning
        assert pg.locator(".conv").count() == 2
        page.shot("results-torn-file")
    assert page.errors == []
