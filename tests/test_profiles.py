"""The workflow profiles (workflow/profiles/{slurm,kubernetes}): real Snakemake dry runs.

A profile must keep what every rule declares: each job of the default DAG gets the same
mem_mb, runtime and threads under the profile as without it, except where the profile's
set-resources raises a rule's value on purpose, and a rule that declares nothing gets the
profile's default-resources.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PROFILES = {
    "slurm": "snakemake_executor_plugin_slurm",
    "kubernetes": "snakemake_executor_plugin_kubernetes",
}
RESOURCES = ("mem_mb", "runtime")


def _profile(repo: Path, name: str) -> dict:
    return yaml.safe_load((repo / "workflow" / "profiles" / name / "config.yaml").read_text())


def _rule_names(repo: Path) -> set[str]:
    text = "\n".join(
        p.read_text() for p in [repo / "Snakefile", *repo.glob("workflow/rules/*.smk")]
    )
    return set(re.findall(r"^\s*(?:local)?rule (\w+):", text, flags=re.M))


def _need_plugin(name: str) -> None:
    module = PROFILES[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install -c constraints.txt -e '.[cluster]'")


def _jobs(log: str) -> dict[tuple[str, str], dict[str, int]]:
    """(rule, wildcards) -> its mem_mb, runtime and threads, from a dry run's job listing."""
    found: list[dict] = []
    for line in log.splitlines():
        head = re.match(r"^(?:local)?rule (\w+):$", line)
        if head:
            found.append({"rule": head.group(1), "wildcards": "", "threads": 1})
            continue
        stripped = line.strip()
        if not found or not line.startswith("    "):
            continue
        job = found[-1]
        if stripped.startswith("wildcards:"):
            job["wildcards"] = stripped.removeprefix("wildcards:").strip()
        elif stripped.startswith("threads:"):
            job["threads"] = int(stripped.split(":", 1)[1])
        elif stripped.startswith("resources:"):
            for item in stripped.removeprefix("resources:").split(","):
                key, _, value = item.strip().partition("=")
                if key in RESOURCES:
                    job[key] = int(value)
    jobs = {(j.pop("rule"), j.pop("wildcards")): j for j in found}
    assert len(jobs) == len(found), "two jobs with the same rule and wildcards"
    return jobs


def _dry_run(repo: Path, *args: str) -> str:
    """The whole DAG (--forceall), whatever outputs exist, so two dry runs list the same jobs."""
    res = subprocess.run(
        SNAKEMAKE + ["-n", "--forceall", "--cores", "2", *args],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_sets_the_cluster_basics(repo, name):
    prof = _profile(repo, name)
    assert prof["executor"] == name
    assert prof["jobs"] >= 1 and prof["latency-wait"] >= 5 and prof["retries"] >= 1
    assert set(RESOURCES) <= set(prof["default-resources"])
    # set-resources must name rules that exist: a renamed rule would silently lose its raise
    unknown = set(prof.get("set-resources", {})) - _rule_names(repo)
    assert not unknown, f"set-resources names rules the workflow does not have: {unknown}"


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_dry_run_keeps_every_rules_resources(repo, name):
    _need_plugin(name)
    prof = _profile(repo, name)
    local = _jobs(_dry_run(repo))
    log = _dry_run(repo, "--workflow-profile", f"workflow/profiles/{name}")
    assert f"Using workflow specific profile workflow/profiles/{name}" in log
    if name == "kubernetes":  # pods share nothing: files go through the storage provider
        assert f"{repo}/data/" in log and "(retrieve from storage)" in log
    remote = _jobs(log)
    assert remote.keys() == local.keys() and "run_system" in {r for r, _ in local}
    raised = prof.get("set-resources", {})
    for (rule, wildcards), declared in local.items():
        got = remote[(rule, wildcards)]
        where = f"{rule} [{wildcards}] under workflow/profiles/{name}"
        assert got["threads"] == declared["threads"], where
        for key in RESOURCES:
            if key in raised.get(rule, {}):
                assert got[key] == raised[rule][key] >= declared.get(key, 0), (where, key)
            elif key in declared:
                assert got[key] == declared[key], (where, key, got, declared)
            else:
                assert got[key] == prof["default-resources"][key], (where, key)
