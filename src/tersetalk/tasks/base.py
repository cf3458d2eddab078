"""What a task is: one :class:`Task` declares everything the workflow needs to know.

A task module builds its :class:`Task` and hands it to
:func:`tersetalk.tasks.registry.register`; nothing outside ``tasks/`` branches on a
task's name. A task declares:

- ``dataset``: its checksummed file, the hub copy, and how a line becomes the
  pipeline's record (:class:`DatasetFile`);
- ``brief``: how the Manager's :class:`Brief` (goal, facts, question, payload) is built
  from a record and the task's config section;
- ``worker_system``: the Worker's instruction in prose;
- ``answer`` (:class:`Answer`) and ``brief_holds``: what the answer is (its form in
  words and its kind) and what the brief holds, the capabilities a system reads to word
  its own prompts and read replies (TerseTalk's answer note, Chain-of-Draft's Worker
  prompt, LLMLingua's kept digits): a task says what it is, never how a system talks;
- ``extract``: how the prediction is read from the Worker's reply;
- ``correct`` / ``score`` / ``aggregate``: the official check of one prediction, the
  per-example score columns, and the run's accuracy from them (``metric`` names it).
  The score step computes each example's scores once (:meth:`Task.example_scores`) and
  every per-example metric, the run's aggregate and the statistics read those; a task
  whose scorer runs the prediction (``executes``: HumanEval's sandbox) has its verdict
  recorded by the run and read as data, so model code never runs twice;
- ``title`` (figures, with the metric), ``display_name`` (how readers are told its
  name), ``topology`` (the topology study's label), and smaller hooks
  (see the field comments).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: topology labels: which topology a task's questions are expected to need. The topology
#: study scores a router by how often it picks the label of the example's
#: task. Direct-optimal tasks are answered from what the brief already holds (a yes/no,
#: one option of five); collaborative-optimal tasks need a chain of steps (multi-hop
#: retrieval, arithmetic, code that must pass tests), where a second Worker and a
#: verify/fix loop can pay for themselves.
DIRECT = "direct"
CHAIN = "chain"

#: the kinds of answer a task can declare (:class:`Answer`): ``span`` words copied from
#: the brief, ``yes/no``, ``choice`` an option's label, ``number`` worked out in steps,
#: ``code`` a program, ``value`` copied from a payload, ``text`` anything else
ANSWER_KINDS = ("text", "span", "yes/no", "choice", "number", "code", "value")


@dataclass(frozen=True)
class Answer:
    """What a task's answer is, as systems read it.

    ``form`` completes "The answer is ..." ("a number", "the letter of one option");
    ``kind`` is one of :data:`ANSWER_KINDS`. Systems decide from them what to tell
    their Worker and how to read its reply (a ``span`` is read from the answer alone, a
    ``number`` needs calculation steps and keeps its digits under compression)."""

    form: str
    kind: str = "text"

    def __post_init__(self) -> None:
        if self.kind not in ANSWER_KINDS:
            raise ValueError(f"Answer kind {self.kind!r} is not one of {', '.join(ANSWER_KINDS)}")
        if not self.form.strip() or self.form.rstrip().endswith("."):
            raise ValueError(f"Answer form {self.form!r}: words that complete "
                             "'The answer is ...', without the full stop")  # fmt: skip


class ScoringError(ValueError):
    """A gold answer or a scoring input that cannot be interpreted."""


class TaskUnavailableError(RuntimeError):
    """A task's own machinery cannot run on this machine (HumanEval's code sandbox, say):
    the run stops before its first example, as for a config error, and the message says
    how to fix it."""


class TaskHostFault(RuntimeError):
    """A task's machinery failed on this host for one example, not the example's content
    (no temporary folder, no file descriptors): the example is not scored, and the runner
    leaves it for the next run, as a model server's passing fault."""


@dataclass
class Brief:
    """The Manager's content before any protocol encodes it.

    ``payload``: a tool response the Manager forwards whole (toolqa), as the tool
    returned it; a codec may re-encode it (the ``formats`` system). Not a fact: it is
    data to read, not sentences to cap or compress.
    """

    goal: str
    facts: list[str] = field(default_factory=list)
    question: str = ""
    payload: str = ""
    #: passages to read, not evidence picked for the question: ``(name, text)``
    #: (BoolQ's passage, Social IQa's situation)
    context: list[tuple[str, str]] = field(default_factory=list)
    #: answer options ``(label, text)`` (CommonsenseQA, Social IQa)
    options: list[tuple[str, str]] = field(default_factory=list)
    #: program text to complete, kept verbatim (HumanEval's signature and docstring)
    code: str = ""
    #: the facts the answer rests on, where the brief's facts are not exactly those
    #: (HotpotQA under ``facts: context``: the supporting sentences within the ten
    #: paragraphs sent); None: the facts themselves. See :meth:`facts_checked`.
    supporting: list[str] | None = None

    def facts_checked(self) -> list[str]:
        """The facts whose arrival at the Worker answer preservation checks: the
        supporting facts, else every fact. The run records them with each example (its
        ``facts_checked`` column), so scoring reads them instead of building the brief
        again."""
        return list(self.facts if self.supporting is None else self.supporting)

    def flat(self) -> Brief:
        """The brief with everything as facts and the question, as codecs that know
        only facts see it (:func:`tersetalk.agents.roles.lay_out`)."""
        return lay_out_parts(self, context=False, options=False, code=False)


def lay_out_parts(brief: Brief, *, context: bool, options: bool, code: bool) -> Brief:
    """``brief`` with the parts whose flag is False folded into facts and the question.

    Folded, a context passage becomes its sentences as facts (before the evidence), an
    option a fact ``"A: bank"`` (after it), and the program text the question itself
    (the prompt as the task gives it). A part whose flag is True stays in its field.
    """
    facts = list(brief.facts)
    if not context:
        facts = [s for _, text in brief.context for s in split_sentences(text)] + facts
    if not options:
        facts += [f"{label}: {text}" for label, text in brief.options]
    folded_code = bool(brief.code) and not code
    return Brief(
        goal=brief.goal,
        facts=facts,
        question=brief.code if folded_code else brief.question,
        payload=brief.payload,
        context=list(brief.context) if context else [],
        options=list(brief.options) if options else [],
        code="" if folded_code else brief.code,
    )


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$\"'(])")


def split_sentences(text: str) -> list[str]:
    """A text's sentences: a split after ``.``, ``!`` or ``?`` before a capital, digit,
    ``$``, quote or parenthesis."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def last_sentence_question(text: str) -> str:
    """The question of a word problem: its last sentence (the others are its facts)."""
    sentences = split_sentences(text)
    return sentences[-1] if sentences else text.strip()


_ANSWER_MARKER = re.compile(r"answer\s*(?:is|:)\s*", re.IGNORECASE)


def short_answer(text: str) -> str:
    """A short answer from a reply: after an "answer is"/"Answer:" marker if there is
    one, its first non-empty line, without quotes, asterisks or a final period."""
    answer = text.strip()
    marker = _ANSWER_MARKER.search(answer)
    if marker:
        answer = answer[marker.end() :]
    for line in answer.splitlines():
        if line.strip():
            answer = line.strip()
            break
    return answer.strip().strip("\"'*").rstrip(".").strip()


@dataclass(frozen=True)
class DatasetFile:
    """A task's shipped file (checked by SHA-256) and where the hub keeps it.

    ``relpath`` is relative to the config's ``data.dir`` (an absolute path is used as
    it is: a plug-in task keeps its file beside its module). ``build`` turns the checked
    file into records when they are not the file's own lines (toolqa: questions
    generated from each payload), taking ``options``: the task's config keys that decide
    which examples exist (passed by `tersetalk sample`). A dataset without ``hub_path``
    is read from the shipped file whatever the source. ``from_hub(row)`` maps a hub row
    to the shipped file's layout; ``to_record(line, row)`` maps a line of the file to
    the pipeline's record; ``gold(record)`` gives the sample's gold string (default: the
    record's ``answer``) and ``example_id(row, record)`` its id (default: its ``id``).
    """

    relpath: str
    sha256: str
    hub_path: str | None = None
    hub_name: str | None = None
    hub_split: str | None = None
    build: Callable[..., list[dict]] | None = None
    options: tuple[str, ...] = ()
    from_hub: Callable[[dict], dict] | None = None
    to_record: Callable[[dict, int], dict] | None = None
    gold: Callable[[dict], str] | None = None
    example_id: Callable[[int, dict], str] | None = None


#: each example's score columns (:meth:`Task.example_scores`, in the run's order, an error
#: row scored as an empty prediction) -> the run's metrics
Aggregate = Callable[[Sequence[Mapping[str, float]]], dict]

#: the score columns every task's scorer writes (a scorer may add provenance columns)
SCORE_COLUMNS: tuple[str, ...] = ("em", "f1", "precision", "recall", "correct")


def mean_in_order(values: Iterable[float]) -> float:
    """The mean of ``values`` summed one after the other from 0.0, in the order given (the
    official HotpotQA script's summation; no compensated or pairwise sum, so a run's
    aggregate is the same float on every Python and NumPy)."""
    total, n = 0.0, 0
    for value in values:
        total += float(value)
        n += 1
    if n == 0:
        raise ScoringError("a run's metrics need at least one example")
    return total / n


@dataclass(frozen=True)
class Metric:
    """A task's official metric: its name, its definition, and which way is better."""

    name: str
    definition: str
    higher_is_better: bool = True


def same_score(ok: float) -> dict[str, float]:
    """The score columns of a task with one right-or-wrong check (all equal ``correct``)."""
    return {"em": ok, "f1": ok, "precision": ok, "recall": ok, "correct": ok}


def accuracy_metrics(accuracy: float) -> dict[str, float]:
    """A run's metrics for a task with accuracy alone (``em`` equal, no F1: NaN)."""
    nan = float("nan")
    return {"accuracy": accuracy, "em": accuracy, "f1": nan, "precision": nan, "recall": nan}


@dataclass(frozen=True)
class TitledFacts:
    """The rules of a task whose facts are ``"Title: sentence"`` (HotpotQA's).

    ``strip_residue(fact)``: the fact without what stripped markup left behind;
    ``dedup_title(fact, loose)``: the sentence alone when it already names the title;
    ``paragraph_titles(facts, loose)``: titles deduplicated and said once per run of one
    paragraph's sentences. ``loose`` is TerseTalk's ``title_names: loose``.
    """

    strip_residue: Callable[[str], str]
    dedup_title: Callable[[str, bool], str]
    paragraph_titles: Callable[[list[str], bool], list[str]]

    def title_overhead(self, fact: str) -> str | None:
        """The sentence of a fact whose title it already names (exactly), else None."""
        sentence = self.dedup_title(fact, False)
        return sentence if sentence != fact else None


@dataclass(frozen=True)
class Task:
    """One task and everything the workflow needs to know about it (module docstring)."""

    name: str
    #: how figures name it, with its metric: "GSM8K (accuracy)"
    title: str
    dataset: DatasetFile
    #: record, the task's config section -> the Manager's brief
    brief: Callable[[dict, Mapping[str, Any]], Brief]
    #: the Worker's system prompt in prose
    worker_system: str
    #: what the answer is: its form in words and its kind (:class:`Answer`)
    answer: Answer
    metric: Metric
    #: the official check of one (non-empty) prediction against the sample's gold
    correct: Callable[[str, str], bool]
    #: ``direct`` or ``chain`` (:data:`DIRECT`, :data:`CHAIN`); None: not in the topology study
    topology: str | None = None
    #: the prediction as read from the Worker's reply
    extract: Callable[[str], str] = short_answer
    #: prediction, gold, config section -> score columns (default: :func:`same_score`
    #: of ``correct``, an empty prediction wrong); a scorer may add provenance columns
    score: Callable[[str, str, Mapping[str, Any]], dict] | None = None
    #: the scorer runs the prediction (model-written code in a sandbox): the run records
    #: the verdict and the score step reads it (:meth:`example_scores`), never running
    #: model code a second time
    executes: bool = False
    #: each example's score columns, in the run's order -> the run's ``accuracy``,
    #: ``em``, ``f1``, ``precision``, ``recall`` (default: :func:`accuracy_metrics` of the
    #: mean of ``correct``)
    aggregate: Aggregate | None = None
    #: the answer string whose arrival at the Worker answer preservation checks, from
    #: the gold (default: the gold itself); None when no string can arrive (code's tests)
    gold_text: Callable[[str], str | None] | None = None
    #: a record's question text -> the question line of its brief (the audit's rule)
    brief_question: Callable[[str], str] = str.strip
    #: the part of a brief fact that must reach the Worker (HotpotQA: the sentence)
    fact_text: Callable[[str], str] | None = None
    #: what the Manager's brief holds, as a Worker is told it ("a math word problem");
    #: None: unsaid, and a prompting that must say it (Chain-of-Draft) is not offered
    brief_holds: str | None = None
    #: the task's config section goes into the run spec (``task_options``)
    run_options: bool = False
    #: the config section -> raise before the first example when the task cannot be scored
    preflight: Callable[[Mapping[str, Any]], None] | None = None
    #: the rules for facts written ``"Title: sentence"`` (:class:`TitledFacts`), which
    #: TerseTalk's brief and the token audit use; None: facts are plain sentences
    titled_facts: TitledFacts | None = None
    #: how every figure, caption and document names the task, the paper's spelling
    #: ("Social IQa"); empty: the title without its metric ("GSM8K (accuracy)" -> "GSM8K")
    display_name: str = ""

    def __post_init__(self) -> None:
        if not self.display_name:
            object.__setattr__(self, "display_name", self.title.split(" (")[0] or self.name)

    def scores(self, prediction: str, gold: str, options: Mapping[str, Any] | None) -> dict:
        """The per-example score columns of one prediction."""
        if self.score is not None:
            return self.score(prediction or "", gold, options or {})
        return same_score(float(bool(prediction) and self.correct(prediction, gold)))

    def example_scores(
        self,
        prediction: str,
        gold: str,
        options: Mapping[str, Any] | None = None,
        *,
        error: bool = False,
        recorded: Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """One example's score columns (:data:`SCORE_COLUMNS`), as the score step computes
        them once: the scorer's on the prediction (an error row's prediction counts as
        empty, so it scores 0), or, for a task whose scorer runs the prediction
        (``executes``), the verdict the run recorded (``recorded``: the run's row)."""
        if self.executes:
            if recorded is None:
                raise ScoringError(
                    f"{self.name}: its scorer runs the prediction, so the score step reads "
                    "the verdict the run recorded; none was given"
                )
            if error:
                return same_score(0.0)
            try:
                verdict = {k: float(recorded[k]) for k in SCORE_COLUMNS}
            except (KeyError, TypeError, ValueError) as exc:
                raise ScoringError(
                    f"{self.name}: the run's recorded verdict is not a score "
                    f"({type(exc).__name__}: {str(exc)[:120]}); the run file is damaged or "
                    "from an older version: rerun it"
                ) from None
            return verdict
        scores = self.scores("" if error else prediction, gold, options)
        return {k: float(scores[k]) for k in SCORE_COLUMNS}

    def run_metrics(self, scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
        """The run's accuracy (and EM/F1 where the task has them) from every example's
        score columns (:meth:`example_scores`; the denominator is every example)."""
        if self.aggregate is not None:
            return self.aggregate(scores)
        return accuracy_metrics(mean_in_order(s["correct"] for s in scores))

    def answer_text(self, gold: str) -> str | None:
        """The string of the gold that can reach the Worker (None: none can)."""
        return gold if self.gold_text is None else self.gold_text(gold)

    def fact_payload(self, fact: str) -> str:
        """What of a brief fact must reach the Worker."""
        return fact if self.fact_text is None else self.fact_text(fact)
