"""Lab only: Nsight Compute's per-instruction warp stall samples of one megakernel launch, added up per task
kind (the fd_run_task case each instruction was inlined from) and per stall reason. Inputs: the source page of
the profile (ncu --import mk.ncu-rep --page source --csv --print-source sass; docs/measurements/call-ncu2.sh)
and the SASS of the same library's megakernel with its inline chains:

    cuobjdump -xelf all lab/sk64c/lib/libfleet_kernels.so      # megakernel.sm_90a.cubin
    nvdisasm -gi -c megakernel.sm_90a.cubin > mk.sass
    python docs/measurements/kind_stalls.py hip/runtime/megakernel.cu mk.sass source-sass.csv.gz

(nvdisasm and cuobjdump come with the CUDA toolkit, or as the PyPI wheels nvidia-cuda-nvdisasm and
nvidia-cuda-cuobjdump.) Prints, per kind: its code size, its share of all samples, and its samples by reason.
Code the compiler emits once for two cases (fd_task_route_topk's body for ROUTE_TOPK and ROUTE_PARTS_TOPK)
counts for the case its inline records name, which may differ between builds.
"""
import collections
import csv
import gzip
import re
import sys

PLACE = re.compile(r'"([^"]+)", line (\d+)')
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(\S.*?);")
REASONS = ("stall_long_sb", "stall_barrier", "stall_wait", "stall_short_sb", "stall_no_inst", "stall_branch_resolving",
           "stall_selected", "stall_not_selected", "stall_dispatch", "stall_math", "stall_membar", "stall_lg",
           "stall_mio", "stall_drain")


def case_lines(megakernel_cu: str) -> tuple[int, int, dict]:
    """fd_run_task's first and last line, and the task kind (its case) of each line between."""
    src = open(megakernel_cu).read().splitlines()
    start = next(i for i, line in enumerate(src) if "void fd_run_task(" in line) + 1
    end = next(i for i in range(start, len(src)) if src[i].startswith("}")) + 1
    kinds, kind = {}, None
    for i in range(start, end + 1):
        m = re.search(r"case FD_KIND_(\w+):", src[i - 1])
        kind = m.group(1) if m else kind
        kinds[i] = kind or "(task prologue)"
    return start, end, kinds


def kind_of_offset(sass: str, start: int, end: int, kinds: dict) -> dict[int, str]:
    """Instruction offset -> task kind, or 'runtime' for the interpreter loop's own code. nvdisasm -gi writes
    an inline chain's levels as lines of their own above the instruction."""
    where, chain, kind = {}, [], "runtime"
    for text in open(sass):
        if "//## File" in text:
            chain += PLACE.findall(text)
            continue
        m = INSTR.match(text)
        if m:
            if chain:
                kind = next((kinds[int(n)] for f, n in chain if f.endswith("megakernel.cu") and start <= int(n) <= end),
                            "runtime")
                chain = []
            where[int(m.group(1), 16)] = kind
    return where


def main():
    start, end, kinds = case_lines(sys.argv[1])
    where = kind_of_offset(sys.argv[2], start, end, kinds)
    with gzip.open(sys.argv[3], "rt") if sys.argv[3].endswith(".gz") else open(sys.argv[3]) as f:
        rows = list(csv.reader(f))
    header = rows[1]
    col = {name: header.index(name) for name in ("Address", "Warp Stall Sampling (All Samples)", *REASONS)}
    base = int(rows[2][col["Address"]], 16)
    size, samples = collections.Counter(), collections.defaultdict(collections.Counter)
    for row in rows[2:]:
        kind = where[int(row[col["Address"]], 16) - base]
        size[kind] += 1
        samples[kind]["all"] += int(row[col["Warp Stall Sampling (All Samples)"]] or 0)
        for r in REASONS:
            samples[kind][r] += int(row[col[r]] or 0)
    total = sum(s["all"] for s in samples.values())
    shown = [r for r in REASONS if sum(s[r] for s in samples.values()) > 0.005 * total]
    print(f"{len(where)} instructions, {total} samples; per kind: code KB, share of samples, then each reason's "
          f"share of the kind's samples (%)")
    print(f"{'kind':22s} {'KB':>6s} {'share':>6s} " + " ".join(f"{r[6:][:9]:>9s}" for r in shown))
    for kind, s in sorted(samples.items(), key=lambda kv: -kv[1]["all"]):
        if s["all"] == 0:
            continue
        print(f"{kind:22s} {16 * size[kind] / 1024:6.1f} {100 * s['all'] / total:6.1f} "
              + " ".join(f"{100 * s[r] / s['all']:9.1f}" for r in shown))


if __name__ == "__main__":
    main()
