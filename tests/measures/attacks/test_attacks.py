"""Attack-based risk (anonymeter, docs/measures.md 5): statistics, distance, and agreement with
anonymeter."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from riskcore.errors import ConfigError
from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.attacks.gower import distances, kneighbors, prepare
from riskcore.measures.attacks.inference import inference
from riskcore.measures.attacks.linkability import linkability, risk_for_k
from riskcore.measures.attacks.singling_out import singling_out
from riskcore.stats import Rate, privacy_risk, wilson, z_score
from tests.measures.attacks.gower_brute import brute_gower

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs

AUX_A = ["type_employer", "education", "hr_per_week", "capital_loss", "capital_gain"]
AUX_B = ["race", "sex", "fnlwgt", "age", "country"]


def test_wilson_and_risk_propagation_on_fixed_counts():
    assert z_score() == pytest.approx(1.959964, abs=1e-6)
    r = wilson(0, 500)
    assert r.rate == pytest.approx(0.0038122, abs=5e-8)
    assert r.error == pytest.approx(0.0038122, abs=5e-8)
    a, c = wilson(82, 500), wilson(19.496503854724278, 500)
    # anonymeter 1.1.0 on the adults data (reference run singling_out_multivariate_ncols3_seed0)
    assert (a.rate, a.error) == pytest.approx((0.16656177839508154, 0.032432858079209814))
    assert (c.rate, c.error) == pytest.approx((0.042507881973827905, 0.017264351814692214))
    risk = privacy_risk(a, c)
    assert risk.value == pytest.approx(0.12956127166559375, rel=1e-12)
    assert risk.ci == pytest.approx((0.09222918422031878, 0.16689335911086872), rel=1e-12)
    # by hand: first-order propagation
    ra, sa, rc, sc = a.rate, a.error, c.rate, c.error
    sigma = math.sqrt((sa / (1 - rc)) ** 2 + (sc * (ra - 1) / (1 - rc) ** 2) ** 2)
    assert risk.ci[1] - risk.value == pytest.approx(sigma)
    # clipping, and no control = the attack rate
    assert privacy_risk(wilson(0, 500), wilson(50, 500)).value == 0.0
    assert privacy_risk(Rate(0.3, 0.1, 3, 10)).ci == pytest.approx((0.2, 0.4))


def test_gower_and_neighbours_against_brute_force(reference):
    ori = pd.read_csv(reference / "datasets/anonymeter/tests_adults_ori.csv")
    syn = pd.read_csv(reference / "datasets/anonymeter/tests_adults_syn.csv")
    ori.loc[[3, 7], "age"] = np.nan  # exercise the missing-value rules
    syn.loc[[5], "age"] = np.nan
    cols = list(ori.columns)
    enc = encode_attack_tables(ori, syn, None, cols)
    q, c = prepare([enc["original"], enc["released"]], cols)
    num = [col for col in cols if enc["original"].column(col).values is not None]
    both = pd.concat([ori, syn])
    ranges = {col: (both[col].max() - both[col].min()) or 1.0 for col in num}
    D = distances(q, c)
    for i in range(0, len(ori), 7):
        for j in range(0, len(syn), 3):
            assert D[i, j] == pytest.approx(brute_gower(ori.iloc[i], syn.iloc[j], num, ranges))
    idx, dist = kneighbors(q, c, 5, max_cells=500)  # tiny blocks
    for i in range(len(ori)):
        order = sorted(range(len(syn)), key=lambda j: (D[i, j], j))[:5]
        assert idx[i].tolist() == order
        np.testing.assert_allclose(dist[i], D[i, order])


def test_the_compiled_kernel_and_the_numpy_blocks_give_the_same_neighbours(monkeypatch):
    """The compiled search and the NumPy blocks agree to the bit, neighbours and distances,
    on ties (few categories), missing numbers and suppressed cells, for k = 1, several and
    all, and on groups large enough to be cut into many leaves."""
    from riskcore.measures.attacks import gower
    from riskcore.measures.attacks.gower import MixedMatrix

    rng = np.random.default_rng(4)

    def matrix(n):
        num = rng.integers(0, 4, size=(n, 2)) / 3.0
        num[rng.random((n, 2)) < 0.1] = np.nan
        cat = rng.integers(-1, 3, size=(n, 3)).astype(np.int32)
        return MixedMatrix(numeric=num, categorical=cat, columns=("a", "b", "c", "d", "e"),
                           n=n, wild=(gower.NO_WILDCARD, 2, gower.NO_WILDCARD))

    q, c = matrix(60), matrix(45)
    assert gower._compiled() is not None
    for k in (1, 4, 45):
        fast = kneighbors(q, c, k)
        with monkeypatch.context() as patch:
            patch.setattr(gower, "_compiled", lambda: None)
            slow = kneighbors(q, c, k, max_cells=300)
        np.testing.assert_array_equal(fast[0], slow[0])
        np.testing.assert_array_equal(fast[1], slow[1])
    # the search's leaves and boxes: large groups, ties at the k-th distance across leaves
    # and groups, columns missing in every row of a leaf, no numbers or no categories, and
    # the query's own group searched first
    for trial in range(120):
        p, nq = int(rng.integers(0, 4)), int(rng.integers(1, 40))
        nan_share, card = (0.0, 0.1, 0.6, 0.95)[trial % 4], int(rng.integers(1, 4))
        n = int(rng.integers(1, 70 if trial % 3 else 8 * gower.LEAF_ROWS))
        cols = 0 if trial % 7 == 0 else 2

        def mixed(n, p=p, nan_share=nan_share, card=card, cols=cols, ties=trial % 2,
                  suppressed=trial % 4 < 2):
            num = rng.random((n, p))
            if ties:
                num = np.round(num * 2) / 2
            num[rng.random((n, p)) < nan_share] = np.nan
            cat = rng.integers(-1, card, size=(n, cols)).astype(np.int32)
            # suppressed cells in a column, or none (a query's own group then searched first)
            wild = (gower.NO_WILDCARD, 0 if suppressed else gower.NO_WILDCARD)
            return MixedMatrix(numeric=num, categorical=cat, columns=(), n=n, wild=wild[:cols])

        q, c = mixed(nq), mixed(n)
        for k in sorted({1, min(3, n), n}):
            fast = kneighbors(q, c, k, grouped=False)
            with monkeypatch.context() as patch:
                patch.setattr(gower, "_compiled", lambda: None)
                slow = kneighbors(q, c, k)
            np.testing.assert_array_equal(fast[0], slow[0])
            np.testing.assert_array_equal(fast[1], slow[1])


@pytest.mark.parametrize("share", [1.01, 0.5])
def test_candidates_alike_searched_by_groups_give_the_same_neighbours(monkeypatch, share):
    """Candidates with few distinct rows (a generalized release): the search over their
    groups gives the same neighbours and distances, to the bit, as the search row by row,
    ties in row order across groups, for k = 1, several and more than there are groups;
    missing numbers (one value), -0.0 beside 0.0, and suppressed cells."""
    from riskcore.measures.attacks import gower
    from riskcore.measures.attacks.gower import MixedMatrix

    rng = np.random.default_rng(7)

    def matrix(n):
        num = rng.choice([0.0, -0.0, 0.5, 1.0, np.nan], size=(n, 1))
        cat = rng.integers(-1, 3, size=(n, 2)).astype(np.int32)
        return MixedMatrix(numeric=num, categorical=cat, columns=("a", "b", "c"), n=n,
                           wild=(gower.NO_WILDCARD, 2))

    monkeypatch.setattr(gower, "GROUPED_BELOW", share)
    q, c = matrix(80), matrix(600)
    assert gower._alike(c) is not None  # 4 x 4 x 4 values at most: grouped either way
    for k in (1, 3, 70):
        grouped = kneighbors(q, c, k)
        rows = kneighbors(q, c, k, grouped=False)
        np.testing.assert_array_equal(grouped[0], rows[0])
        np.testing.assert_array_equal(grouped[1], rows[1])


def test_the_pruned_nearest_distance_equals_the_full_search():
    """Membership's nearest-distance search (groups by categorical codes visited fewest
    mismatches first, their rows in leaves skipped by their boxes, sums left once no better)
    gives the full search's distances to the bit, for one metric and for a squared one beside
    it in the same search, on ties, missing numbers (alone, and in every row of a leaf's
    column), suppressed cells, no numbers or no categories, small groups searched row by row
    and large ones cut into many leaves."""
    from riskcore.measures.attacks import gower
    from riskcore.measures.attacks.gower import MixedMatrix, nearest_distance

    rng = np.random.default_rng(31)
    for trial in range(300):
        p, q = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        nan_share, card = (0.0, 0.1, 0.5, 0.95)[trial % 4], int(rng.integers(1, 5))
        # every fifth trial: a few large groups, cut into leaves of LEAF_ROWS rows
        most = 70 if trial % 5 else 12 * gower.LEAF_ROWS
        wild = tuple(int(rng.choice([gower.NO_WILDCARD, 0, 1])) for _ in range(q))

        def matrix(n, p=p, q=q, nan_share=nan_share, card=card, wild=wild, ties=trial % 2):
            num = rng.random((n, p))
            if ties:
                num = np.round(num * 3) / 3  # ties
            num[rng.random((n, p)) < nan_share] = np.nan
            cat = rng.integers(-1, card, size=(n, q)).astype(np.int32)
            return MixedMatrix(numeric=num, categorical=cat, columns=(), n=n, wild=wild)

        queries, candidates = matrix(int(rng.integers(1, 50))), matrix(int(rng.integers(1, most)))
        full = kneighbors(queries, candidates, 1)[1][:, 0]
        np.testing.assert_array_equal(nearest_distance(queries, candidates), full)
        # several metrics in one walk, a squared one among them, against the numpy blocks
        both = gower.nearest_distances([(queries, candidates, True), (queries, candidates,
                                                                      False)])
        np.testing.assert_array_equal(
            both[:, 0], gower._nearest_squared_blocks(queries, candidates))
        np.testing.assert_array_equal(both[:, 1], full)


def test_the_compiled_query_counter_equals_the_row_by_row_definition(monkeypatch):
    """Singling out's compiled counter (candidates from the inverted index, early
    stop) gives each query's exact count, and the same count capped at a limit, on every
    operator, missing numbers and codes, and a column with suppressed cells."""
    from riskcore.measures.attacks import singling_out as so

    rng = np.random.default_rng(8)
    n = 200
    num = rng.integers(0, 6, n).astype(float)
    num[rng.random(n) < 0.1] = np.nan
    cat = rng.integers(-1, 4, n).astype(np.int64)
    wild = rng.integers(0, 3, n).astype(np.int64)  # code 2 is the suppression token
    table = so._Arrays([num, cat, wild], [True, False, False], n, (so.NO_WILDCARD,
                                                                 so.NO_WILDCARD, 2))
    k = 3000
    J = np.sort(np.argsort(rng.random((k, 3)), axis=1)[:, :rng.integers(2, 4)], axis=1)
    width = J.shape[1]
    OP = np.where(J == 0, rng.integers(0, 8, (k, width)),
                  rng.choice([so.EQ, so.EQ, so.NE, so.ISNULL, so.NOTNULL], (k, width)))
    V = rng.integers(0, 5, (k, width)).astype(float)

    def by_rows(i):  # the definition, one row at a time
        count = 0
        for r in range(n):
            ok = True
            for p in range(width):
                j, op, v = int(J[i, p]), int(OP[i, p]), V[i, p]
                x = table.cols[j][r]
                miss = bool(np.isnan(x)) if j == 0 else x < 0
                hit = {so.EQ: x == v, so.NE: x != v and not miss, so.LT: x < v,
                       so.LE: x <= v, so.GT: x > v, so.GE: x >= v, so.ISNULL: miss,
                       so.NOTNULL: not miss}[op]
                if j == 2 and op in (so.EQ, so.NE):
                    hit = True if v == 2 else (hit or x == 2)
                ok = ok and bool(hit)
            count += ok
        return count

    assert so._compiled() is not None
    exact = so.count_queries(table, J, OP, V)
    want = np.array([by_rows(i) for i in range(k)])
    np.testing.assert_array_equal(exact, want)
    np.testing.assert_array_equal(so.count_queries(table, J, OP, V, limit=2),
                                  np.minimum(want, 2))
    monkeypatch.setattr(so, "_compiled", lambda: None)  # the NumPy path, query by query
    np.testing.assert_array_equal(so.count_queries(table, J, OP, V, limit=2),
                                  np.minimum(want, 2))
    assert (want > 0).mean() > 0.3 and (want == 1).any() and (want == 0).any()


CASE_MANY_GROUPS = 70  # queries of 3 columns, seed 5: the 70th in attempt 8,166 (batch 9 of 16)


def test_multivariate_queries_are_those_of_the_one_by_one_search():
    """The multivariate generator looks only at the attempts that single out a row
    (a query's count is a function of the query); the queries kept and the number of
    attempts are those of the search that looks at every attempt in order, skipping any
    query seen before, down to where the last query is found and where max_attempts stops.
    Batches counted together in growing groups leave the generator where the batch-by-batch
    search leaves it (the baseline's and the size correction's draws come next)."""
    from riskcore.measures.attacks import singling_out as so

    rng = np.random.default_rng(4)
    n = 400
    num = rng.integers(0, 30, n).astype(float)
    num[rng.random(n) < 0.05] = np.nan
    cols = [num, rng.integers(-1, 3, n).astype(np.int64), rng.integers(0, 6, n).astype(np.int64),
            rng.integers(0, 2, n).astype(np.int64)]
    table = so._Arrays(cols, [True, False, False, False], n, None)

    def one_by_one(n_attacks, n_cols, max_attempts, rng):  # every attempt, in order
        m = len(table.cols)
        medians = np.array([float(np.nanmedian(x)) if table.numeric[j] else 0.0
                            for j, x in enumerate(table.cols)])
        numeric = np.array(table.numeric, dtype=bool)
        out, seen, attempts = [], set(), 0
        while len(out) < n_attacks and attempts < max_attempts:
            batch = min(1000, max_attempts - attempts)
            rows = rng.integers(0, table.n, size=batch)
            J = np.sort(np.argsort(rng.random((batch, m)), axis=1)[:, :n_cols], axis=1)
            V = np.zeros(J.shape)
            for j in range(m):
                at = J == j
                V[at] = table.cols[j][np.broadcast_to(rows[:, None], J.shape)[at]]
            isnum = numeric[J]
            missing = np.where(isnum, np.isnan(V), V < 0)
            OP = np.where(missing, so.ISNULL,
                          np.where(isnum, np.where(V > medians[J], so.GE, so.LE), so.EQ))
            V = np.where(missing, 0.0, V) + 0.0
            for i in range(batch):
                attempts += 1
                query = tuple((int(J[i, p]), int(OP[i, p]), float(V[i, p]))
                              for p in range(n_cols))
                if query in seen:
                    continue
                seen.add(query)
                if so.count_matches(table, query) == 1:
                    out.append(query)
                    if len(out) == n_attacks:
                        break
        return out, attempts

    cases = [(40, 2, 100_000, 0), (25, 3, 100_000, 1), (10_000, 2, 2_500, 2),
             (CASE_MANY_GROUPS, 3, 100_000, 5), (1, 4, 500, 3)]
    for n_attacks, n_cols, max_attempts, seed in cases:
        mine, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        got = so._multivariate_queries(table, n_attacks, n_cols, max_attempts, mine)
        want = one_by_one(n_attacks, n_cols, max_attempts, theirs)
        assert got == want, (n_attacks, n_cols, seed)
        assert want[0] and len(set(want[0])) == len(want[0])
        assert mine.random() == theirs.random(), (n_attacks, n_cols, seed)
        if n_attacks == CASE_MANY_GROUPS:  # found in a later batch of a group of four or more
            assert len(want[0]) == n_attacks and want[1] > 3_000 and want[1] % 1000
    assert len(got[0]) == 1 and 1 < want[1] < 500  # the search stopped at its first find


@pytest.fixture(scope="module")
def adults(reference):
    d = reference / "datasets/anonymeter"
    ori = pd.read_csv(d / "adults_train_reconstructed.csv.gz")
    syn = pd.read_csv(d / "adults_syn_ctgan.csv.gz")
    ctl = pd.read_csv(d / "adults_control.csv.gz")
    ref = json.loads((reference / "outputs/anonymeter/adults_anonymeter_1.1.0.json").read_text())
    runs = {r["name"]: r for r in ref["runs"]}
    return encode_attack_tables(ori, syn, ctl), list(ori.columns), runs


def agree(res, ref):
    """Risks lie in each other's confidence intervals (the random draws differ)."""
    lo, hi = res.figures["risk_ci_low"], res.figures["risk_ci_high"]
    assert ref["risk_ci"][0] - 1e-12 <= res.figures["risk"] <= ref["risk_ci"][1] + 1e-12
    assert lo - 1e-12 <= ref["risk"] <= hi + 1e-12


@pytest.mark.parametrize("mode,n_cols,names", [
    ("univariate", 1, ["singling_out_univariate_seed0", "singling_out_univariate_seed1"]),
    ("multivariate", 3, ["singling_out_multivariate_ncols3_seed0",
                         "singling_out_multivariate_ncols3_seed1"])])
def test_singling_out_agrees_with_anonymeter(adults, mode, n_cols, names):
    enc, cols, runs = adults
    res = singling_out(enc["original"], enc["released"], enc["control"], columns=cols,
                       mode=mode, n_cols=n_cols, n_attacks=500, seed=0)
    # univariate: every value unique in the release is a query, the whole pool counted
    # (anonymeter draws n_attacks of them; the risk is the same share, its interval narrower)
    assert res.figures["n_attacks_achieved"] == (500 if mode == "multivariate" else 35_900)
    for name in names:
        if mode == "multivariate":
            agree(res, runs[name])
        else:  # the pool's rate, its interval narrow, lies in each 500-draw interval
            ref = runs[name]
            assert ref["risk_ci"][0] <= res.figures["risk"] <= ref["risk_ci"][1], name
    if mode == "univariate":
        assert res.figures["risk"] == pytest.approx(0.04116, abs=1e-4)


def test_linkability_agrees_with_anonymeter_for_every_k(adults):
    enc, _, runs = adults
    res = linkability(enc["original"], enc["released"], enc["control"], aux_a=AUX_A,
                      aux_b=AUX_B, n_attacks=2000, n_neighbors=10, seed=0)
    for seed in (0, 1):
        agree(res, runs[f"linkability_k10_seed{seed}"])
        for k in (1, 5):
            ref = runs[f"linkability_k{k}_seed{seed}(reused)"]
            value, ci = risk_for_k(res, k)
            assert ref["risk_ci"][0] <= value <= ref["risk_ci"][1]
            assert ci[0] <= ref["risk"] <= ci[1]


@pytest.mark.parametrize("secret", ["income", "occupation", "marital"])
def test_inference_agrees_with_anonymeter(adults, secret):
    enc, cols, runs = adults
    res = inference(enc["original"], enc["released"], enc["control"], secret=secret,
                    aux=[c for c in cols if c != secret], n_attacks=1000, seed=0)
    agree(res, runs[f"inference_{secret}_n1000"])
    # the baseline compares by position: a real majority-class guess rate, not anonymeter's ~0
    if secret == "income":
        assert res.figures["baseline_rate"] > 0.5


def test_bad_attack_configs(adults):
    enc, cols, _ = adults
    with pytest.raises(ConfigError, match="overlap"):
        linkability(enc["original"], enc["released"], aux_a=["age", "sex"], aux_b=["sex"])
    with pytest.raises(ConfigError, match="also an auxiliary"):
        inference(enc["original"], enc["released"], secret="age", aux=["age", "sex"])
    with pytest.raises(ConfigError, match="regression needs a numeric"):
        inference(enc["original"], enc["released"], secret="sex", aux=["age"], regression=True)


PLANTED = """
import json, sys
import numpy as np, pandas as pd
from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.attacks.singling_out import singling_out
from riskcore.measures.attacks.linkability import linkability
from riskcore.results import to_jsonable
d = sys.argv[1]
ori = pd.read_csv(d + "/adults_train_reconstructed.csv.gz").iloc[:6000].reset_index(drop=True)
ctl = pd.read_csv(d + "/adults_control.csv.gz").iloc[:6000].reset_index(drop=True)
rng = np.random.default_rng(7)
clean = pd.DataFrame({c: ori[c].to_numpy()[rng.integers(0, len(ori), len(ori))] for c in ori})
leaky = clean.copy()
copied = rng.choice(len(ori), int(0.15 * len(ori)), replace=False)
leaky.iloc[: copied.size] = ori.iloc[copied].to_numpy()
out = {}
for name, rel in (("clean", clean), ("leaky", leaky)):
    enc = encode_attack_tables(ori, rel, ctl)
    so = singling_out(enc["original"], enc["released"], enc["control"], columns=list(ori.columns),
                      n_attacks=500, n_cols=6, seed=11)
    li = linkability(enc["original"], enc["released"], enc["control"],
                     aux_a=["type_employer", "education", "hr_per_week", "capital_loss",
                            "capital_gain"], aux_b=["race", "sex", "fnlwgt", "age", "country"],
                     n_attacks=500, n_neighbors=5, seed=11)
    out[name] = {"so": so.to_dict(), "li": li.to_dict()}
print(json.dumps(to_jsonable(out), sort_keys=True))
"""


def _planted_run(reference) -> dict:
    done = subprocess.run([sys.executable, "-c", PLANTED, str(reference / "datasets/anonymeter")],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_planted_leak_is_caught_and_runs_are_deterministic(reference):
    first = _planted_run(reference)
    second = _planted_run(reference)
    assert first == second  # same seed, separate processes: identical JSON
    for attack in ("so", "li"):
        clean = first["clean"][attack]["figures"]
        leaky = first["leaky"][attack]["figures"]
        assert leaky["risk"] > clean["risk"]
        assert leaky["risk_ci_low"] > clean["risk"], attack


def test_cli_attack_json(reference, tmp_path):
    from riskgate.flows.cli import main

    d = reference / "datasets/anonymeter"
    out = tmp_path / "inf.json"
    code = main(["attack", "inference", str(d / "tests_adults_ori.csv"),
                 str(d / "tests_adults_syn.csv"), "--secret", "income", "--n-attacks", "50",
                 "--seed", "3", "--json", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    ori = pd.read_csv(d / "tests_adults_ori.csv")
    syn = pd.read_csv(d / "tests_adults_syn.csv")
    enc = encode_attack_tables(ori, syn, None)
    lib = inference(enc["original"], enc["released"], secret="income",
                    aux=[c for c in ori.columns if c != "income"], n_attacks=50, seed=3)
    # the command reads columns as the gate does: a handful of whole numbers (on these 100
    # rows, capital_gain) both as numbers and as codes, the worse kept; as numbers, it is the
    # library's attack
    readings = doc["result"]["details"]["readings"]
    assert "capital_gain" in readings["both_ways"]
    as_numbers = readings["as_encoded"]
    assert as_numbers["risk"] == pytest.approx(lib.figures["risk"])
    assert [as_numbers["risk_ci_low"], as_numbers["risk_ci_high"]] == pytest.approx(
        [lib.figures["risk_ci_low"], lib.figures["risk_ci_high"]])
    assert doc["risk"] == pytest.approx(max(lib.figures["risk"],
                                            readings["other_way"]["risk"]))
    assert doc["result"]["figures"]["n_attack"] == lib.figures["n_attack"]
    assert main(["attack", "linkability", str(d / "tests_adults_ori.csv"),
                 str(d / "tests_adults_syn.csv"), "--aux", "age,sex", "--aux2", "sex"]) == 3


def test_control_overlapping_the_original_is_flagged(reference):
    d = reference / "datasets/anonymeter"
    ori = pd.read_csv(d / "tests_adults_ori.csv")
    syn = pd.read_csv(d / "tests_adults_syn.csv")
    enc = encode_attack_tables(ori, syn, ori.iloc[:40])
    res = inference(enc["original"], enc["released"], enc["control"], secret="income",
                    aux=["age", "sex"], n_attacks=30)
    assert any("equal an original row" in w and "must be records held out" in w
               for w in res.warnings), res.warnings
