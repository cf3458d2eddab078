"""The dashboard at the size of a full run, in headless Chromium (as test_dashboard_browser).

One results folder per module in the per-model layout with the default target's 82 runs
(hotpotqa, gsm8k, toolqa x the systems and variants of config/config.yaml; real run
rows copied under every name), a second model with two runs, and an attached folder with
run events of the main, calibration and topology studies and a Snakemake log. Screenshots
go to results/screenshots/.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter

import pytest
from dashboard_support import (
    FULL_MODEL,
    LONG_MESSAGE,
    OTHER_MODEL,
    REPO,
    build_full_results,
    offline_live_config,
)
from test_dashboard_browser import CHROMIUM, Page, browser, serve  # noqa: F401
from test_dashboard_browser import wait_js as _wait_js

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM}: run .ci/install-browser (apt-get install chromium)",
    ),
]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    from tersetalk.pipeline.config import load_config

    root = tmp_path_factory.mktemp("full-size")
    runs = build_full_results(load_config(REPO / "config" / "config.yaml"), root)
    return root, runs


def _stamp(t: float) -> str:
    return time.strftime("[%a %b %d %H:%M:%S %Y]", time.localtime(t))


def _snakemake_log(runs, t0: float) -> str:
    """A Snakemake log in its own format: 82 runs, as many scorings and two plots planned;
    runs finished but one, some scorings finished, one failed, the plots not started."""
    lines = ["Building DAG of jobs...", "Job stats:", "job      count", "-----  -------"]
    lines += [f"run         {len(runs)}", f"score       {len(runs)}", "plot_main       2"]
    lines += [f"total      {2 * len(runs) + 2}", ""]
    total, done, jobid = 2 * len(runs) + 2, 0, 0
    for rule, chosen in (("run", runs), ("score", runs[:10])):
        for task, system, variant in chosen:
            jobid += 1
            lines += [
                _stamp(t0 + jobid),
                f"localrule {rule}:",
                f"    output: results/{FULL_MODEL}/{rule}s/{task}/{system}/{variant}.parquet",
                f"    jobid: {jobid}",
                f"    wildcards: task={task}, system={system}, variant={variant}",
                "    resources: tmpdir=/tmp",
            ]
            if rule == "run" and jobid == len(runs):
                continue  # the last run is still running
            if rule == "score" and jobid == len(runs) + 3:
                lines += [_stamp(t0 + jobid + 1), f"Error in rule {rule}:", f"    jobid: {jobid}"]
                continue
            done += 1
            lines += [
                _stamp(t0 + jobid + 1),
                f"Finished jobid: {jobid} (Rule: {rule})",
                f"{done} of {total} steps ({100 * done // total}%) done",
            ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def attached(full, tmp_path_factory):
    """A workflow folder: config/, .snakemake/log/ and results/ with run events."""
    from tersetalk.core.events import RunPublisher

    _, runs = full
    wf = tmp_path_factory.mktemp("workflow")
    shutil.copytree(REPO / "config", wf / "config")
    base = wf / "results" / FULL_MODEL
    studies = [(f"runs/{t}/{s}/{v}", t, s, v) for t, s, v in runs]
    studies.append(
        ("calibration/runs/hotpotqa/freeform/default", "hotpotqa", "freeform", "default")
    )
    for i in range(8):  # the calibration grid of tersetalk (g00-g07)
        point = f"g{i:02d}"
        studies.append(
            (f"calibration/runs/hotpotqa/tersetalk/{point}", "hotpotqa", "tersetalk", point)
        )
    for v in ("star", "chain"):
        system = "topology_tersetalk"
        studies.append((f"topology/runs/hotpotqa/{system}/{v}", "hotpotqa", system, v))
    for i, (rel, task, system, variant) in enumerate(studies):
        pub = RunPublisher(base / f"{rel}.events.jsonl", task=task, system=system, variant=variant)
        pub.run_started(n_examples=2, model=FULL_MODEL)
        if i % 7:  # most runs finished, some still running
            pub.run_finished("finished")
        pub.close()
    log = wf / ".snakemake" / "log" / "2026-11-26T210000.000000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text(_snakemake_log(runs, time.time() - 600))
    return wf


@pytest.fixture
def server(full):
    from tersetalk.dashboard.live import LiveMediator

    root, _ = full
    with serve(root, lambda pub: LiveMediator(offline_live_config(), pub)) as url:
        yield url


@pytest.fixture
def page(browser):  # noqa: F811 - the module-scoped browser of test_dashboard_browser
    p = Page(browser, width=1280, height=800)
    yield p
    p.close()


def wait_js(pg, expression: str) -> None:
    """test_dashboard_browser's wait, giving up sooner: nothing here waits for a model."""
    _wait_js(pg, expression, timeout_ms=30_000)


def _labels(pg) -> list[str]:
    return pg.eval_on_selector_all(".conv", "els => els.map(e => e.dataset.label)")


def test_the_fixture_has_the_default_targets_82_runs(full):
    _, runs = full
    assert len(runs) == 82
    assert Counter(t for t, _, _ in runs) == {"hotpotqa": 38, "gsm8k": 38, "toolqa": 6}


def test_results_filter_compare_and_url_at_full_size(page, server, full):
    _, runs = full
    gsm8k = [f"{s}/{v}" for t, s, v in runs if t == "gsm8k"]
    pg = page.page
    pg.goto(server + "#results")
    pg.wait_for_selector(".conv")
    assert pg.input_value("#model-select") == FULL_MODEL  # the newest model by default
    tasks = pg.locator("#task-select option").all_inner_texts()
    assert tasks == ["gsm8k (38 runs)", "hotpotqa (38 runs)", "toolqa (6 runs)"]
    pg.select_option("#task-select", "gsm8k")
    wait_js(pg, "document.querySelectorAll('.conv').length === 38")
    assert sorted(_labels(pg)) == sorted(gsm8k)
    # with 38 conversations the messages are folded, and the summary is on the first screen
    assert pg.locator(".conv details.msgs[open]").count() == 0
    box = pg.locator("#summary-table").bounding_box()
    assert box["y"] < 800, "the summary table is below the first screen"
    page.shot("scale-results-all")

    # the filter: none, then one system's variants, then one more variant by the search box
    pg.click("#filter-summary")
    pg.click("#filter-none")
    wait_js(pg, "document.querySelectorAll('.conv').length === 0")
    system = gsm8k[-1].split("/")[0]
    mine = [lbl for lbl in gsm8k if lbl.startswith(f"{system}/")]
    pg.check(f"#filter-list input[data-system='{system}']")
    wait_js(pg, f"document.querySelectorAll('.conv').length === {len(mine)}")
    assert sorted(_labels(pg)) == sorted(mine)
    extra = gsm8k[0]
    pg.check(f"#filter-list input[data-label='{extra}']")
    wait_js(pg, f"document.querySelectorAll('.conv').length === {len(mine) + 1}")
    summary = pg.locator("#summary-table tbody tr").all_inner_texts()
    chosen = {lbl.replace("/", "\t") for lbl in [*mine, extra]}
    # each row: its conversation link, then task, system, variant, ...
    assert summary and all("\t".join(r.split("\t")[2:4]) in chosen for r in summary)
    example = pg.input_value("#example-select")
    pg.select_option("#example-select", index=1)
    example = pg.input_value("#example-select")
    assert "task=gsm8k" in pg.url and f"example={example}" in pg.url and "show=" in pg.url
    page.shot("scale-results-filtered")

    # a reload (or the link shared) shows the same
    shown = sorted(_labels(pg))
    pg.reload()
    wait_js(pg, f"document.querySelectorAll('.conv').length === {len(shown)}")
    assert sorted(_labels(pg)) == shown
    assert pg.input_value("#task-select") == "gsm8k"
    assert pg.input_value("#example-select") == example

    # compare two: side by side, messages open, in the URL, kept over a reload
    pg.check("#mode-compare")
    pg.wait_for_selector("#compare-pick", state="visible")
    pg.select_option("#compare-a", gsm8k[3])
    pg.select_option("#compare-b", gsm8k[20])
    wait_js(pg, f"document.querySelectorAll('.conv')[1].dataset.label === '{gsm8k[20]}'")
    assert _labels(pg) == [gsm8k[3], gsm8k[20]]
    assert "compare=" in pg.url
    pg.reload()
    wait_js(pg, "document.querySelectorAll('.conv').length === 2")
    assert _labels(pg) == [gsm8k[3], gsm8k[20]]
    convs = pg.locator(".conv")
    a, b = convs.nth(0).bounding_box(), convs.nth(1).bounding_box()
    assert abs(a["y"] - b["y"]) < 1 and a["x"] < b["x"]
    assert pg.locator(".conv details.msgs[open]").count() == 2
    rows = pg.locator("#summary-table tbody tr").count()
    assert rows == sum(f"{s}/{v}" in (gsm8k[3], gsm8k[20]) for _, s, v in runs)  # every task
    page.shot("scale-results-compare")
    assert page.errors == []


def test_a_model_selector_in_the_url(page, server):
    pg = page.page
    pg.goto(server + "#results")
    pg.wait_for_selector(".conv")
    models = pg.locator("#model-select option").all_inner_texts()
    assert models == [OTHER_MODEL, FULL_MODEL]
    pg.select_option("#model-select", OTHER_MODEL)
    wait_js(pg, "document.querySelectorAll('#task-select option').length === 1")
    assert pg.locator("#task-select option").all_inner_texts() == ["hotpotqa (2 runs)"]
    wait_js(pg, "document.querySelectorAll('.conv').length === 2")
    assert f"model={OTHER_MODEL}" in pg.url
    pg.reload()
    wait_js(pg, "document.querySelectorAll('.conv').length === 2")
    assert pg.input_value("#model-select") == OTHER_MODEL
    wait_js(pg, "document.querySelectorAll('#summary-table tbody tr').length === 2")
    # another tab and back: the selection is in the URL again
    pg.click("#tab-live")
    pg.click("#tab-results")
    wait_js(pg, f"location.hash.includes('model={OTHER_MODEL}')")
    # a link to another selection followed in the same page
    pg.goto(f"{server}#results?model={FULL_MODEL}&task=toolqa&compare=")
    wait_js(pg, "document.querySelectorAll('.conv').length === 6")
    assert pg.input_value("#model-select") == FULL_MODEL
    assert pg.input_value("#task-select") == "toolqa"
    assert page.errors == []


def test_workflow_groups_studies_labels_calibration_and_shows_every_job(browser, full, attached):  # noqa: F811
    from tersetalk.dashboard.live import LiveMediator

    root, runs = full
    p = Page(browser, width=1280, height=900)
    try:
        with serve(
            root, lambda pub: LiveMediator(offline_live_config(), pub), attached / "results"
        ) as url:
            pg = p.page
            pg.goto(url + "#workflow")
            wait_js(pg, "document.querySelectorAll('#runs-table tr[data-run]').length === 93")
            groups = pg.eval_on_selector_all(
                "#runs-table tbody.study", "els => els.map(e => e.dataset.group)"
            )
            assert groups == ["main", "calibration", "topology"]
            main = pg.eval_on_selector_all(
                "tbody[data-group='main'] tr[data-run]",
                "els => els.map(e => [...e.cells].slice(1, 4).map(c => c.textContent))",
            )
            assert len(main) == 82 and main == sorted(main, key=lambda r: (r[0], r[1]))
            calib = pg.locator("tbody[data-group='calibration'] tr[data-run] td:nth-child(4)")
            texts = calib.all_inner_texts()
            assert texts[0] == "calibration reference run: default"  # freeform/default
            assert texts[4] == "calibration point g03: caps=baseline, deref=never"
            assert all(t.startswith("calibration point g0") for t in texts[1:])
            head = pg.inner_text("tbody[data-group='main'] tr.group-head")
            assert head == f"main · {FULL_MODEL} · 70 / 82 finished · 12 running"
            # Snakemake's jobs: every rule, overall progress, elapsed time and an estimate
            total = 2 * len(runs) + 2
            done = len(runs) - 1 + 9
            assert pg.inner_text("#jobs-done").startswith(f"{done} / {total} jobs done")
            assert pg.inner_text("#jobs-elapsed") not in ("", "–")
            assert pg.inner_text("#jobs-eta") not in ("", "–", "done")
            assert pg.inner_text("#jobs-failed") == "1"
            assert pg.inner_text("#jobs-running") == "1"
            rules = pg.eval_on_selector_all(
                "#jobs-rules details", "els => els.map(e => e.dataset.rule)"
            )
            assert rules == ["run", "score", "plot_main"]
            assert "0 / 2 done" in pg.inner_text("details[data-rule='plot_main'] summary")
            assert pg.locator("details[data-rule='score'] tr[data-job]").count() == 10
            p.shot("scale-workflow")
            p.shot("scale-workflow-full", full_page=True)
            pg.set_viewport_size({"width": 420, "height": 860})  # a phone: no sideways scroll
            pg.click("details[data-rule='run'] summary")
            width = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], "the page scrolls sideways on a narrow window"
            p.shot("scale-workflow-narrow")
            pg.click("#tab-results")
            pg.wait_for_selector(".conv")
            pg.click("#filter-summary")
            width = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], "Results scrolls sideways on a narrow window"
            p.shot("scale-results-narrow")
        assert p.errors == []
    finally:
        p.close()


def test_live_flags_an_over_budget_delivery_and_keeps_it_over_a_reload(page, server):
    """The offline mediator's delivery (a keys header and the keys) is over its 16-token
    budget whatever the judge says: flagged, and still shown after a reload."""
    pg = page.page
    pg.goto(server)
    pg.wait_for_selector("#conn.up")
    pg.fill("#message-input", LONG_MESSAGE)
    pg.click("#send-button")
    pg.wait_for_selector('.stage[data-stage="agent_b"].done')
    pg.wait_for_selector("#delivery-flag", state="visible")
    delivered = int(pg.inner_text('[data-tok="agent_b"]').split()[0])
    assert delivered > 16
    flag = pg.inner_text("#delivery-flag")
    assert f"{delivered} delivered" in flag and "budget 16" in flag
    assert "over-budget" in pg.get_attribute('.stage[data-stage="agent_b"]', "class")
    pg.click("details[data-config='compression'] summary")
    passes = pg.locator("#timeline-body tr[data-pass]").count()
    assert passes >= 1
    page.shot("scale-live-over-budget")
    pg.reload()
    pg.wait_for_selector("#conn.up")
    pg.wait_for_selector("#delivery-flag", state="visible")
    assert pg.inner_text("#delivery-flag") == flag
    assert pg.locator("#timeline-body tr[data-pass]").count() == passes
    assert pg.input_value("#message-input") == LONG_MESSAGE  # the draft
    assert pg.locator("#event-log li").count() > 0
    assert pg.get_attribute("details[data-config='compression']", "open") is not None
    assert pg.inner_text("#text-agent_b") not in ("", "–")
    page.shot("scale-live-after-reload")
    assert page.errors == []
