"""Direct identifiers nobody declared: every published column scanned for values that name a
person on their own, in any country's form (Microsoft Presidio's recognizers, a pattern and a
validator per kind with the column as context, are the anchor).

A custodian who forgot to list a column of e-mail addresses under
``roles.direct_identifiers`` must not see it approved. Before any measure, every column of
the release and of the control (which stands for a release) is scanned, whatever its role or
format, and so are their column names (:mod:`riskcore.gate.tables` refuses a header that
holds one). The kinds:

* e-mail addresses, IP addresses and personal URLs, by their form
  (:mod:`.patterns`);
* national identifiers, personal tax and social-security numbers of some sixty countries
  (python-stdnum's validators, named as stdnum names them: ``nl.bsn``, ``br.cpf``), payment
  cards and IBANs (:mod:`.checked`), each told from codes by passing its checks more often
  than random codes of its shape do (:mod:`.chance`);
* phone numbers of the config's regions, national and international forms (phonenumbers,
  :mod:`.phones`), by the same test;
* person names: full names in any case or surname first, and columns of first names or of
  surnames, places told apart (:mod:`.names`).

Values are normalized first (NFKC, format characters dropped: :mod:`.text`). Linear time:
RE2 over the distinct values in Arrow first, the libraries only on candidates, on a sample
where a column has very many (:mod:`.checked_scan`, :mod:`.phones`).

Out of scope: encodings meant to hide (base64, hexadecimal, an address spelled ``john at
example dot com``) and identifiers split over several columns.
"""

from .scan import (
    DEFAULT_THRESHOLD,
    Finding,
    IdentifierScan,
    describe,
    identifier_names,
    kind_name,
    kind_titles,
    scan_column,
    scan_tables,
)

__all__ = ["DEFAULT_THRESHOLD", "Finding", "IdentifierScan", "describe", "identifier_names",
           "kind_name", "kind_titles", "scan_column", "scan_tables"]
