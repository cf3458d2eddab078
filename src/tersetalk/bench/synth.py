"""A seeded synthetic size sweep: many different messages per size, tricky prose included.

Texts are built from sentence templates that carry what trips sentence and label
parsers -- abbreviations ("Dr.", "U.S.", "e.g."), numbers with periods ("3.5",
"$1,204.75", "v2.0.1"), quotes ending in a period, colons and semicolons,
non-ASCII letters and dashes -- filled with random names and numbers, so no two
messages (and almost no two lines) are the same.
"""

from __future__ import annotations

import random

from .fields import Fields, canonical_text

_NAMES = ["Smith", "Okafor", "Nakamura", "García", "Müller", "O'Neil", "Ivanova", "Chen", "Dubois"]
_CITIES = ["St. Louis", "Washington, D.C.", "Zürich", "São Paulo", "Mt. Vernon", "Kraków", "Lagos"]
_THINGS = ["oats", "bolts", "tickets", "apples", "cables", "stamps", "litres of milk", "books"]
_VERBS = ["bought", "sold", "shipped", "counted", "repaired", "returned"]
_QUOTES = ["Stop.", "We are done.", "Is it ready?", "Go on!", "Not yet, Mr. Lee."]

_SENTENCES = [
    "Dr. {name} moved to {city} in {year}.",
    "The U.S. team {verb} {n} {thing} at ${money} each.",
    "It weighs {dec} kg, i.e. about {n} lb.",
    '{name} said "{quote}" and left at {h}.{mm} p.m.',
    "Version {v} was released on Jan. {day}, {year}; see Fig. {n}.",
    "The ratio is {n}:{n2} (approx. {dec}%).",
    "Mr. and Mrs. {name} {verb} {n} {thing} on Sat. morning.",
    "{name} — born {year} in {city} — {verb} {n} {thing}.",
    "Café {name} opened {n} km from {city}, e.g. near the station.",
    "Each of the {n} {thing} costs {dec} dollars, so {n2} of them cost more.",
    "Note: {name} {verb} {n} {thing} vs. {n2} last year.",
    "Prof. {name} counted {n},{nnn} {thing} by {h} a.m.",
]
_GOALS = [
    "Solve the word problem about {thing} and give the final number.",
    "Answer the question about {name} with a short span taken from the facts.",
    "Check whether {name} {verb} more {thing} than {name2}.",
]
_STEPS = [
    "Multiply {n} by {dec}.",
    "Add the {n} {thing} {name} {verb} to the total",
    "Divide ${money} by {n} to get the price per unit.",
    "Subtract {n2} from {n}; keep the remainder",
    'Look up "{quote}" in the notes of Dr. {name}.',
]
_QUESTIONS = [
    "How many {thing} did {name} buy in {year}?",
    "What is {dec} times {n}?",
    'Who said "{quote}" in {city}?',
    "Is the U.S. total above {n},{nnn}?",
    "Why did Dr. {name} leave {city}",
]


def _fill(rng: random.Random, template: str) -> str:
    name, name2 = rng.sample(_NAMES, 2)
    values = {
        "name": name,
        "name2": name2,
        "city": rng.choice(_CITIES),
        "thing": rng.choice(_THINGS),
        "verb": rng.choice(_VERBS),
        "quote": rng.choice(_QUOTES),
        "year": rng.randint(1850, 2024),
        "day": rng.randint(1, 28),
        "n": rng.randint(2, 999),
        "n2": rng.randint(2, 99),
        "nnn": f"{rng.randint(0, 999):03d}",
        "h": rng.randint(1, 12),
        "mm": f"{rng.randint(0, 59):02d}",
        "dec": f"{rng.randint(0, 99)}.{rng.randint(0, 99)}",
        "money": f"{rng.randint(1, 9)},{rng.randint(0, 999):03d}.{rng.randint(0, 99):02d}",
        "v": f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
    }
    return canonical_text(template.format(**values))


def _text(rng: random.Random, templates: list[str], max_sentences: int = 1) -> str:
    n = rng.randint(1, max_sentences)
    return " ".join(_fill(rng, rng.choice(templates)) for _ in range(n))


def synthetic_message(rng: random.Random, n_items: int) -> Fields:
    """One message with ``n_items`` facts, plan steps and questions in varying shares.

    The role decides the shape, as in a real conversation: a Manager brief
    (goal, facts, questions), a Worker draft (plan), a Critic reply (verdict,
    questions); at larger sizes every kind appears.
    """
    role = rng.choice("MWC")
    n_items = max(1, n_items)
    if n_items <= 2:
        shares = {"M": (0.7, 0.0, 0.3), "W": (0.0, 1.0, 0.0), "C": (0.0, 0.0, 1.0)}[role]
    else:
        shares = (0.6, 0.3, 0.1)
    n_facts = round(n_items * shares[0])
    n_plan = round(n_items * shares[1])
    n_questions = max(0, n_items - n_facts - n_plan)
    return Fields(
        role=role,
        goal=_fill(rng, rng.choice(_GOALS)) if role == "M" or n_items > 2 else None,
        facts=tuple(_text(rng, _SENTENCES, 3) for _ in range(n_facts)),
        plan=tuple(_text(rng, _STEPS) for _ in range(n_plan)),
        questions=tuple((rng.choice("MWC"), _text(rng, _QUESTIONS)) for _ in range(n_questions)),
        verdict=rng.choice("ARE") if role == "C" or n_items > 2 else None,
    )


def synthetic_sweep(sizes: list[int], per_size: int, seed: int) -> list[tuple[int, Fields]]:
    """``per_size`` distinct messages for each size (items per message), seeded."""
    rng = random.Random(seed)
    out: list[tuple[int, Fields]] = []
    for size in sizes:
        seen: set[Fields] = set()
        while len(seen) < per_size:
            msg = synthetic_message(rng, size)
            if msg not in seen:
                seen.add(msg)
                out.append((size, msg))
    return out
