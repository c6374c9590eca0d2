"""Every figure of the benchmark and the report (matplotlib, Agg backend), drawn in this one place.

From one run_bench result (docs/bench.md), PNG bytes, as `python -m fleet_decode.bench --plots DIR`
writes them:

    from fleet_decode.report import plots
    Path("latency.png").write_bytes(plots.latency_png(result))
    Path("bandwidth.png").write_bytes(plots.bandwidth_png(result))
    Path("context.png").write_bytes(plots.context_png(result))

From the evidence docs per host ({host: {"bench/bench.json": doc, ...}}), the report's figures as
base64 SVG (so report.html stands alone), each None when no host has the data: `figures(docs)`.
"""
import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator, NullFormatter  # noqa: E402

from fleet_decode.report.benches import host_bench  # noqa: E402


def _encoded(figure, format: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=format, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _svg(figure) -> str:
    return base64.b64encode(_encoded(figure, "svg")).decode()


def measured(result: dict):
    """(name, label, {length: entry}) of every contender of a run_bench result with at least one
    measured length."""
    for name, record in result["contenders"].items():
        entries = {int(length): e for length, e in record.get("lengths", {}).items() if "p50_ms" in e}
        if entries:
            yield name, record.get("label", name), entries


# ----------------------------------------------------------------------------- drawn from one bench result
# Each takes `host` to label its lines "<host> <contender>" where several hosts share the axes.

def _draw_steps(axis, result: dict, length: int, runs: int | None = None, host: str | None = None) -> None:
    """Milliseconds of each decode step of every run (or the first `runs`) per contender at one prompt
    length; the runs of one contender share its colour."""
    for name, label, entries in measured(result):
        color = None
        for run, step_ms in enumerate(entries.get(length, {}).get("step_ms", [])[:runs]):
            line, = axis.plot(range(len(step_ms)), step_ms, marker=".", alpha=0.8, color=color,
                              label=(f"{host} {name}" if host else label) if run == 0 else None)
            color = line.get_color()


def _draw_context(axis, result: dict, host: str | None = None) -> None:
    """P50 per token against prompt length per contender (with a bar to P95 where measured), and the
    floor's own growth."""
    for name, label, entries in measured(result):
        lengths = sorted(entries)
        p50 = [entries[L]["p50_ms"] for L in lengths]
        p95 = [entries[L].get("p95_ms") for L in lengths]
        above = None if None in p95 else [[0] * len(lengths), [b - a for a, b in zip(p50, p95)]]
        axis.errorbar(lengths, p50, yerr=above, marker="o", capsize=3, label=f"{host} {name}" if host else label)
    lengths = sorted(int(L) for L in result["prompt_lengths"])
    axis.plot(lengths, [result["lengths"][str(L)]["floor_ms"] for L in lengths], "k--",
              label=f"{host} floor" if host else "floor")


def _context_axes(axis, lengths) -> None:
    axis.set(xscale="log", yscale="log", xlabel="prompt length (tokens)",
             ylabel="ms per token (P50, bar to P95; log)", title="Cost against context length")
    axis.set_xticks(lengths, [str(L) for L in lengths])
    axis.xaxis.set_minor_formatter(NullFormatter())


def latency_png(result: dict, prompt_length: int | None = None) -> bytes:
    """Milliseconds of every decode step of every run, per contender, at one prompt length
    (default: the middle one); steps before `steady_from_step` are shaded as warm-up."""
    lengths = result["prompt_lengths"]
    length = prompt_length or lengths[len(lengths) // 2]
    figure, axis = plt.subplots(figsize=(8, 4.5))
    _draw_steps(axis, result, length)
    axis.axvspan(-0.5, result["steady_from_step"] - 0.5, color="0.9", label="warm-up steps (not in P50/P95)")
    axis.axhline(result["lengths"][str(length)]["floor_ms"], color="k", linestyle="--", label="floor (bytes / copy bandwidth)")
    axis.set(yscale="log", xlabel="decode step", ylabel="ms per token",
             title=f"Per-token latency after a {length}-token prompt ({result['environment'].get('gpu', result['environment']['device'])})")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)
    return _encoded(figure, "png")


def bandwidth_png(result: dict) -> bytes:
    """Achieved bandwidth (minimal bytes per token / P50) of each contender at each prompt length,
    against the copy bandwidth measured in the same run."""
    figure, axis = plt.subplots(figsize=(8, 4.5))
    contenders = list(measured(result))
    lengths = result["prompt_lengths"]
    width = 0.8 / max(len(contenders), 1)
    for i, (name, label, entries) in enumerate(contenders):
        values = [entries[L]["achieved_tb_s"] if L in entries else 0 for L in lengths]
        axis.bar([x + i * width for x in range(len(lengths))], values, width, label=label)
    axis.axhline(result["copy_bandwidth"]["bytes_per_s"] / 1e12, color="k", linestyle="--", label="device copy bandwidth")
    axis.set_xticks([x + width * (len(contenders) - 1) / 2 for x in range(len(lengths))], [f"prompt {L}" for L in lengths])
    axis.set(ylabel="TB/s (minimal bytes per token / P50)", title="Achieved bandwidth against the floor")
    axis.legend(fontsize=8)
    return _encoded(figure, "png")


def context_png(result: dict) -> bytes:
    """P50 ms per token against prompt length, per contender, with the floor's own growth."""
    figure, axis = plt.subplots(figsize=(8, 4.5))
    _draw_context(axis, result)
    _context_axes(axis, sorted(int(L) for L in result["prompt_lengths"]))
    axis.legend(fontsize=8)
    return _encoded(figure, "png")


# ----------------------------------------------------------------------------- the report's, over hosts

def _bench_metrics(files) -> dict:
    """A host's bench as the report reads it (report.benches: the baselines joined), shaped as the bench
    evidence's metrics: the headline's numbers (where one was timed) and the whole result under "bench"
    ({} without bench evidence)."""
    bench = host_bench(files)
    return {**(bench["headline"] or {}), "bench": bench["result"]} if bench else {}


def _bench_at_headline(docs):
    """{host: (metrics, {contender: its entry at the headline prompt length})} for measured ones."""
    out = {}
    for host, files in docs.items():
        metrics = _bench_metrics(files)
        if "prompt_length" not in metrics:  # nothing timed at the headline's length
            continue
        length = int(metrics["prompt_length"])
        out[host] = (metrics, {name: entries[length] for name, _, entries in measured(metrics["bench"])
                               if length in entries})
    return out


def token_latency(docs):
    benches = _bench_at_headline(docs)
    if not benches:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, (metrics, _) in benches.items():
        _draw_steps(ax, metrics["bench"], int(metrics["prompt_length"]), runs=1, host=host)
    # contenders differ by 10-20x: on a linear axis the fastest ones are a flat line at zero
    ax.set(xlabel="decode step (first run)", ylabel="ms per token (log)", title="Per-token latency", yscale="log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(fig)


def layer_error(docs):
    errors = {}
    for host, files in docs.items():
        metrics = files.get("m3/layers.json", {}).get("metrics", {})
        if "layer_rel_err_vs_exact" in metrics:
            errors[host] = metrics["layer_rel_err_vs_exact"]
            errors[f"{host} HF eager"] = metrics["hf_layer_rel_err_vs_exact"]
        elif "layer_rel_err" in metrics:  # evidence from before the exact gates: against HF eager
            errors[f"{host} (vs HF eager)"] = metrics["layer_rel_err"]
    if not errors:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, values in errors.items():
        ax.semilogy(range(len(values)), [max(v, 1e-12) for v in values], marker="o", label=host)
    ax.set(xlabel="layer", ylabel="relative error of hidden state", title="M3 per-layer error vs exact arithmetic")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    return _svg(fig)


def bandwidth(docs):
    benches = _bench_at_headline(docs)
    if not benches:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    hosts = list(benches)
    achieved = [benches[h][0]["achieved_tb_s"] * 1e3 for h in hosts]
    copy = [benches[h][0]["copy_bandwidth_bytes_per_s"] / 1e9 for h in hosts]
    x = range(len(hosts))
    ax.bar([i - 0.2 for i in x], achieved, width=0.4, label="achieved (bytes per token / p50)")
    ax.bar([i + 0.2 for i in x], copy, width=0.4, label="measured copy bandwidth (the floor)")
    ax.set_xticks(list(x), [f"{h}\n({benches[h][0]['timed']})" for h in hosts])
    ax.set(ylabel="GB/s", title="Bandwidth vs floor")
    ax.legend(fontsize=8)
    return _svg(fig)


def baselines(docs):
    benches = _bench_at_headline(docs)
    if not benches:
        return None
    labels, values = [], []
    for host, (_, entries) in benches.items():
        for name, entry in entries.items():
            labels.append(f"{host} {name}")
            values.append(entry["p50_ms"])
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.32 * len(labels)))
    ax.barh(labels, values)  # horizontal: the contenders' names stay readable
    for y, value in enumerate(values):
        ax.annotate(f"{value:.3g}", (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set(xlabel="ms per token (p50, steps >= 2; log)", title="Contenders", xscale="log")
    ax.invert_yaxis()
    return _svg(fig)


def context_scaling(docs):
    """P50 per token against prompt length for every contender of every host that measured two or
    more lengths, with that host's floor: how each one's cost grows with context."""
    benches = {host: _bench_metrics(files)["bench"] for host, files in docs.items()
               if len(_bench_metrics(files).get("bench", {}).get("prompt_lengths", [])) >= 2}
    if not benches:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, bench in benches.items():
        _draw_context(ax, bench, host=host)
    _context_axes(ax, sorted({int(L) for bench in benches.values() for L in bench["prompt_lengths"]}))
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(fig)


def figures(docs) -> dict:
    figures = {"Per-token latency": token_latency(docs), "Per-layer error (M3)": layer_error(docs),
               "Bandwidth vs floor": bandwidth(docs), "Baselines": baselines(docs),
               "Context scaling": context_scaling(docs)}
    return {title: svg for title, svg in figures.items() if svg is not None}
