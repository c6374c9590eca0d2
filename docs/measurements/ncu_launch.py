"""Lab only: one decode launch of the megakernel for a profiler to look at (Nsight Compute's warp stall
reasons, docs/measurements/call-ncu.sh). On a GPU host:

    ncu --kernel-name regex:fd_megakernel --launch-count 1 --section WarpStateStats \
        python3 docs/measurements/ncu_launch.py [PROMPT] [STEPS]
"""
import sys

import torch

from fleet_decode.graph import decode_plan
from fleet_decode.kernels.runtime import Megakernel
from fleet_decode.model import load_model, prompt_ids

n_prompt = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 8
model = load_model("random:deepseek-coder-v2-lite", dtype=torch.bfloat16, device="cuda")
n_sm = torch.cuda.get_device_properties(0).multi_processor_count
mk = Megakernel(model, plan=decode_plan(model.config, n_prompt + steps + 1, n_sm))
mk.prefill(prompt_ids(n_prompt, vocab_size=model.config.vocab_size))
run = mk.generate(n_prompt, steps, timeout_s=60.0)  # the profiled launch (replayed once per pass)
print(f"tokens {run.tokens[:8]} ...; steps {len(run.step_seconds)}")
