import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
