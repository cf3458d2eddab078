"""Which system runs on which task (``systems.<name>.tasks``), and that the workflow obeys.

Why: toolqa runs only free-form (the paired reference) and the formats variants, and
the formats system runs only on toolqa. The restriction is config, so the test reads
it back through every consumer: the schedule functions, config validation, the
statistics' planned comparisons, and the real Snakefile's dry run (run, calibration,
sample and stats jobs), for the default and the paper config.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tersetalk.pipeline.config import ConfigError, load_config, validate_config
from tersetalk.pipeline.schedule import (
    ablation_batches,
    batch_cost,
    batched_variants,
    calibration_systems,
    calibration_tasks,
    group_batches,
    headline_batches,
    headline_variants,
    planned_runs,
    rank_priorities,
    sweep_batches,
    system_tasks,
    task_runs,
    whole_batched,
)
from tersetalk.stats import noninferiority_table

FORMATS = ["json_pretty", "json_compact", "toon", "mckp", "mckp_budget_200"]
TOOLQA_RUNS = ["freeform/default", *(f"formats/{v}" for v in FORMATS)]


@pytest.fixture(scope="module")
def cfg(request):
    return load_config(request.config.rootpath / "config" / "config.yaml")


def test_default_config_schedules_toolqa_with_freeform_and_formats_only(cfg):
    assert cfg["tasks"] == ["hotpotqa", "gsm8k", "toolqa"]
    assert task_runs(cfg, "toolqa") == TOOLQA_RUNS
    assert system_tasks(cfg, "formats") == ["toolqa"]
    assert system_tasks(cfg, "freeform") == ["hotpotqa", "gsm8k", "toolqa"]
    for name in ("tersetalk", "llmlingua", "hybrid", "mediator", "msp"):
        assert system_tasks(cfg, name) == ["hotpotqa", "gsm8k"]
    assert not any(r.startswith("formats/") for r in task_runs(cfg, "gsm8k"))
    # nothing is calibrated on toolqa: no shard, no calibration file
    assert calibration_tasks(cfg) == ["hotpotqa", "gsm8k"]
    assert calibration_systems(cfg, "toolqa") == []
    assert ["formats/mckp", "formats/json_compact"] in cfg["evaluation"]["comparisons"]


def test_narrowing_tasks_drops_runs_without_errors(cfg):
    narrow = copy.deepcopy(cfg)
    narrow["tasks"] = ["gsm8k"]
    validate_config(narrow)  # the formats comparison simply has no task now
    assert planned_runs(narrow) == {"gsm8k": task_runs(cfg, "gsm8k")}
    assert system_tasks(narrow, "formats") == []


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda c: c["systems"]["freeform"].update(tasks=["hotpotqa", "gsm8k"]),
         "systems.freeform.tasks", "add toolqa to systems.freeform.tasks"),
        (lambda c: c["systems"]["formats"].update(tasks=["toolqa", "sqa"]),
         "systems.formats.tasks", "unknown task(s) ['sqa']"),
        (lambda c: c["systems"]["formats"].update(tasks=[]),
         "systems.formats.tasks", "should be non-empty"),
        (lambda c: c["calibration"]["hybrid"].update(reference="formats/mckp"),
         "calibration.hybrid.reference", "does not run on hotpotqa, gsm8k"),
    ],
)  # fmt: skip
def test_schedule_errors_name_the_key(cfg, edit, key, words):
    bad = copy.deepcopy(cfg)
    edit(bad)
    with pytest.raises(ConfigError) as info:
        validate_config(bad)
    msg = str(info.value)
    assert f"config key '{key}'" in msg and words in msg, msg


def _metrics(task, label, correct):
    system, variant = label.split("/")
    n = len(correct)
    return pd.DataFrame(
        {
            "task": task,
            "system": system,
            "variant": variant,
            "example_id": [f"e{i}" for i in range(n)],
            "correct": np.asarray(correct, float),
            "tokens_total_cl100k": np.arange(n, dtype=float) + 50,
            "error": [None] * n,
        }
    )


def test_statistics_ask_only_the_planned_comparisons():
    frames = [
        _metrics("gsm8k", "tersetalk/default", [1, 0, 1, 1]),
        _metrics("gsm8k", "freeform/default", [1, 0, 1, 0]),
        _metrics("toolqa", "freeform/default", [1, 1, 0, 0]),
        _metrics("toolqa", "formats/mckp", [1, 1, 0, 1]),
        _metrics("toolqa", "formats/json_compact", [1, 1, 0, 1]),
    ]
    comparisons = [
        ["tersetalk/default", "freeform/default"],
        ["formats/mckp", "formats/json_compact"],
    ]
    levels = dict(margin=0.02, alpha=0.05, n_resamples=200, seed=0)
    planned = {
        "gsm8k": ["freeform/default", "tersetalk/default"],
        "toolqa": ["freeform/default", "formats/mckp", "formats/json_compact"],
    }
    df, skipped = noninferiority_table(frames, comparisons, planned=planned, **levels)
    got = list(zip(df["task"], df["treatment"], df["not_computed"], strict=True))
    assert got == [("gsm8k", "tersetalk/default", ""), ("toolqa", "formats/mckp", "")]
    assert skipped == []
    # without the plan, every comparison is asked on every task and the gaps reported
    df, skipped = noninferiority_table(frames, comparisons, **levels)
    assert len(df) == 4 and len(skipped) == 2
    # a planned run that is missing is still reported, never silently dropped
    df, skipped = noninferiority_table(frames[:-1], comparisons, planned=planned, **levels)
    assert skipped == [
        {
            "task": "toolqa",
            "treatment": "formats/mckp",
            "control": "formats/json_compact",
            "not_computed": "no toolqa records of formats/json_compact among the inputs",
        }
    ]


# --------------------------------------------------------------------------------------
# the real Snakefile


def _dry_run(repo, *args):
    """The jobs a fresh checkout would run (--forceall: whatever results this checkout
    already holds, as after a run of the workflow here, no job is left out)."""
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", "--cores", "2", *args],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def _files(out, pattern):
    return sorted(set(re.findall(pattern, out)))


def test_dry_run_schedules_exactly_the_toolqa_runs(repo):
    out = _dry_run(repo)
    runs = _files(out, r"results/smollm2-135m-instruct/runs/toolqa/[\w-]+/[\w-]+\.parquet")
    assert runs == sorted(
        f"results/smollm2-135m-instruct/runs/toolqa/{r}.parquet" for r in TOOLQA_RUNS
    )
    assert _files(out, r"results/smollm2-135m-instruct/runs/\w+/formats/") == [
        "results/smollm2-135m-instruct/runs/toolqa/formats/"
    ]
    assert not _files(out, r"results/smollm2-135m-instruct/calibration/[\w/]*toolqa[\w/.]*")
    assert _files(out, r"results/smollm2-135m-instruct/calibration/\w+\.yaml") == [
        "results/smollm2-135m-instruct/calibration/gsm8k.yaml",
        "results/smollm2-135m-instruct/calibration/hotpotqa.yaml",
    ]
    sample = re.search(r"tersetalk sample --task toolqa .*", out).group(0)
    assert "--calibration-n 0 " in sample
    assert '--task-options \'{"max_payload_tokens": 1000, "questions_per_kind": 1}\'' in sample
    stats = re.search(r"tersetalk stats .*", out).group(0)
    planned = json.loads(re.search(r"--planned '([^']*)'", stats).group(1))
    assert planned["toolqa"] == TOOLQA_RUNS
    assert "results/smollm2-135m-instruct/metrics/toolqa/formats/mckp.parquet" in stats


def test_paper_dry_run_adds_its_budgets_and_a_gsm8k_only_run_has_no_toolqa(repo):
    out = _dry_run(repo, "--configfile", "config/paper.yaml")
    # the paper's model (Ollama's mistral:instruct) keeps its results in its own folder
    runs = _files(out, r"results/mistral-instruct/runs/toolqa/[\w-]+/[\w-]+\.parquet")
    extra = ["formats/mckp_budget_500", "formats/mckp_budget_1000"]
    assert runs == sorted(
        f"results/mistral-instruct/runs/toolqa/{r}.parquet" for r in TOOLQA_RUNS + extra
    )
    assert '"max_payload_tokens": 4000' in re.search(r"tersetalk sample --task toolqa .*", out)[0]
    out = _dry_run(repo, "--config", "tasks=[gsm8k]")
    assert "toolqa" not in out and "results/smollm2-135m-instruct/runs/gsm8k/formats" not in out


def test_the_topology_target_samples_and_runs_its_own_study(repo):
    out = _dry_run(repo, "topology")
    samples = _files(out, r"tersetalk sample --task \w+ --n \d+ --calibration-n \d+")
    assert samples == sorted(
        f"tersetalk sample --task {t} --n 5 --calibration-n 10"
        for t in ("boolq", "commonsenseqa", "socialiqa", "hotpotqa", "gsm8k", "humaneval")
    )
    runs = _files(out, r"results/[\w/.-]+\.parquet")
    # the study's own samples (shared by every model) and its runs under the model's folder
    assert runs and all(
        r.startswith(("results/smollm2-135m-instruct/topology/", "results/samples/topology/"))
        for r in runs
    ), runs
    # 21 TerseTalk variants and 8 free-form ones on each of the six tasks
    assert len(
        [r for r in runs if r.startswith("results/smollm2-135m-instruct/topology/runs/")]
    ) == 6 * (21 + 8)
    assert (
        "results/smollm2-135m-instruct/topology/runs/humaneval/topology_tersetalk/scrambled.parquet"
        in runs
    )
    # the fitted router: signals of each task's calibration split, one fit, read by `fitted`
    assert (
        "results/smollm2-135m-instruct/topology/calibration/boolq/topology_freeform.parquet" in runs
    )
    assert "results/samples/topology/boolq.calibration.parquet" in runs
    assert len(re.findall(r"tersetalk topology-fit ", out)) == 1
    assert "--router-yaml results/smollm2-135m-instruct/topology/router.yaml" in out
    # the paper's layer: 100 examples per task, the same runs
    paper = _dry_run(repo, "topology", "--configfile", "config/paper.yaml")
    assert "tersetalk sample --task boolq --n 100 --calibration-n 50" in paper


def test_score_groups_split_each_task_into_headline_and_ablation_runs(cfg):
    from tersetalk.pipeline.schedule import ablation_only, score_groups

    for task in cfg["tasks"]:
        groups = score_groups(cfg, task)
        # a partition of the task's runs, in config order within each group
        assert sorted(sum(groups.values(), [])) == sorted(task_runs(cfg, task))
        assert cfg["evaluation"]["reference"] in groups["headline"]
    hotpot = score_groups(cfg, "hotpotqa")
    assert {"tersetalk/default", "llmlingua/default", "hybrid/default", "freeform/cod"} <= set(
        hotpot["headline"]
    )
    assert {"tersetalk/caps_baseline", "hybrid/budget_60", "llmlingua/rate_05"} <= set(
        hotpot["ablations"]
    )
    assert list(score_groups(cfg, "toolqa")) == ["headline"]  # no ablation runs there
    # a default variant stays headline even when an ablation lists it
    edited = copy.deepcopy(cfg)
    edited["ablations"]["caps"]["variants"].append("default")
    assert not ablation_only(edited, "tersetalk", "default")


def _jobs(out):
    """name, outputs, inputs and priority of each job of a dry run's listing (``-p``).
    A job of a wildcard rule that writes several files (run_batch, calibration_sweep,
    score) is named by its rule and wildcards, ``run_batch[ablations,gsm8k,tersetalk]``;
    its outputs are the files its command writes (each ``--out``), beside its manifest."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", out):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        prio = re.search(r"^\s+priority: (\d+)", block, re.M)
        if rule:
            files = {k: (re.search(rf"^\s+{k}: (.*)$", block, re.M) or [None, ""])[1].split(", ")
                     for k in ("input", "output")}  # fmt: skip
            files = {k: set(v) - {""} for k, v in files.items()}
            name = rule[1]
            if name in ("run_batch", "calibration_sweep", "score"):
                wild = re.search(r"^\s+wildcards: (.*)$", block, re.M)[1]
                values = dict(kv.split("=", 1) for kv in wild.split(", "))
                keys = [k for k in ("phase", "group", "task", "batch") if k in values]
                name += "[" + ",".join(values[k] for k in keys) + "]"
                files["output"] |= set(re.findall(r"--out(?:-records)? '?([^\s']+)", block))
            jobs.append((name, files["output"], files["input"],
                         int(prio[1]) if prio else 0))  # fmt: skip
    return jobs


def test_the_main_figure_needs_only_jobs_that_run_before_every_other(repo):
    """Results in reading order: every job upstream of rule plot outranks every job that
    is not, so Snakemake starts none of the ablation runs while a headline job is ready."""
    jobs = _jobs(_dry_run(repo))
    producer = {f: i for i, (_, outs, _, _) in enumerate(jobs) for f in outs}
    (plot,) = [i for i, job in enumerate(jobs) if job[0] == "plot"]
    upstream, todo = set(), [plot]
    while todo:
        i = todo.pop()
        if i not in upstream:
            upstream.add(i)
            todo += [producer[f] for f in jobs[i][2] if f in producer]
    rules_up = {jobs[i][0] for i in upstream}
    assert {"sample", "calibration_run", "calibrate", "run_system", "score[headline,gsm8k]",
            "aggregate_headline"} <= rules_up  # fmt: skip
    assert not any(r.startswith("score[ablations") or r == "plot_ablations" for r in rules_up)
    lowest_up = min(jobs[i][3] for i in upstream)
    others = [jobs[i] for i in range(len(jobs)) if i not in upstream]
    assert all(job[3] < lowest_up for job in others), sorted(
        (job[3], job[0]) for job in others if job[3] >= lowest_up
    )
    # the 60 ablation-only runs: a batch per task and system, none of them upstream
    assert not any(j[0] == "run_system" for j in others)
    batches = [j for j in others if j[0].startswith("run_batch[ablations,")]
    runs = [f for j in batches for f in j[1] if f.endswith(".parquet")]
    assert len(runs) == 60

    # one batch per task for TerseTalk, one for LLMLingua and the hybrid (both load the
    # compressor); longest first: ranked by estimated seconds (the config's
    # schedule.run_seconds by system and task), one priority apart, under the format
    # study's comprehension job
    seconds = load_config(repo / "config" / "config.yaml")["schedule"]["run_seconds"]

    def cost(job):
        return sum(seconds[Path(out).parent.name][Path(out).parent.parent.name]
                   for out in job[1] if out.endswith(".parquet"))  # fmt: skip

    by_rule = {j[0]: j[3] for j in batches}
    assert sorted(by_rule) == sorted(f"run_batch[ablations,{t},{b}]" for t in ("gsm8k", "hotpotqa")
                                     for b in ("tersetalk", "llmlingua_hybrid"))  # fmt: skip
    ranked = [j[0] for j in sorted(batches, key=cost, reverse=True)]
    assert [by_rule[r] for r in ranked] == [19, 18, 17, 16], by_rule
    # the default run's measured order (7eb5cf6): GSM8K's LLMLingua batch before
    # HotpotQA's, which is short enough to end the run beside the fillers
    assert ranked == ["run_batch[ablations,hotpotqa,tersetalk]",
                      "run_batch[ablations,gsm8k,tersetalk]",
                      "run_batch[ablations,gsm8k,llmlingua_hybrid]",
                      "run_batch[ablations,hotpotqa,llmlingua_hybrid]"]  # fmt: skip
    for job in batches:
        systems = {Path(out).parent.name for out in job[1] if out.endswith(".parquet")}
        assert systems == ({"tersetalk"} if job[0].endswith(",tersetalk]")
                           else {"llmlingua", "hybrid"}), (job[0], systems)  # fmt: skip
    assert {f"calibration_sweep[{t},{b}]" for t in ("gsm8k", "hotpotqa")
            for b in ("tersetalk", "llmlingua_hybrid")} <= rules_up  # fmt: skip
    # the headline runs of the systems that load a model of their own: batches, upstream
    assert {f"run_batch[headline,{t},{b}]" for t in ("gsm8k", "hotpotqa")
            for b in ("llmlingua_hybrid", "mediator_msp")} <= rules_up  # fmt: skip
    # the format study's model-free jobs fill free cores: under every ablation job (the
    # end of the run has a core free while the last batch, then its scores and figures,
    # run one after the other), the longest first; its model job runs with the headline
    experiments = {
        re.sub(r".*/formats/(\w+)\.parquet", r"\1", out): j[3]
        for j in others
        if j[0] == "formats_experiment"
        for out in j[1]
    }
    (figures,) = [j[3] for j in others if j[0] == "formats_figures"]
    ablation = [j[3] for j in others if "ablation" in j[0]]
    assert ablation and max(*experiments.values(), figures) < min(ablation), experiments
    assert experiments["knapsack"] > experiments["savings"] > experiments["dedup"]
    (comprehension,) = [j[3] for j in jobs if j[0] == "formats_comprehension"]
    assert comprehension > max(j[3] for j in batches)


def test_llmlingua_and_the_hybrid_share_a_batch(cfg):
    """Both load LLMLingua's compressor: one job per task loads it once, for their
    ablation-only variants and for their calibration grids. The group is named, not
    derived from the compressor: TerseTalk's touchpoint variants need it too."""
    shared = {"tersetalk": ["tersetalk"], "llmlingua_hybrid": ["llmlingua", "hybrid"]}
    assert ablation_batches(cfg) == shared
    # the calibration section lists the hybrid before LLMLingua: the host still leads
    assert list(cfg["calibration"]).index("hybrid") < list(cfg["calibration"]).index("llmlingua")
    assert sweep_batches(cfg, "gsm8k") == sweep_batches(cfg, "hotpotqa") == shared
    assert sweep_batches(cfg, "toolqa") == {}  # no calibrated system runs there
    # a batch is named by the systems it holds: the hybrid alone is just the hybrid
    assert group_batches(["hybrid"]) == {"hybrid": ["hybrid"]}
    assert group_batches(["hybrid", "msp", "llmlingua"]) == {
        "llmlingua_hybrid": ["llmlingua", "hybrid"], "msp": ["msp"]
    }  # fmt: skip
    sched = cfg["schedule"]
    cost = partial(batch_cost, seconds=sched["run_seconds"], other=sched["run_seconds_other"])
    assert cost("gsm8k", {"llmlingua": 3, "hybrid": 6}) == 3 * 53 + 6 * 10
    assert cost("boolq", {"tersetalk": 2}) == 2 * sched["run_seconds_other"] == 2 * 15


def test_rank_priorities_put_the_costliest_first_and_none_under_the_floor():
    costs = {"a": 5, "b": 50, "c": 5, "d": 20}
    assert rank_priorities(costs, low=4, high=19) == {"b": 19, "d": 18, "a": 17, "c": 16}
    # more keys than priorities: the cheapest share the floor
    assert rank_priorities(costs, low=17, high=19) == {"b": 19, "d": 18, "a": 17, "c": 17}
    assert rank_priorities({}, low=4, high=19) == {}


def test_a_disabled_system_is_not_calibrated(cfg):
    """Its grid would have no sweep to run it (the Snakefile's sweeps are of enabled
    systems), and the calibration file would wait for it."""
    edited = copy.deepcopy(cfg)
    edited["systems"]["hybrid"]["enabled"] = False
    assert "hybrid" not in calibration_systems(edited, "gsm8k")
    alone = {"tersetalk": ["tersetalk"], "llmlingua": ["llmlingua"]}
    assert sweep_batches(edited, "gsm8k") == alone


def test_systems_that_load_a_model_run_every_run_in_a_batch(cfg):
    """LLMLingua and the hybrid load the compressor, the mediator and MSP the MiniLM judge:
    their headline variants on a task share a job too, and each of their variants is in
    exactly one batch, so run_system (which leaves these systems out) never needs one."""
    assert whole_batched(cfg) == ["llmlingua", "hybrid", "mediator", "msp"]
    assert headline_batches(cfg) == {
        "llmlingua_hybrid": ["llmlingua", "hybrid"], "mediator_msp": ["mediator", "msp"]
    }  # fmt: skip
    headline, ablations = headline_variants(cfg), batched_variants(cfg)
    assert headline["mediator"] == ["default", "with_metadata"]
    for system in whole_batched(cfg):
        names = list(cfg["systems"][system]["variants"])
        both = headline.get(system, []) + ablations.get(system, [])
        assert sorted(both) == sorted(names), system
        assert not set(headline.get(system, [])) & set(ablations.get(system, []))
    # sharded runs: every shard is a job of its own, nothing is batched
    sharded = copy.deepcopy(cfg)
    sharded["run"]["shard_size"] = 2
    assert (whole_batched(sharded), headline_variants(sharded), batched_variants(sharded)) == (
        [],
        {},
        {},
    )
    # a disabled system is in no batch
    edited = copy.deepcopy(cfg)
    edited["systems"]["msp"]["enabled"] = False
    assert headline_batches(edited)["mediator"] == ["mediator"]
