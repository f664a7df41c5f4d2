"""The earlier releases a gate run composes the new one with (the ``composition`` family).

An earlier release is one of the gate's own earlier decisions: listed by URL under
``composition.earlier``, or found as the APPROVED runs of the release ids under
``composition.lineage`` in the output store (newest first; runs that approved the same
released file count once). Each decision is read strictly and its signature must verify,
under ``composition.public_key`` or, by default, the key of the signer this gate signs with:
a decision taken on its word (a hand-made one pointing at a harmless file with its SHA-256)
is never composed. Its released table (and, for releases of new rows, its original) is read
again with the decision's own config and must have the SHA-256 the decision recorded.
Whatever fails is kept with its reason, and more earlier releases than ``max_releases`` is
itself a reason: the family then reports insufficient evidence naming it, never a figure
that silently left a release out (a flood of harmless approved runs cannot push the real
earlier release out of the window).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..errors import ConfigError, InputError, StorageError
from ..measures.composition import CompositionParams
from ..measures.releases import Lineage, ReleaseTables
from ..redact import redact_text
from ..storage import filesystem, join_url
from .config import Gate, TablesConfig
from .history import runs_of
from .inputs import load_input

log = logging.getLogger(__name__)

MAX_DECISION = 64 << 20
_TABLE_KEYS = set(TablesConfig.model_fields)


def _read_bytes(url: str, options: Mapping[str, Any], limit: int = MAX_DECISION
                ) -> bytes:
    fs, path = filesystem(url, dict(options))
    with fs.open(path, "rb") as fh:
        return bytes(fh.read(limit))


def _release(name: str, url: str, doc: Mapping[str, Any], options: Mapping[str, Any],
             with_original: bool) -> ReleaseTables:
    """One earlier decision's release, its tables read again and checked against the
    checksums the decision recorded (a reason instead of tables when anything fails)."""

    inputs = {str(i.get("name")): i for i in doc.get("inputs") or [] if isinstance(i, dict)}
    meta = {"release_id": doc.get("release_id"), "run_id": doc.get("flow_run_id"),
            "decision": url, "verdict": doc.get("verdict"),
            "sha256": (inputs.get("released") or {}).get("sha256")}

    def failed(reason: str) -> ReleaseTables:
        return ReleaseTables(name=name, released=pd.DataFrame(), quasi_identifiers=(),
                             sensitive=(), meta=meta, reason=reason)

    raw = doc.get("config")
    if not isinstance(raw, Mapping):
        return failed("its decision records no config (written by an older riskgate?)")
    try:
        cfg = TablesConfig.model_validate({k: v for k, v in raw.items() if k in _TABLE_KEYS})
    except Exception as exc:
        return failed(f"its recorded config does not load: {str(exc).splitlines()[0][:200]}")
    wanted = ["released", *(["original"] if with_original else [])]
    frames: dict[str, pd.DataFrame] = {}
    for table in wanted:
        expected = (inputs.get(table) or {}).get("sha256")
        if not expected:
            return failed(f"its decision records no checksum of the {table} table")
        try:
            df, info = load_input(cfg, table, options)
        except (InputError, StorageError, ConfigError, OSError) as exc:
            return failed(f"its {table} table ({redact_text(str(getattr(cfg, table)))}) cannot "
                          f"be read again: {redact_text(str(exc))[:200]}")
        if info.sha256 != expected:
            return failed(f"its {table} table ({info.url}) changed since that decision "
                          f"(sha256 {info.sha256[:16]}..., the decision read "
                          f"{str(expected)[:16]}...): compose with the file as released")
        frames[table] = df
    roles = cfg.role_spec
    return ReleaseTables(
        name=name, released=frames["released"],
        quasi_identifiers=tuple(roles.quasi_identifiers), sensitive=tuple(roles.sensitive),
        generalization=dict(cfg.generalization), tokens=tuple(cfg.suppressed),
        original=frames.get("original"), meta=meta)


def earlier_decisions(params: CompositionParams, gate: Gate, options: Mapping[str, Any],
                      run_id: str, notes: list[str] | None = None
                      ) -> list[tuple[str, str, bytes | None, str | None]]:
    """(name, decision URL, its bytes or None, why not) of every earlier release: the
    explicit URLs first, then the APPROVED runs of the lineage release ids (this run
    excluded), newest first, one per released file (:func:`one_per_file`). A lineage id with
    no run at all in the output store is an entry that cannot be used (a misspelt id must not
    pass for a first release); one whose runs were none APPROVED published nothing, said in
    ``notes``. More than ``max_releases`` in all is an entry that cannot be used either: none
    is left out in silence."""
    out: list[tuple[str, str, bytes | None, str | None]] = []
    for url in params.earlier:
        try:
            out.append((url.rstrip("/").rsplit("/", 2)[-2] if url.count("/") >= 2 else url,
                        url, _read_bytes(url, options), None))
        except (OSError, StorageError, ValueError) as exc:
            out.append((url, url, None, f"its decision cannot be read: "
                        f"{redact_text(str(exc))[:200]}"))
    for release_id in params.lineage:
        runs = [r for r in runs_of(release_id, gate.config.output_url, options)
                if r["run_id"] != run_id]
        if not runs and release_id != gate.config.release_id:
            out.append((release_id, join_url(gate.config.output_url, release_id), None,
                        f"no run of release '{release_id}' in the output store "
                        f"{redact_text(gate.config.output_url)}: check the id under "
                        "composition.lineage"))
        elif not any(r["verdict"] == "APPROVED" for r in runs) and notes is not None:
            verdicts = sorted({str(r["verdict"]) for r in runs})
            notes.append(f"release '{release_id}': {len(runs)} run(s), none APPROVED "
                         f"({', '.join(verdicts) or 'none'}): nothing of it was published")
        for run in runs:
            if run["verdict"] != "APPROVED":
                continue  # only what went out composes with what goes out now
            url = join_url(gate.config.output_url, release_id, run["run_id"], "decision.json")
            try:
                out.append((f"{release_id}/{run['run_id']}", url, _read_bytes(url, options),
                            None))
            except (OSError, StorageError) as exc:
                out.append((url, url, None, f"its decision cannot be read: "
                            f"{redact_text(str(exc))[:200]}"))
    out = one_per_file(out)
    if len(out) > params.max_releases:
        names = ", ".join(name for name, *_ in out[params.max_releases:][:5])
        out = out[:params.max_releases] + [(
            "earlier releases", join_url(gate.config.output_url), None,
            f"{len(out)} earlier releases were published, more than composition.max_releases "
            f"({params.max_releases}); the oldest ({names}...) would be left out: raise "
            "max_releases (up to 64) so that every one is composed")]
    return out


def one_per_file(entries: list[tuple[str, str, bytes | None, str | None]]
                 ) -> list[tuple[str, str, bytes | None, str | None]]:
    """The entries with one decision per released file (by the SHA-256 it records): a file
    approved again (a nightly re-check, a re-run) is one earlier release, the newest decision
    standing for it. Entries that cannot be read stay, each with its reason."""
    import json

    seen: set[str] = set()
    out = []
    for entry in entries:
        raw = entry[2]
        sha = None
        if raw is not None:
            try:
                doc = json.loads(raw)
                sha = next((str(i.get("sha256")) for i in doc.get("inputs") or []
                            if isinstance(i, dict) and i.get("name") == "released"), None)
            except (ValueError, AttributeError, TypeError, RecursionError):
                sha = None
        if sha is not None and sha in seen:
            continue
        if sha is not None:
            seen.add(sha)
        out.append(entry)
    return out


def load_lineage(gate: Gate, frames: Mapping[str, pd.DataFrame], options: Mapping[str, Any],
                 run_id: str, signer_pem: bytes | None = None) -> Lineage | None:
    """The :class:`Lineage` of this run for the ``composition`` family (None when the gate
    does not run it, or its tables are partitions). ``signer_pem``: the public key of the
    signer this gate signs with, under which earlier decisions must verify when
    ``composition.public_key`` names none."""
    from ..signing import SIGNATURE_SUFFIX, VerificationFailed, check_signature, read_decision

    if "composition" not in gate.measures:
        return None
    if not all(isinstance(frames.get(t), pd.DataFrame) for t in ("original", "released")):
        return None
    params = gate.measures["composition"]
    assert isinstance(params, CompositionParams)
    public_pem = signer_pem or None
    key_reason = None if public_pem else (
        "its decision cannot be verified: earlier decisions are composed only when their "
        "signature verifies; set composition.public_key (riskgate-signing.pub), or run the gate "
        "with its signer (RISKGATE_SIGNER_SOCKET or RISKGATE_SIGNING_KEY)")
    if params.public_key:
        try:
            public_pem = _read_bytes(params.public_key, options, 1 << 16)
            key_reason = None
        except (OSError, StorageError) as exc:
            key_reason = (f"composition.public_key ({params.public_key}) cannot be read: "
                          f"{redact_text(str(exc))[:200]}")
    roles = gate.config.role_spec
    kind, evidence = release_kind(frames, roles.measured_columns) if params.kind == "auto" \
        else (params.kind, ("as configured (composition.kind)",))
    kind_new = kind == "new"
    new = ReleaseTables(
        name="this release", released=frames["released"],
        quasi_identifiers=tuple(roles.quasi_identifiers), sensitive=tuple(roles.sensitive),
        generalization=dict(gate.config.generalization), tokens=tuple(gate.config.suppressed),
        original=frames["original"])
    earlier: list[ReleaseTables] = []
    notes: list[str] = []
    for name, url, raw, why in earlier_decisions(params, gate, options, run_id, notes):
        meta = {"decision": url}
        if why is None and key_reason is not None:
            why = key_reason
        if why is None and raw is not None:
            try:
                doc = read_decision(raw)
                assert public_pem is not None  # key_reason is set otherwise
                try:
                    signature = _read_bytes(url + SIGNATURE_SUFFIX, options, 1 << 16)
                except (OSError, StorageError):
                    signature = None
                check_signature(doc, signature, public_pem)
                meta["signature"] = "verified"
            except VerificationFailed as exc:
                why = f"its decision does not verify: {exc}"
            except InputError as exc:
                why = str(exc)
        if why is not None:
            earlier.append(ReleaseTables(name=name, released=pd.DataFrame(),
                                         quasi_identifiers=(), sensitive=(), meta=meta,
                                         reason=why))
            continue
        release = _release(name, url, doc, options, with_original=kind_new)
        earlier.append(ReleaseTables(**{**release.__dict__,
                                        "meta": {**release.meta, **meta}}))
    return Lineage(original=frames["original"], new=new, earlier=tuple(earlier),
                   control=frames.get("control"), storage_options=dict(options), kind=kind,
                   kind_evidence=tuple(evidence), notes=tuple(notes))


def release_kind(frames: Mapping[str, pd.DataFrame], columns: Sequence[str]
                 ) -> tuple[str, tuple[str, ...]]:
    """"kept" (the original's records: kept, a subsample, or a mixed release's linked ones)
    or "new" (synthetic rows), read from the data (:func:`riskcore.anatomy.diff`) on the
    measured columns, with its evidence."""
    from ..anatomy import diff

    def measured(df: pd.DataFrame) -> pd.DataFrame:
        return df[[c for c in columns if c in df.columns]]

    control = frames.get("control")
    release = diff(measured(frames["original"]), measured(frames["released"]),
                   measured(control) if isinstance(control, pd.DataFrame) else None)
    return ("new" if release.kind == "synthetic" else "kept"), release.evidence
