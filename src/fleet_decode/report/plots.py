"""The report's figures (matplotlib, rendered to SVG and base64-encoded so report.html stands alone).
Each takes the evidence docs per host ({host: {"bench/bench.json": doc, ...}}) and returns None when
no host has the data."""
import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator, NullFormatter  # noqa: E402


def _svg(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _bench_metrics(files) -> dict:
    """A host's bench evidence metrics ({} without one)."""
    return files.get("bench/bench.json", {}).get("metrics", {})


def _bench_at_headline(docs):
    """{host: (metrics, {contender: its entry at the headline prompt length})} for measured ones."""
    out = {}
    for host, files in docs.items():
        metrics = _bench_metrics(files)
        if "bench" not in metrics:
            continue
        length = str(metrics["prompt_length"])
        entries = {name: record["lengths"][length] for name, record in metrics["bench"]["contenders"].items()
                   if "p50_ms" in record.get("lengths", {}).get(length, {})}
        out[host] = (metrics, entries)
    return out


def token_latency(docs):
    benches = _bench_at_headline(docs)
    if not benches:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, (metrics, entries) in benches.items():
        for name, entry in entries.items():
            first_run = entry["step_ms"][0]
            ax.plot(range(len(first_run)), first_run, marker="o", label=f"{host} {name}")
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
    hosts = []
    for host, files in docs.items():
        bench = _bench_metrics(files).get("bench", {})
        lengths = sorted(int(length) for length in bench.get("prompt_lengths", []))
        if len(lengths) >= 2:
            hosts.append((host, bench, lengths))
    if not hosts:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for host, bench, lengths in hosts:
        for name, record in bench["contenders"].items():
            points = [(length, record["lengths"][str(length)]["p50_ms"]) for length in lengths
                      if "p50_ms" in record.get("lengths", {}).get(str(length), {})]
            if points:
                ax.plot(*zip(*points), marker="o", label=f"{host} {name}")
        ax.plot(lengths, [bench["lengths"][str(length)]["floor_ms"] for length in lengths], "k--",
                label=f"{host} floor")
    ticks = sorted({length for _, _, lengths in hosts for length in lengths})
    ax.set(xscale="log", yscale="log", xlabel="prompt length (tokens)", ylabel="ms per token (P50, log)",
           title="Cost against context length")
    ax.set_xticks(ticks, [str(length) for length in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(fig)


def figures(docs) -> dict:
    figures = {"Per-token latency": token_latency(docs), "Per-layer error (M3)": layer_error(docs),
               "Bandwidth vs floor": bandwidth(docs), "Baselines": baselines(docs),
               "Context scaling": context_scaling(docs)}
    return {title: svg for title, svg in figures.items() if svg is not None}
