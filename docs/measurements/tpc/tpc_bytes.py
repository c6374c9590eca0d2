"""Per-TPC bytes of a MoE layer's expert window under the block-to-SM map a smid trace recorded
(docs/megakernel.md "Speed, part 10"; the traces of a docs/next/smid.patch build carry `block_sm`).

    PYTHONPATH=src python docs/measurements/tpc/tpc_bytes.py \
        docs/measurements/megakernel-h200-trace48-smid-stride67.json 67 \
        docs/measurements/megakernel-h200-trace48-smid-stride1.json 1
"""
import json
import sys
from collections import Counter

from fleet_decode.graph import build_graph, decode_plan
from fleet_decode.graph.__main__ import config_of

config = config_of("random:deepseek-coder-v2-lite")
for path, stride in zip(sys.argv[1::2], sys.argv[2::2]):
    block_sm = json.load(open(path))["block_sm"]
    graph = build_graph(config, decode_plan(config, 1056, len(block_sm), worker_stride=int(stride)))
    tpc_bytes, routed_gate_up = Counter(), Counter()
    for block, tasks in enumerate(graph.workers):
        for i in tasks:
            t = graph.tasks[i]
            if t.layer == 5 and ("gate_up" in t.name or "down" in t.name):
                tpc_bytes[block_sm[block] // 2] += 2 * t.cost  # bf16 weight elements
                routed_gate_up[block_sm[block] // 2] += "expert_gate_up" in t.name
    mb = [tpc_bytes[k] / 1e6 for k in range(len(block_sm) // 2)]
    print(f"{path} (stride {stride}): per-TPC expert-window MB max {max(mb):.2f} min {min(mb):.2f}; "
          f"TPCs streaming two routed gate/up tiles: {sum(v == 2 for v in routed_gate_up.values())}")
