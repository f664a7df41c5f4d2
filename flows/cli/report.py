"""``riskgate report`` (re-render a run's report) and ``riskgate screenshot`` (open a report in
headless Chromium, check it, save a PNG). Both take local paths or any fsspec URL."""

from __future__ import annotations

import argparse
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from riskcore.errors import InputError
from riskcore.storage import exists, is_local, join_url, read_bytes, write_bytes

from .common import add_storage_flag, console, out, storage_options

MAX_DOC_BYTES = 1 << 30


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    r = sub.add_parser("report", parents=[common],
                       help="re-render report.html from a run folder's JSON outputs")
    r.add_argument("run_dir", help="folder holding decision.json (local path or fsspec URL)")
    r.add_argument("--out", help="where to write the HTML (default "
                   "RUN_DIR/report.rerendered.html)")
    r.add_argument("--report-detail", choices=["summary", "full"], default=None,
                   dest="report_detail", help="'full' shows the example values the run "
                   "recorded (quasi-identifiers only); default: the run's own setting")
    r.add_argument("--json", action="store_true", help="print where the report went as JSON")
    add_storage_flag(r)
    r.set_defaults(handler=cmd_report)

    sc = sub.add_parser("screenshot", parents=[common],
                        help="open a report in headless Chromium: check it and save a PNG",
                        description="Load report.html in headless Chromium (Debian's chromium), "
                        "check that the verdict is visible, every plot has a size and the "
                        "console has no error, and save a screenshot. Exit 1 if a reader would "
                        "see a problem.")
    sc.add_argument("report", help="a report.html, a run folder, or a release folder (its "
                    "latest run); local path or fsspec URL")
    sc.add_argument("--out", default="report.png", help="PNG file (default report.png)")
    sc.add_argument("--width", type=int, default=1280, help="viewport width in CSS pixels")
    sc.add_argument("--max-height", type=int, default=None, dest="max_height",
                    help="crop the full-page screenshot to this many pixels")
    sc.add_argument("--json", action="store_true", help="print what the browser saw as JSON")
    add_storage_flag(sc)
    sc.set_defaults(handler=cmd_screenshot)


def _read_json(run_dir: str, name: str, options: dict[str, Any]) -> Any:
    url = join_url(run_dir, name)
    if not exists(url, options, what="run folder"):
        return None
    return json.loads(read_bytes(url, options, max_bytes=MAX_DOC_BYTES,
                                 what=name).data.decode("utf-8"))


def cmd_report(args: argparse.Namespace) -> int:
    import pandas as pd

    from riskcore.gate.outputs import report_html

    options = storage_options(args)
    decision = _read_json(args.run_dir, "decision.json", options)
    if decision is None:
        raise InputError(f"no decision.json in '{args.run_dir}': not a finished gate run")
    measures = (_read_json(args.run_dir, "measures.json", options) or {}).get("measures", [])
    per_record = None
    pr_url = join_url(args.run_dir, "per_record.parquet")
    if exists(pr_url, options):
        per_record = pd.read_parquet(io.BytesIO(read_bytes(
            pr_url, options, max_bytes=MAX_DOC_BYTES, what="per_record.parquet").data))
    detail = args.report_detail or (decision.get("config") or {}).get("report", {}).get(
        "detail", "summary")
    examples = _read_json(args.run_dir, "examples.json", options) if detail == "full" else None
    if detail == "full" and examples is None:
        console.print("[yellow]note:[/] this run recorded no example values (examples.json); "
                      "run the gate with --report-detail full to record them")
    html = report_html(decision, measures, _read_json(args.run_dir, "validation.json",
                                                      options), per_record, detail, examples)
    target = args.out or join_url(args.run_dir, "report.rerendered.html")
    write_bytes(target, html, options, overwrite=True)
    if args.json:
        print(json.dumps({"report_url": target, "detail": detail,
                          "verdict": decision.get("verdict"), "bytes": len(html)}, indent=2))
    else:
        out.print(f"report written to {target}")
    return 0


def find_report(path: str) -> Path:
    """A report.html itself, the one of a run folder, or that of a release folder's latest run
    (by its decision.json's finish time)."""
    p = Path(path)
    if p.is_file():
        return p
    if (p / "report.html").is_file():
        return p / "report.html"
    runs = []
    for d in p.glob("*/decision.json") if p.is_dir() else []:
        if (d.parent / "report.html").is_file():
            finished = json.loads(d.read_text(encoding="utf-8")).get("finished_at", "")
            runs.append((finished, d.stat().st_mtime, d.parent / "report.html"))
    if not runs:
        raise InputError(f"no report.html in '{path}' nor in a run folder under it: give a "
                         "report file, a run folder or a release folder")
    return max(runs)[2]


def cmd_screenshot(args: argparse.Namespace) -> int:
    from ..browser import check_page

    options = storage_options(args)
    with tempfile.TemporaryDirectory() as tmp:
        if is_local(args.report):
            report = find_report(args.report)
        else:
            url = args.report if args.report.endswith(".html") else join_url(args.report,
                                                                              "report.html")
            report = Path(tmp) / "report.html"
            report.write_bytes(read_bytes(url, options, max_bytes=MAX_DOC_BYTES,
                                          what="report").data)
        with console.status(f"opening {report} in headless Chromium..."):
            page = check_page(report, args.out, width=args.width, max_height=args.max_height)
    problems = page.problems()
    if args.json:
        print(json.dumps({**page.to_dict(), "report": str(args.report), "problems": problems},
                         indent=2))
    else:
        out.print(f"{args.report}: verdict {page.verdict}, {len(page.plots)} plots, page "
                  f"{page.page_height} px high ({page.chromium})", soft_wrap=True)
        out.print(f"screenshot: {page.screenshot}", soft_wrap=True)
        for p in problems:
            out.print(f"[red]problem:[/] {p}")
    return 1 if problems else 0
