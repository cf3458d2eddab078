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


def pytest_collection_modifyitems(config, items):
    """Modules with tests marked ``integration`` (real models, real Snakemake DAGs, some a
    minute or two) first, each module kept whole (its fixtures are set up once).

    Why: pytest-xdist hands out tests in this order; a two-minute DAG test collected last
    (``test_workflow.py`` sorts late) would run alone at the end while the other workers
    wait. Started first, the slow tests overlap and the quick ones fill in around them.
    """
    slow = {item.module for item in items if item.get_closest_marker("integration")}
    items.sort(key=lambda item: item.module not in slow)  # stable: the order otherwise kept


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
    from tersetalk.pipeline.config import load_config

    return load_config(REPO / "config" / "config.yaml")


@pytest.fixture(scope="session")
def prepared(request) -> Path:
    """LLMLingua's compressor prepared from the embedded model: the workflow's own copy
    when it is prepared, else :func:`prepared_cached`'s folder."""
    from tersetalk.encoders.prepare import DEFAULT_COMPRESSOR_DIR, is_prepared

    workflow_copy = REPO / DEFAULT_COMPRESSOR_DIR
    if is_prepared(workflow_copy):
        return workflow_copy
    return request.getfixturevalue("prepared_cached")[0]


@pytest.fixture(scope="session")
def prepared_cached(request, tmp_path_factory) -> tuple[Path, Path]:
    """(folder, cache_dir): the compressor prepared in pytest's cache folder (about
    30-50 s the first time on a machine, a manifest check after), its preparation also
    kept as a cache entry in ``cache_dir`` (what the cache's own test restores, instead
    of converting the model a second time). Test workers prepare it under a lock, so
    the second waits for the first's folder instead of replacing it while it is used."""
    from tersetalk.core.io import exclusive
    from tersetalk.encoders.prepare import CACHE_DIR, is_prepared, prepare_compressor

    cache = getattr(request.config, "cache", None)
    root = Path(
        cache.mkdir("tersetalk-compressor-cached")
        if cache is not None
        else tmp_path_factory.getbasetemp().parent / "tersetalk-compressor-cached"
    )
    folder, cache_dir = root / "smollm2-hf", root / "cache"
    with exclusive(root / "smollm2-hf.lock"):  # a prepared folder: returned at once
        kept = (cache_dir / CACHE_DIR).is_dir() and any((cache_dir / CACHE_DIR).iterdir())
        # a folder prepared without its entry (an interrupted run): converted again
        force = is_prepared(folder) and not kept
        prepare_compressor(folder, threads=1, cache_dir=cache_dir, force=force)
        return folder, cache_dir
