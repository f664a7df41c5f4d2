"""A release read against its original, on a labelled corpus of releases made by every
textbook method and on releases of real survey data (tests/release_corpus.py): the kind of
each, the original row behind each released row, what was done to each column and how each
column reads."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from riskcore.anatomy import diff
from tests.release_corpus import CODES, QUANTITIES, Release, corpus, national, national_releases

#: links right for at least this share of the rows whose values are unchanged ...
RIGHT_UNCHANGED = 0.95
#: ... and of the rows whose values were perturbed
RIGHT_PERTURBED = 0.90


def as_read(df: pd.DataFrame) -> pd.DataFrame:
    """A table as the gate's loader reads a CSV: every cell text, dictionary-encoded."""
    return pd.read_csv(io.StringIO(df.to_csv(index=False)), dtype=str, keep_default_na=False,
                       na_values=[""]).astype("category")


def right_links(result, release: Release, original: pd.DataFrame) -> float:
    """The share of released rows that are records whose link points at their source (or a
    row identical to it on every column: rows alike cannot be told apart)."""
    links = np.where(result.linked, result.links.original_row, -1)
    real = release.source >= 0
    values = original.astype(str).to_numpy()
    got, want = links[real], release.source[real]
    ok = got >= 0
    same = np.zeros(real.sum(), dtype=bool)
    same[ok] = (values[got[ok]] == values[want[ok]]).all(axis=1)
    return float(same.mean())


@pytest.fixture(scope="module")
def census():
    original, control, releases = corpus(3000, seed=11)
    return as_read(original), as_read(control), original, releases


@pytest.mark.parametrize("name", ["kept-shuffled", "kept-dropped", "k-anonymized", "suppressed",
                                  "swapped", "pram", "noise", "top-coded", "subsample",
                                  "tool-formats", "synthetic", "mixed", "mixed-noise"])
@pytest.mark.parametrize("with_control", [True, False])
def test_every_textbook_release_is_read_right(census, name, with_control):
    read_original, read_control, original, releases = census
    release = next(r for r in releases if r.name == name)
    result = diff(read_original, as_read(release.released),
                  read_control if with_control else None, seed=1)
    assert result.kind == release.kind, result.evidence
    if release.kind in ("kept", "subsample", "mixed"):
        bar = RIGHT_PERTURBED if release.perturbed else RIGHT_UNCHANGED
        assert right_links(result, release, original) >= bar
    if release.kind == "mixed":
        assert abs(result.linked_share - release.real_share) <= 0.05, result.linked_share
    if release.kind == "synthetic":
        assert result.linked_share == 0.0
    for column, transform in release.transforms.items():
        assert result.columns[column].transform == transform, (column, result.columns[column])
    for column in CODES:  # integer codes are read as codes
        assert result.columns[column].reading.type == "categorical", column
    for column in QUANTITIES:
        if result.columns[column].transform != "generalized":  # bands are labels
            assert result.columns[column].reading.type == "numeric", column


def test_the_generalizations_seen_are_named(census):
    read_original, _, _, releases = census
    k_anon = next(r for r in releases if r.name == "k-anonymized")
    result = diff(read_original, as_read(k_anon.released))
    assert result.columns["age"].domain == "interval" and result.columns["age"].detail[
        "width"] == 5
    assert result.columns["zip"].domain == "mask"
    assert result.columns["region"].domain == "learned"
    assert result.label_maps["region"]["North-East"] == "North region"
    assert 0.97 < result.rows["released"] / result.rows["original"] < 1.0
    top = next(r for r in releases if r.name == "top-coded")
    result = diff(read_original, as_read(top.released))
    assert result.columns["income"].domain == "round"
    assert result.columns["income"].detail["unit"] == 1000.0
    assert result.columns["income"].detail["top"] > 0
    assert result.columns["age"].domain == "top_code" and result.columns["age"].detail[
        "top"] == 85.0
    noisy = next(r for r in releases if r.name == "noise")
    result = diff(read_original, as_read(noisy.released))
    income = result.columns["income"].detail
    assert 0.005 < income["noise_relative"] < 0.03  # +-3 % noise: a median of 1.5 %


def test_no_step_assumes_equal_row_counts(census):
    """A release a few rows off, in any order, with an added column and one dropped."""
    read_original, _, original, releases = census
    release = next(r for r in releases if r.name == "kept-dropped").released
    release = release.drop(columns=["weight"]).assign(batch=1).iloc[:-7]
    result = diff(read_original, as_read(release))
    assert result.kind == "kept"
    assert result.columns["weight"].transform == "absent"
    assert result.columns["batch"].transform == "added"
    assert result.links_frame()["original_row"].notna().mean() > 0.99


@pytest.fixture(scope="module")
def survey():
    original, control = national()
    return as_read(original), as_read(control), original, national_releases(original)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kept-dropped", "k6-suppressed", "swapped", "noise",
                                  "synthetic", "smote", "mixed"])
def test_releases_of_real_survey_data_are_read_right(survey, name):
    read_original, read_control, original, releases = survey
    release = next(r for r in releases if r.name == name)
    result = diff(read_original, as_read(release.released), read_control, seed=2)
    assert result.kind == release.kind, result.evidence
    if release.kind in ("kept", "subsample"):
        bar = RIGHT_PERTURBED if release.perturbed else RIGHT_UNCHANGED
        assert right_links(result, release, original) >= bar
    if release.kind == "mixed" and release.name == "mixed":
        assert abs(result.linked_share - release.real_share) <= 0.05, result.linked_share
    for column, transform in release.transforms.items():
        assert result.columns[column].transform == transform, column
    assert result.columns["PUMA"].reading.type == "categorical"  # a code, written 01-01301
    assert result.columns["INDP"].reading.type == "categorical"  # industry codes with gaps
    assert result.columns["PINCP"].reading.type == "numeric"  # income, with N for none


def test_riskgate_diff_writes_its_summary_json_and_links(census, tmp_path, capsys):
    from riskgate.flows.cli import main

    _, _, original, releases = census
    release = next(r for r in releases if r.name == "k-anonymized")
    original.to_csv(tmp_path / "o.csv", index=False)
    release.released.to_csv(tmp_path / "r.csv", index=False)
    code = main(["diff", "--original", str(tmp_path / "o.csv"), "--released",
                 str(tmp_path / "r.csv"), "--json", str(tmp_path / "d.json"), "--links",
                 str(tmp_path / "links.parquet")])
    said = capsys.readouterr().out
    assert code == 0, said
    assert said.startswith("kept: ") and "age: generalized to intervals of width 5" in said
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["kind"] == "kept" and doc["linked_share"] == 1.0
    assert {"kind", "linked_share", "rows", "columns", "evidence"} <= set(doc)
    assert doc["columns"]["zip"]["transform"] == "generalized"
    assert doc["columns"]["puma"]["type"] == "categorical"
    assert {"transform", "suppressed_share", "type"} <= set(doc["columns"]["age"])
    assert "North-East" not in json.dumps(doc)  # a label map holds values: never written
    links = pd.read_parquet(tmp_path / "links.parquet")
    assert list(links.columns) == ["original_row", "quality"] and len(links) == len(
        release.released)
    assert (links["original_row"].to_numpy(dtype="int64") == release.source).mean() > 0.99


def test_riskgate_diff_on_bad_input_is_one_line_exit_3(tmp_path, capsys):
    from riskgate.flows.cli import main

    code = main(["diff", "--original", str(tmp_path / "none.csv"), "--released",
                 str(tmp_path / "none.csv")])
    said = capsys.readouterr()
    lines = [ln for ln in (said.out + said.err).splitlines() if ln.strip()]
    assert code == 3 and len(lines) == 1 and "does not exist" in lines[0], lines
    code = main(["diff", "--released", str(tmp_path / "r.csv")])
    said = capsys.readouterr()
    assert code == 3 and "--original is missing" in said.out + said.err


def test_merged_labels_are_learned_on_the_gates_few_columns(tmp_path):
    """The gate reads the release on its measured columns alone (the example's seven): a
    hierarchy that keeps four region names and merges four into them takes each merged row
    under the 0.7 quality the kept columns' maps were learned from; the rows that agree on
    every other column still show the map, and the region is read as generalized, not
    perturbed (the demo's report said "perturbed: 46 % of linked rows changed")."""
    from riskcore.examples import write_example
    from riskcore.roles import ColumnType

    files = write_example(tmp_path, n=6000, seed=2026)
    read = {"dtype": str, "keep_default_na": False}
    original = pd.read_csv(files["original"], **read).astype("category")
    released = pd.read_csv(files["released"], **read).astype("category")
    cols = ["region", "age", "sex", "education", "diagnosis", "weight", "household_id"]
    result = diff(original[cols], released[cols], types={"age": ColumnType.CATEGORICAL},
                  seed=2026)
    assert result.kind == "kept"
    region = result.columns["region"]
    assert region.transform == "generalized", region.to_dict()
    assert "region" in result.label_maps
    assert result.label_maps["region"]["South-West"] == "South"


@pytest.mark.parametrize("top", [4, 2**21], ids=["few-values", "overflowing"])
def test_blocking_keys_pair_exactly_the_rows_equal_on_the_columns(top):
    """The keys the linkage blocks on (built in place, a missing cell's -1 folded in, the
    query's keys looked up in a table or a hash) pair a query row with an original row exactly
    where both show the same codes on every key column; three columns of 2**22 codes
    overflow the running key, which is then made dense."""
    from riskcore.anatomy.linkage import _keys, _pairs_on

    rng = np.random.default_rng(5)
    originals = rng.integers(-1, 3, size=(300, 4))
    originals[:, :3] = np.where(originals[:, :3] >= 0, originals[:, :3] * top, -1)
    queries = originals[rng.integers(0, 300, 120)].copy()
    queries[:20, 1] = top * 3  # a code no original row holds
    queries[20:30, 2] = -1
    cols = [0, 1, 2]
    kq, ko, span = _keys(list(queries.T), list(originals.T), cols)
    assert (kq < span).all() and (ko < span).all()
    q, o = _pairs_on(kq, ko, span, cap=10**6)
    expected = {(i, j) for i in range(len(queries)) for j in range(len(originals))
                if (queries[i, cols] >= 0).all() and (originals[j, cols] >= 0).all()
                and (queries[i, cols] == originals[j, cols]).all()}
    assert expected and set(zip(q.tolist(), o.tolist())) == expected
    assert len(q) == len(expected)


def test_the_rank_of_many_keys_is_the_hash_lookups():
    """The original's keys looked up among the query's (a bit table of their low bits first,
    where the keys are many): every key's rank is what a hash lookup gives, -1 included."""
    from riskcore.anatomy.linkage import _rank_in

    rng = np.random.default_rng(8)
    span = 2**45
    keys = rng.integers(0, span, 200_000)
    keys[rng.random(keys.size) < 0.1] = -1
    # wanted keys some rows hold, others none does, and ones equal to a held key in their low
    # bits alone (what the bit table lets through to the hash)
    held = rng.choice(keys[keys >= 0], 3_000)
    wanted = np.unique(np.concatenate([held, rng.integers(0, span, 3_000),
                                       (held[:500] + (1 << 30)) % span]))
    got = _rank_in(wanted, keys, span)
    expected = pd.Index(wanted).get_indexer(keys)
    assert (got == expected).all()
    assert (got >= 0).sum() >= 2_000 and (got == -1).sum() > 100_000


def test_each_rows_best_pairs_are_a_sort_of_the_pairs_cut():
    """The best pairs of each query row, taken in rounds over its block of candidates, are
    the pairs sorted by row and score (equal scores in their order) cut at KEEP a row: on
    blocks larger and smaller than KEEP, ties, an infinite score, unsorted rows and a
    missing score (these two sorted)."""
    from riskcore.anatomy.linkage import KEEP, _best

    def cut(q, s):
        order = np.lexsort((-s, q))
        qs = q[order]
        rank = np.arange(qs.size) - np.searchsorted(qs, qs)
        return order[rank < KEEP]

    rng = np.random.default_rng(21)
    for trial in range(400):
        n = int(rng.integers(0, 300))
        q = np.sort(rng.integers(0, 40, n))
        s = rng.integers(0, 5, n).astype(float)
        if trial % 4 == 1 and n:
            s[rng.integers(0, n, 5)] = -np.inf
        if trial % 4 == 2:
            q = rng.permutation(q)
        if trial % 4 == 3 and n:
            s[rng.integers(0, n, 5)] = np.nan
        got = _best(q, np.zeros(n, np.int64), s)
        assert np.array_equal(got, cut(q, s)), trial
    big = np.repeat(np.arange(1_000), 40)  # a block of 40 per row: 6 kept of each
    assert _best(big, big, rng.random(big.size)).size == 1_000 * KEEP


def test_pairs_ranked_in_their_blocks_are_the_sort_of_the_pairs():
    """The assignment's order of the pairs, ranked within each query row's block, is
    ``lexsort((spread, -score, row))``: ties of score and of spread, an infinite score, and
    (sorted instead) unsorted rows, a missing score and a block larger than ranked."""
    from riskcore.anatomy.linkage import BLOCK_RANKED, _by_row_and_score

    rng = np.random.default_rng(22)
    for trial in range(400):
        n = int(rng.integers(0, 300))
        q = np.sort(rng.integers(0, 60, n))
        s = rng.integers(0, 3, n).astype(float)
        spread = rng.integers(0, 3, n)
        if trial % 5 == 1 and n:
            s[rng.integers(0, n, 4)] = -np.inf
        if trial % 5 == 2 and n:
            s[rng.integers(0, n, 2)] = np.nan
        if trial % 5 == 3:
            q = rng.permutation(q)
        if trial % 5 == 4:
            q = np.sort(rng.integers(0, 3, n))  # blocks of up to ~150
        got = _by_row_and_score(q, s, spread)
        assert np.array_equal(got, np.lexsort((spread, -s, q))), trial
    assert BLOCK_RANKED >= 12  # two stages' best of each row are ranked, not sorted


def test_keys_over_the_rows_holding_a_query_code_find_every_pair(monkeypatch):
    """The candidates of keys made over the original rows that hold a query row's code in
    the key's most selective column are the candidates of keys over every original row,
    missing and suppressed cells, capped blocks and noisy numbers included."""
    from riskcore.anatomy import linkage
    from riskcore.anatomy.linkage import Matrix, Weights, candidates

    rng = np.random.default_rng(5)
    n_o, n_q = 60_000, 2_000
    codes = np.column_stack([rng.integers(0, 4, n_o), rng.integers(0, 30, n_o),
                             rng.integers(0, 20_000, n_o), rng.integers(0, 50, n_o)])
    codes[rng.random(codes.shape) < 0.02] = -1
    numbers = codes[:, 3:4].astype(float) + rng.normal(0, 0.2, (n_o, 1))
    numbers[codes[:, 3] < 0, 0] = np.nan
    original = Matrix(np.asfortranarray(codes), np.asfortranarray(numbers))
    rows = rng.choice(n_o, n_q, replace=False)
    q_codes = codes[rows].copy()
    q_codes[rng.random(q_codes.shape) < 0.05] = -2  # suppressed
    q_codes[: n_q // 4, 1] = rng.integers(0, 30, n_q // 4)  # swapped
    query = Matrix(np.asfortranarray(q_codes), np.asfortranarray(numbers[rows] + 0.3))
    collision = np.array([0.25, 1 / 30, 1 / 20_000, 1 / 50])
    w = Weights(np.ones(4), -np.ones(4), np.array([3]), np.array([0.5]), collision)
    every = np.arange(n_q)
    subset = [candidates(query, original, w, every, fuzzy) for fuzzy in (False, True)]
    assert linkage._holding(q_codes[:, 2], codes[:, 2]) is not None  # the subset is taken
    monkeypatch.setattr(linkage, "_holding", lambda col_q, col_o: None)
    full = [candidates(query, original, w, every, fuzzy) for fuzzy in (False, True)]
    for (q1, o1), (q2, o2) in zip(subset, full):
        assert q1.size > n_q and np.array_equal(q1, q2) and np.array_equal(o1, o2)


def test_a_code_written_in_numbers_is_linked_as_labels(census):
    """A household number is a code: rows agree on it when it is equal (written 1.0 or 1),
    never when it is near. Renumbered, it is relabelled (its labels learned from the rows
    that link on the other columns), not a quantity with noise."""
    read_original, _, _, releases = census
    kept = next(r for r in releases if r.name == "kept-dropped").released
    as_floats = diff(read_original, as_read(kept.assign(
        household_id=kept["household_id"].astype(float))), seed=1)
    column = as_floats.columns["household_id"]
    assert (column.reading.type, column.domain, column.transform) == (
        "categorical", "kept", "kept")
    renumbered = diff(read_original, as_read(kept.assign(
        household_id=kept["household_id"] + 1)), seed=1)
    column = renumbered.columns["household_id"]
    assert renumbered.kind == "kept"
    assert column.domain == "learned" and "noise_sd" not in column.detail, column


def test_no_map_is_learned_from_rows_linked_by_chance():
    """A synthetic release of the same population, its households numbered in the same range,
    read on a sample as the gate reads one: rows that link by chance pair households seen once
    each, which is no evidence of a map (it once made a 1M-row synthetic release read as 25 %
    original records); the households stay not comparable, and the release synthetic."""
    from riskcore.examples import census_population

    cols = ["region", "age", "sex", "education", "diagnosis", "weight", "household_id"]
    original = as_read(census_population(30_000, seed=19)[cols])
    synthetic = as_read(census_population(30_000, seed=23)[cols])
    result = diff(original, synthetic, seed=19, sample=2_000)
    assert result.kind == "synthetic", result.evidence
    assert result.columns["household_id"].domain == "labels"
    assert "household_id" not in result.label_maps



def _people(n: int, seed: int) -> pd.DataFrame:
    """People of one population on a few coarse columns, numbered P000000..."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "person": [f"P{i:06d}" for i in range(n)],
        "sex": rng.choice(["F", "M"], n),
        "region": rng.choice(["north", "south", "east", "west", "centre"], n,
                             p=[0.4, 0.2, 0.2, 0.1, 0.1]),
        "age": rng.choice(["18-34", "35-54", "55+"], n, p=[0.3, 0.4, 0.3])})


@pytest.mark.parametrize("real_share", [0.0, 0.15])
def test_rows_numbered_alike_in_both_tables_are_not_records(real_share):
    """Both tables numbered ``P000000``, ``P000001``... (what a synthesizer and
    ``reset_index`` write): a new row that holds an original row's number is not that row's
    record, though on coarse columns it often agrees with it on every other (here 1 in 30).
    Chance, measured on the original itself, takes each row's number from another row, so
    that it coincides as an independent sample's does; before, such a synthetic release read
    as mixed (and a 100,000-row one was read again on every row: 5 s). The records of a mixed
    release, kept with their numbers, are still found."""
    original = _people(3000, 1)
    released = _people(3000, 2)
    real = int(real_share * len(released))
    rows = np.random.default_rng(3).choice(len(original), real, replace=False)
    released.iloc[:real] = original.iloc[rows].to_numpy()
    result = diff(as_read(original), as_read(released), seed=1)
    if real_share == 0:
        assert result.kind == "synthetic" and result.linked_share == 0.0, result.evidence
    else:
        assert result.kind == "mixed", result.evidence
        assert abs(result.linked_share - real_share) <= 0.05, result.linked_share


def test_a_sampled_row_of_the_original_never_links_to_itself():
    """Chance's rows are a sample of the original's, each kept from its own match: in a block
    of identical rows whose earlier rows are not in the sample, the row's "next identical
    row" was once itself (a self-link counted as chance)."""
    from riskcore.anatomy.domain import column_domain
    from riskcore.anatomy.linkage import Query, link_each, matrices, weights

    table = pd.DataFrame({"a": ["x", "x", "x", "y", "z", "y"], "b": ["1", "1", "1", "2", "3", "4"]})
    doms = [column_domain(c, {"original": table[c].astype("category"),
                              "released": table[c].astype("category")}) for c in table]
    original = matrices(doms, "original")
    w = weights(doms, original)
    for sample in ([1], [2], [1, 2], [0, 2]):
        links = link_each([Query(original, np.array(sample), exclude_self=True)], original, w)[0]
        linked = links.original_row[np.array(sample)]
        assert (linked != np.array(sample)).all(), (sample, linked)
        assert (linked >= 0).all() and (links.quality[np.array(sample)] == 1.0).all()
