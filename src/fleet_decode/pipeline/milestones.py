"""The milestones, one row each: the remote/ script that runs on the host, the evidence it writes
(under results/<host>/) and the sources it declares. rules/*.smk, the host side of a run
(pipeline.run), the evidence envelope and `fleet-decode audit` all read this table, so a milestone
is spelled out once.

A source entry is a file or a directory (every file below it, except the lab bench: the
measure/sweep/trace tools that time the decoder by hand change no milestone's result).
"""
import itertools
from dataclasses import dataclass, field

ENVELOPE = ("src/fleet_decode/pipeline/evidence.py",)
MODEL = ("src/fleet_decode/__init__.py", "src/fleet_decode/model")
DECODER = ("hip", "src/fleet_decode/kernels", "src/fleet_decode/graph", "src/fleet_decode/sim",
           "src/fleet_decode/task_kinds.py", "src/fleet_decode/sampling.py", "src/fleet_decode/pipeline/backends.py")
LAB_BENCH = ("src/fleet_decode/kernels/lab.py", "src/fleet_decode/kernels/trace.py")


@dataclass(frozen=True)
class MilestoneRule:
    label: str  # the milestone a reader knows it by (M0 ... M4, bench)
    script: str
    evidence: str  # relative to results/<host>/; may name wildcards, e.g. {layer}
    sources: tuple[str, ...]
    wildcards: dict[str, tuple[str, ...]] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()  # the script's own arguments, with the same wildcards

    def evidence_files(self) -> list[str]:
        """Every evidence file of the rule: its evidence path for each combination of wildcards."""
        names = list(self.wildcards)
        return [self.evidence.format(**dict(zip(names, values)))
                for values in itertools.product(*self.wildcards.values())]

    def declared(self) -> tuple[str, ...]:
        return (self.script, *self.sources)


MILESTONES = {
    "m0_host": MilestoneRule("M0", "remote/m0_host.py", "m0/host.json", (*ENVELOPE, *MODEL)),
    "m0_build": MilestoneRule("M0", "remote/m0_build.py", "m0/build.json", (*ENVELOPE, *DECODER)),
    "m1": MilestoneRule("M1", "remote/m1_kernels.py", "m1/kernels.json", (*ENVELOPE, *MODEL, *DECODER)),
    "m2": MilestoneRule("M2", "remote/m2_layer.py", "m2/layer_{layer}.json", (*ENVELOPE, *MODEL, *DECODER),
                        wildcards={"layer": ("0", "1")}, arguments=("--layer", "{layer}")),
    "m3": MilestoneRule("M3", "remote/m3_layers.py", "m3/layers.json", (*ENVELOPE, *MODEL, *DECODER)),
    "m4": MilestoneRule("M4", "remote/m4_e2e.py", "m4/e2e.json", (*ENVELOPE, *MODEL, *DECODER)),
    "bench": MilestoneRule("bench", "remote/bench.py", "bench/bench.json",
                           ("src/fleet_decode/bench", *ENVELOPE, *MODEL, *DECODER)),
    # The torch contenders the megakernel is compared with: the model and the bench code, not the decoder,
    # so a kernel change leaves them fresh (their minutes of timing are the bench's longest part).
    "baselines": MilestoneRule("bench", "remote/baselines.py", "bench/baselines.json",
                               ("src/fleet_decode/bench", *ENVELOPE, *MODEL)),
    "generate": MilestoneRule("generate", "remote/generate.py", "generate/generate.json",
                              ("src/fleet_decode/decoder.py", *ENVELOPE, *MODEL, *DECODER)),
}

# The report is rendered on this side from every host's evidence; it has sources but no script.
# (bench/results.py: combine() and derive() put the bench and the baselines in one table)
REPORT_SOURCES = ("report_templates", "src/fleet_decode/report", "src/fleet_decode/bench/results.py")


def envelope(rule: str, **wildcards) -> tuple[str, str, str]:
    """(rule, label, evidence path) of one run: what a remote/ script seals its evidence under."""
    milestone = MILESTONES[rule]
    return rule, milestone.label, milestone.evidence.format(**wildcards)
