"""Open a report in headless Chromium, check what a reader sees, and take a screenshot.

Speaks the DevTools protocol over ``--remote-debugging-pipe`` (file descriptors 3 and 4), so it
needs no port, no web server and no Python package beyond the standard library: only a Chromium
binary (Debian's ``chromium``). Used by the report's browser test and by ``riskgate screenshot``
(the README's picture).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from riskcore.errors import ConfigError
from riskcore.processes import wait_or_kill

#: flags for a closed network and a root user
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync", "--disable-quic", "--hide-scrollbars",
                  "--mute-audio", "--disable-extensions")

_PAGE_JS = """(() => {
  const v = document.getElementById('verdict');
  const r = v ? v.getBoundingClientRect() : null;
  const st = v ? getComputedStyle(v) : null;
  const plots = [...document.querySelectorAll('figure.plot')].map(f => {
    const s = f.querySelector('svg');
    const b = s ? s.getBoundingClientRect() : {width: 0, height: 0};
    return {plot: f.dataset.plot || '', width: b.width, height: b.height,
            marks: s ? s.querySelectorAll('rect, circle, polyline, polygon').length : 0};
  });
  return JSON.stringify({
    title: document.title,
    verdict: v ? v.innerText : null,
    verdict_visible: !!(r && r.width > 0 && r.height > 0 && st.visibility !== 'hidden'
                        && st.display !== 'none' && r.top < window.innerHeight),
    plots: plots,
    scripts: document.scripts.length,
    height: Math.ceil(document.documentElement.scrollHeight),
  });
})()"""


@dataclass(frozen=True)
class PlotBox:
    """One ``figure.plot`` as laid out: its id, the SVG's size in CSS pixels, drawn marks."""

    plot: str
    width: float
    height: float
    marks: int


@dataclass(frozen=True)
class PageCheck:
    """What the browser saw."""

    title: str
    verdict: str | None
    verdict_visible: bool
    plots: tuple[PlotBox, ...]
    console_errors: tuple[str, ...]
    dialogs: tuple[str, ...]
    scripts: int
    page_height: int
    screenshot: str | None
    chromium: str

    def problems(self) -> list[str]:
        """Everything a reader would notice: errors, a hidden verdict, an empty plot."""
        out = [f"console error: {e}" for e in self.console_errors]
        out += [f"a dialog opened: {d}" for d in self.dialogs]
        if not self.verdict_visible:
            out.append("the verdict is not visible at the top of the page")
        out += [f"plot '{p.plot}' has no size ({p.width}x{p.height})" for p in self.plots
                if p.width <= 0 or p.height <= 0]
        out += [f"plot '{p.plot}' draws nothing" for p in self.plots if p.marks == 0]
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_chromium() -> str | None:
    """The Chromium binary: $RISKGATE_CHROMIUM, else chromium / chromium-browser on PATH."""
    env = os.environ.get("RISKGATE_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _high_fd(fd: int) -> int:
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class _Pipe:
    """A DevTools session over Chromium's pipe: JSON messages separated by NUL bytes."""

    def __init__(self, exe: str, user_data_dir: str, timeout: float) -> None:
        to_r, to_w = os.pipe()      # we write commands -> Chromium reads fd 3
        from_r, from_w = os.pipe()  # Chromium writes fd 4 -> we read
        # the child's ends go above 9 first, so that moving them to 3 and 4 cannot clobber
        to_r, from_w = _high_fd(to_r), _high_fd(from_w)
        # bash puts the pipes on fds 3 and 4 of the browser (no preexec_fn: safe with threads;
        # dash cannot redirect descriptors above 9)
        script = f'exec "$0" "$@" 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-'
        cmd = [shutil.which("bash") or "/bin/bash", "-c", script,
               exe, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}",
               "--remote-debugging-pipe", "about:blank"]
        # Chromium's own log goes to a file: an unread pipe could fill and stall the browser
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(to_r)
        os.close(from_w)
        self._w = to_w
        self._r = from_r
        self._timeout = timeout
        self._next = 0
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._inbox.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self._inbox.put(json.loads(msg))

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self._timeout
        while True:
            reply = self._get(deadline, method)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"Chromium refused {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, name: str, session: str | None) -> dict[str, Any]:
        for ev in self.events:
            if ev.get("method") == name and ev.get("sessionId") == session:
                return ev
        deadline = time.monotonic() + self._timeout
        while True:
            ev = self._get(deadline, name)
            self.events.append(ev)
            if ev.get("method") == name and ev.get("sessionId") == session:
                return ev

    def _get(self, deadline: float, what: str) -> dict[str, Any]:
        left = deadline - time.monotonic()
        try:
            item = self._inbox.get(timeout=max(left, 0.01))
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {what} within {self._timeout} s"
                               ) from None
        if item is None:
            self._log.seek(0)
            err = self._log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"Chromium exited while waiting for {what}: {err}")
        return item

    def close(self) -> None:
        try:
            os.write(self._w, json.dumps({"id": 10 ** 6, "method": "Browser.close"}
                                         ).encode() + b"\0")
        except OSError:
            pass
        wait_or_kill(self.proc, 10)
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()


def _console_errors(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    errors, dialogs = [], []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            errors.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append(p["entry"].get("text", ""))
        elif method == "Page.javascriptDialogOpening":
            dialogs.append(f"{p.get('type')}: {p.get('message')}")
    return errors, dialogs


def check_page(html_path: str | Path, screenshot: str | Path | None = None, *,
               width: int = 1280, height: int = 900, full_page: bool = True,
               max_height: int | None = None, top: int = 0, chromium: str | None = None,
               timeout: float = 60.0) -> PageCheck:
    """Load a local HTML file in headless Chromium and report what a reader would see.

    Args:
        html_path: the report file.
        screenshot: where to write a PNG (None: no screenshot).
        width, height: the viewport in CSS pixels (the verdict must be in the first screen).
        full_page: capture the whole page (up to ``max_height`` pixels), not only the viewport.
        top: the first page row of the screenshot (CSS pixels).
        chromium: the browser binary (default: :func:`find_chromium`).
    """
    exe = chromium or find_chromium()
    if not exe:
        raise ConfigError("Chromium is not installed: install Debian's 'chromium' package "
                          "(apt-get install chromium) or set RISKGATE_CHROMIUM to a binary")
    path = Path(html_path).resolve()
    if not path.is_file():
        raise ConfigError(f"'{html_path}' is not a file: give the path of a report.html")
    with tempfile.TemporaryDirectory(prefix="riskgate-chromium-") as profile:
        cdp = _Pipe(exe, profile, timeout)
        try:
            version = cdp.send("Browser.getVersion").get("product", "")
            target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True}
                               )["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                cdp.send(f"{domain}.enable", session=session)
            cdp.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1,
                      "mobile": False}, session=session)
            cdp.send("Page.navigate", {"url": path.as_uri()}, session=session)
            cdp.wait_event("Page.loadEventFired", session)
            value = cdp.send("Runtime.evaluate", {"expression": _PAGE_JS,
                                                  "returnByValue": True}, session=session)
            page = json.loads(value["result"]["value"])
            shot = None
            if screenshot is not None:
                top = max(0, min(top, page["height"] - 1))
                h = (page["height"] - top) if full_page else height
                if max_height:
                    h = min(h, max_height)
                cdp.send("Emulation.setDeviceMetricsOverride",
                         {"width": width, "height": top + h, "deviceScaleFactor": 1,
                          "mobile": False}, session=session)
                data = cdp.send("Page.captureScreenshot", {
                    "format": "png", "clip": {"x": 0, "y": top, "width": width, "height": h,
                                              "scale": 1}}, session=session)["data"]
                Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                Path(screenshot).write_bytes(base64.b64decode(data))
                shot = str(screenshot)
            # let late console messages arrive before reading them
            cdp.send("Runtime.evaluate", {"expression": "1"}, session=session)
            errors, dialogs = _console_errors(cdp.events)
        finally:
            cdp.close()
    return PageCheck(
        title=page["title"], verdict=page["verdict"], verdict_visible=page["verdict_visible"],
        plots=tuple(PlotBox(**p) for p in page["plots"]), console_errors=tuple(errors),
        dialogs=tuple(dialogs), scripts=int(page["scripts"]), page_height=int(page["height"]),
        screenshot=shot, chromium=version)
