"""Golden transcripts: every system still runs as it ran when the goldens were made.

Each case of ``tests/golden/cases.py`` (every variant of config/config.yaml on both
tasks, plus the edge cases of the conversation loop) is run through
``runner.run`` with the scripted model, and compared with what the code produced
when the goldens were made (``tests/golden/index.json`` names the commit): column
list and dtypes, every deterministic value (``c_*`` columns included, exact, NaN ==
NaN), the timing-free part of the ``calls`` column, and the cache-key material of
every model call in order (messages, generation config, schema). A failure names
the case, the column, the row and example, or the first model call that differs.

Regenerate (only when a change of output is intended, and say so in the commit):
``PYTHONPATH=src python tests/golden/make_golden.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent / "golden" / "cases.py"
_spec = importlib.util.spec_from_file_location("golden_cases", _PATH)
golden = importlib.util.module_from_spec(_spec)
sys.modules["golden_cases"] = golden  # dataclasses look their module up by name
_spec.loader.exec_module(golden)

CASES = golden.all_cases()


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return golden.write_samples(tmp_path_factory.mktemp("golden-samples"))


def test_every_case_has_a_golden():
    missing = [c.name for c in CASES if not golden.golden_path(c.name).exists()]
    stored = {p.name.removesuffix(".json.gz") for p in golden.CASES_DIR.glob("*.json.gz")}
    extra = sorted(stored - {c.name for c in CASES})
    assert not missing and not extra, (
        f"cases without a golden: {missing}; goldens without a case: {extra} "
        "(the case list and tests/golden/cases/ must agree; see tests/golden/make_golden.py)"
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case, samples, tmp_path):
    path = golden.golden_path(case.name)
    if not path.exists():
        pytest.fail(f"no golden for {case.name}: run tests/golden/make_golden.py")
    want = golden.read_golden(case.name)
    got = golden.run_case(case, samples, tmp_path)
    problems = golden.compare(want, got)
    if problems:
        shown = problems[:8]
        more = f"\n... and {len(problems) - 8} more differences" if len(problems) > 8 else ""
        import tersetalk

        pytest.fail(
            f"golden case {case.name} ({case.task}/{case.system}/{case.variant}) differs from "
            f"{path.relative_to(golden.REPO)} (tersetalk imported from "
            f"{Path(tersetalk.__file__).parent}):\n" + "\n".join(shown) + more,
            pytrace=False,
        )
