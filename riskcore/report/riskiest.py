"""Example values for ``report detail: full``: the quasi-identifier values of the riskiest records.

Only quasi-identifiers are shown (the values an attacker is assumed to know already); sensitive
attributes and direct identifiers never are, whatever the detail level. The default report shows
no record values at all, only row numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..data import EncodedTable
from ..results import MeasureResult

#: per-record arrays that rank records by risk, in order of preference, and whether a higher
#: value is riskier
RANKING = (("reid", "prosecutor_risk", True), ("sdc", "risk", True),
           ("k_anonymity", "fk", False), ("suda", "dis_score", True))


def example_records(table: EncodedTable, results: Mapping[str, MeasureResult],
                    n: int = 10) -> dict[str, Any] | None:
    """The ``n`` riskiest records' row numbers, risk and quasi-identifier values.

    Returns None when no measure of the run ranks records (e.g. only attacks ran).
    """
    for measure, key, higher in RANKING:
        res = results.get(measure)
        if res is None or key not in res.per_record:
            continue
        risk = np.asarray(res.per_record[key], dtype=float)
        if risk.size != table.n:
            continue
        order = np.argsort(-risk if higher else risk, kind="stable")[:max(n, 0)]
        hidden = set(table.roles.sensitive) | set(table.roles.direct_identifiers)
        cols = [c for c in table.roles.quasi_identifiers if c not in hidden]
        values = []
        for c in cols:
            col = table.column(c)
            codes = col.codes[order]
            labels = np.where(codes >= 0, col.categories[np.maximum(codes, 0)].astype(object),
                              None)
            values.append([None if v is None else str(v) for v in labels])
        return {"ranked_by": f"{measure}.{key}", "higher_is_riskier": higher, "columns": cols,
                "rows": [{"row": int(r), "risk": float(risk[r]),
                          "values": [values[j][i] for j in range(len(cols))]}
                         for i, r in enumerate(order)]}
    return None
