"""Paired comparison of two encoders on the comprehension questions.

Every question of the comprehension experiment is answered from every encoding, so two
encoders are compared per question, not as two independent samples: the difference in
accuracy is the mean of ``correct(T) - correct(C)`` over the questions both answered,
with a paired percentile bootstrap interval (:func:`tersetalk.stats.bootstrap.paired_bootstrap`),
and the exact McNemar test on the discordant pairs (under "no difference" a question
that only one encoder gets right is equally likely to be either one: binomial, p = 1/2).
Questions about one payload are not independent (the same text, often the same defect),
so a second interval resamples whole payloads with all their questions (a cluster
bootstrap of the same difference); with several questions per payload it is the one to
read.
The discordant questions themselves are listed, since they are where an encoding helps
or misleads the model.

    tersetalk formats paired results/formats/comprehension.parquet --treatment mckp
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from tersetalk.stats.bootstrap import paired_bootstrap


@dataclass(frozen=True)
class PairedAccuracy:
    """Accuracy of a treatment and a control encoder over the same questions."""

    treatment: str
    control: str
    n: int
    correct_treatment: int
    correct_control: int
    accuracy_treatment: float
    accuracy_control: float
    diff: float  # accuracy_treatment - accuracy_control
    ci_low: float
    ci_high: float
    only_treatment: int  # discordant: treatment right, control wrong
    only_control: int  # discordant: control right, treatment wrong
    mcnemar_p: float  # exact, two-sided
    n_resamples: int
    seed: int
    #: the same difference's interval with whole payloads resampled (NaN: no payload_id)
    payloads: int = 0
    cluster_ci_low: float = float("nan")
    cluster_ci_high: float = float("nan")

    def as_dict(self) -> dict:
        return asdict(self)


def wide_correct(df: pd.DataFrame, treatment: str, control: str) -> pd.DataFrame:
    """One row per question answered from both encoders (sorted by qid): their ``correct``."""
    missing = {treatment, control} - set(df["encoder"])
    if missing:
        raise ValueError(
            f"no rows for encoder(s) {sorted(missing)}; the file has {sorted(set(df['encoder']))}"
        )
    sub = df[df["encoder"].isin([treatment, control])]
    if sub.duplicated(["qid", "encoder"]).any():
        raise ValueError("a question is answered twice by one encoder; expected one row each")
    wide = sub.pivot(index="qid", columns="encoder", values="correct").dropna().sort_index()
    return wide[[treatment, control]].astype(bool)


def mcnemar_exact(only_treatment: int, only_control: int) -> float:
    """Two-sided exact McNemar p-value from the two discordant counts (1.0 when none)."""
    n = only_treatment + only_control
    if n == 0:
        return 1.0
    return float(sps.binomtest(only_treatment, n, 0.5).pvalue)


def cluster_interval(
    diff: np.ndarray, groups: np.ndarray, *, n_resamples: int, seed: int, confidence: float
) -> tuple[float, float]:
    """Percentile interval of ``mean(diff)`` resampling whole groups with replacement.

    A resample draws as many groups as there are, and its statistic is the sum of the
    drawn groups' differences over their number of questions (the mean over questions).
    """
    _, inverse = np.unique(groups, return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    counts = np.bincount(inverse).astype(float)
    draws = np.random.default_rng(seed).integers(0, sums.size, size=(n_resamples, sums.size))
    stat = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(stat, [tail, 1 - tail])
    return float(low), float(high)


def paired_accuracy(
    df: pd.DataFrame,
    treatment: str = "mckp",
    control: str = "json_compact",
    *,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedAccuracy:
    """Paired accuracy difference of ``treatment`` minus ``control`` (see the module doc)."""
    wide = wide_correct(df, treatment, control)
    if wide.empty:
        raise ValueError(f"no question was answered from both {treatment} and {control}")
    t = wide[treatment].to_numpy(float)
    c = wide[control].to_numpy(float)
    boot = paired_bootstrap(t, c, n_resamples=n_resamples, seed=seed, confidence=confidence)
    only_t = int(((t == 1) & (c == 0)).sum())
    only_c = int(((t == 0) & (c == 1)).sum())
    cluster: dict = {}
    if "payload_id" in df.columns:
        groups = df.drop_duplicates("qid").set_index("qid")["payload_id"].reindex(wide.index)
        low, high = cluster_interval(
            t - c, groups.to_numpy(), n_resamples=n_resamples, seed=seed, confidence=confidence
        )
        cluster = dict(payloads=int(groups.nunique()), cluster_ci_low=low, cluster_ci_high=high)
    return PairedAccuracy(
        treatment=treatment,
        control=control,
        n=int(t.size),
        correct_treatment=int(t.sum()),
        correct_control=int(c.sum()),
        accuracy_treatment=float(t.mean()),
        accuracy_control=float(c.mean()),
        diff=boot.estimate,
        ci_low=boot.ci_low,
        ci_high=boot.ci_high,
        only_treatment=only_t,
        only_control=only_c,
        mcnemar_p=mcnemar_exact(only_t, only_c),
        n_resamples=n_resamples,
        seed=seed,
        **cluster,
    )


def discordant(df: pd.DataFrame, treatment: str, control: str) -> pd.DataFrame:
    """The questions exactly one of the two encoders gets right, with both answers."""
    wide = wide_correct(df, treatment, control)
    qids = wide.index[wide[treatment] != wide[control]]
    columns = ["qid", "kind", "gold", "right", f"answer_{treatment}", f"answer_{control}"]
    if qids.empty:
        return pd.DataFrame(columns=columns)
    sub = df[df["qid"].isin(qids) & df["encoder"].isin([treatment, control])]
    pred = sub.pivot(index="qid", columns="encoder", values="prediction")
    first = sub.drop_duplicates("qid").set_index("qid")
    out = pd.DataFrame(
        {
            "kind": first["kind"],
            "gold": first["gold"],
            "right": [treatment if wide.at[q, treatment] else control for q in pred.index],
            f"answer_{treatment}": pred[treatment],
            f"answer_{control}": pred[control],
        },
        index=pred.index,
    )
    return out.sort_values(["right", "kind"]).reset_index()


def by_kind(df: pd.DataFrame, treatment: str, control: str) -> pd.DataFrame:
    """Accuracy of both encoders and their discordant counts per question kind."""
    wide = wide_correct(df, treatment, control)
    kinds = df.drop_duplicates("qid").set_index("qid")["kind"]
    wide = wide.assign(kind=kinds.reindex(wide.index))
    rows = []
    for kind, g in wide.groupby("kind"):
        rows.append(
            {
                "kind": kind,
                "n": len(g),
                f"acc_{treatment}": g[treatment].mean(),
                f"acc_{control}": g[control].mean(),
                "only_treatment": int((g[treatment] & ~g[control]).sum()),
                "only_control": int((~g[treatment] & g[control]).sum()),
            }
        )
    return pd.DataFrame(rows)


DESCRIPTION = (
    "Compare two encoders of a comprehension run question by question: accuracy of each,"
    " the paired difference with a bootstrap interval, the exact McNemar test, the"
    " discordant questions."
)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("file", help="results/formats/comprehension.parquet")
    ap.add_argument("--treatment", default="mckp", help="default: %(default)s")
    ap.add_argument("--control", default="json_compact", help="default: %(default)s")
    ap.add_argument("--n-resamples", type=int, default=10000, help="default: %(default)s")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from tersetalk.core.io import read_parquet

    df = read_parquet(args.file)
    try:
        r = paired_accuracy(
            df, args.treatment, args.control, n_resamples=args.n_resamples, seed=args.seed
        )
    except ValueError as exc:
        print(f"tersetalk formats paired: error: {exc}", file=sys.stderr)
        return 2
    t, c = r.treatment, r.control
    print(
        f"n={r.n} questions answered from both\n"
        f"{t}: {r.accuracy_treatment:.3f} ({r.correct_treatment}/{r.n})\n"
        f"{c}: {r.accuracy_control:.3f} ({r.correct_control}/{r.n})\n"
        f"difference {t} - {c}: {100 * r.diff:+.1f} points, 95% paired bootstrap CI "
        f"[{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}] ({r.n_resamples} resamples, "
        f"seed {r.seed})\n"
        + (
            f"by payload ({r.payloads} payloads, each resampled with all its questions): "
            f"[{100 * r.cluster_ci_low:+.1f}, {100 * r.cluster_ci_high:+.1f}]\n"
            if r.payloads
            else ""
        )
        + f"discordant: {r.only_treatment} only {t}, {r.only_control} only {c}; "
        f"exact McNemar p = {r.mcnemar_p:.3g}"
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print("\nby kind:")
        print(by_kind(df, t, c).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
        d = discordant(df, t, c)
        if len(d):
            print("\ndiscordant questions:")
            print(d.to_string(index=False))
    return 0
