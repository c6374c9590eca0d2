"""The report's context-scaling figure: which hosts and contenders it draws, and when it has none."""
import base64

import matplotlib

from fleet_decode.report.plots import context_scaling


def bench_doc(lengths, contenders):
    """A bench evidence doc as the report reads it: contenders {name: {length: p50 or None}}."""
    return {"bench/bench.json": {"metrics": {"bench": {
        "prompt_lengths": lengths,
        "lengths": {str(length): {"floor_ms": 1.0 + length / 1e5} for length in lengths},
        "contenders": {name: {"lengths": {str(length): ({"p50_ms": p50} if p50 else {"status": "skipped"})
                                          for length, p50 in values.items()}}
                       for name, values in contenders.items()},
    }}}}


def svg_text(encoded):
    return base64.b64decode(encoded).decode()


def test_context_scaling_draws_every_host_with_several_lengths_and_its_floor():
    docs = {"h200": bench_doc([256, 1024, 4096], {"megakernel": {256: 2.8, 1024: 2.9, 4096: 3.1},
                                                  "hf_static_compile": {256: 5.7, 1024: None, 4096: 5.7}}),
            "cpu": bench_doc([1024], {"hf_eager": {1024: 1.5}})}
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # labels as <text>, not glyph paths
        svg = svg_text(context_scaling(docs))
    assert "h200 megakernel" in svg and "h200 hf_static_compile" in svg and "h200 floor" in svg
    assert "cpu" not in svg  # one prompt length: no growth to show
    assert all(f">{length}<" in svg for length in (256, 1024, 4096))  # the lengths are the ticks


def test_no_host_with_several_lengths_means_no_context_figure():
    docs = {"cpu": bench_doc([1024], {"hf_eager": {1024: 1.5}}), "h200": {}}
    assert context_scaling(docs) is None
