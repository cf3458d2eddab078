"""Golden transcripts: the cases, the scripted model, and how a case is run and compared.

Shared by ``make_golden.py`` (which ran the cases once on the code of the commit
``index.json`` names and stored what they produced in ``cases/<name>.json.gz``) and
``tests/test_golden.py`` (which runs the same cases on the code under test and
compares). Both go through :func:`run_case`, so they run the same code path.

What a case stores (see :func:`snapshot`): the record's column list and dtypes; every
deterministic column (every column but ``t_*``, ``c_t_*`` and ``records.TIMING_COLUMNS``:
at generation, ``records.DETERMINISTIC_COLUMNS`` and every other ``c_*``), row by row;
the ``calls`` column without its timing fields (role, usage, attempts, error of each
call); the keys of ``counters_timing``;
and the cache-key material of every model call in order (kind, messages,
``gen.as_dict()``, the sha256 of the canonical JSON of the Pydantic schema, and the
cache key itself), taken from :class:`tersetalk.models.CachedClient.key_material`.

Doubles (control flow only; nothing here is a reported number):

* the model is a :class:`tersetalk.models.ScriptedClient` answering through
  :class:`Responder`, a deterministic function of the prompt and of how many calls
  of that role came before in the run (so a case can cycle through verdicts and
  messy reply forms);
* LLMLingua is :class:`tersetalk.encoders.scripted.ScriptedCompressor`, patched in
  for ``tersetalk.encoders.lingua.load_compressor`` in EVERY case (as in
  tests/test_system_hybrid.py); the cases that really reach it are listed in
  ``index.json`` (``uses_compressor``);
* MiniLM (the mediator's embedding judge and MSP's semantic judge) is
  :class:`FakeEmbedder` (word-set Jaccard), patched in for the ``embedder`` property
  of ``EmbeddingJudge`` and ``SemanticJudge`` in every case (``uses_embedder``).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import gzip
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES_DIR = HERE / "cases"
CONFIG = HERE / "config.yaml"  # config/config.yaml as it was when the goldens were made
INDEX = HERE / "index.json"

SAMPLE_SEED = 13
SAMPLE_N = 3
TASKS = ("hotpotqa", "gsm8k")

#: timing fields of an entry of the ``calls`` column (the rest is deterministic)
CALL_TIMING_KEYS = ("ttft_s", "itl_s", "total_s", "cache_hit")


# -- the cases --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One run: (task, system, variant) on the first ``n`` examples of the task's sample.

    ``settings`` None: the variant of the frozen config.yaml as it stands; a dict:
    a variant of that name with these settings is added to the config. ``point``: the
    calibration grid point (``config.calibration_spec``) instead of a variant.
    ``pipeline``: overrides of ``pipeline`` (``max_revisions``). ``model``: the
    :class:`Responder`'s knobs.
    """

    name: str
    task: str
    system: str
    variant: str = "default"
    settings: dict[str, Any] | None = None
    point: str | None = None
    pipeline: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    n: int = SAMPLE_N
    max_retries: int = 2
    #: ScriptedCompressor(**compressor): ratio < 1 overshoots the target, > 1 falls short
    compressor: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def _config_variants() -> list[Case]:
    """Every variant of config/config.yaml, on both tasks (calibrated ones at a grid point)."""
    calibrated = {"tersetalk": "g01", "hybrid": "g02"}  # aggressive/never; budget 10**6
    cfg = yaml.safe_load(CONFIG.read_text())
    out = []
    for system, block in cfg["systems"].items():
        for variant, settings in block["variants"].items():
            for task in TASKS:
                if (settings or {}).get("calibrated"):
                    point = calibrated[system]
                    out.append(
                        Case(
                            f"cfg-{system}-{variant}@{point}-{task}",
                            task,
                            system,
                            variant=point,
                            point=point,
                            note=f"calibrated variant at grid point {point}",
                        )
                    )
                else:
                    out.append(Case(f"cfg-{system}-{variant}-{task}", task, system, variant))
    # llmlingua's calibration grid has a second point (rate 0.33)
    for task in TASKS:
        out.append(Case(f"cfg-llmlingua@g01-{task}", task, "llmlingua", "g01", point="g01"))
    return out


OVERFLOW = {"f": 3, "q": 200}  # every fact overflows into memory: M# ids to dereference


def _edge_cases() -> list[Case]:
    def case(name: str, task: str, system: str, settings: dict, **kw: Any) -> Case:
        return Case(name, task, system, "v", settings, **kw)

    H, G = TASKS
    revise, escalate, none = {"critic": "R"}, {"critic": "E"}, {"critic": "N"}
    messy = {"style": "messy", "critic": "RANE"}
    c: list[Case] = []
    # -- freeform: verdicts and revise rounds
    c += [
        case("freeform-critic-revise", H, "freeform", {}, model=revise),
        case("freeform-critic-escalate", H, "freeform", {}, model=escalate),
        case("freeform-critic-noverdict", H, "freeform", {}, model=none),
    ]
    for mr in (0, 2):
        for t in TASKS:
            c.append(
                case(
                    f"freeform-revise-max{mr}-{t}",
                    t,
                    "freeform",
                    {},
                    model=revise,
                    pipeline={"max_revisions": mr},
                )
            )
    # -- tersetalk: enforcement modes
    base = {"caps": "baseline"}
    for t in TASKS:
        c += [
            case(
                f"tt-schema-fallback-{t}",
                t,
                "tersetalk",
                base,
                model={"worker": "invalid", "critic_schema": "invalid", "style": "messy"},
                note="every structured call fails: StructuredOutputError, posthoc fallback",
            ),
            case(
                f"tt-schema-retry-{t}",
                t,
                "tersetalk",
                base,
                model={"worker": "retry", "critic_schema": "retry"},
                note="first attempt invalid, second valid: after_retries",
            ),
            case(
                f"tt-json-messy-{t}", t, "tersetalk", {**base, "enforcement": "json"}, model=messy
            ),
            case(
                f"tt-posthoc-messy-{t}",
                t,
                "tersetalk",
                {**base, "enforcement": "posthoc"},
                model={**messy, "need": "mixed"},
            ),
        ]
    c.append(
        case(
            "tt-schema-fallback-maxretries0",
            G,
            "tersetalk",
            {},
            max_retries=0,
            model={"worker": "invalid", "critic": "R"},
        )
    )
    # -- tersetalk: dereference policies (OVERFLOW: every fact goes to memory)
    for t in TASKS:
        c += [
            case(f"tt-deref-always-{t}", t, "tersetalk", {"caps": OVERFLOW, "deref": "always"}),
            case(
                f"tt-deref-conditional-{t}",
                t,
                "tersetalk",
                {"caps": OVERFLOW, "deref": "conditional"},
                model={"need": "mixed"},
                note="asks for its brief's first M# id, for an absent id, for nothing",
            ),
        ]
    c += [
        case(
            "tt-deref-never-asks",
            H,
            "tersetalk",
            {"caps": OVERFLOW, "deref": "never"},
            model={"need": "first"},
        ),
        case(
            "tt-deref-conditional-posthoc",
            H,
            "tersetalk",
            {"caps": OVERFLOW, "deref": "conditional", "enforcement": "posthoc"},
            model={"need": "first"},
        ),
    ]
    # -- tersetalk: verdicts and revise rounds
    c += [
        case("tt-critic-revise", H, "tersetalk", {}, model=revise),
        case("tt-critic-escalate", H, "tersetalk", {}, model=escalate),
        case("tt-critic-noverdict-posthoc", H, "tersetalk", {"enforcement": "posthoc"}, model=none),
        case("tt-critic-noverdict-json", G, "tersetalk", {"enforcement": "json"}, model=none),
        case("tt-revise-max0", G, "tersetalk", {}, model=revise, pipeline={"max_revisions": 0}),
        case("tt-revise-max2", G, "tersetalk", {}, model=revise, pipeline={"max_revisions": 2}),
    ]
    # -- tersetalk: the LLMLingua touchpoints (scripted compressor)
    for t in TASKS:
        c += [
            case(
                f"tt-lingua-payloads-{t}",
                t,
                "tersetalk",
                {"caps": "aggressive", "lingua_payloads": True},
            ),
            case(
                f"tt-lingua-summaries-{t}",
                t,
                "tersetalk",
                {"caps": "aggressive", "lingua_summaries": True},
            ),
            case(
                f"tt-lingua-deref-{t}",
                t,
                "tersetalk",
                {"caps": OVERFLOW, "deref": "always", "lingua_deref": True},
            ),
        ]
    all_touchpoints = {"lingua_payloads": True, "lingua_summaries": True, "lingua_deref": True}
    c.append(
        case(
            "tt-lingua-all-conditional",
            G,
            "tersetalk",
            {
                "caps": {"f": 6, "q": 200},
                "deref": "conditional",
                **all_touchpoints,
                "lingua": {"rate": 0.33, "force_digits": "always"},
            },
            model={"need": "first"},
        )
    )
    # -- llmlingua
    c += [
        case("llmlingua-target20", G, "llmlingua", {"target_tokens": 20}),
        case(
            "llmlingua-longllmlingua",
            H,
            "llmlingua",
            {
                "rate": 0.33,
                "rank_method": "longllmlingua",
                "condition_compare": True,
                "reorder_context": "sort",
            },
            model=revise,
        ),
    ]
    for ratio in (0.4, 1.8):
        c.append(
            case(
                f"llmlingua-compressor-ratio{ratio}",
                H,
                "llmlingua",
                {"rate": 0.5},
                compressor={"ratio": ratio},
                note="the scripted compressor misses the target rate",
            )
        )
    # -- hybrid: each route, a deref after a prose brief, replies, touchpoints
    for budget in (10, 60, 10**6):
        for t in TASKS:
            c.append(
                case(
                    f"hybrid-budget{budget}-{t}",
                    t,
                    "hybrid",
                    {"budget": budget},
                    model={"need": "mixed"},
                )
            )
    for t, budget in ((G, 60), (H, 100)):
        c.append(
            case(
                f"hybrid-prose-brief-conditional-deref-{t}",
                t,
                "hybrid",
                {"budget": budget, "tersetalk": {"deref": "conditional"}},
                model={"need": "force"},
                note="the brief goes as LLMLingua prose; the Worker still asks for M#1",
            )
        )
    c += [
        case(
            "hybrid-compressor-falls-short", G, "hybrid", {"budget": 60}, compressor={"ratio": 1.8}
        ),
        case(
            "hybrid-overflow-deref-always",
            H,
            "hybrid",
            {"budget": 40, "projection_factor": 3.0, "tersetalk": {"deref": "always"}},
        ),
        case(
            "hybrid-overflow-conditional",
            G,
            "hybrid",
            {"budget": 30, "projection_factor": 3.0},
            model={"need": "first"},
        ),
        case(
            "hybrid-posthoc-messy",
            H,
            "hybrid",
            {"budget": 10**6, "tersetalk": {"enforcement": "posthoc"}},
            model={"style": "messy", "critic": "RNE"},
        ),
        case(
            "hybrid-json-revise-max0",
            G,
            "hybrid",
            {"budget": 60, "tersetalk": {"enforcement": "json"}},
            pipeline={"max_revisions": 0},
            model={"style": "messy", "critic": "R"},
        ),
        case(
            "hybrid-schema-fallback",
            H,
            "hybrid",
            {"budget": 60},
            model={"worker": "invalid", "critic_schema": "invalid"},
        ),
        case(
            "hybrid-touchpoints",
            G,
            "hybrid",
            {
                "budget": 10,
                "tersetalk": {"caps": "aggressive", "deref": "always", **all_touchpoints},
            },
        ),
    ]
    # -- mediator (judge off, but for the LLM judge case and the config's default)
    for t in TASKS:
        c += [
            case(
                f"mediator-truncate-{t}",
                t,
                "mediator",
                {"budget": 20, "compressor": "truncate", "judge": False},
            ),
            case(
                f"mediator-model-{t}",
                t,
                "mediator",
                {"budget": 40, "recursion_limit": 2, "summary_max_tokens": 64, "judge": False},
            ),
        ]
    crash = {"mediator": "crash"}
    c += [
        case(
            "mediator-llm-keys-judge-metadata",
            H,
            "mediator",
            {
                "budget": 48,
                "extractor": "llm",
                "judge": True,
                "judge_kind": "llm",
                "metadata": True,
            },
            model=revise,
        ),
        case("mediator-no-compression", G, "mediator", {"compression": False, "judge": False}),
        case(
            "mediator-passthrough",
            G,
            "mediator",
            {"budget": 5, "judge": False, "on_error": "passthrough"},
            model=crash,
        ),
        case("mediator-error-row", H, "mediator", {"budget": 5, "judge": False}, model=crash, n=2),
    ]
    # -- msp (judge off, but for the config's default)
    invalid = {"msp": "invalid"}
    c += [
        case("msp-nojudge-hotpotqa", H, "msp", {"judge": False}),
        case("msp-nojudge-gsm8k", G, "msp", {"judge": False}),
        case(
            "msp-traced-nojudge",
            H,
            "msp",
            {"judge": False, "wire": "traced", "style": "casual"},
            model=revise,
        ),
        case(
            "msp-passthrough", G, "msp", {"judge": False, "on_error": "passthrough"}, model=invalid
        ),
        case("msp-error-row", H, "msp", {"judge": False}, model=invalid, n=2),
    ]
    return c


def all_cases() -> list[Case]:
    cases = _config_variants() + _edge_cases()
    names = [c.name for c in cases]
    dup = [n for n, k in Counter(names).items() if k > 1]
    assert not dup, f"duplicate case names: {dup}"
    return cases


# -- the scripted model ---------------------------------------------------------------


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


_CAPS_RE = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")
_NUM_RE = re.compile(r"\d+(?:\.\d+)?")
_REF_RE = re.compile(r"M#[0-9]{1,6}")
_STOP = set(
    "Goal Facts Fact Question Answer Solve The Manager Worker Critic What Which Who How When "
    "Where Is Are Was Were Did Do Does In A An If She He They It".split()
)
VERDICT_PROSE = {
    "A": "ACCEPT. The answer matches the facts.",
    "R": "REVISE: check the numbers and the names again.",
    "E": "ESCALATE: the facts do not settle it.",
    "N": "Looks fine to me.",
}
VERDICT_WORD = {"A": "accept", "R": "revise", "E": "escalate", "N": "fine"}


class Responder:
    """The scripted model's answers: a deterministic function of the prompt and call order.

    Knobs (``Case.model``):
      critic: verdict letters cycled over the Critic's calls (A, R, E; N = none stated);
      worker / critic_schema: ``valid`` | ``invalid`` (never valid JSON for the schema:
        StructuredOutputError) | ``retry`` (the first attempt invalid, then valid);
      style: ``clean`` | ``messy`` (free and JSON-mode replies cycle through code fences,
        prose, ``key: value`` lines, over-long fields, renamed JSON keys, ...);
      need: which ``M#`` ids the Worker's first reply asks for: ``cycle`` (its brief's
        first id, every other example), ``first`` (always that), ``mixed`` (that id, an
        absent ``M#99``, nothing, in turn), ``force`` (``M#1`` whatever the brief), ``never``;
      mediator: ``ok`` | ``crash`` (the summarizer raises); msp: ``ok`` | ``invalid``.
    """

    def __init__(
        self,
        critic: str = "RAE",
        worker: str = "valid",
        critic_schema: str = "valid",
        style: str = "clean",
        need: str = "cycle",
        mediator: str = "ok",
        msp: str = "ok",
    ) -> None:
        self.critic, self.worker, self.critic_schema = critic, worker, critic_schema
        self.style, self.need, self.mediator, self.msp = style, need, mediator, msp
        self.calls: Counter[str] = Counter()  # distinct calls per role
        self._attempts: Counter[str] = Counter()  # attempts per identical structured request

    # -- dispatch
    def __call__(self, messages: list[dict], gen, schema) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        attempt = 1
        if schema is not None:
            key = json.dumps([schema.__name__, messages], sort_keys=True)
            self._attempts[key] += 1
            attempt = self._attempts[key]
            name = schema.__name__
            if name == "WorkerReply":
                return self._worker(messages, "schema", attempt)
            if name == "CriticReply":
                return self._critic(messages, "schema", attempt)
            if name == "KeysDraft":
                return self._keys(messages[-1]["content"])
            if name == "_Verdict":
                return self._judge(messages[-1]["content"])
            if name == "SignalDraft":
                return self._signal(messages[-1]["content"])
            raise AssertionError(f"golden responder: unexpected schema {name}")
        if system.startswith("You compress"):
            if self.mediator == "crash":
                raise RuntimeError("summarizer crashed")
            return self._summary(system, messages[-1]["content"])
        if messages[0]["content"].startswith("Here is a task signal"):
            return self._decoded(messages[0]["content"])
        tersetalk = "TerseTalk-JSONL" in system
        mode = ("json" if gen.json_mode else "lines") if tersetalk else "prose"
        if system.startswith("You are the Worker"):
            return self._worker(messages, mode, attempt)
        if system.startswith("You are the Critic"):
            return self._critic(messages, mode, attempt)
        raise AssertionError(f"golden responder: unexpected prompt {system[:80]!r}")

    # -- the Worker
    def _worker(self, messages: list[dict], mode: str, attempt: int) -> str:
        brief = next(m["content"] for m in messages if m["role"] == "user")
        turn = sum(m["role"] == "assistant" for m in messages)  # 0: first reply to the brief
        if attempt == 1:
            self.calls["worker"] += 1
        n = self.calls["worker"] - 1
        if mode == "schema" and (
            self.worker == "invalid" or (self.worker == "retry" and attempt == 1)
        ):
            return '{"plan": ["unfinished' if attempt == 1 else "not json at all"
        gsm = "math" in messages[0]["content"] or "calculation" in messages[0]["content"]
        answer, plan = self._solve(brief, gsm, turn)
        need = self._need(brief) if turn == 0 else []
        if mode == "schema":
            return json.dumps({"plan": plan, "need": need, "answer": answer})
        if mode == "prose":
            return "\n".join(plan + [f"Answer: {answer}"]) if gsm else answer
        form = n % 5 if self.style == "messy" else 4
        if mode == "json":
            return self._worker_json(form, plan, need, answer)
        return self._worker_lines(form, plan, need, answer)

    def _solve(self, brief: str, gsm: bool, turn: int) -> tuple[str, list[str]]:
        h = _digest(brief)
        if gsm:
            nums = [float(x) for x in _NUM_RE.findall(brief)][:4] or [1.0]
            total = sum(nums) + turn
            shown = int(total) if total == int(total) else round(total, 2)
            plan = [f"add {' + '.join(f'{x:g}' for x in nums)}", f"total is {shown}"]
            return str(shown), plan[: 1 + h % 2]
        names = [c for c in _CAPS_RE.findall(brief) if c.split()[0] not in _STOP]
        if not names:
            return ("yes" if h % 2 else "no"), []
        return names[(h + turn) % len(names)], (["find the span in the facts"] if h % 3 else [])

    def _need(self, brief: str) -> list[str]:
        refs = _REF_RE.findall(brief)
        first = refs[:1]
        n = self.calls["worker_first"]
        self.calls["worker_first"] += 1
        if self.need == "never":
            return []
        if self.need == "force":
            return ["M#1"]
        if self.need == "first":
            return first
        if self.need == "mixed":
            return [first, ["M#99"], []][n % 3] if first else (["M#99"] if n % 2 else [])
        return first if n % 2 == 0 else []  # cycle

    @staticmethod
    def _worker_lines(form: int, plan: list[str], need: list[str], answer: str) -> str:
        clean = [
            ["r", "W"],
            *(["p", s] for s in plan),
            *(["d", r] for r in need),
            ["x", "answer", answer],
        ]
        if form == 0:  # fenced, a 150-character step and a 4th step: truncated and dropped
            lines = [
                ["r", "W"],
                ["p", "x" * 150],
                ["p", "b"],
                ["p", "c"],
                ["p", "d"],
                *(["d", r] for r in need),
                ["x", "answer", answer],
            ]
            return "```\n" + "\n".join(json.dumps(ln) for ln in lines) + "\n```"
        if form == 1:  # prose only
            return f"I think the answer is {answer}."
        if form == 2:  # key: value lines
            return "\n".join([*(f"Plan: {s}" for s in plan), f"Answer: {answer}"])
        if form == 3:  # python literals with trailing commas, after a word of prose
            return "Here you go:\n" + "\n".join(repr(ln) + "," for ln in clean)
        return "\n".join(json.dumps(ln) for ln in clean)

    @staticmethod
    def _worker_json(form: int, plan: list[str], need: list[str], answer: str) -> str:
        obj = {"plan": plan, "need": need, "answer": answer}
        if form == 0:  # other names, a bad ref, an extra key
            return json.dumps(
                {
                    "steps": plan[0] if plan else "think",
                    "final": answer,
                    "need": [*need, "bogus"],
                    "confidence": 0.3,
                }
            )
        if form == 1:
            return "```json\n" + json.dumps(obj, indent=2) + "\n```"
        if form == 2:
            return f"The answer is {answer}."
        if form == 3:
            return '["r","W"]\n' + json.dumps(["x", "answer", answer])
        return json.dumps(obj)

    # -- the Critic
    def _critic(self, messages: list[dict], mode: str, attempt: int) -> str:
        if attempt == 1:
            self.calls["critic"] += 1
        n = self.calls["critic"] - 1
        v = self.critic[n % len(self.critic)]
        if mode == "schema" and (
            self.critic_schema == "invalid" or (self.critic_schema == "retry" and attempt == 1)
        ):
            return '{"verdict": "maybe"}'
        note = {
            "A": "matches the facts",
            "R": "check M#1 and the year",
            "E": "cannot tell",
            "N": "",
        }[v]
        if mode == "schema":
            return json.dumps({"verdict": "A" if v == "N" else v, "note": note})
        if mode == "prose":
            return VERDICT_PROSE[v]
        form = n % 4 if self.style == "messy" else 3
        if mode == "json":
            if form == 0:
                return json.dumps({"Verdict": VERDICT_WORD[v], "comment": note})
            if form == 1:
                return json.dumps({"note": note or "no verdict given"})
            if form == 2:
                return VERDICT_PROSE[v]
            return json.dumps({"note": note} if v == "N" else {"verdict": v, "note": note})
        if form == 0:
            return f'Sure!\n```\n["r","C"]\n{{"verdict": "{VERDICT_WORD[v]}"}}\n```'
        if form == 1:
            return f"Verdict: {v}\nNote: {note}"
        if form == 2:
            return VERDICT_PROSE[v]
        lines = [["r", "C"]] + ([] if v == "N" else [["v", v]]) + ([["t", note]] if note else [])
        return "\n".join(json.dumps(ln) for ln in lines)

    # -- the mediator's and MSP's calls
    @staticmethod
    def _summary(system: str, text: str) -> str:
        m = re.search(r"at most (\d+) words", system)
        words = int(m.group(1)) if m else 20
        return " ".join(text.split()[: math.ceil(words * 1.6)])

    @staticmethod
    def _keys(text: str) -> str:
        keys = []
        for line in text.splitlines():
            if line.startswith("Goal:"):
                keys.append({"type": "GOAL", "value": line[5:].strip()[:300]})
            elif line.startswith("Question:"):
                keys.append({"type": "INSTRUCTION", "value": line[9:].strip()[:300]})
            elif line.startswith("- ") and len(keys) < 5:
                keys.append({"type": "CONTEXT", "value": line[2:].strip()[:300]})
        return json.dumps({"keys": keys or [{"type": "CONTEXT", "value": text[:300]}]})

    @staticmethod
    def _judge(text: str) -> str:
        h = _digest(text)
        return json.dumps(
            {
                "passed": h % 2 == 0,
                "confidence": round(0.5 + (h % 50) / 100, 2),
                "issues": [] if h % 2 == 0 else ["a number is missing"],
            }
        )

    def _signal(self, text: str) -> str:
        if self.msp == "invalid":
            return "not json"
        lines = text.splitlines()
        question = next((ln[9:].strip() for ln in lines if ln.startswith("Question:")), text)
        facts = [ln[2:].strip() for ln in lines if ln.startswith("- ")][:3]
        h = _digest(text)
        return json.dumps(
            {
                "intent": "QUERY" if h % 2 else "ANALYZE",
                "target": question[:120],
                "params": [{"key": f"fact{i + 1}", "value": f[:120]} for i, f in enumerate(facts)],
                "constraints": ["use only the facts"],
                "state": [{"key": "step", "value": "start"}] if h % 3 == 0 else [],
                "priority": ("low", "medium", "high")[h % 3],
            }
        )

    @staticmethod
    def _decoded(prompt: str) -> str:
        m = re.search(r"\{.*\}", prompt, re.S)
        sig = json.loads(m.group(0)) if m else {}
        values = "; ".join(f"{k} {v}" for k, v in (sig.get("params") or {}).items())
        return f"{sig.get('intent', 'QUERY').title()} {sig.get('target', '')}. {values}".strip()


# -- doubles for LLMLingua and MiniLM ---------------------------------------------------------


class FakeEmbedder:
    """Word-set Jaccard similarity instead of MiniLM cosine; records its inputs."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def similarity(self, a: str, b: str) -> float:
        self.calls.append([a, b])
        wa, wb = set(a.lower().split()), set(b.lower().split())
        return round(len(wa & wb) / len(wa | wb), 6) if wa | wb else 0.0


@dataclass
class Doubles:
    compressors: list = field(default_factory=list)
    embedder: FakeEmbedder = field(default_factory=FakeEmbedder)

    def compressor_calls(self) -> list:
        return [call for comp in self.compressors for call in comp.calls]


@contextlib.contextmanager
def patched_doubles(compressor: dict[str, Any] | None = None):
    """LLMLingua -> ScriptedCompressor(**compressor), MiniLM -> FakeEmbedder, meanwhile."""
    from unittest import mock

    from tersetalk.encoders import lingua
    from tersetalk.encoders.scripted import ScriptedCompressor
    from tersetalk.mediator.judges import EmbeddingJudge
    from tersetalk.msp.judge import SemanticJudge

    doubles = Doubles()

    def load(settings):
        comp = ScriptedCompressor(**(compressor or {}))
        doubles.compressors.append(comp)
        return comp

    fake = property(lambda self: doubles.embedder)
    with (
        mock.patch.object(lingua, "load_compressor", load),
        mock.patch.object(EmbeddingJudge, "embedder", fake),
        mock.patch.object(SemanticJudge, "embedder", fake),
    ):
        yield doubles


# -- the model client: ScriptedClient behind a cache that records its key material ---------


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def recording_client(scripted, cache_dir: Path):
    """``CachedClient(scripted)`` that never reads or writes entries, and keeps every
    call's key material (so every call reaches the responder, as without a cache)."""
    from tersetalk.models import CachedClient

    class Recording(CachedClient):
        def __init__(self, inner, folder):
            super().__init__(inner, folder)
            self.material: list[dict] = []

        def key_material(self, kind, messages, gen, schema):
            material = super().key_material(kind, messages, gen, schema)
            self.material.append(json.loads(canonical(material)) | {"key": self.key(material)})
            return material

        def _load(self, key):
            return None

        def _try_store(self, key, material, outcome):
            return None

    return Recording(scripted, cache_dir)


# -- specs, samples, running -------------------------------------------------------------


def base_config() -> dict:
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg.setdefault("data", {})["dir"] = str(REPO / "data")  # not part of any run spec
    return cfg


def spec_for(case: Case) -> dict:
    from tersetalk.pipeline.config import calibration_spec, run_spec, validate_config

    cfg = base_config()
    # the goldens pin error rows as well: no run of theirs is refused for holding many
    # (pipeline.max_error_share is not part of spec_hash, so the records do not move)
    cfg["pipeline"] = {**cfg.get("pipeline", {}), "max_error_share": 1.0, **case.pipeline}
    if case.settings is not None:
        cfg["systems"].setdefault(case.system, {"variants": {}})
        cfg["systems"][case.system]["variants"][case.variant] = copy.deepcopy(case.settings)
    validate_config(cfg)
    if case.point is not None:
        return calibration_spec(cfg, case.task, case.system, case.point)
    return run_spec(cfg, case.task, case.system, case.variant)


def write_samples(folder: Path) -> dict[str, Path]:
    """The first SAMPLE_N examples of each task's seeded sample, as sample Parquet files."""
    from tersetalk.tasks.loading import load_records, sample

    out = {}
    for task in TASKS:
        ev, _ = sample(
            task,
            load_records(task, data_dir=REPO / "data"),
            n=SAMPLE_N,
            calibration_n=0,
            seed=SAMPLE_SEED,
        )
        out[task] = folder / f"sample-{task}.parquet"
        ev.to_parquet(out[task])
    return out


@contextlib.contextmanager
def _summarizers_restored():
    """Leave the protocol's ``llmlingua`` summarizer slot as it was (a touchpoint may fill it)."""
    from tersetalk.protocol import (
        available_summarizers,
        get_summarizer,
        register_summarizer,
        unregister_summarizer,
    )

    before = get_summarizer("llmlingua") if "llmlingua" in available_summarizers() else None
    try:
        yield
    finally:
        if before is None:
            unregister_summarizer("llmlingua")
        else:
            register_summarizer("llmlingua", before, replace=True)


def run_case(case: Case, samples: dict[str, Path], workdir: Path) -> dict:
    """Run one case with the doubles; return its snapshot (see :func:`snapshot`)."""
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.runner import run

    workdir.mkdir(parents=True, exist_ok=True)
    spec = spec_for(case)
    responder = Responder(**case.model)
    scripted = ScriptedClient(responder, max_retries=case.max_retries)
    client = recording_client(scripted, workdir / "cache")
    with patched_doubles(case.compressor) as doubles, _summarizers_restored():
        df = run(
            spec,
            samples[case.task],
            workdir / f"{case.name}.parquet",
            client=client,
            limit=case.n,
            progress=False,
        )
    return snapshot(case, df, client.material, doubles)


# -- snapshots ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A cell as a JSON value of the same kind (NaN kept as float NaN, NA as None)."""
    import numpy as np
    import pandas as pd

    if value is None or value is pd.NA:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple | np.ndarray):  # a list column (facts_checked)
        return [_plain(v) for v in value]
    raise TypeError(f"golden: unexpected cell type {type(value).__name__}: {value!r}")


#: columns that describe one execution (records.TIMING_COLUMNS at generation time)
TIMING_COLUMNS = (
    "t_example_s",
    "t_model_s",
    "t_ttft_mean_s",
    "t_itl_mean_s",
    "cache_hits",
    "calls",
    "counters_timing",
)


def value_columns(columns: list[str]) -> list[str]:
    """The deterministic columns: every column but the timing ones (``t_*``, ``c_t_*`` and
    TIMING_COLUMNS). At generation this was checked to equal
    ``records.DETERMINISTIC_COLUMNS`` + the ``c_*`` columns (make_golden.py); it does not
    import that constant, which the refactor may remove."""
    return [c for c in columns if c not in TIMING_COLUMNS and not c.startswith(("t_", "c_t_"))]


def _cell(col: str, value: Any) -> Any:
    """A cell as the snapshot holds it. Run files store ``messages`` as a nested list of
    structs where the snapshots were made with a JSON string: the transcript
    is pinned as that JSON text (same keys, same order), so its content is compared."""
    if col == "messages" and not isinstance(value, str):
        from tersetalk.core.io import message_list

        return json.dumps(message_list(value), ensure_ascii=False)
    return _plain(value)


def _dtype(df, col: str) -> str:
    """A column's dtype; ``messages`` as the string column the snapshots were made with
    (now a nested list: its storage type changed on purpose, its content is pinned)."""
    return "string" if col == "messages" else str(df[col].dtype)


def snapshot(case: Case, df, material: list[dict], doubles: Doubles) -> dict:
    columns = [str(c) for c in df.columns]
    schemas: dict[str, Any] = {}
    calls = []
    for m in material:
        schema = m.pop("schema")
        sha = None
        if schema is not None:
            sha = hashlib.sha256(canonical(schema).encode("utf-8")).hexdigest()
            schemas[sha] = schema
        calls.append({**m, "schema_sha256": sha})
    return {
        "case": asdict(case),
        "columns": columns,
        "dtypes": {c: _dtype(df, c) for c in columns},
        "values": {c: [_cell(c, v) for v in df[c].tolist()] for c in value_columns(columns)},
        "call_log": [
            [{k: v for k, v in c.items() if k not in CALL_TIMING_KEYS} for c in json.loads(raw)]
            for raw in df["calls"]
        ],
        "timing_counter_keys": [sorted(json.loads(raw)) for raw in df["counters_timing"]],
        "model_calls": calls,
        "schemas": schemas,
        "compressor_calls": doubles.compressor_calls(),
        "embedder_calls": doubles.embedder.calls,
    }


def golden_path(name: str) -> Path:
    return CASES_DIR / f"{name}.json.gz"


def write_golden(snap: dict) -> Path:
    path = golden_path(snap["case"]["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(snap, ensure_ascii=False, indent=1, sort_keys=True)
    with gzip.GzipFile(path, "wb", mtime=0) as fh:  # mtime 0: same bytes on regeneration
        fh.write(text.encode("utf-8"))
    return path


#: a run file's per-direction token column, as the snapshots name it (``tokens_M_W``);
#: now it is ``tokens_M_W_cl100k`` (one token-column scheme everywhere)
_OLD_DIRECTION = re.compile(r"^tokens_[A-Z][A-Z0-9]*_[A-Z][A-Z0-9]*$")


def _renamed(col: str) -> str:
    return f"{col}_cl100k" if _OLD_DIRECTION.match(col) else col


def read_golden(name: str) -> dict:
    """A snapshot, with the columns renamed since it was made under their new names
    (values unchanged: a rename is not a change of behaviour)."""
    with gzip.open(golden_path(name), "rt", encoding="utf-8") as fh:
        golden = json.load(fh)
    golden["columns"] = [_renamed(c) for c in golden["columns"]]
    golden["dtypes"] = {_renamed(c): v for c, v in golden["dtypes"].items()}
    golden["values"] = {_renamed(c): v for c, v in golden["values"].items()}
    return golden


# -- comparison ---------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Exact equality of JSON values, types included (1 != 1.0 != True); NaN == NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _text_diff(a: str, b: str, label: str) -> str:
    lines = difflib.unified_diff(
        a.splitlines(), b.splitlines(), f"golden {label}", f"now {label}", lineterm="", n=2
    )
    out = list(lines)
    return "\n".join(out[:60] + (["... (diff cut)"] if len(out) > 60 else []))


def _first_change(a: str, b: str) -> str:
    """Where two texts part, with a little context: ``char N: '...old...' -> '...new...'``."""
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    j = 0  # common suffix, so the changed middle is shown
    while j < min(len(a), len(b)) - i and a[len(a) - 1 - j] == b[len(b) - 1 - j]:
        j += 1
    lo = max(0, i - 30)
    return (
        f"char {i}: {a[lo : len(a) - j + 30]!r} -> {b[lo : len(b) - j + 30]!r}"
        f" (lengths {len(a)} -> {len(b)})"
    )


def _short(v: Any, limit: int = 300) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} chars)"


def _json_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as ``path: golden -> now`` lines."""
    if _same(a, b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: key gone (golden {_short(a[k])})" for k in a if k not in b]
        out += [f"{path}.{k}: new key (now {_short(b[k])})" for k in b if k not in a]
        if not out and list(a) != list(b):
            out.append(f"{path}: key order {list(a)} -> {list(b)}")
        for k in a:
            if k in b:
                out += _json_diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [] if len(a) == len(b) else [f"{path}: length {len(a)} -> {len(b)}"]
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += _json_diff(x, y, f"{path}[{i}]")
        return out
    if isinstance(a, str) and isinstance(b, str):
        if "\n" in a or "\n" in b:
            return [f"{path}: text differs at {_first_change(a, b)}\n{_text_diff(a, b, path)}"]
        if len(a) > 80 or len(b) > 80:
            return [f"{path}: text differs at {_first_change(a, b)}"]
    return [f"{path}: {_short(a)} ({type(a).__name__}) -> {_short(b)} ({type(b).__name__})"]


def _cell_diff(col: str, a: Any, b: Any) -> str:
    if col in ("messages", "counters") and isinstance(a, str) and isinstance(b, str):
        try:
            lines = _json_diff(json.loads(a), json.loads(b), col)
        except json.JSONDecodeError:
            lines = []
        if not lines:  # same JSON value, different text (key order, spacing, escaping)
            lines = [f"{col}: same JSON, different text\n{_text_diff(a, b, col)}"]
        return "\n    ".join(
            lines[:12] + ([f"... {len(lines) - 12} more"] if len(lines) > 12 else [])
        )
    return f"{_short(a)} ({type(a).__name__}) -> {_short(b)} ({type(b).__name__})"


def compare(golden: dict, now: dict) -> list[str]:
    """Every difference, as readable lines (empty: identical)."""
    name = golden["case"]["name"]
    problems: list[str] = []
    if golden["case"] != now["case"]:
        problems.append(
            f"[{name}] case definition changed: {_json_diff(golden['case'], now['case'])}"
        )
    gc, nc = golden["columns"], now["columns"]
    if gc != nc:
        gone = [c for c in gc if c not in nc]
        new = [c for c in nc if c not in gc]
        problems.append(
            f"[{name}] columns differ: gone {gone}, new {new}"
            + ("" if gone or new else f"; order now {nc}")
        )
    for col in gc:
        if col in now["dtypes"] and golden["dtypes"][col] != now["dtypes"][col]:
            problems.append(
                f"[{name}] dtype of {col}: {golden['dtypes'][col]} -> {now['dtypes'][col]}"
            )
    ids = golden["values"].get("example_id", [])
    for col, want in golden["values"].items():
        got = now["values"].get(col)
        if got is None:
            continue  # reported with the columns
        if len(got) != len(want):
            problems.append(f"[{name}] {col}: {len(want)} rows -> {len(got)} rows")
            continue
        for row, (a, b) in enumerate(zip(want, got, strict=True)):
            if not _same(a, b):
                ex = ids[row] if row < len(ids) else "?"
                problems.append(
                    f"[{name}] column {col}, row {row} (example {ex}):\n    "
                    + _cell_diff(col, a, b)
                )
    for key, label in (
        ("call_log", "calls column (timing fields dropped)"),
        ("timing_counter_keys", "keys of counters_timing"),
        ("compressor_calls", "scripted LLMLingua calls"),
        ("embedder_calls", "fake MiniLM calls"),
    ):
        if not _same(golden[key], now[key]):
            diff = _json_diff(golden[key], now[key], key)
            problems.append(f"[{name}] {label} differ:\n    " + "\n    ".join(diff[:12]))
    problems += _compare_calls(name, golden, now)
    return problems


def _compare_calls(name: str, golden: dict, now: dict) -> list[str]:
    want, got = golden["model_calls"], now["model_calls"]
    out = []
    if len(want) != len(got):
        out.append(f"[{name}] number of model calls: {len(want)} -> {len(got)}")
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        if _same(a, b):
            continue
        lines = []
        for k in sorted(set(a) | set(b)):
            if k == "key" or _same(a.get(k), b.get(k)):
                continue
            if k == "schema_sha256":
                sa = golden["schemas"].get(a.get(k)) if a.get(k) else None
                sb = now["schemas"].get(b.get(k)) if b.get(k) else None
                lines += _json_diff(sa, sb, "schema") or [
                    f"schema_sha256: {a.get(k)} -> {b.get(k)}"
                ]
            else:
                lines += _json_diff(a.get(k), b.get(k), k)
        out.append(
            f"[{name}] first differing model call: #{i} ({a.get('kind')}; cache key "
            f"{a.get('key', '')[:12]} -> {b.get('key', '')[:12]}):\n    "
            + "\n    ".join(lines[:16])
        )
        break
    return out
