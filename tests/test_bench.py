"""The benchmark library (issue 6): structure and consistency of run_bench's result, the capturable
reference step against Reference, failure handling, the CLI and the plots. Speed is never asserted."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fleet_decode.bench import contenders as contenders_module
from fleet_decode.bench import headline, run_bench
from fleet_decode.bench.results import Mismatch, combine
from fleet_decode.bench.run import routed_expert_bytes
from fleet_decode.bench.__main__ import main as bench_main
from fleet_decode.bench.static_step import StaticStep
from fleet_decode.bench.timing import STEADY_FROM_STEP, latency_summary
from fleet_decode.graph import build_graph, default_plan
from fleet_decode.graph.counts import graph_counts
from fleet_decode.model import Reference, get_config, load_model, prompt_ids
from fleet_decode.report import plots

LENGTHS, TOKENS, RUNS = (16, 24), 4, 2


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


class ReferenceMegakernel:
    """Stands in for the megakernel through the protocol of docs/bench.md (decode after HF's
    prefill; tokens with the prefill's first; per-step times or a total; launches)."""

    def __init__(self, model, per_step=True):
        self.model, self.per_step, self.calls = model, per_step, 0

    def decode(self, ids, n_steps):
        self.calls += 1
        reference = Reference(self.model, max_positions=len(ids) + n_steps + 1)
        tokens = [int(reference.prefill(ids).argmax())]
        for _ in range(n_steps):
            tokens.append(int(reference.step(tokens[-1]).argmax()))
        if self.per_step:
            return SimpleNamespace(tokens=tokens, step_ms=[0.5 + i for i in range(n_steps)], launches=1,
                                   chunk_forms=["plain"])
        return SimpleNamespace(tokens=tokens, seconds=0.004 * n_steps)


@pytest.fixture(scope="module")
def cli_result(tmp_path_factory):
    """One CPU run through the CLI, shared by the structural tests."""
    out = tmp_path_factory.mktemp("bench")
    rc = bench_main(["--model", "tiny", "--device", "cpu", "--prompt-lengths", ",".join(map(str, LENGTHS)),
                     "--tokens", str(TOKENS), "--runs", str(RUNS), "--contenders", "hf_eager,reference_eager,reference_graph",
                     "--json", str(out / "bench.json"), "--plots", str(out / "plots")])
    assert rc == 0
    return json.loads((out / "bench.json").read_text()), out


# ----------------------------------------------------------------------------- statistics

def test_latency_summary_skips_warm_up_steps_and_pools_runs():
    runs = [[100.0, 50.0, 1.0, 2.0, 3.0], [90.0, 40.0, 4.0, 5.0, 6.0]]
    summary = latency_summary(runs)
    steady = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert STEADY_FROM_STEP == 2
    assert summary["steady_steps"] == 6
    assert summary["p50_ms"] == pytest.approx(3.5)
    assert summary["p95_ms"] == pytest.approx(np.percentile(steady, 95))
    assert summary["mean_ms"] == pytest.approx(3.5)
    assert summary["tokens_per_s"] == pytest.approx(1e3 / 3.5)
    with pytest.raises(ValueError, match="steady"):
        latency_summary([[1.0, 2.0]])


# ----------------------------------------------------------------------------- the capturable step

@pytest.mark.parametrize("experts", ["grouped_mm", "gather"])
def test_static_step_decodes_like_the_reference(tiny, experts):
    ids = prompt_ids(20, vocab_size=tiny.config.vocab_size)
    steps, positions = 6, 20 + 6 + 1
    reference = Reference(tiny, max_positions=positions)
    tokens = [int(reference.prefill(ids).argmax())]
    for _ in range(steps):
        tokens.append(int(reference.step(tokens[-1]).argmax()))

    static = StaticStep(tiny, positions, experts=experts)
    # an earlier, longer run leaves cache rows past the new prompt: the mask must hide them
    static.prefill(prompt_ids(23, vocab_size=tiny.config.vocab_size)[::-1])  # rows 20..25 left stale
    for _ in range(3):
        static.replay()
    static.prefill(ids)
    for _ in range(steps):
        static.replay()
    assert static.experts == experts and static.graph is None  # no CUDA here: eager
    assert static.tokens() == tokens
    assert int(static.pos) == 20 + steps
    # the cache rows the steps wrote depend on every layer's hidden state
    written = slice(20, 20 + steps)
    torch.testing.assert_close(static.reference.ckv[:, written], reference.ckv[:, written], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(static.reference.kpe[:, written], reference.kpe[:, written], rtol=1e-4, atol=1e-5)


def test_static_step_counts_its_extra_bytes(tiny):
    c = tiny.config
    row = c.num_hidden_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * 4  # fp32 cache
    grouped = StaticStep(tiny, 40, experts="grouped_mm")
    assert grouped.extra_bytes_per_token(30, routed_bytes=1000) == {"masked_cache_rows": 10 * row}
    gather = StaticStep(tiny, 40, experts="gather")
    assert gather.extra_bytes_per_token(40, routed_bytes=1000) == {"masked_cache_rows": 0, "gathered_expert_copy": 2000}


# ----------------------------------------------------------------------------- run_bench on a CPU

def test_cpu_result_structure_and_consistency(cli_result, tiny):
    result, _ = cli_result
    assert result["schema"] == "fleet-decode-bench/1" and "partial" not in result
    assert result["environment"]["clock"] == "perf_counter"
    assert result["prompt_lengths"] == list(LENGTHS) and result["steady_from_step"] == 2
    assert result["copy_bandwidth"]["bytes_per_s"] > 0

    counts = graph_counts(build_graph(tiny.config, default_plan(tiny.config, 8)), weight_bytes=4)
    assert result["bytes"]["weights"] == counts["weight_bytes_per_token_total"]
    for length in LENGTHS:
        facts = result["lengths"][str(length)]
        assert facts["context_positions"] == pytest.approx(length + np.mean(range(3, TOKENS + 1)))
        assert facts["bytes_per_token"] == pytest.approx(
            result["bytes"]["weights"] + result["bytes"]["cache_per_position"] * facts["context_positions"])
        assert facts["floor_ms"] == pytest.approx(facts["bytes_per_token"] / result["copy_bandwidth"]["bytes_per_s"] * 1e3)

    graph = result["contenders"]["reference_graph"]
    assert graph["status"] == "unavailable" and "CUDA" in graph["reason"] and graph["lengths"] == {}

    eager = result["contenders"]["hf_eager"]["lengths"]
    for name in ("hf_eager", "reference_eager"):
        record = result["contenders"][name]
        assert record["status"] == "ok"
        for length in LENGTHS:
            entry, facts = record["lengths"][str(length)], result["lengths"][str(length)]
            assert len(entry["step_ms"]) == RUNS and all(len(run) == TOKENS for run in entry["step_ms"])
            assert all(ms > 0 for run in entry["step_ms"] for ms in run)
            assert 0 < entry["min_ms"] <= entry["p50_ms"] <= entry["p95_ms"]
            assert entry["steady_steps"] == RUNS * (TOKENS - STEADY_FROM_STEP)
            assert entry["tokens_per_s"] == pytest.approx(1e3 / entry["p50_ms"])
            assert entry["percent_of_floor"] == pytest.approx(100 * facts["floor_ms"] / entry["p50_ms"])
            assert entry["achieved_tb_s"] == pytest.approx(facts["bytes_per_token"] / entry["p50_ms"] * 1e-9)
            assert entry["speedup_vs_hf_eager"] == pytest.approx(eager[str(length)]["p50_ms"] / entry["p50_ms"])
            assert entry["launches_per_token"] is None and "CPU" in entry["launches_method"]
            assert len(entry["tokens"]) == TOKENS + 1 and entry["runs_agree"]
            # fp32 tiny: the reference decodes HF's greedy tokens exactly
            assert entry["tokens"] == eager[str(length)]["tokens"]
            assert entry["tokens_equal_hf_eager"] == TOKENS + 1


def test_cli_writes_the_report_plots(cli_result):
    result, out = cli_result
    for name in ("latency", "bandwidth", "context"):
        data = (out / "plots" / f"{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
    assert plots.latency_png(result, prompt_length=LENGTHS[0]).startswith(b"\x89PNG")
    assert [name for name, _, _ in plots.measured(result)] == ["hf_eager", "reference_eager"]
    # the report draws the same result, as bench evidence of a host, with the same drawing code
    docs = {"cpu": {"bench/bench.json": {"metrics": headline(result) | {"bench": result}}}}
    assert plots.token_latency(docs) and plots.context_scaling(docs)


def test_headline_picks_the_preferred_measured_contender(cli_result):
    result, _ = cli_result
    top = headline(result)
    assert top["prompt_length"] == 24 and top["timed"] == "hf_eager"  # reference_graph is unavailable on a CPU
    entry = result["contenders"]["hf_eager"]["lengths"]["24"]
    assert top["p50_ms"] == entry["p50_ms"] and top["hf_eager_p50_ms"] == entry["p50_ms"]
    assert top["floor_ms"] == result["lengths"]["24"]["floor_ms"]
    assert headline(result, prefer=("reference_eager",), prompt_length=16)["timed"] == "reference_eager"
    with pytest.raises(ValueError, match="no contender"):
        headline(result, prefer=("megakernel",))


def test_megakernel_protocol_per_step_and_total(tiny):
    megakernel = ReferenceMegakernel(tiny)
    result = run_bench(tiny, prompt_lengths=(16,), decode_tokens=TOKENS, runs=RUNS, megakernel=megakernel,
                       contenders=("hf_eager",))
    entry = result["contenders"]["megakernel"]["lengths"]["16"]
    assert list(result["contenders"]) == ["megakernel", "hf_eager"]
    assert megakernel.calls == RUNS + 1  # one warm-up, then the timed runs
    assert entry["step_ms"] == [[0.5 + i for i in range(TOKENS)]] * RUNS
    assert entry["p50_ms"] == pytest.approx(np.median([2.5, 3.5]))
    assert entry["launches_per_token"] == pytest.approx(1 / TOKENS) and entry["per_step_timing"]
    assert entry["tokens_equal_hf_eager"] == TOKENS + 1
    assert entry["chunk_form"] == "plain"  # which megakernel entry ran, where the decoder says

    total_only = run_bench(tiny, prompt_lengths=(16,), decode_tokens=TOKENS, runs=1,
                           megakernel=ReferenceMegakernel(tiny, per_step=False), contenders=())
    entry = total_only["contenders"]["megakernel"]["lengths"]["16"]
    assert not entry["per_step_timing"] and "chunk_form" not in entry
    assert entry["p50_ms"] == pytest.approx(4.0) and entry["p95_ms"] == pytest.approx(4.0)
    assert "speedup_vs_hf_eager" not in entry  # no baseline measured
    json.dumps(total_only)


def test_baselines_run_apart_and_combine_into_the_one_run_table(tiny, monkeypatch):
    """The pipeline's split: the bench rule times the megakernel with the floor, the baselines rule the
    torch contenders without reading the decoder; combine() gives what one run of both would have."""
    import fleet_decode.bench.run as run_module

    def no_graph(*args, **kwargs):
        raise AssertionError("a floor=False run read the task graph")

    bench = run_bench(tiny, prompt_lengths=LENGTHS, decode_tokens=TOKENS, runs=RUNS,
                      megakernel=ReferenceMegakernel(tiny), contenders=())
    monkeypatch.setattr(run_module, "bytes_per_token", no_graph)
    baselines = run_bench(tiny, prompt_lengths=LENGTHS, decode_tokens=TOKENS, runs=RUNS,
                          contenders=("hf_eager", "reference_eager"), floor=False)
    assert baselines["schema"] == "fleet-decode-baselines/1"
    assert not {"bytes", "copy_bandwidth", "lengths"} & set(baselines)
    assert "percent_of_floor" not in baselines["contenders"]["hf_eager"]["lengths"]["16"]

    both = combine(bench, baselines)
    assert list(both["contenders"]) == ["megakernel", "hf_eager", "reference_eager"]
    assert "from_run" not in both["contenders"]["megakernel"]
    assert both["contenders"]["hf_eager"]["from_run"] == "baselines"
    assert both["combined_from"]["baselines"]["environment"] == baselines["environment"]
    assert "hf_eager" not in bench["contenders"]  # the runs given are left as they were
    for length in LENGTHS:
        floor = bench["lengths"][str(length)]["floor_ms"]
        eager = both["contenders"]["hf_eager"]["lengths"][str(length)]
        assert eager["percent_of_floor"] == pytest.approx(100 * floor / eager["p50_ms"])
        mega = both["contenders"]["megakernel"]["lengths"][str(length)]
        assert mega["speedup_vs_hf_eager"] == pytest.approx(eager["p50_ms"] / mega["p50_ms"])
        assert mega["tokens_equal_hf_eager"] == TOKENS + 1  # fp32 tiny: the same greedy tokens
    top = headline(both, prompt_length=16)
    assert top["timed"] == "megakernel" and top["hf_eager_p50_ms"] == both["contenders"]["hf_eager"]["lengths"]["16"]["p50_ms"]

    with pytest.raises(Mismatch, match="decode_tokens 4 against 5"):
        combine(bench, baselines | {"decode_tokens": TOKENS + 1})
    with pytest.raises(Mismatch, match="model config_sha256"):
        combine(bench, baselines | {"model": baselines["model"] | {"config_sha256": "0" * 64}})
    with pytest.raises(Mismatch, match="megakernel timed in both"):
        combine(bench, bench)
    with pytest.raises(Mismatch, match="no floor"):
        combine(baselines, baselines)


@pytest.mark.parametrize("name", ["tiny", "deepseek-coder-v2-lite"])
def test_routed_expert_bytes_from_the_config_match_the_task_graph(name):
    """The baselines count the routed experts' bytes without the graph; the two counts must agree."""
    config = get_config(name)
    counts = graph_counts(build_graph(config, default_plan(config, 132)), weight_bytes=2)
    assert routed_expert_bytes(config, 2) == counts["weight_bytes_per_token"]["routed experts"]


def test_a_failing_contender_is_recorded_not_fatal(tiny, monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("inductor exploded\nsecond line never shown")

    monkeypatch.setattr(contenders_module.torch, "compile", broken_compile)
    own = tiny.config._experts_implementation
    tiny.set_experts_implementation("eager")  # the contender switches to grouped_mm while it runs
    try:
        result = run_bench(tiny, prompt_lengths=LENGTHS, decode_tokens=3, runs=1,
                           contenders=("hf_static_compile", "hf_eager"))
        handed_back = tiny.config._experts_implementation
    finally:
        tiny.set_experts_implementation(own)
    record = result["contenders"]["hf_static_compile"]
    assert record["status"] == "unavailable"
    assert record["reason"] == "RuntimeError: inductor exploded"
    first, second = (record["lengths"][str(L)] for L in LENGTHS)
    assert first["reason"] == record["reason"] and second.get("not_retried")
    assert result["contenders"]["hf_eager"]["status"] == "ok"
    assert handed_back == "eager"


def test_time_budget_skips_what_has_not_started(tiny):
    result = run_bench(tiny, prompt_lengths=(16,), decode_tokens=3, runs=1, contenders=("hf_eager",),
                       time_budget_s=1e-9)
    entry = result["contenders"]["hf_eager"]["lengths"]["16"]
    assert entry["status"] == "skipped" and "time budget" in entry["reason"]
    assert result["contenders"]["hf_eager"]["status"] == "unavailable"


def test_too_few_tokens_for_steady_statistics_is_refused(tiny):
    with pytest.raises(ValueError, match="decode_tokens"):
        run_bench(tiny, prompt_lengths=(16,), decode_tokens=2, runs=1, contenders=())


# ----------------------------------------------------------------------------- on the GPU

@pytest.mark.gpu
def test_gpu_small_run_all_contenders():
    model = load_model("tiny", dtype=torch.bfloat16, device="cuda")
    result = run_bench(model, prompt_lengths=(16, 32), decode_tokens=6, runs=2)
    json.dumps(result)
    assert result["environment"]["clock"] == "cuda_events"
    for name in ("hf_eager", "reference_eager", "reference_graph"):
        record = result["contenders"][name]
        assert record["status"] == "ok", record
        for entry in record["lengths"].values():
            assert 0 < entry["p50_ms"] <= entry["p95_ms"] and entry["kernels_per_token"] > 0
    graph = result["contenders"]["reference_graph"]["lengths"]["32"]
    assert graph["host_launches_per_token"] == 1
    assert graph["extra_bytes_per_token"]["masked_cache_rows"] > 0
    compiled = result["contenders"]["hf_static_compile"]
    assert compiled["status"] == "ok" or compiled["reason"]


@pytest.mark.gpu
def test_gpu_captured_step_replays_the_eager_step():
    model = load_model("tiny", dtype=torch.bfloat16, device="cuda")
    ids = prompt_ids(24, vocab_size=model.config.vocab_size)
    captured, eager = StaticStep(model, 40), StaticStep(model, 40, capture=False, experts=None)
    assert captured.graph is not None and eager.graph is None
    for static in (captured, eager):
        static.prefill(ids)
        for _ in range(8):
            static.replay()
    assert captured.tokens() == eager.tokens()
    torch.testing.assert_close(captured.reference.ckv[:, :32], eager.reference.ckv[:, :32])
    assert not math.isnan(float(captured.reference.ckv[:, :32].float().sum()))
