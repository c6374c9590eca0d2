"""The report's figures (matplotlib, rendered to SVG and base64-encoded so report.html stands alone).
Each takes the evidence docs per host ({host: {"bench/bench.json": doc, ...}}) and returns None when
no host has the data."""
import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _svg(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _metric(docs, rel, *keys):
    out = {}
    for host, files in docs.items():
        value = files.get(rel, {}).get("metrics", {})
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            out[host] = value
    return out


def token_latency(docs):
    runs = _metric(docs, "bench/bench.json", "runs")
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, by_name in runs.items():
        for name, run in by_name.items():
            if "ms_per_token" in run:
                ax.plot(range(1, len(run["ms_per_token"]) + 1), run["ms_per_token"], marker="o",
                        label=f"{host} {name}")
    ax.set(xlabel="decode step", ylabel="ms per token", title="Per-token latency")
    ax.legend(fontsize=8)
    return _svg(fig)


def layer_error(docs):
    errors = _metric(docs, "m3/layers.json", "layer_rel_err")
    if not errors:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, values in errors.items():
        ax.semilogy(range(len(values)), [max(v, 1e-12) for v in values], marker="o", label=host)
    ax.set(xlabel="layer", ylabel="relative error of hidden state", title="M3 per-layer error vs HF eager")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    return _svg(fig)


def bandwidth(docs):
    benches = {h: f["bench/bench.json"]["metrics"] for h, f in docs.items() if "bench/bench.json" in f}
    if not benches:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    hosts = list(benches)
    achieved = [m["runs"][m["timed"]]["achieved_bytes_per_s"] / 1e9 for m in benches.values()]
    copy = [m["copy_bandwidth_bytes_per_s"] / 1e9 for m in benches.values()]
    x = range(len(hosts))
    ax.bar([i - 0.2 for i in x], achieved, width=0.4, label="achieved (weights / p50)")
    ax.bar([i + 0.2 for i in x], copy, width=0.4, label="measured copy bandwidth (floor)")
    ax.set_xticks(list(x), [f"{h}\n({benches[h]['timed']})" for h in hosts])
    ax.set(ylabel="GB/s", title="Bandwidth vs floor")
    ax.legend(fontsize=8)
    return _svg(fig)


def baselines(docs):
    runs = _metric(docs, "bench/bench.json", "runs")
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    labels, values = [], []
    for host, by_name in runs.items():
        for name, run in by_name.items():
            labels.append(f"{host}\n{name}")
            values.append(run["p50_ms"])
    ax.bar(labels, values)
    ax.set(ylabel="ms per token (p50, steps >= 2)", title="Baselines")
    return _svg(fig)


def figures(docs) -> dict:
    figures = {"Per-token latency": token_latency(docs), "Per-layer error (M3)": layer_error(docs),
               "Bandwidth vs floor": bandwidth(docs), "Baselines": baselines(docs)}
    return {title: svg for title, svg in figures.items() if svg is not None}
