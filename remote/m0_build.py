"""M0 build: builds the decoder's kernels for the host's arch and records the build (compiler,
flags, binary sha256, register/spill counts). The sim backend has nothing to compile and says so.

  PYTHONPATH=src python3 remote/m0_build.py --host cpu --params '{"backend": "sim"}' --out /tmp/build.json
"""
from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m0_build"), args) as m:
    backend = backends.get(m.params)
    m.metrics["backend"] = backend.name
    m.metrics["build"] = backend.build()
    if backend.name == "gpu":
        m.gate("binary_built", bool(m.metrics["build"].get("library_sha256")), "==", True)
