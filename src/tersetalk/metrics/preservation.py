"""What survives the trip to the Worker: semantic similarity and answer preservation.

Semantic preservation compares what the Worker was sent by a system (rendered to
prose when it is TerseTalk-JSONL) with what the free-form system sent for the same
example. BERTScore F1 with the local all-MiniLM-L6-v2 is the main measure and
token Jaccard is reported beside it; the method actually used is written in a
provenance column, so a fallback is never silent.

Answer preservation is model-independent: does the gold answer string, and each
supporting fact, still appear in the text the Worker received?
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from pathlib import Path

from tersetalk.core.io import message_list
from tersetalk.models.embedding import minilm_path
from tersetalk.tasks.hotpotqa import normalize_answer
from tersetalk.tasks.registry import get as get_task

log = logging.getLogger(__name__)

MINILM_LAYERS = 6


def worker_input(messages: list[dict]) -> str:
    """Everything the Manager sent the Worker, in order (brief and re-injected text)."""
    return "\n".join(m["content"] for m in messages if m["sender"] == "M" and m["receiver"] == "W")


def as_prose(text: str) -> tuple[str, bool]:
    """Render TerseTalk-JSONL to prose; other text is returned as is.

    Returns the text and whether it was JSONL. Strict parsing decides, so a prose
    message that happens to contain a bracket is never mistaken for JSONL.
    """
    from tersetalk.protocol import ProtocolError, jsonl_to_prose, parse_strict

    try:
        lines = parse_strict(text)
    except ProtocolError:
        return text, False
    return jsonl_to_prose(lines), True


_WORD = re.compile(r"\w+")


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of lower-cased word sets (1.0 for two empty texts)."""
    sa, sb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


@lru_cache(maxsize=1)
def _scorer():
    from bert_score import BERTScorer

    return BERTScorer(
        model_type=str(minilm_path()),
        num_layers=MINILM_LAYERS,
        lang="en",
        rescale_with_baseline=False,
        device="cpu",
    )


BATCH_SIZE = 16
#: in the cache key: how texts that tie in bert_score's embedding order are ordered
TIE_ORDER = "text-digest"


class _Text(str):
    """A text whose hash is a digest of its characters, the same in every process.

    bert_score embeds a call's distinct texts in batches, in the order of
    ``sorted(set(texts), key=word count)``: texts with the same number of words keep the
    set's order, which follows ``hash(str)`` and so changes with every process's
    PYTHONHASHSEED. A batch's padding moves the last bits of its texts' embeddings, so
    the same texts scored twice could differ by a few float32 units (33 of 820 pairs of
    two default runs, up to 1.8e-7). Passed as ``_Text``, they tie in one order
    everywhere and a call's scores depend on its texts alone.
    """

    __slots__ = ()

    def __hash__(self) -> int:
        import hashlib

        digest = hashlib.blake2b(self.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        return int.from_bytes(digest, "little", signed=True)


#: the folder of BERTScore results under a cache directory (``tersetalk score --cache-dir``)
CACHE_FOLDER = "bertscore"


def _versions() -> dict[str, str | None]:
    """The versions of the packages BERTScore's numbers come from, read without importing
    them (importing torch is what the cache saves)."""
    from tersetalk.core.memo import versions

    return versions("bert-score", "torch", "transformers", "tokenizers")


def _cache_path(cache_dir: Path, method: str,
                groups: list[tuple[list[str], list[str]]]) -> Path:  # fmt: skip
    """Where the scores of this call are kept: keyed on everything they depend on: the
    encoder's files (their sha256, memoised under ``<cache_dir>/fingerprints/``), the package
    versions, the method, the batch size (padding in a batch can move the last bits),
    and every text of every group in order (the texts scored together share batches)."""
    import hashlib
    import json

    from tersetalk.models.fingerprint import FINGERPRINT_DIR, folder_sha256

    key = {
        "method": method,
        "batch_size": BATCH_SIZE,
        "tie_order": TIE_ORDER,
        "encoder": folder_sha256(minilm_path(), cache_dir / FINGERPRINT_DIR),
        "versions": _versions(),
        "groups": [{"candidates": c, "references": r} for c, r in groups],
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    return cache_dir / CACHE_FOLDER / digest[:2] / f"{digest}.json"


def _cached(path: Path, sizes: list[int]) -> list[list[float]] | None:
    import json

    try:
        scores = json.loads(path.read_text(encoding="utf-8"))["f1"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, or damaged: computed again and rewritten
    if not isinstance(scores, list) or [len(g) if isinstance(g, list) else -1
                                        for g in scores] != sizes:  # fmt: skip
        return None
    if not all(isinstance(x, float) for g in scores for x in g):
        return None
    return scores


def bertscore_f1(
    candidates: list[str], references: list[str], cache_dir: str | Path | None = None
) -> tuple[list[float], str]:
    """BERTScore F1 per pair and the method string; falls back to NaN with the reason.

    One group of :func:`bertscore_f1_groups`, which says how the cache works."""
    [scores], method = bertscore_f1_groups([(candidates, references)], cache_dir)
    return scores, method


def bertscore_f1_groups(
    groups: list[tuple[list[str], list[str]]], cache_dir: str | Path | None = None
) -> tuple[list[list[float]], str]:
    """BERTScore F1 per pair of each group (candidates, references), and the method string;
    falls back to NaN with the reason.

    All groups are scored in one call of the encoder: BERTScore embeds each distinct text
    once per call, so a text several groups share is embedded once. The score job passes
    one group per run: every run is paired with the same free-form messages, and many
    variants send the Worker the same text (hotpotqa's 30 ablation runs: 600 texts, 156
    distinct). Texts batched with other texts can differ in the last bits (padding), so
    a pair's score depends on its call's texts, within BERTScore's float tolerance; the
    cache key holds them all. On their texts alone: ties in the order of embedding are
    broken the same way in every process (:class:`_Text`).

    With ``cache_dir``, the scores of a call are kept under ``<cache_dir>/bertscore/``
    and a later call with the same groups (and the same encoder files and package
    versions) reads them back, bit for bit (JSON floats round-trip exactly), without
    importing torch or loading the encoder. A fallback is never cached.
    """
    method = f"bertscore-f1:all-MiniLM-L6-v2:layer{MINILM_LAYERS}"
    sizes = [len(c) for c, _ in groups]
    for cands, refs in groups:
        if len(refs) != len(cands):
            raise ValueError(
                f"{len(cands)} candidates but {len(refs)} references: pair them one to one"
            )
        if bad := [t for t in (*cands, *refs) if not isinstance(t, str)]:
            raise TypeError(f"BERTScore scores texts, not {type(bad[0]).__name__}: {bad[0]!r:.80}")
    if not any(sizes):
        return [[] for _ in groups], method
    path = None
    if cache_dir is not None:
        try:
            path = _cache_path(Path(cache_dir), method, groups)
        except Exception as exc:  # noqa: BLE001 - the encoder is missing: the fallback below
            log.warning("BERTScore cache not used: %s", exc)
        if path is not None and (hit := _cached(path, sizes)) is not None:
            log.info("BERTScore of %d pairs read from the cache (%s)", sum(sizes), path.name)
            return hit, method
    try:
        _, _, f1 = _scorer().score([_Text(c) for cands, _ in groups for c in cands],
                                   [_Text(r) for _, refs in groups for r in refs],
                                   batch_size=BATCH_SIZE)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - recorded in the provenance column
        log.warning("BERTScore unavailable, semantic preservation is Jaccard only: %s", exc)
        reason = f"unavailable ({type(exc).__name__}: {exc})"
        return [[float("nan")] * n for n in sizes], reason
    flat = [float(x) for x in f1]
    scores, start = [], 0
    for n in sizes:
        scores.append(flat[start : start + n])
        start += n
    if path is not None:
        import json

        from tersetalk.core.io import write_text_atomic

        try:
            write_text_atomic(json.dumps({"method": method, "f1": scores}), path)
        except OSError as exc:
            log.warning("BERTScore cache: could not write %s: %s", path, exc)
    return scores, method


def _contains(haystack: str, needle: str) -> bool:
    needle_n = normalize_answer(needle)
    return bool(needle_n) and needle_n in normalize_answer(haystack)


def answer_preservation(task: str, facts: list[str], gold: str, received: str) -> dict[str, float]:
    """Whether the gold string and each checked fact reach the Worker (normalised match).

    ``facts``: the facts the run recorded as checked (its ``facts_checked`` column: the
    brief's supporting facts, HotpotQA's supporting sentences, GSM8K's sentences). The
    gold string is the answer's text (the task's ``gold_text``): for CommonsenseQA and
    Social IQa the gold option's text (their gold holds the label and the options), and
    none for HumanEval. Of a fact, what must arrive is the task's ``fact_text`` (a
    HotpotQA fact is "Title: sentence"; the sentence must arrive).
    """
    spec = get_task(task)
    sentences = [spec.fact_payload(f) for f in facts]
    reached = [_contains(received, s) for s in sentences]
    answer = spec.answer_text(gold)
    return {
        # HumanEval's gold is its tests: no answer string can reach the Worker (NaN)
        "gold_reaches_worker": float(_contains(received, answer)) if answer else float("nan"),
        "facts_reaching_worker": float(sum(reached) / len(reached)) if reached else float("nan"),
        "n_facts_checked": len(reached),
    }


def messages_of(raw) -> list[dict]:
    """A run row's messages: a nested list (run files) or a JSON string (older files)."""
    return message_list(raw)
