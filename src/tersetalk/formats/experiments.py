"""The format study's experiments over the tool-response corpus.

Each experiment is a pure function of the corpus and its settings, writes one Parquet
file, and is one rule of ``workflow/rules/formats.smk``:

- ``savings``: tokens of every payload in every encoder under each tokenizer, with the
  lossless knapsack (``mckp``; ``mckp_plain`` without its alias layer) and the best
  single format chosen with hindsight.
- ``knapsack``: exact vs greedy vs binary at budgets that are fractions of the
  payload's compact-JSON tokens: value kept, tokens, time.
- ``dedup``: a seeded replay of repeated tool calls through the L0 cache: hit rate
  and the dedup / encoder / combined savings against each baseline.

Run one with ``tersetalk formats experiment <name> --out FILE``. The study's tables
(savings by shape, the knapsack and dedup summaries, comprehension per encoder) are
computed here too, from those files (:func:`summary_tables`); ``tersetalk formats
plot`` (:mod:`tersetalk.formats.plot`) writes them and draws the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
from tqdm import tqdm

from tersetalk.core.io import write_parquet_atomic
from tersetalk.core.tokens import count_tokens
from tersetalk.formats.corpus import load_corpus, markdown_tables
from tersetalk.formats.solver import MCKP, SINGLE, BudgetError, encode, single_text, solve
from tersetalk.formats.tree import Node, from_python, table_to_json

TOKENIZERS = ("o200k_base", "cl100k_base")
BASELINES = ("json_compact", "json_pretty", "toon")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Item:
    """One payload the experiments encode: a JSON body or one Markdown table."""

    item_id: str
    kind: str  # json | markdown_table
    shape: str
    node: Node


def items(data_dir: str) -> Iterator[Item]:
    """Every JSON body, and every Markdown table as the array of its rows."""
    for p in load_corpus(data_dir):
        if p.kind == "json":
            yield Item(p.id, "json", p.shape, from_python(p.value))
        else:
            for i, table in enumerate(markdown_tables(p)):
                try:
                    node = table_to_json(table)
                except ValueError:  # a header that repeats a column: not a record table
                    continue
                if node.items:
                    yield Item(f"{p.id}#t{i}", "markdown_table", "markdown_table", node)


def savings(payloads: list[Item], tokenizers=TOKENIZERS) -> pd.DataFrame:
    """Tokens per (payload, encoder, tokenizer); NaN where a format cannot carry it."""
    rows = []
    for it in tqdm(payloads, desc="savings", unit="payload", file=sys.stderr):
        # a single format's text is the same under every tokenizer: made once, counted
        # under each (what encode() returns, without its round trip per tokenizer)
        texts = {enc: single_text(it.node, enc) for enc in SINGLE}
        for tok in tokenizers:
            counts: dict[str, float] = {
                enc: float("nan") if text is None else count_tokens(text, tok)
                for enc, text in texts.items()
            }
            for enc in MCKP:
                try:
                    counts[enc] = encode(it.node, enc, tokenizer=tok).tokens
                except ValueError:
                    counts[enc] = float("nan")
            singles = {k: v for k, v in counts.items() if k in SINGLE and v == v}
            best = min(singles, key=lambda k: singles[k])
            for enc, n in (*counts.items(), ("best_single", singles[best])):
                rows.append(
                    {
                        "item_id": it.item_id,
                        "kind": it.kind,
                        "shape": it.shape,
                        "tokenizer": tok,
                        "encoder": enc,
                        "tokens": n,
                        "eligible": n == n,
                        "best_single_format": best if enc == "best_single" else None,
                        "json_compact_tokens": counts["json_compact"],
                    }
                )
    return pd.DataFrame(rows)


def savings_by_shape(df: pd.DataFrame, tokenizer: str = "o200k_base") -> pd.DataFrame:
    """Total tokens per shape and encoder, and the saving against compact JSON (%)."""
    d = df[(df["tokenizer"] == tokenizer) & df["eligible"]]
    out = d.groupby(["shape", "encoder"], as_index=False).agg(
        n=("tokens", "size"), tokens=("tokens", "sum"), json_compact=("json_compact_tokens", "sum")
    )
    total = d.groupby("encoder", as_index=False).agg(
        n=("tokens", "size"), tokens=("tokens", "sum"), json_compact=("json_compact_tokens", "sum")
    )
    total.insert(0, "shape", "all")
    out = pd.concat([out, total], ignore_index=True)
    out["savings_vs_json_compact_pct"] = 100 * (1 - out["tokens"] / out["json_compact"])
    out["tokenizer"] = tokenizer
    return out


def savings_tables(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`savings_by_shape` under every tokenizer of the savings run, stacked."""
    return pd.concat([savings_by_shape(df, t) for t in sorted(df["tokenizer"].unique())])


def knapsack(
    payloads: list[Item],
    fractions=(0.25, 0.5, 0.75, 1.0),
    methods=("exact", "greedy", "binary"),
    tokenizer: str = "o200k_base",
    kinds=("json",),
) -> pd.DataFrame:
    """Value kept and tokens per (payload, budget, method); the greedy's gap per budget."""
    rows = []
    chosen = [i for i in payloads if i.kind in kinds]
    for it in tqdm(chosen, desc="knapsack", unit="payload", file=sys.stderr):
        compact = encode(it.node, "json_compact", tokenizer=tokenizer).tokens
        for frac in fractions:
            budget = max(1, int(compact * frac))
            for method in methods:
                t0 = time.perf_counter()
                try:
                    e = solve(it.node, budget=budget, method=method, tokenizer=tokenizer)
                    rec = {
                        "tokens": e.tokens,
                        "value_share": e.value_share,
                        "lossless": e.lossless,
                        "error": None,
                    }
                except BudgetError as exc:
                    rec = {"tokens": None, "value_share": 0.0, "lossless": False, "error": str(exc)}
                rows.append(
                    {
                        "item_id": it.item_id,
                        "shape": it.shape,
                        "tokenizer": tokenizer,
                        "budget_fraction": frac,
                        "budget": budget,
                        "json_compact_tokens": compact,
                        "method": method,
                        **rec,
                        "t_solve_s": time.perf_counter() - t0,  # timing: not deterministic
                    }
                )
    return pd.DataFrame(rows)


def dedup_replay(
    payloads: list[Item],
    sessions: int = 20,
    calls: int = 30,
    repeat_p: float = 0.3,
    capacity: int = 64,
    seed: int = 0,
    tokenizer: str = "o200k_base",
) -> pd.DataFrame:
    """A seeded replay: each session draws tool calls, repeating an earlier one with
    probability ``repeat_p``; a byte-identical repeat becomes a reference hint.

    One row per call and encoder: the tokens sent with L0 dedup (the hint on a hit, the
    encoding on a miss) and without it, for the savings accounting.
    """
    from tersetalk.formats.dedup import DedupCache

    pool = [i for i in payloads if i.kind == "json"]
    rng = random.Random(seed)
    encoded: dict[tuple[str, str], tuple[str, int]] = {}
    rows = []
    for s in range(sessions):
        caches = {enc: DedupCache(capacity) for enc in ("mckp", *BASELINES)}
        seen: list[Item] = []
        for c in range(calls):
            it = rng.choice(seen) if seen and rng.random() < repeat_p else rng.choice(pool)
            seen.append(it)
            for enc in caches:
                key = (it.item_id, enc)
                if key not in encoded:
                    e = encode(it.node, enc, tokenizer=tokenizer)
                    encoded[key] = (e.text, e.tokens)
                text, n = encoded[key]
                hint = caches[enc].check(text)
                sent = n if hint is None else count_tokens(hint, tokenizer)
                rows.append(
                    {
                        "session": s,
                        "call": c,
                        "item_id": it.item_id,
                        "encoder": enc,
                        "tokenizer": tokenizer,
                        "hit": hint is not None,
                        "tokens_full": n,
                        "tokens_sent": sent,
                    }
                )
    return pd.DataFrame(rows)


COMPREHENSION_ENCODERS = ("json_compact", "json_pretty", "toon", "mckp_plain", "mckp")


def comprehension(
    data_dir: str,
    client,
    *,
    n_payloads: int = 12,
    seed: int = 0,
    encoders=COMPREHENSION_ENCODERS,
    max_prompt_tokens: int = 1500,
    per_kind: int = 1,
    max_tokens: int = 32,
    tokenizer: str = "o200k_base",
) -> pd.DataFrame:
    """Questions with gold answers by construction, answered from each encoding.

    Payloads: a seeded sample of the JSON bodies whose largest encoding fits the
    model's context (``max_prompt_tokens`` by the model's own tokenizer), with up to
    ``per_kind`` questions of each kind about each (the first ones are the same at any
    ``per_kind``, so a larger set extends a smaller one). One row per
    (question, encoder): the payload's tokens in that encoding, the model's answer,
    whether it matches the gold answer. A model error is a row with ``error`` set and
    ``correct`` False; a transient server fault propagates (rerun: the call cache
    keeps what was answered).
    """
    from tersetalk.formats.questions import answer_matches, prompt_for, questions_for
    from tersetalk.models.base import GenerationConfig, ModelCallError, is_transient

    gen = GenerationConfig(temperature=0.0, max_tokens=max_tokens, seed=seed)
    bodies = [p for p in load_corpus(data_dir, kinds=("json",))]
    rng = random.Random(seed)
    rng.shuffle(bodies)
    prompt_tokens, fit_source = _prompt_counter(client)
    chosen = []
    for p in bodies:
        if len(chosen) == n_payloads:
            break
        node = from_python(p.value)
        texts = {enc: encode(node, enc, tokenizer=tokenizer) for enc in encoders}
        longest = max(texts.values(), key=lambda e: len(e.text))
        if prompt_tokens(prompt_for(_probe(p), longest.text)) > max_prompt_tokens:
            continue
        questions = questions_for(p, seed=seed, per_kind=per_kind)
        if questions:
            chosen.append((p, texts, questions))
    if not chosen:
        raise ValueError(
            f"no payload fits {max_prompt_tokens} prompt tokens; raise formats.comprehension"
            ".max_prompt_tokens (and the model's n_ctx)"
        )
    rows = []
    work = [(p, texts, q) for p, texts, qs in chosen for q in qs]
    for p, texts, q in tqdm(work, desc="comprehension", unit="question", file=sys.stderr):
        for enc, e in texts.items():
            messages = [{"role": "user", "content": prompt_for(q, e.text)}]
            pred, err, ptoks = "", None, -1
            try:
                res = client.chat(messages, gen)
                pred, ptoks = res.text, res.prompt_tokens
            except ModelCallError as exc:
                if is_transient(exc):
                    raise
                err = f"{type(exc).__name__}: {exc}"
            rows.append(
                {
                    "payload_id": p.id,
                    "shape": p.shape,
                    "qid": q.qid,
                    "kind": q.kind,
                    "encoder": enc,
                    "tokenizer": tokenizer,
                    "payload_tokens": e.tokens,
                    "prompt_tokens": ptoks,
                    "gold": q.gold,
                    "prediction": pred,
                    "correct": err is None and answer_matches(pred, q.gold),
                    "error": err,
                    "fit_tokens_source": fit_source,
                }
            )
    return pd.DataFrame(rows)


def _prompt_counter(client):
    """How a prompt's length is measured against ``max_prompt_tokens``, and its label.

    The model's own tokenizer where it can be counted; for a hosted API with no tokenize
    endpoint and no ``models.tokenizer``, o200k_base as an estimate, said in every row's
    ``fit_tokens_source`` (it only decides which payloads are asked about).
    """
    from tersetalk.models.tokenizers import TokensUnavailableError

    try:
        client.count_tokens("tokens")
    except TokensUnavailableError as exc:
        log.warning("%s; payloads are fitted to max_prompt_tokens by o200k_base instead", exc)
        return (lambda text: count_tokens(text, "o200k_base")), (
            "o200k_base (estimate: the model's tokens cannot be counted)"
        )
    return client.count_tokens, "the model's tokenizer"


def _probe(payload):
    """A stand-in question for measuring a prompt's length before questions exist."""
    from tersetalk.formats.questions import Question

    return Question(payload.id, "probe", "probe", "What is the value?", "", ())


EXPERIMENTS = {"savings": savings, "knapsack": knapsack, "dedup": dedup_replay}


def knapsack_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean value kept and tokens per (budget, method); the greedy's gap to exact."""
    s = df.groupby(["tokenizer", "budget_fraction", "method"], as_index=False).agg(
        n=("item_id", "size"),
        value_share=("value_share", "mean"),
        tokens=("tokens", "mean"),
        infeasible=("error", lambda e: int(e.notna().sum())),
        t_solve_s_median=("t_solve_s", "median"),
    )
    exact = df[df["method"] == "exact"].set_index(["item_id", "budget_fraction"])["value_share"]
    gaps = []
    for m in ("greedy", "binary"):
        other = df[df["method"] == m].set_index(["item_id", "budget_fraction"])["value_share"]
        gap = (exact - other).groupby(level="budget_fraction").agg(["mean", "max"])
        gap["method"] = m
        gaps.append(gap.reset_index())
    g = pd.concat(gaps).rename(columns={"mean": "gap_to_exact_mean", "max": "gap_to_exact_max"})
    return s.merge(g, on=["budget_fraction", "method"], how="left")


def dedup_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per encoder and baseline: hit rate and the dedup / encoder / combined savings (%).

    ``dedup_savings_pct``: tokens the reference hints saved, over the baseline's tokens
    for every call; ``encoder_savings_pct``: the encoder against the baseline on the
    calls that missed the cache; ``combined_savings_pct``: everything the encoder with
    L0 dedup sent, against the baseline sending every call in full.
    """
    rows = []
    for base in BASELINES:
        b = df[df["encoder"] == base].set_index(["session", "call"])
        for enc, e in df.groupby("encoder"):
            e = e.set_index(["session", "call"])
            base_all = b["tokens_full"].sum()
            miss = ~e["hit"]
            rows.append(
                {
                    "encoder": enc,
                    "baseline": base,
                    "tokenizer": e["tokenizer"].iloc[0],
                    "calls": len(e),
                    "hit_rate": e["hit"].mean(),
                    "dedup_savings_pct": 100
                    * (e.loc[~miss, "tokens_full"] - e.loc[~miss, "tokens_sent"]).sum()
                    / e["tokens_full"].sum(),
                    "encoder_savings_pct": 100
                    * (1 - e.loc[miss, "tokens_full"].sum() / b.loc[miss, "tokens_full"].sum()),
                    "combined_savings_pct": 100 * (1 - e["tokens_sent"].sum() / base_all),
                }
            )
    return pd.DataFrame(rows)


def comprehension_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Accuracy and mean payload tokens per encoder; paired difference to compact JSON."""
    s = df.groupby("encoder", as_index=False).agg(
        n_questions=("qid", "size"),
        accuracy=("correct", "mean"),
        payload_tokens_mean=("payload_tokens", "mean"),
        errors=("error", lambda e: int(e.notna().sum())),
    )
    s["tokenizer"] = df["tokenizer"].iloc[0]
    ref = df[df["encoder"] == "json_compact"].set_index("qid")["correct"].astype(float)
    diffs = {}
    for enc, g in df.groupby("encoder"):
        d = g.set_index("qid")["correct"].astype(float) - ref
        diffs[enc] = 100 * d.mean()
    s["accuracy_minus_json_compact_pts"] = s["encoder"].map(diffs)
    return s


def summary_tables(
    savings: pd.DataFrame, knapsack: pd.DataFrame, dedup: pd.DataFrame, comprehension: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The study's tables, by CSV name (``results/formats/<name>.csv``), from the four
    experiments' rows: computed here, beside the experiments, once; the plot draws from
    them (:mod:`tersetalk.formats.plot`)."""
    return {
        "savings_by_shape": savings_tables(savings),
        "knapsack_summary": knapsack_summary(knapsack),
        "dedup_summary": dedup_summary(dedup),
        "comprehension_summary": comprehension_summary(comprehension),
    }


DESCRIPTION = (
    "Run one experiment of the format study over the tool-response corpus and write its"
    " Parquet file (one rule of workflow/rules/formats.smk each)."
)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "experiment",
        choices=[*sorted(EXPERIMENTS), "comprehension"],
        help="which experiment to run",
    )
    ap.add_argument("--data-dir", default="data/toolresponses", help="the corpus folder")
    ap.add_argument("--out", required=True, help="the Parquet file to write")
    ap.add_argument("--seed", type=int, default=0, help="dedup replay / question sampling seed")
    ap.add_argument("--limit", type=int, help="only the first N payloads (quick checks)")
    ap.add_argument(
        "--tokenizers",
        nargs="+",
        default=list(TOKENIZERS),
        help="savings: tokenizers to count under",
    )
    ap.add_argument(
        "--budgets",
        nargs="+",
        type=float,
        default=[0.25, 0.5, 0.75, 1.0],
        help="knapsack: budgets as fractions of compact-JSON tokens",
    )
    ap.add_argument(
        "--dedup-json", default="{}", help="dedup: JSON of sessions, calls, repeat_p, capacity"
    )
    ap.add_argument("--models-json", help="comprehension: the config's models section as JSON")
    ap.add_argument(
        "--comprehension-json",
        default="{}",
        help="comprehension: JSON of n_payloads, max_prompt_tokens, per_kind, encoders",
    )
    ap.add_argument("--cache-dir", help="comprehension: the model call cache folder")


def run(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be a positive number of payloads")
    meta = {"experiment": args.experiment, "data_dir": args.data_dir, "seed": args.seed}
    if args.experiment == "comprehension":
        if not args.models_json:
            ap.error("comprehension needs --models-json (the config's models section)")
        from tersetalk.models import make_client

        opts = json.loads(args.comprehension_json)
        with make_client(json.loads(args.models_json), cache_dir=args.cache_dir) as client:
            df = comprehension(args.data_dir, client, seed=args.seed, **opts)
            meta["model"] = client.describe()
    else:
        chosen = list(items(args.data_dir))[: args.limit]
        if not chosen:
            ap.error(f"no payloads in {args.data_dir}; see data/toolresponses/README.md")
        if args.experiment == "savings":
            df = savings(chosen, tokenizers=tuple(args.tokenizers))
        elif args.experiment == "knapsack":
            df = knapsack(chosen, fractions=tuple(args.budgets))
        else:
            df = dedup_replay(chosen, seed=args.seed, **json.loads(args.dedup_json))
    write_parquet_atomic(df, args.out, metadata=meta)
    print(f"{args.experiment}: {len(df)} rows -> {args.out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tersetalk formats experiment", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv), ap)


if __name__ == "__main__":
    raise SystemExit(main())
