"""Report plots drawn from a run_bench result; each function returns PNG bytes (Agg backend).

    from fleet_decode.bench import plots
    Path("latency.png").write_bytes(plots.latency_png(result))
    Path("bandwidth.png").write_bytes(plots.bandwidth_png(result))
    Path("context.png").write_bytes(plots.context_png(result))
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator, NullFormatter  # noqa: E402


def measured(result: dict):
    """(name, label, {length: entry}) of every contender with at least one measured length."""
    for name, record in result["contenders"].items():
        entries = {int(length): e for length, e in record["lengths"].items() if "p50_ms" in e}
        if entries:
            yield name, record.get("label", name), entries


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def latency_png(result: dict, prompt_length: int | None = None) -> bytes:
    """Milliseconds of every decode step of every run, per contender, at one prompt length
    (default: the middle one); steps before `steady_from_step` are shaded as warm-up."""
    lengths = result["prompt_lengths"]
    length = prompt_length or lengths[len(lengths) // 2]
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for name, label, entries in measured(result):
        if length not in entries:
            continue
        for run, step_ms in enumerate(entries[length]["step_ms"]):
            axis.plot(range(len(step_ms)), step_ms, marker=".", alpha=0.8,
                      color=f"C{list(result['contenders']).index(name)}", label=label if run == 0 else None)
    axis.axvspan(-0.5, result["steady_from_step"] - 0.5, color="0.9", label="warm-up steps (not in P50/P95)")
    axis.axhline(result["lengths"][str(length)]["floor_ms"], color="k", linestyle="--", label="floor (bytes / copy bandwidth)")
    axis.set(yscale="log", xlabel="decode step", ylabel="ms per token",
             title=f"Per-token latency after a {length}-token prompt ({result['environment'].get('gpu', result['environment']['device'])})")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)
    return _png(figure)


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
    return _png(figure)


def context_png(result: dict) -> bytes:
    """P50 ms per token against prompt length, per contender, with the floor's own growth."""
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for name, label, entries in measured(result):
        lengths = sorted(entries)
        axis.errorbar(lengths, [entries[L]["p50_ms"] for L in lengths], marker="o", capsize=3, label=label,
                      yerr=[[0] * len(lengths), [entries[L]["p95_ms"] - entries[L]["p50_ms"] for L in lengths]])
    lengths = result["prompt_lengths"]
    axis.plot(lengths, [result["lengths"][str(L)]["floor_ms"] for L in lengths], "k--", label="floor")
    axis.set(xscale="log", yscale="log", xlabel="prompt length (tokens)", ylabel="ms per token (P50, bar to P95)",
             title="Cost against context length")
    axis.set_xticks(lengths, [str(L) for L in lengths])
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.legend(fontsize=8)
    return _png(figure)
