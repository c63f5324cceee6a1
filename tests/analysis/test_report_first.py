"""What a practitioner reads first: the main confusions, why no slice is named, numeric causes cut where they start,
slices within a class, near-duplicate quantities named once, findings that restate the class.

Every table has a known truth and is written with the real writer and read back; each figure is checked against an
independent computation (scipy, scikit-learn, a brute-force search).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import chi2_contingency, hypergeom, spearmanr
from sklearn.metrics import confusion_matrix

from analysis.class_restatements import class_note
from analysis.failures import analyze_table
from analysis.findings import Findings
from analysis.thresholds import best_cut
from runners.analyze import format_findings
from tests.analysis.tables import classified, probabilities_of, write_table


def test_four_failures_sharing_one_value_say_why_no_slice_is_named(tmp_path):
    """240 datapoints, 4 failures, all at site C (82 datapoints: 4.9 % fail against 0 % elsewhere): too few to name
    a slice, and the report says so with the numbers, in the findings, the command's report and findings.json."""
    rng = np.random.default_rng(0)
    site = np.array(["A"] * 80 + ["B"] * 78 + ["C"] * 82, dtype=object)
    failed = np.zeros(240, dtype=bool)
    failed[rng.choice(np.flatnonzero(site == "C"), 4, replace=False)] = True
    meta = {"site": site, "shift": rng.choice(["day", "night"], 240).astype(object), "blur": rng.random(240)}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", classified(rng, failed) | meta, list(meta),
                                         {"accuracy": True}))
    assert findings.meta.slices == []
    why = findings.meta.no_slice
    assert why.condition.describe() == "site = C" and (why.size, why.inside, why.failures) == (82, 4, 4)
    assert why.rest_failure_rate == 0.0
    assert why.p_value == pytest.approx(hypergeom.sf(3, 240, 4, 82))
    assert why.p_value > why.level  # hence no slice
    # the fewest failures a slice of 82 needs, its rest (158 datapoints, none failing) as it is: brute force
    needed = next(k for k in range(83) if hypergeom.sf(k - 1, 240, k, 82) < why.level)
    assert why.needed == needed > 4
    text = "4 failures of 240: at this level (p < {:.2g}) a slice of 82 datapoints needs at least {} failures; " \
           "the closest is site = C, with 4 of the 4 failures (4.9% fail against 0.0% elsewhere; p = {:.2g})"
    assert why.description == text.format(why.level, needed, why.p_value)
    assert f"why none: {why.description}" in format_findings(findings)
    stored = json.loads(json.dumps(findings.to_dict()))
    assert stored["meta"]["no_slice"]["description"] == why.description
    assert Findings.from_dict(stored).meta.no_slice == why


def test_a_named_slice_leaves_no_note_and_nothing_failing_says_so(tmp_path):
    rng = np.random.default_rng(1)
    site = rng.choice(["A", "B", "C"], 600).astype(object)
    failed = rng.random(600) < np.where(site == "C", 0.6, 0.05)
    meta = {"site": site}
    findings = analyze_table(write_table(tmp_path / "a.parquet", classified(rng, failed) | meta, list(meta),
                                         {"accuracy": True}))
    assert [s.description for s in findings.meta.slices] == ["site = C"] and findings.meta.no_slice is None
    none_fail = analyze_table(write_table(tmp_path / "b.parquet", classified(rng, np.zeros(600, dtype=bool)) | meta,
                                          list(meta), {"accuracy": True}))
    assert none_fail.meta.no_slice.description == "0 failures of 600: nothing tells failures from passes"


def g_statistic(values: np.ndarray, failed: np.ndarray, cut: float, context: np.ndarray, op: str = ">=") -> float:
    """The G-test statistic (scipy) of slice / rest of the context x fail / pass, the slice ``values op cut``; -inf
    where the slice is under 10 rows or fails no more than the rest."""
    inside = context & ((values >= cut) if op == ">=" else (values < cut))
    rest = context & ~inside
    k, size, rest_k, rest_n = failed[inside].sum(), inside.sum(), failed[rest].sum(), rest.sum()
    if size < 10 or rest_n == 0 or k / size <= rest_k / rest_n:
        return -np.inf
    return chi2_contingency(np.array([[k, size - k], [rest_k, rest_n - rest_k]]), correction=False,
                            lambda_="log-likelihood")[0]


def check_cut(cut: float, values: np.ndarray, failed: np.ndarray, context: np.ndarray, op: str = ">=") -> None:
    """By brute force: the cut's G is within 2 of the best over every value of the column, and no number with fewer
    significant digits in the column's range gets there."""
    best = max(g_statistic(values, failed, value, context, op) for value in np.unique(values[context]))
    assert g_statistic(values, failed, cut, context, op) >= best - 2
    exponent = next(e for e in range(3, -12, -1) if abs(round(cut / 10.0 ** e) * 10.0 ** e - cut) < 1e-9)
    for coarser in range(exponent + 1, 4):
        step = 10.0 ** coarser
        for candidate in np.arange(np.floor(values.min() / step), np.ceil(values.max() / step) + 1) * step:
            assert g_statistic(values, failed, candidate, context, op) < best - 2, (cut, candidate)


def cable_table(rng: np.random.Generator, rows: int = 1200) -> dict[str, np.ndarray]:
    """A cable length past 40 attenuates three of four classes (one of them fails more anyway); the fourth class
    is spared: a cause of every class but one, like the signals benchmark's."""
    names = np.array(["slow", "fast", "square", "pulses"], dtype=object)
    label = rng.integers(0, 4, rows)
    cable = rng.uniform(0, 50, rows)
    base = np.array([0.35, 0.1, 0.1, 0.1])[label]
    attenuated = (cable >= 40) & (label != 3)
    failed = rng.random(rows) < np.where(attenuated, 0.85, base)
    prediction = np.where(failed, (label + rng.integers(1, 4, rows)) % 4, label)
    return {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
            "prediction_name": names[prediction], "accuracy": (~failed).astype(np.float64), "cable_m": cable,
            "humidity": rng.normal(50, 10, rows), "operator": rng.choice(["ann", "bob", "cy"], rows).astype(object)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_threshold_is_cut_where_failures_start_for_every_label(tmp_path, seed):
    """The slice on cable_m is the single condition ``cable_m >= t`` (no label), t the brute-force best cut, within
    5 % of the range of 40; its figures are those of its rows."""
    rng = np.random.default_rng(seed)
    columns = cable_table(rng)
    meta = ["cable_m", "humidity", "operator"]
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, meta, {"accuracy": True}))
    on_cable = [s for s in findings.meta.slices if any(c.column == "cable_m" for c in s.conditions)]
    first = on_cable[0]
    assert [c.column for c in first.conditions] == ["cable_m"] and first.conditions[0].op == ">=", first.description
    failed = columns["accuracy"] == 0
    check_cut(first.conditions[0].value, columns["cable_m"], failed, np.ones(len(failed), dtype=bool))
    inside = columns["cable_m"] >= first.conditions[0].value
    assert abs(first.conditions[0].value - 40) <= 0.05 * 50
    assert np.array_equal(first.idx, np.flatnonzero(inside))
    assert first.failure_rate == pytest.approx(failed[inside].mean())
    assert not any(c.column in ("humidity", "operator") for s in findings.meta.slices for c in s.conditions)


def test_a_label_stays_where_the_cause_holds_for_that_label_alone(tmp_path):
    """Past 40, only the squares fail: ``label_name = square and cable_m >= t`` keeps its label."""
    rng = np.random.default_rng(4)
    columns = cable_table(rng)
    label = columns["label"]
    failed = rng.random(len(label)) < np.where((columns["cable_m"] >= 40) & (label == 2), 0.9, 0.08)
    columns["prediction"] = np.where(failed, (label + 1) % 4, label)
    columns["prediction_name"] = np.array(["slow", "fast", "square", "pulses"], dtype=object)[columns["prediction"]]
    columns["accuracy"] = (~failed).astype(np.float64)
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, ["cable_m", "humidity"],
                                         {"accuracy": True}))
    first = findings.meta.slices[0]
    assert {c.column for c in first.conditions} == {"label_name", "cable_m"}, first.description


def test_the_cut_search_matches_a_brute_force_search_within_a_context():
    """Among the rows of a context (the slice's other conditions), failures start below 3.3."""
    rng = np.random.default_rng(7)
    values = np.round(rng.uniform(0, 10, 800), 2)
    group = rng.random(800) < 0.5
    failed = rng.random(800) < np.where(group & (values < 3.3), 0.8, 0.1)
    cut = best_cut(values, failed, group, "<", 10)
    check_cut(cut, values, failed, group, "<")
    assert abs(cut - 3.3) < 0.5
    assert best_cut(values, np.zeros(800, dtype=bool), group, "<", 10) is None  # nothing fails: no cut


@pytest.mark.slow
def test_a_sharp_cut_keeps_its_digits_and_a_loose_one_is_rounded():
    """Failures start at exactly 0.8546 on 20,000 rows: the data tell 0.8546 from 0.85, and the cut says so; on 300
    rows they do not, and the cut is the rounder number."""
    rng = np.random.default_rng(2)
    for rows, most_digits in ((20_000, None), (300, 2)):
        values = rng.uniform(0, 1, rows)
        failed = rng.random(rows) < np.where(values >= 0.8546, 0.95, 0.05)
        cut = best_cut(values, failed, np.ones(rows, dtype=bool), ">=", 10)
        check_cut(cut, values, failed, np.ones(rows, dtype=bool))
        if most_digits is None:
            assert abs(cut - 0.8546) < 0.0005 and round(cut, 2) != cut
        else:
            assert round(cut, most_digits) == cut


def test_the_main_confusions_are_the_confusion_matrix_off_its_diagonal(tmp_path):
    """8s read as 1 (30), 3s read as 5 (12), scattered single mistakes; counts against scikit-learn's matrix, the
    examples the most confident mistakes."""
    rng = np.random.default_rng(3)
    rows = 1000
    label = rng.integers(0, 10, rows)
    prediction = label.copy()
    eights, threes = np.flatnonzero(label == 8)[:30], np.flatnonzero(label == 3)[:12]
    prediction[eights], prediction[threes] = 1, 5
    scattered = rng.choice(np.flatnonzero((label != 8) & (label != 3)), 9, replace=False)
    prediction[scattered] = (label[scattered] + 1 + np.arange(9)) % 10
    probabilities, logsumexp = probabilities_of(rng, label, prediction, 10, rng.uniform(1, 5, rows))
    names = np.array([str(d) for d in range(10)], dtype=object)
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
               "prediction_name": names[prediction], "probabilities": probabilities, "logsumexp": logsumexp,
               "accuracy": (label == prediction).astype(np.float64)}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, [], {"accuracy": True}))
    matrix = confusion_matrix(label, prediction, labels=range(10))
    off = [(int(matrix[i, j]), i, j) for i in range(10) for j in range(10) if i != j and matrix[i, j] >= 2]
    expected = sorted(off, key=lambda cell: (-cell[0], cell[1], cell[2]))
    assert [(c.count, int(c.label), int(c.prediction)) for c in findings.confusions] == expected
    first = findings.confusions[0]
    assert (first.label, first.prediction, first.count) == ("8", "1", 30)
    assert first.share == pytest.approx(30 / (label == 8).sum())
    assert np.array_equal(first.idx, eights)
    assert first.examples == eights[np.argsort(-probabilities[eights, 1], kind="stable")][:3].tolist()
    text = format_findings(findings)
    assert text.index("Main confusions") < text.index("Meta info")
    assert "Main confusions (label read as prediction; 42 of the 51 failures)" in text


def test_a_condition_that_fails_one_class_is_found_within_that_class(tmp_path):
    """Thick-stroked 1s fail 60 %, other 1s 25 %; thickness means nothing for the other classes: over the whole
    table the conjunction is not significant at the search's level, within the 1s it is a slice, with the class's
    own rates. Its cut is where the failures start among the 1s."""
    rng = np.random.default_rng(5)
    rows = 800
    label = rng.integers(0, 5, rows)
    thickness = rng.uniform(1, 4, rows)
    ones = label == 1
    failed = rng.random(rows) < np.where(ones, np.where(thickness >= 2.6, 0.6, 0.25), 0.1)
    names = np.array(["zero", "one", "two", "three", "four"], dtype=object)
    prediction = np.where(failed, (label + 1) % 5, label)
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
               "prediction_name": names[prediction], "accuracy": (~failed).astype(np.float64),
               "thickness": thickness, "slant": rng.normal(size=rows), "ink": rng.normal(size=rows)}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, ["thickness", "slant", "ink"],
                                         {"accuracy": True}))
    assert [s.description for s in findings.meta.slices] == ["label_name = one"]
    found = findings.class_slices[0]
    assert (found.label.column, found.label.value) == ("label_name", "one")
    assert [c.column for c in found.conditions] == ["thickness"] and found.conditions[0].op == ">="
    assert found.description == f"{found.conditions[0].describe()} among label_name = one"
    cut = found.conditions[0].value
    assert abs(cut - 2.6) <= 0.05 * 3
    check_cut(cut, thickness[ones], failed[ones], np.ones(ones.sum(), dtype=bool))
    inside = ones & (thickness >= cut)
    assert np.array_equal(found.idx, np.flatnonzero(inside))
    assert found.failure_rate == pytest.approx(failed[inside].mean())
    assert found.rest_failure_rate == pytest.approx(failed[ones & ~inside].mean())
    assert (found.class_size, found.class_failure_rate) == (ones.sum(), pytest.approx(failed[ones].mean()))
    targeted = [c.describe() for c in found.target.conditions]
    assert targeted == ["label_name = one", found.conditions[0].describe()]
    assert len(findings.class_slices) == 1
    text = format_findings(findings)
    assert "Within a class" in text and f"label_name = one  {found.conditions[0].describe()}  " in text


def test_without_a_slice_within_a_class_the_closest_class_and_condition_are_named(tmp_path):
    """The same kind of table, with too few ones to tell: the report names the class and condition that came closest,
    its figures counted within the class."""
    rng = np.random.default_rng(0)
    rows = 600
    label = rng.integers(0, 5, rows)
    thickness = rng.uniform(1, 4, rows)
    ones = label == 1
    failed = rng.random(rows) < np.where(ones, np.where(thickness >= 2.6, 0.5, 0.25), 0.1)
    names = np.array(["zero", "one", "two", "three", "four"], dtype=object)
    prediction = np.where(failed, (label + 1) % 5, label)
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
               "prediction_name": names[prediction], "accuracy": (~failed).astype(np.float64), "thickness": thickness}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, ["thickness"],
                                         {"accuracy": True}))
    assert findings.class_slices == []
    why = findings.class_no_slice
    of_class = names[label] == why.within.value
    inside = of_class & why.condition.mask(thickness)
    assert (why.failures, why.datapoints) == (failed[of_class].sum(), of_class.sum())
    assert (why.size, why.inside) == (inside.sum(), failed[inside].sum())
    assert why.p_value == pytest.approx(hypergeom.sf(why.inside - 1, of_class.sum(), failed[of_class].sum(),
                                                     inside.sum()))
    assert why.p_value >= why.level
    assert why.description.startswith(f"{why.failures} failures of {why.datapoints} among label_name = ")
    assert f"why none: {why.description}" in format_findings(findings)


def digit_shapes(rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
    """Digits whose 9s fail 75 % and the rest 8 %; width is 3 to 8 pixels, aspect width / 8 (every digit 8 high),
    area grows with width; centre_x is higher for 9s and says nothing within a class; blur fails every class."""
    label = rng.integers(0, 10, rows)
    width = rng.integers(3, 9, rows) + (label == 9)
    blur = rng.random(rows)
    failed = rng.random(rows) < np.where(label == 9, 0.75, 0.08) + 0.2 * (blur > 0.8)
    names = np.array([str(d) for d in range(10)], dtype=object)
    prediction = np.where(failed, (label + 1) % 10, label)
    return {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
            "prediction_name": names[prediction], "accuracy": (~failed).astype(np.float64),
            "width": width, "aspect": np.round(width / 8.0, 3), "area": width * 2 + rng.integers(0, 2, rows),
            "centre_x": rng.normal(3.5, 0.3, rows) + 0.8 * (label == 9), "blur": blur}


def test_near_duplicate_quantities_are_listed_once_with_their_twins(tmp_path):
    rng = np.random.default_rng(6)
    columns = digit_shapes(rng, 2000)
    meta = ["width", "aspect", "area", "centre_x", "blur"]
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, meta, {"accuracy": True}))
    listed = {s.column: s for s in findings.meta.separators}
    kept = [name for name in ("width", "aspect", "area") if name in listed]
    assert len(kept) == 1, list(listed)
    twins = {t.column: t.rho for t in listed[kept[0]].twins}
    assert set(twins) == {"width", "aspect", "area"} - set(kept)
    for name, rho in twins.items():
        assert rho == pytest.approx(spearmanr(columns[kept[0]], columns[name]).statistic, abs=1e-3)
    assert "blur" in listed and not listed["blur"].twins
    assert "twins: " in format_findings(findings)


def test_a_quantity_that_only_tells_the_classes_apart_says_so(tmp_path):
    """centre_x separates failures only because 9s have it higher (within a class it means nothing); blur fails every
    class: no note. The within-class AUROC is checked by counting pairs."""
    rng = np.random.default_rng(8)
    columns = digit_shapes(rng, 2000)
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, ["centre_x", "blur"],
                                         {"accuracy": True}))
    listed = {s.column: s for s in findings.meta.separators}
    note = listed["centre_x"].class_note
    assert note is not None and "it restates which classes fail" in note
    assert listed["blur"].class_note is None
    failed, label, centre = columns["accuracy"] == 0, columns["label"], columns["centre_x"]
    above = pairs = 0
    for class_id in range(10):
        failing, passing = centre[(label == class_id) & failed], centre[(label == class_id) & ~failed]
        above += (failing[:, None] > passing[None, :]).sum() + 0.5 * (failing[:, None] == passing[None, :]).sum()
        pairs += len(failing) * len(passing)
    assert f"AUROC {max(above / pairs, 1 - above / pairs):.2f} within classes" in note
    assert "it restates which classes fail" in format_findings(findings)


def test_a_group_that_is_mostly_one_class_failing_as_the_class_does_restates_it():
    """A random half of the 9s with a few 0s fails as 9s and 0s do: it restates the class, and its failures and
    those its classes' rates predict are counted. The failing 9s, or a group failing more within each class,
    do not restate it; a group of every class is not mostly one."""
    rng = np.random.default_rng(9)
    columns = digit_shapes(rng, 2000)
    failed, label = columns["accuracy"] == 0, columns["label"]
    values = {name: columns[name] for name in ("idx", "label", "label_name")}
    group = (label == 9) & (rng.random(2000) < 0.5) | (label == 0) & (rng.random(2000) < 0.1)
    expected = sum(((label == c) & group).sum() * failed[label == c].mean() for c in (0, 9))
    assert class_note(group, values, failed) == (
        f"mostly label_name = 9 ({(group & (label == 9)).sum()} of {group.sum()}); within each of its classes it "
        f"fails no more than the rest of the class ({failed[group].sum()} failures, {expected:.0f} at its classes' "
        "rates): it restates the class")
    assert class_note(label == 9, values, failed) is not None  # every 9: nothing within the class to compare
    assert class_note((label == 9) & failed, values, failed) is None  # fails more than the other 9s
    assert class_note(columns["blur"] > 0.8, values, failed) is None  # not mostly one class
