import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

# One place for how hard the property tests try. `dev` (the default) keeps a local
# `pytest` quick; `ci` (.ci/run exports HYPOTHESIS_PROFILE=ci) tries more examples and
# derandomizes, so a CI failure reproduces on the next run. No deadline in either:
# timing on a shared 2-core machine is not what the properties are about.
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True, scope="session")
def _offline_env():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    yield


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def base_config() -> dict:
    from tersetalk.config import load_config

    return load_config(REPO / "config" / "config.yaml")
