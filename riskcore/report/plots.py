"""Inline SVG plots for the report: no JavaScript, no network, every label escaped.

Each function returns one ``<figure class="plot" data-plot="ID">`` holding an ``<svg>`` with a
``<title>`` (read by screen readers and shown as a tooltip) and a caption. Sizes are fixed in
pixels so that the page lays out the same everywhere; numbers are formatted here, data values
never reach a plot (only counts, rates and column names).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup
from markupsafe import escape as _escape

from ..redact import visible

INK = "#1d2330"
GRID = "#e3e7ef"
MUTED = "#5b6475"
BAR = "#3b5b8c"
BAD = "#b42318"
WARN = "#b7791f"
GOOD = "#1b7f3b"
SERIES = {"attack": "#b42318", "baseline": "#2563eb", "control": "#6b7280", "risk": "#1d2330"}
FONT = 'font-family="system-ui, sans-serif"'


def escape(text: object) -> Markup:
    """HTML-escaped text with control and bidirectional-override characters made visible
    (markup passes unchanged)."""
    if hasattr(text, "__html__"):
        return _escape(text)
    return _escape(visible(str(text)))


@dataclass(frozen=True)
class Frame:
    """The plotting area inside an SVG of ``width`` x ``height`` pixels."""

    width: int
    height: int
    left: int = 56
    right: int = 16
    top: int = 14
    bottom: int = 46

    @property
    def x0(self) -> float:
        return float(self.left)

    @property
    def x1(self) -> float:
        return float(self.width - self.right)

    @property
    def y0(self) -> float:  # bottom of the plotting area
        return float(self.height - self.bottom)

    @property
    def y1(self) -> float:
        return float(self.top)


def _f(x: float) -> str:
    return f"{x:.1f}"


def _text(x: float, y: float, s: object, *, anchor: str = "middle", size: int = 11,
          colour: str = INK, extra: str = "") -> str:
    return (f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{colour}" {FONT} {extra}>{escape(str(s))}</text>')


def _figure(plot_id: str, title: str, frame: Frame, body: str, caption: str | None = None
            ) -> Markup:
    cap = escape(caption if caption is not None else title)
    return Markup(
        f'<figure class="plot" data-plot="{escape(plot_id)}">'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{frame.height}" '
        f'viewBox="0 0 {frame.width} {frame.height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
        f'<figcaption>{cap}</figcaption></figure>')


def nice_ticks(top: float, n: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (steps of 1, 2 or 5 times a power of 10)."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    count = int(math.ceil(top / step - 1e-9))
    return [i * step for i in range(count + 1)]


def _tick_label(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:.3g}"


def _y_axis(frame: Frame, ticks: Sequence[float], scale, label: str,
            fmt=_tick_label) -> str:
    parts = []
    for t in ticks:
        y = scale(t)
        parts.append(f'<line x1="{_f(frame.x0)}" x2="{_f(frame.x1)}" y1="{_f(y)}" y2="{_f(y)}" '
                     f'stroke="{GRID}"/>')
        parts.append(_text(frame.x0 - 6, y + 4, fmt(t), anchor="end", size=10, colour=MUTED))
    mid = (frame.y0 + frame.y1) / 2
    parts.append(_text(12, mid, label, size=11, colour=MUTED,
                       extra=f'transform="rotate(-90 12 {_f(mid)})"'))
    return "".join(parts)


def _x_label(frame: Frame, label: str) -> str:
    return _text((frame.x0 + frame.x1) / 2, frame.height - 6, label, size=11, colour=MUTED)


def bar_chart(plot_id: str, title: str, labels: Sequence[str], values: Sequence[float], *,
              xlabel: str, ylabel: str, highlight: Sequence[bool] | None = None,
              width: int = 520, height: int = 240, caption: str | None = None) -> Markup:
    """Vertical bars, one per label; highlighted bars are drawn in the alarm colour."""
    frame = Frame(width, height, top=22)
    top = max([float(v) for v in values] + [0.0])
    ticks = nice_ticks(top * 1.08 if top > 0 else 1.0)
    ymax = ticks[-1]

    def sy(v: float) -> float:
        return frame.y0 - (frame.y0 - frame.y1) * (v / ymax)

    n = max(len(values), 1)
    slot = (frame.x1 - frame.x0) / n
    bw = max(slot * 0.72, 1.0)
    body = [_y_axis(frame, ticks, sy, ylabel)]
    for i, (lab, v) in enumerate(zip(labels, values)):
        x = frame.x0 + i * slot + (slot - bw) / 2
        y = sy(float(v))
        if float(v) > 0:  # a small non-zero count stays visible
            y = min(y, frame.y0 - 2.0)
        colour = BAD if highlight is not None and highlight[i] else BAR
        body.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(bw)}" '
                    f'height="{_f(max(frame.y0 - y, 0.0))}" fill="{colour}">'
                    f'<title>{escape(str(lab))}: {escape(_tick_label(float(v)))}</title></rect>')
        if n <= 16:
            body.append(_text(x + bw / 2, frame.y0 + 14, lab, size=10, colour=MUTED))
            if float(v) > 0:
                body.append(_text(x + bw / 2, y - 3, _tick_label(float(v)), size=9,
                                  colour=BAD if colour == BAD else MUTED))
    if n > 16:  # too many for every label: first, middle, last
        for i in (0, n // 2, n - 1):
            body.append(_text(frame.x0 + (i + 0.5) * slot, frame.y0 + 14, labels[i], size=10,
                              colour=MUTED))
    body.append(f'<line x1="{_f(frame.x0)}" x2="{_f(frame.x1)}" y1="{_f(frame.y0)}" '
                f'y2="{_f(frame.y0)}" stroke="{INK}"/>')
    body.append(_x_label(frame, xlabel))
    return _figure(plot_id, title, frame, "".join(body), caption)


def hbar_chart(plot_id: str, title: str, labels: Sequence[str], values: Sequence[float], *,
               xlabel: str, width: int = 520, caption: str | None = None) -> Markup:
    """Horizontal bars (long labels such as column names), largest first as given."""
    row = 22
    label_w = min(200, 12 + 7 * max((len(str(lab)) for lab in labels), default=4))
    frame = Frame(width, 30 + row * max(len(values), 1) + 24, left=label_w, top=10, bottom=40)
    top = max([float(v) for v in values] + [0.0])
    ticks = nice_ticks(top if top > 0 else 1.0, 4)
    xmax = ticks[-1]

    def sx(v: float) -> float:
        return frame.x0 + (frame.x1 - frame.x0) * (v / xmax)

    body = []
    for t in ticks:
        x = sx(t)
        body.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(frame.y1)}" y2="{_f(frame.y0)}" '
                    f'stroke="{GRID}"/>')
        body.append(_text(x, frame.y0 + 14, _tick_label(t), size=10, colour=MUTED))
    for i, (lab, v) in enumerate(zip(labels, values)):
        y = frame.y1 + 6 + i * row
        body.append(_text(frame.x0 - 6, y + 12, lab, anchor="end", size=11))
        body.append(f'<rect x="{_f(frame.x0)}" y="{_f(y)}" width="{_f(sx(float(v)) - frame.x0)}" '
                    f'height="16" fill="{BAR}"><title>{escape(str(lab))}: '
                    f'{escape(_tick_label(float(v)))}</title></rect>')
    body.append(_x_label(frame, xlabel))
    return _figure(plot_id, title, frame, "".join(body), caption)


@dataclass(frozen=True)
class Whisker:
    """One estimate with its interval, e.g. the attack's success rate and its 95 % bounds."""

    series: str  # attack | baseline | control | risk
    value: float
    low: float
    high: float


def dot_whisker(plot_id: str, title: str, rows: Sequence[tuple[str, Sequence[Whisker]]], *,
                xlabel: str = "rate", width: int = 620, caption: str | None = None) -> Markup:
    """Rows of estimates with intervals on a 0..1 axis (Anonymeter's main/baseline/control)."""
    per = 14
    heights = [max(len(ws), 1) * per + 12 for _, ws in rows]
    label_w = min(190, 14 + 7 * max((len(lab) for lab, _ in rows), default=4))
    frame = Frame(width, 16 + sum(heights) + 64, left=label_w, top=10, bottom=62)

    def sx(v: float) -> float:
        return frame.x0 + (frame.x1 - frame.x0) * min(max(v, 0.0), 1.0)

    body = []
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = sx(t)
        body.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(frame.y1)}" y2="{_f(frame.y0)}" '
                    f'stroke="{GRID}"/>')
        body.append(_text(x, frame.y0 + 14, f"{t:g}", size=10, colour=MUTED))
    y = frame.y1 + 6
    for (lab, ws), h in zip(rows, heights):
        body.append(_text(frame.x0 - 8, y + h / 2 + 2, lab, anchor="end", size=11))
        for j, w in enumerate(ws):
            yy = y + 6 + j * per
            colour = SERIES.get(w.series, INK)
            body.append(f'<line x1="{_f(sx(w.low))}" x2="{_f(sx(w.high))}" y1="{_f(yy)}" '
                        f'y2="{_f(yy)}" stroke="{colour}" stroke-width="2"/>')
            shape = (f'<rect x="{_f(sx(w.value) - 4)}" y="{_f(yy - 4)}" width="8" height="8" '
                     f'fill="{colour}">' if w.series == "risk" else
                     f'<circle cx="{_f(sx(w.value))}" cy="{_f(yy)}" r="4" fill="{colour}">')
            close = "</rect>" if w.series == "risk" else "</circle>"
            body.append(f'{shape}<title>{escape(lab)} {escape(w.series)}: {w.value:.4f} '
                        f'[{w.low:.4f}, {w.high:.4f}]</title>{close}')
        y += h
    body.append(_x_label(frame, xlabel))
    lx = frame.x0
    for name in ("attack", "baseline", "control", "risk"):
        body.append(f'<circle cx="{_f(lx)}" cy="{_f(frame.y0 + 30)}" r="4" '
                    f'fill="{SERIES[name]}"/>')
        body.append(_text(lx + 8, frame.y0 + 34, name, anchor="start", size=10))
        lx += 80
    return _figure(plot_id, title, frame, "".join(body), caption)


def alc_scatter(plot_id: str, title: str,
                points: Sequence[tuple[str, float, float, str]], *, width: int = 420,
                caption: str | None = None) -> Markup:
    """Attack PRC against base PRC, one dot per attack, with the ALC bands of the ALC paper.

    ``points`` are (label, base PRC, attack PRC, band). The lines are ALC = 0, 0.5 and 0.75,
    i.e. PRC_attack = PRC_base + a (1 - PRC_base): above 0.75 is serious, 0.5-0.75 at risk.
    """
    frame = Frame(width, width, left=52, right=16, top=14, bottom=44)

    def sx(v: float) -> float:
        return frame.x0 + (frame.x1 - frame.x0) * min(max(v, 0.0), 1.0)

    def sy(v: float) -> float:
        return frame.y0 - (frame.y0 - frame.y1) * min(max(v, 0.0), 1.0)

    def line_at(a: float) -> list[tuple[float, float]]:
        return [(0.0, a), (1.0, 1.0)]

    body = []
    serious = [(0.0, 0.75), (1.0, 1.0), (0.0, 1.0)]
    at_risk = [(0.0, 0.5), (1.0, 1.0), (0.0, 0.75)]
    for poly, colour in ((at_risk, "#fdf3e1"), (serious, "#fde8e7")):
        pts = " ".join(f"{_f(sx(x))},{_f(sy(y))}" for x, y in poly)
        body.append(f'<polygon points="{pts}" fill="{colour}"/>')
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        body.append(f'<line x1="{_f(sx(t))}" x2="{_f(sx(t))}" y1="{_f(frame.y1)}" '
                    f'y2="{_f(frame.y0)}" stroke="{GRID}"/>')
        body.append(f'<line x1="{_f(frame.x0)}" x2="{_f(frame.x1)}" y1="{_f(sy(t))}" '
                    f'y2="{_f(sy(t))}" stroke="{GRID}"/>')
        body.append(_text(sx(t), frame.y0 + 14, f"{t:g}", size=10, colour=MUTED))
        body.append(_text(frame.x0 - 6, sy(t) + 4, f"{t:g}", anchor="end", size=10,
                          colour=MUTED))
    for a, colour, name in ((0.0, MUTED, "ALC 0"), (0.5, WARN, "ALC 0.5"),
                            (0.75, BAD, "ALC 0.75")):
        (xa, ya), (xb, yb) = line_at(a)
        body.append(f'<line x1="{_f(sx(xa))}" y1="{_f(sy(ya))}" x2="{_f(sx(xb))}" '
                    f'y2="{_f(sy(yb))}" stroke="{colour}" stroke-dasharray="4 3"/>')
        body.append(_text(sx(0.02), sy(ya) - 4, name, anchor="start", size=10, colour=colour))
    for lab, base, attack, band in points:
        colour = {"serious": BAD, "at_risk": WARN, "safe": GOOD}.get(band, MUTED)
        body.append(f'<circle cx="{_f(sx(base))}" cy="{_f(sy(attack))}" r="5" fill="{colour}" '
                    f'stroke="#fff"><title>{escape(lab)}: base {base:.3f}, attack {attack:.3f} '
                    f'({escape(band)})</title></circle>')
    body.append(_x_label(frame, "base PRC (baseline attack)"))
    mid = (frame.y0 + frame.y1) / 2
    body.append(_text(12, mid, "attack PRC", size=11, colour=MUTED,
                      extra=f'transform="rotate(-90 12 {_f(mid)})"'))
    return _figure(plot_id, title, frame, "".join(body), caption)


def _log_axes(frame: Frame, e0: int, ticks: Sequence[float]
              ) -> tuple[Callable[[float], float], Callable[[float], float], list[str]]:
    """A rate (log, 10^e0 to 1) against a share (0 to 1): the two scales and the grid, with
    a label at each power of ten and each of ``ticks``."""
    def sx(r: float) -> float:
        r = max(r, 10.0 ** e0)
        return frame.x0 + (frame.x1 - frame.x0) * (math.log10(r) - e0) / (0 - e0)

    def sy(p: float) -> float:
        return frame.y0 - (frame.y0 - frame.y1) * min(max(p, 0.0), 1.0)

    body = []
    for e in range(e0, 1):
        x = sx(10.0 ** e)
        body.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(frame.y1)}" y2="{_f(frame.y0)}" '
                    f'stroke="{GRID}"/>')
        body.append(_text(x, frame.y0 + 14, f"{10.0 ** e:g}", size=10, colour=MUTED))
    for t in ticks:
        body.append(f'<line x1="{_f(frame.x0)}" x2="{_f(frame.x1)}" y1="{_f(sy(t))}" '
                    f'y2="{_f(sy(t))}" stroke="{GRID}"/>')
        body.append(_text(frame.x0 - 6, sy(t) + 4, f"{t:g}", anchor="end", size=10,
                          colour=MUTED))
    return sx, sy, body


def pr_curves(plot_id: str, title: str,
              series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *,
              r_min: float = 1e-4, width: int = 300, height: int = 220,
              caption: str | None = None) -> Markup:
    """Precision against recall (log axis) for the attack and the baseline of one ALC attack."""
    frame = Frame(width, height, left=44, right=10, top=12, bottom=56)
    lo = min([r for _, rs, _ in series for r in rs if r > 0] + [1.0])
    lo = max(min(lo, 0.1), r_min)
    e0 = math.floor(math.log10(lo))
    sx, sy, body = _log_axes(frame, e0, (0.0, 0.5, 1.0))
    for name, recalls, precisions in series:
        colour = SERIES.get(name, INK)
        pts = sorted(zip(recalls, precisions))
        if not pts:
            continue
        path = " ".join(f"{_f(sx(r))},{_f(sy(p))}" for r, p in pts)
        dash = ' stroke-dasharray="5 3"' if name == "baseline" else ""
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                    f'stroke-width="2"{dash}><title>{escape(name)}</title></polyline>')
    body.append(_text((frame.x0 + frame.x1) / 2, frame.y0 + 30, "recall (log)", size=11,
                      colour=MUTED))
    lx = frame.x0
    for name in ("attack", "baseline"):
        dash = ' stroke-dasharray="5 3"' if name == "baseline" else ""
        body.append(f'<line x1="{_f(lx)}" x2="{_f(lx + 18)}" y1="{_f(frame.y0 + 44)}" '
                    f'y2="{_f(frame.y0 + 44)}" stroke="{SERIES[name]}" stroke-width="2"{dash}/>')
        body.append(_text(lx + 22, frame.y0 + 48, name, anchor="start", size=10))
        lx += 90
    mid = (frame.y0 + frame.y1) / 2
    body.append(_text(10, mid, "precision", size=11, colour=MUTED,
                      extra=f'transform="rotate(-90 10 {_f(mid)})"'))
    return _figure(plot_id, title, frame, "".join(body), caption)


ROC_COLOURS = ("#b42318", "#2563eb", "#1b7f3b", "#b7791f", "#6b21a8", "#0e7490")


def roc_curves(plot_id: str, title: str,
               series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *,
               fpr_min: float = 1e-3, width: int = 360, height: int = 260,
               caption: str | None = None,
               epsilon_lines: Sequence[tuple[str, float, float]] = (),
               point: tuple[float, float] | None = None) -> Markup:
    """True-positive rate against false-positive rate on a log axis (the low-FPR regime that
    matters for membership, Carlini et al. 2022), one line per attack, chance dashed; each
    ``epsilon_lines`` entry (label, epsilon, delta) dotted: TPR = e^epsilon FPR + delta, the
    most an (epsilon, delta)-DP mechanism allows (an attack above it refutes that epsilon);
    ``point`` (FPR, TPR) marks the test the audit counted."""
    frame = Frame(width, height, left=44, right=10, top=12, bottom=70)
    e0 = math.floor(math.log10(fpr_min))
    sx, sy, body = _log_axes(frame, e0, (0.0, 0.25, 0.5, 0.75, 1.0))
    chance = " ".join(f"{_f(sx(10.0 ** (e0 + i * (0 - e0) / 40)))},"
                      f"{_f(sy(10.0 ** (e0 + i * (0 - e0) / 40)))}" for i in range(41))
    body.append(f'<polyline points="{chance}" fill="none" stroke="{MUTED}" '
                f'stroke-dasharray="4 3"><title>chance</title></polyline>')
    for label, eps, delta in epsilon_lines:
        steps = [10.0 ** (e0 + i * (0 - e0) / 60) for i in range(61)]
        line = " ".join(f"{_f(sx(r))},{_f(sy(min(1.0, math.exp(eps) * r + delta)))}"
                        for r in steps)
        body.append(f'<polyline points="{line}" fill="none" stroke="{INK}" '
                    f'stroke-dasharray="1 3" stroke-width="1.5"><title>{escape(label)}'
                    '</title></polyline>')
        r_end = min(1.0, max(10.0 ** e0, (1.0 - delta) / math.exp(eps)))
        body.append(_text(sx(r_end) - 2, sy(min(1.0, math.exp(eps) * r_end + delta)) - 4,
                          label, anchor="end", size=10, colour=INK))
    if point is not None:
        body.append(f'<circle cx="{_f(sx(point[0]))}" cy="{_f(sy(point[1]))}" r="4" '
                    f'fill="none" stroke="{INK}" stroke-width="2"><title>the test the '
                    'epsilon bound counted</title></circle>')
    for i, (name, fpr, tpr) in enumerate(series):
        colour = ROC_COLOURS[i % len(ROC_COLOURS)]
        pts = [(f, t) for f, t in zip(fpr, tpr) if f >= 10.0 ** e0 or t == 0]
        if not pts:
            continue
        path = " ".join(f"{_f(sx(f))},{_f(sy(t))}" for f, t in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                    f'stroke-width="2"><title>{escape(name)}</title></polyline>')
        lx = frame.x0 + (i % 3) * 104
        ly = frame.y0 + 40 + (i // 3) * 14
        body.append(f'<line x1="{_f(lx)}" x2="{_f(lx + 14)}" y1="{_f(ly - 4)}" '
                    f'y2="{_f(ly - 4)}" stroke="{colour}" stroke-width="2"/>')
        body.append(_text(lx + 18, ly, name, anchor="start", size=10))
    body.append(_text((frame.x0 + frame.x1) / 2, frame.y0 + 27, "false-positive rate (log)",
                      size=11, colour=MUTED))
    mid = (frame.y0 + frame.y1) / 2
    body.append(_text(10, mid, "true-positive rate", size=11, colour=MUTED,
                      extra=f'transform="rotate(-90 10 {_f(mid)})"'))
    return _figure(plot_id, title, frame, "".join(body), caption)


@dataclass(frozen=True)
class RUPoint:
    """One point of the risk-utility map: a run (or the control) and its two figures."""

    label: str
    utility: float
    risk: float
    kind: str  # "release" (this run), "control" (the yardstick) or "earlier" (a past run)


def ru_map(plot_id: str, title: str, points: Sequence[RUPoint], *, risk_label: str,
           utility_label: str, risk_max: float | None = None, utility_min: float | None = None,
           width: int = 420, caption: str | None = None) -> Markup:
    """Duncan et al.'s R-U confidentiality map: data utility across, disclosure risk up; the
    policy's bounds dashed (the acceptable corner is bottom right)."""
    frame = Frame(width, 300, left=52, right=16, top=14, bottom=44)
    us = [p.utility for p in points] + ([utility_min] if utility_min is not None else [])
    rs = [p.risk for p in points] + ([risk_max] if risk_max is not None else [])
    u0 = min(0.5, math.floor(10 * (min(us) - 0.02)) / 10) if us else 0.0
    u0 = max(0.0, u0)
    rticks = nice_ticks(max(max(rs, default=0.0) * 1.15, 0.05), 4)
    r1 = rticks[-1]

    def sx(u: float) -> float:
        return frame.x0 + (frame.x1 - frame.x0) * (min(max(u, u0), 1.0) - u0) / (1.0 - u0)

    def sy(r: float) -> float:
        return frame.y0 - (frame.y0 - frame.y1) * min(max(r, 0.0), r1) / r1

    body = [_y_axis(frame, rticks, sy, risk_label)]
    steps = 5
    for i in range(steps + 1):
        u = u0 + (1.0 - u0) * i / steps
        body.append(f'<line x1="{_f(sx(u))}" x2="{_f(sx(u))}" y1="{_f(frame.y1)}" '
                    f'y2="{_f(frame.y0)}" stroke="{GRID}"/>')
        body.append(_text(sx(u), frame.y0 + 14, f"{u:.2g}", size=10, colour=MUTED))
    if risk_max is not None:
        body.append(f'<line x1="{_f(frame.x0)}" x2="{_f(frame.x1)}" y1="{_f(sy(risk_max))}" '
                    f'y2="{_f(sy(risk_max))}" stroke="{BAD}" stroke-dasharray="4 3">'
                    f'<title>policy: risk at most {risk_max:g}</title></line>')
    if utility_min is not None:
        body.append(f'<line x1="{_f(sx(utility_min))}" x2="{_f(sx(utility_min))}" '
                    f'y1="{_f(frame.y1)}" y2="{_f(frame.y0)}" stroke="{BAD}" '
                    f'stroke-dasharray="4 3"><title>policy: utility at least {utility_min:g}'
                    f'</title></line>')
    style = {"release": (BAR, 7), "control": (GOOD, 6), "earlier": (MUTED, 4)}
    for p in sorted(points, key=lambda p: {"earlier": 0, "control": 1, "release": 2}[p.kind]):
        colour, r = style.get(p.kind, (MUTED, 4))
        shape = (f'<rect x="{_f(sx(p.utility) - r)}" y="{_f(sy(p.risk) - r)}" '
                 f'width="{2 * r}" height="{2 * r}" fill="{colour}" stroke="#fff"'
                 if p.kind == "control" else
                 f'<circle cx="{_f(sx(p.utility))}" cy="{_f(sy(p.risk))}" r="{r}" '
                 f'fill="{colour}" stroke="#fff"')
        body.append(f'{shape}><title>{escape(p.label)}: utility {p.utility:.4f}, risk '
                    f'{p.risk:.4f}</title>{"</rect>" if p.kind == "control" else "</circle>"}')
        if p.kind != "earlier":
            body.append(_text(sx(p.utility) - 9, sy(p.risk) + 4, p.label, anchor="end",
                              size=10, colour=colour))
    body.append(_x_label(frame, utility_label))
    return _figure(plot_id, title, frame, "".join(body), caption)
