"""The rare-token rule (``analysis/rare_tokens.py``: a token held by at most 1% of the datapoints) on real text: the
docstrings of the standard library's public functions and classes, each a datapoint of lower-case word ids.

    python -m benchmarks.rare_token_rule

Prints how many word types and words the rule calls rare, the spread of the share of rare tokens over the
docstrings (the column the analysis searches), and the most held words (what the rule keeps common).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings

import numpy as np

from analysis.rare_tokens import RARE_SHARE, rare_token_share

SKIPPED = ("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo")  # open windows or print on import
MIN_WORDS = 5


def docstrings() -> list[list[str]]:
    """The lower-case words of each public function's and class's docstring, module by module."""
    found = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in SKIPPED:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except Exception:  # a module this platform lacks (winreg, ...)
            continue
        for _, member in inspect.getmembers(module, lambda m: inspect.isfunction(m) or inspect.isclass(m)):
            doc = inspect.getdoc(member) if getattr(member, "__module__", "") == name else None
            words = re.findall(r"[a-z]+", doc.lower()) if doc else []
            if len(words) >= MIN_WORDS:
                found.append(words)
    return found


def main() -> None:
    texts = docstrings()
    vocabulary: dict[str, int] = {}
    rows = {i: np.array([vocabulary.setdefault(w, len(vocabulary)) for w in words]) for i, words in enumerate(texts)}
    held = np.bincount(np.concatenate([np.unique(tokens) for tokens in rows.values()]))
    rare = np.flatnonzero(held <= max(1.0, RARE_SHARE * len(rows)))
    words = np.concatenate(list(rows.values()))
    share = rare_token_share(rows, np.arange(len(rows)))
    print(f"{len(rows)} docstrings, {len(vocabulary)} word types, {len(words)} words; rare (held by at most "
          f"{RARE_SHARE:.0%} = {RARE_SHARE * len(rows):.0f} docstrings): {len(rare) / len(held):.0%} of the types, "
          f"{np.isin(words, rare).mean():.0%} of the words")
    print("share of rare tokens per docstring, 10/25/50/75/90% quantiles:",
          " / ".join(f"{q:.2f}" for q in np.quantile(share, [0.1, 0.25, 0.5, 0.75, 0.9])),
          f"; none: {np.mean(share == 0):.0%}")
    names = {i: w for w, i in vocabulary.items()}
    print("most held:", ", ".join(names[i] for i in np.argsort(-held)[:12]))


if __name__ == "__main__":
    main()
