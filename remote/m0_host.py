"""M0 host: the host's fingerprint and toolchain, and one HF eager decode step of the model.

Runs on the host from a deployed tree (the pipeline does this; by hand):
  PYTHONPATH=src python3 remote/m0_host.py --host cpu --params '{"model": "tiny", "prompt_tokens": 64}' --out /tmp/host.json
"""
import shutil
import time

import torch

from fleet_decode.pipeline.evidence import Milestone, command_output, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m0_host"), args) as m:
    model_api = require("fleet_decode.model", "M0")
    m.metrics["toolchain"] = {
        tool: (command_output([tool, "--version"]) or "").splitlines()[-1:] or None
        for tool in ("nvcc", "hipcc") if shutil.which(tool)
    }
    model = m.load_model()
    prompt = m.prompt(model)
    start = time.perf_counter()
    tokens, logits = model_api.hf_decode(model, prompt, 1)[:2]
    m.metrics["hf_eager_one_step_seconds"] = time.perf_counter() - start
    m.metrics["hf_first_token"] = int(tokens[0])
    m.metrics["parameters"] = sum(p.numel() for p in model.parameters())
    m.gate("hf_logits_finite", bool(torch.isfinite(torch.as_tensor(logits[0])).all()), "==", True)
