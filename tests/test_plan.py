"""`tersetalk plan`: the model jobs of a config's DAG counted, rates from measured run
records (with their provenance), and hours per target.

The run records here are written by the tests (a few calls per example with known tokens
and timings), so every count has a hand count; the job counts are checked against what
`snakemake -n` schedules for the same configs."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tersetalk.pipeline import plan
from tersetalk.pipeline.config import load_workflow_config

REPO = Path(__file__).resolve().parents[1]

# gsm8k only, one grid point per calibrated system, 3 evaluation examples in shards of 2
TINY = """
tasks: [gsm8k]
n_eval: 3
calibration_n: 2
run: {shard_size: 2}
calibration:
  tersetalk: {grid: {caps: [baseline], deref: [never]}}
  hybrid: {grid: {budget: [60]}}
  llmlingua: {grid: {rate: [0.5]}}
"""
# the default config's gsm8k runs: tersetalk 22 variants; freeform 2, llmlingua 4, hybrid 7,
# mediator 2, msp 1 (16 more)
TERSETALK_RUNS, OTHER_RUNS = 22, 16


def _call(prompt, completion, *, structured=False, hit=False, ttft=None, total=1.0):
    c = {"role": "worker", "prompt_tokens": prompt, "completion_tokens": completion,
         "ttft_s": ttft, "total_s": total, "attempts": 1, "cache_hit": hit}  # fmt: skip
    if structured:
        c["response_format"] = "json_object+schema"
    return c


def _write_run(path: Path, rows: list[list[dict]], spec: dict | None = None) -> None:
    """A run file as the runner writes one, reduced to what the plan reads: the ``calls``
    column and the spec in the file's ``tersetalk`` metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"calls": [json.dumps(calls) for calls in rows]})
    if spec is not None:
        table = table.replace_schema_metadata({"tersetalk": json.dumps({"spec": spec})})
    pq.write_table(table, path)


# freeform: 2 streamed calls per example, 250 prompt and 30 completion tokens; at 200 prompt
# and 50 generated tok/s: 1.25 s + 0.6 s = 1.85 s per example
FREEFORM = [_call(100, 10, ttft=0.5, total=0.7), _call(150, 20, ttft=0.75, total=1.15)]
# tersetalk: 3 schema-constrained calls per example (no time to first token), each taking
# twice its tokens' time at those rates; one answered from the call cache
TERSETALK = [
    _call(100, 20, structured=True, total=1.8),
    _call(100, 20, structured=True, total=1.8),
    _call(100, 20, structured=True, hit=True, total=1.8),
]


_DRY_RUNS: dict[tuple, list] = {}
_REAL_DRY_RUN = plan.dry_run


@pytest.fixture(autouse=True)
def one_dry_run_per_config(monkeypatch):
    """Snakemake's dry run of a config (seconds: the whole DAG is built) once per config
    text in this process: the tests write the same configs to fresh folders."""

    def cached(configfiles=()):
        key = (Path("Snakefile").resolve(), *(Path(f).read_text() for f in configfiles))
        if key not in _DRY_RUNS:
            _DRY_RUNS[key] = _REAL_DRY_RUN(configfiles)
        return _DRY_RUNS[key]

    monkeypatch.setattr(plan, "dry_run", cached)


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # --config files layer over config/config.yaml
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    measured = tmp_path / "results" / "m"
    _write_run(measured / "runs/gsm8k/freeform/default.parquet", [FREEFORM] * 4)
    _write_run(measured / "runs/gsm8k/tersetalk/default.parquet", [TERSETALK] * 5)
    _write_run(measured / "calibration/runs/gsm8k/freeform/default.parquet", [FREEFORM[:1]] * 2)
    return cfg, measured


def _planned(cfg, measured):
    config = load_workflow_config([cfg])
    runs = plan.plan_runs(config, plan.dry_run([cfg]))
    plan.assign_rates(runs, plan.measure(measured), config)
    return config, runs


def test_counts_equal_a_hand_count_on_a_tiny_config(tiny):
    config, runs = _planned(*tiny)
    ev = [r for r in runs if r.part == "evaluation"]
    cal = [r for r in runs if r.part == "calibration"]
    assert len(ev) == TERSETALK_RUNS + OTHER_RUNS
    assert sum(r.jobs for r in ev) == 2 * len(ev)  # 3 examples in shards of 2
    # three grid points and the reference on the calibration shard
    assert sorted((r.system, r.variant) for r in cal) == [
        ("freeform", "default"), ("hybrid", "g00"), ("llmlingua", "g00"), ("tersetalk", "g00"),
    ]  # fmt: skip
    assert {r.examples for r in cal} == {2}
    # calls: tersetalk runs 3 per example (borrowed from tersetalk/default), the others 2
    # (freeform/default's, measured or borrowed); the reference 1 (its own file)
    calls = sum(r.rates.calls for r in runs)
    hand = (TERSETALK_RUNS * 3 * 3 + OTHER_RUNS * 3 * 2) + (2 * 3 + 2 * 2 * 2 + 2 * 1)
    assert calls == pytest.approx(hand) == 310
    prompt = sum(r.rates.prompt for r in runs)
    hand_prompt = (TERSETALK_RUNS * 3 * 300 + OTHER_RUNS * 3 * 250) + (2 * 300 + 4 * 250 + 2 * 100)
    assert prompt == pytest.approx(hand_prompt)
    completion = sum(r.rates.completion for r in runs)
    hand_completion = (TERSETALK_RUNS * 3 * 60 + OTHER_RUNS * 3 * 30) + (2 * 60 + 4 * 30 + 2 * 10)
    assert completion == pytest.approx(hand_completion)
    # calibrated variants wait for their task's calibration: the next layer of the DAG
    assert {(r.system, r.variant) for r in ev if r.layer == 1} == {
        ("tersetalk", "default"), ("llmlingua", "default"), ("hybrid", "default"),
    }  # fmt: skip


def test_rates_fall_back_with_their_provenance_set(tiny):
    _, runs = _planned(*tiny)
    by = {(r.part, r.system, r.variant): r for r in runs}
    own_key = ("evaluation", "tersetalk", "default")
    own = by[own_key]
    assert (own.rates_from, own.rates_basis) == (
        "runs/gsm8k/tersetalk/default.parquet", "measured",
    )  # fmt: skip
    # measured: its cache hit is kept (1 of 3 calls)
    assert own.rates.cached == pytest.approx(3)
    borrowed = by["evaluation", "tersetalk", "caps_baseline"]
    assert borrowed.rates_from == "runs/gsm8k/tersetalk/default.parquet"
    assert borrowed.rates_basis == "fallback: the system's default variant"
    # a borrowed rate pays for every call: another run's cache hits say nothing of this one
    assert borrowed.rates.cached == 0
    assert borrowed.rates.struct_prompt == pytest.approx(3 * 300)
    msp = by["evaluation", "msp", "default"]
    assert (msp.rates_from, msp.rates_basis) == (
        "runs/gsm8k/freeform/default.parquet", "fallback: evaluation.reference",
    )  # fmt: skip
    ref = by["calibration", "freeform", "default"]
    assert (ref.rates_from, ref.rates_basis) == (
        "calibration/runs/gsm8k/freeform/default.parquet", "measured",
    )  # fmt: skip
    table = plan.runs_table(runs)
    assert (table["rates_basis"].str.startswith("fallback")).sum() == len(runs) - 3
    assert table["rates_from"].ne("").all()
    # a cold cache: the measured run's hit is paid for too
    config = load_workflow_config([tiny[0]])
    plan.assign_rates(runs, plan.measure(tiny[1]), config, pay_cached=True)
    own = next(r for r in runs if (r.part, r.system, r.variant) == own_key)
    assert own.rates.cached == 0 and own.rates.struct_prompt == pytest.approx(3 * 300)


def test_a_run_with_the_same_settings_is_used_and_spec_differences_are_named(tiny, tmp_path):
    cfg, measured = tiny
    config = load_workflow_config([cfg])
    from tersetalk.pipeline.config import run_spec

    spec = run_spec(config, "gsm8k", "tersetalk", "caps_baseline")
    spec = {**spec, "generation": {**spec["generation"], "max_tokens": 99}}
    _write_run(measured / "calibration/runs/gsm8k/tersetalk/g07.parquet", [TERSETALK[:1]], spec)
    _, runs = _planned(cfg, measured)
    run = next(r for r in runs if (r.system, r.variant) == ("tersetalk", "caps_baseline"))
    assert (run.rates_from, run.rates_basis) == (
        "calibration/runs/gsm8k/tersetalk/g07.parquet", "same settings",
    )  # fmt: skip
    assert run.differs == f"generation.max_tokens 99->{config['generation']['max_tokens']}"


def test_no_run_files_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    with pytest.raises(plan.PlanError, match="no run records under"):
        plan.measure(tmp_path)
    code = plan.main(["--measured", str(tmp_path), "--no-comprehension"])
    assert code == 2
    err = capsys.readouterr().err
    assert "tersetalk plan: error: no run records" in err and "--measured" in err


def test_a_run_nothing_covers_is_named(tiny):
    cfg, measured = tiny
    for f in (measured / "runs/gsm8k/freeform").glob("*.parquet"):
        f.unlink()
    (measured / "calibration/runs/gsm8k/freeform/default.parquet").unlink()
    with pytest.raises(plan.PlanError, match="gsm8k/freeform/default"):
        _planned(cfg, measured)


def test_throughput_comes_from_the_streamed_calls_and_constrained_calls_get_their_factor(tiny):
    _, measured = tiny
    tp = plan.measured_throughput(plan.measure(measured))
    assert tp.prompt_tps == pytest.approx(200)  # (100 + 150) / (0.5 + 0.75)
    assert tp.gen_tps == pytest.approx(50)  # (10 + 20) / (0.2 + 0.4)
    assert tp.structured_factor == pytest.approx(2)  # 1.8 s for 0.9 s of tokens
    # a run's seconds at these rates are its measured seconds
    for m in plan.measure(measured):
        assert tp.seconds(m.rates) == pytest.approx(m.rates.seconds)


def test_a_sweep_is_one_job_whose_runs_follow_each_other():
    tp = plan.Throughput(prompt_tps=100, gen_tps=10)

    def run(variant, prompt, sweep=""):
        r = plan.PlannedRun("calibration", "a", "s", variant, 1, 1, 0, sweep=sweep)
        r.rates = plan.Rates(1, stream_prompt=prompt)
        return r

    # two grid points of 100 s in one sweep and a 50 s reference: 2 jobs, the sweep's
    # 200 s the longest chain, however many streams there are
    runs = [run("g00", 10_000, "a/s"), run("g01", 10_000, "a/s"), run("default", 5_000)]
    assert plan.count_jobs(runs) == 2
    assert [[r.variant for r in u] for u in plan.job_units(runs)] == [["g00", "g01"], ["default"]]
    ten = plan.project(runs, plan.Target("t", tp, slots=10, per_job=1, assumption=""))
    assert ten.parallel["total"] == 2
    assert ten.critical_hours * 3600 == pytest.approx(200)
    assert ten.total_hours * 3600 == pytest.approx(200)


def test_hours_are_bounded_by_streams_and_by_the_longest_chain():
    tp = plan.Throughput(prompt_tps=100, gen_tps=10)

    def run(part, task, layer, prompt, jobs=1, examples=1):
        r = plan.PlannedRun(part, task, "s", "v", examples, jobs, layer)
        r.rates = plan.Rates(examples, stream_prompt=prompt)
        return r

    # 100 s of calibration, then 50 s of a calibrated run on the same task, and 150 s of
    # an uncalibrated run: 300 s over 2 streams is 150 s; the chain is 150 s too
    runs = [run("calibration", "a", 0, 10_000), run("evaluation", "a", 1, 5_000),
            run("evaluation", "b", 0, 15_000)]  # fmt: skip
    two = plan.project(runs, plan.Target("t", tp, slots=2, per_job=1, assumption=""))
    assert two.total_hours * 3600 == pytest.approx(150)
    # with 10 streams the work would take 30 s, but the chain still takes 150 s, and no
    # more than 2 jobs are ever ready at once (the widest layer)
    ten = plan.project(runs, plan.Target("t", tp, slots=10, per_job=1, assumption=""))
    assert ten.parallel["total"] == 2
    assert ten.critical_hours * 3600 == pytest.approx(150)
    assert ten.total_hours * 3600 == pytest.approx(150)
    # examples in flight per job widen the layer: 4 jobs x 4 examples, 10 streams
    wide = [run("evaluation", "b", 0, 40_000, jobs=4, examples=40)]
    p = plan.project(wide, plan.Target("t", tp, slots=10, per_job=4, assumption=""))
    assert p.parallel["total"] == 10
    assert p.total_hours * 3600 == pytest.approx(40)


def test_model_params_from_the_table_a_name_or_the_flag():
    assert plan.model_params("mistral:instruct") == 7.24e9
    assert plan.model_params("llama3.1:8b") == 8e9
    assert plan.model_params("qwen2.5:14b") == 14e9
    assert plan.model_params("smollm2-135m-instruct") == 134.5e6
    assert plan.model_params("some-model") is None
    assert plan.model_params("some-model", 3e9) == 3e9


def test_cli_writes_the_summary_and_scales_to_the_planned_model(tiny, tmp_path, capsys):
    cfg, measured = tiny
    paper = tmp_path / "paper.yaml"
    paper.write_text(TINY + 'models: {backend: ollama, model: "mistral:instruct", '
                     'base_url: "http://localhost:11434", max_concurrency: 4}\n')  # fmt: skip
    out, runs_out = tmp_path / "plan.csv", tmp_path / "runs.csv"
    args = ["--config", str(paper), "--measured", str(measured), "--no-comprehension",
            "--cores", "2", "--measured-params", "1e8", "--out", str(out),
            "--runs-out", str(runs_out)]  # fmt: skip
    assert plan.main(args) == 0
    text = capsys.readouterr().out
    import pandas as pd

    s = pd.read_csv(out)
    assert set(s["target"]) == {
        "cpu:measured",
        "cpu:mistral:instruct",
        "gpu-server",
        "slurm:4-nodes",
    }
    assert set(s["part"]) == {"evaluation", "calibration", "total"}
    total = s[s.part == "total"].set_index("target")
    assert (total["calls"] == 310).all()
    # the one measured cache hit per example of tersetalk/default (100 prompt and 20
    # completion tokens, 3 examples) does not reach the model
    assert (total["prompt_tokens"] - total["uncached_prompt_tokens"] == 300).all()
    assert (total["completion_tokens"] - total["uncached_completion_tokens"] == 60).all()
    # throughput inversely proportional to parameters: 1e8 measured, 7.24e9 planned
    ratio = total.loc["cpu:mistral:instruct", "hours"] / total.loc["cpu:measured", "hours"]
    assert ratio == pytest.approx(72.4)
    assert "inversely proportional to parameters" in total.loc["cpu:mistral:instruct", "assumption"]
    assert "assumed, not measured" in total.loc["gpu-server", "assumption"]
    assert total.loc["gpu-server", "parallel_streams"] == 4  # models.max_concurrency
    assert "fallback: the system's default variant" in text
    assert len(pd.read_csv(runs_out)) == TERSETALK_RUNS + OTHER_RUNS + 4
    # the given tok/s replace the scaling
    assert plan.main([*args, "--prompt-tps", "3", "--gen-tps", "1"]) == 0
    given = pd.read_csv(out).set_index(["part", "target"]).loc[("total", "cpu:mistral:instruct")]
    assert "given: 3 prompt tok/s, 1 generated tok/s" in given["assumption"]


def test_comprehension_counts_the_studys_own_questions(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = load_workflow_config([])
    run = plan.plan_comprehension(config, tmp_path)  # nothing measured: o200k counts
    encoders = len(config["formats"]["comprehension"]["encoders"])
    assert run.examples > 0 and run.rates.calls == encoders * run.examples
    assert run.rates.completion == 32 * run.rates.calls  # the study's max_tokens
    assert run.sequential and run.rates_basis.startswith("counted: o200k_base")
    # a measured study whose prompts were twice the o200k count scales every prompt by 2
    from tersetalk.formats.experiments import comprehension

    rows = comprehension(
        config["formats"]["data_dir"], plan._CountingClient(), seed=config["seed"],
        **plan.comprehension_options(config),
    )  # fmt: skip
    asked = rows.iloc[::2].assign(prompt_tokens=lambda d: 2 * d["prompt_tokens"])
    (tmp_path / "formats").mkdir()
    asked.to_parquet(tmp_path / "formats" / "comprehension.parquet")
    scaled = plan.plan_comprehension(config, tmp_path)
    assert scaled.rates.prompt == pytest.approx(2 * run.rates.prompt)
    assert scaled.rates_from == "formats/comprehension.parquet"
    assert f"measured prompts for {len(asked)} of {len(rows)} calls" in scaled.rates_basis


def _job_counts(*args):
    """Jobs per rule of a fresh checkout's dry run; a batch or sweep job by its rule and
    wildcards (``run_batch[ablations,gsm8k,tersetalk]``, ``calibration_sweep[gsm8k,tersetalk]``)."""
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "2", *args],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    counts: dict[str, int] = {}
    for block in re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", res.stdout):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        if not rule:
            continue
        name = rule[1]
        if name in ("run_batch", "calibration_sweep"):
            wild = dict(kv.split("=", 1) for kv in
                        re.search(r"^\s+wildcards: (.*)$", block, re.M)[1].split(", "))  # fmt: skip
            keys = [k for k in ("phase", "task", "batch") if k in wild]
            name += "[" + ",".join(wild[k] for k in keys) + "]"
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.integration
@pytest.mark.parametrize("configfile", [None, "tiny"])
def test_the_plans_jobs_are_the_dry_runs(tiny, configfile):
    cfg, _ = tiny
    args = ["--configfile", str(cfg)] if configfile else []
    jobs = _job_counts(*args)
    files = [cfg] if configfile else []
    runs = plan.plan_runs(load_workflow_config(files), plan.dry_run(files))
    calibration = [r for r in runs if r.part == "calibration"]
    evaluation = [r for r in runs if r.part == "evaluation"]
    sweeps = {k: v for k, v in jobs.items() if k.startswith("calibration_sweep[")}
    batches = {k: v for k, v in jobs.items() if k.startswith("run_batch[ablations,")}
    headline = {k: v for k, v in jobs.items() if k.startswith("run_batch[headline,")}
    assert jobs["run_system"] == sum(r.jobs for r in evaluation if not r.sweep)
    assert jobs["run_system"] + sum(batches.values()) + sum(headline.values()) == (
        plan.count_jobs(evaluation)
    )
    assert jobs["calibration_run"] + sum(sweeps.values()) == plan.count_jobs(calibration)
    assert jobs["calibration_run"] == sum(r.jobs for r in calibration if not r.sweep)
    # the format study is in the default target only when tasks list its task (toolqa)
    studied = "toolqa" in load_workflow_config([cfg] if configfile else [])["tasks"]
    assert jobs.get("formats_comprehension", 0) == int(studied)
    batch_names = ("tersetalk", "llmlingua_hybrid")
    if configfile:  # the hand count: 38 runs in 2 shards each; 3 systems of 1 grid point
        # each (tersetalk's sweep, llmlingua's and the hybrid's together), 1 reference
        # (sharded runs are never batched)
        assert (jobs["run_system"], jobs["calibration_run"], batches, headline) == (76, 1, {}, {})
        assert sweeps == {f"calibration_sweep[gsm8k,{b}]": 1 for b in batch_names}
        assert len(calibration) == 4
    else:  # 38 runs on each of hotpotqa and gsm8k, 6 on toolqa: 3 on each of hotpotqa
        # and gsm8k and 6 on toolqa run alone; each task's 21 tersetalk ablation-only
        # variants in a batch, its 3 llmlingua and 6 hybrid ones in another; its headline
        # llmlingua and hybrid runs in one, its 2 mediator and 1 msp ones in another; per
        # calibrated task, 1 reference and two sweeps, the same batches (15 grid points)
        assert (len(evaluation), jobs["run_system"], jobs["calibration_run"]) == (82, 12, 2)
        assert batches == {
            f"run_batch[ablations,{t},{b}]": 1 for t in ("hotpotqa", "gsm8k") for b in batch_names
        }
        assert headline == {
            f"run_batch[headline,{t},{b}]": 1
            for t in ("hotpotqa", "gsm8k")
            for b in ("llmlingua_hybrid", "mediator_msp")
        }
        assert sweeps == {
            f"calibration_sweep[{t},{b}]": 1 for t in ("hotpotqa", "gsm8k") for b in batch_names
        }
        assert len(calibration) == 32


def _spec(task, system, variant, calibrated=False):
    return {"task": task, "system": system, "variant": variant,
            "variant_settings": {"calibrated": True} if calibrated else {}}  # fmt: skip


def _shell(*specs):
    args = " ".join(f"--spec-json {shlex.quote(json.dumps(s))} --out x.parquet" for s in specs)
    return f"Shell command: tersetalk run {args} --sample s.parquet 2>&1 | tee log"


DRY_RUN = "\n".join([
    "Building DAG of jobs...",
    "[Sun Dec  6 16:31:58 2026]", "rule run_batch:", "    jobid: 13",
    "    wildcards: task=gsm8k, phase=headline, batch=mediator_msp",
    _shell(_spec("gsm8k", "mediator", "default"), _spec("gsm8k", "msp", "default")), "",
    "[Sun Dec  6 16:31:58 2026]", "rule run_system:",
    "    wildcards: task=gsm8k, system=tersetalk, variant=default, shard=0",
    _shell(_spec("gsm8k", "tersetalk", "default", calibrated=True)), "",
    "rule run_system:", "    wildcards: task=gsm8k, system=tersetalk, variant=default, shard=1",
    _shell(_spec("gsm8k", "tersetalk", "default", calibrated=True)), "",
    "localrule calibration_run:", "    wildcards: task=gsm8k, system=freeform, variant=default",
    _shell(_spec("gsm8k", "freeform", "default")), "",
    "rule run_system:",  # a sensitivity model's run: not counted
    "    wildcards: model=other, task=gsm8k, system=freeform, variant=default",
    _shell(_spec("gsm8k", "freeform", "default")), "",
    "rule formats_comprehension:", "Shell command: tersetalk formats comprehension", "",
])  # fmt: skip


def test_the_plan_reads_the_model_jobs_of_a_dry_run():
    jobs = plan.parse_dry_run(DRY_RUN)
    assert [j.rule for j in jobs] == ["run_batch", "run_system", "run_system", "calibration_run",
                                      "run_system", "formats_comprehension"]  # fmt: skip
    assert [s["system"] for s in jobs[0].specs] == ["mediator", "msp"]
    assert jobs[5].specs == [] and jobs[4].wildcards["model"] == "other"
    runs = plan.plan_runs({"tasks": ["gsm8k"], "n_eval": 6, "calibration_n": 2}, jobs)
    got = [(r.part, r.system, r.examples, r.jobs, r.layer, r.sweep) for r in runs]
    assert got == [
        ("evaluation", "mediator", 6, 1, 0, "gsm8k/mediator_msp/headline"),
        ("evaluation", "msp", 6, 1, 0, "gsm8k/mediator_msp/headline"),
        ("evaluation", "tersetalk", 6, 2, 1, ""),  # one run in two shard jobs
        ("calibration", "freeform", 2, 1, 0, ""),
    ]
    assert plan.count_jobs(runs) == 4  # the batch, two shards, the reference


@pytest.mark.integration
def test_a_config_means_to_every_subcommand_what_it_means_to_snakemake(monkeypatch):
    """The paper config lists a grid's settings in another order than the default config:
    Snakemake numbers the points in the paper's order, and so must the subcommands that
    read --config (the dashboard's grid, the plan's measured rates)."""
    from tersetalk.pipeline.config import calibration_points

    monkeypatch.chdir(REPO)
    files = [REPO / "config" / "paper.yaml"]
    config = load_workflow_config(files)
    grids = [r for r in plan.plan_runs(config, plan.dry_run(files))
             if r.part == "calibration" and r.system == "tersetalk"]  # fmt: skip
    assert len(grids) == 2 * 24
    points = calibration_points(config, "tersetalk")
    for r in grids:
        settings = {k: v for k, v in r.spec["variant_settings"].items() if k in points[r.variant]}
        assert settings == points[r.variant], r.variant


def _o200k_sizes(df):
    from tersetalk.core.tokens import ensure_offline_tiktoken

    ensure_offline_tiktoken()
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    return [len(enc.encode(r, disallowed_special=())) for r in df["record"]]


@pytest.mark.parametrize("planned", [{"max_payload_tokens": 4000, "questions_per_kind": 3}, None])
def test_a_sample_drawn_otherwise_moves_prompt_tokens_by_the_runs_slope(
    tmp_path, monkeypatch, planned
):
    """The measured toolqa sample had payloads up to 1000 tokens; the planned one up to
    4000. A run whose prompt is 100 + 2 x the record's tokens is planned at 100 + 2 x the
    planned sample's mean; with the same options it stays as measured."""
    from tersetalk.tasks.loading import load_records, sample

    monkeypatch.chdir(REPO)
    small = {"max_payload_tokens": 1000, "questions_per_kind": 1}
    ev, _ = sample("toolqa", load_records("toolqa", options=small), n=6, calibration_n=0, seed=7)
    (tmp_path / "results/samples").mkdir(parents=True)
    meta = {"tersetalk": json.dumps({"task": "toolqa", "task_options": small})}
    pq.write_table(
        pa.Table.from_pandas(ev, preserve_index=False).replace_schema_metadata(meta),
        tmp_path / "results/samples/toolqa.parquet",
    )
    sizes = _o200k_sizes(ev)
    assert len(set(sizes)) > 1  # the slope needs examples that differ in size
    run = tmp_path / "results/m/runs/toolqa/freeform/default.parquet"
    _write_run(run, [[_call(100 + 2 * n, 5, ttft=0.1, total=0.2)] for n in sizes])
    table = pq.read_table(run).append_column("example_id", pa.array(list(ev["example_id"])))
    pq.write_table(table, run)
    cfg = tmp_path / "toolqa.yaml"
    cfg.write_text(
        "tasks: [toolqa]\nn_eval: 5\nseed: 3\n"
        + (f"toolqa: {json.dumps(planned)}\n" if planned else "toolqa: " + json.dumps(small) + "\n")
    )
    config = load_workflow_config([cfg])
    runs = plan.plan_runs(config, plan.dry_run([cfg]))
    measured = plan.measure(tmp_path / "results/m")
    plan.assign_rates(runs, measured, config)
    plan.correct_for_samples(runs, measured, config, tmp_path / "results/m")
    ref = next(r for r in runs if (r.system, r.variant) == ("freeform", "default"))
    if planned:
        want, _ = sample(
            "toolqa", load_records("toolqa", options=planned), n=5, calibration_n=0, seed=3
        )
        mean = sum(_o200k_sizes(want)) / 5
        assert ref.rates.prompt / 5 == pytest.approx(100 + 2 * mean)
        assert "record tokens per example" in ref.differs and "this run's slope 2.00" in ref.differs
    else:
        assert ref.rates.prompt / 5 == pytest.approx(100 + 2 * sum(sizes) / len(sizes))
        assert "sample" not in ref.differs
