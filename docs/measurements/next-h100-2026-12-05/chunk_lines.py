# Lab only: Nsight Compute stall samples of the ATTN_CHUNK case by source line of attention_chunk.cu (twelfth session):
#   python docs/measurements/next-h100-2026-12-05/chunk_lines.py <megakernel.cu> <mk.sass from nvdisasm -gi> <source-sass.csv.gz> <attention_chunk.cu>
# (run from the repository root; reuses docs/measurements/kind_stalls.py)
import collections, csv, gzip, re, sys
sys.path.insert(0, "docs/measurements")
from kind_stalls import PLACE, INSTR, REASONS, case_lines
start, end, kinds = case_lines(sys.argv[1])
line_of, kind_of, chain, kind, line = {}, {}, [], "runtime", None
for text in open(sys.argv[2]):
    if "//## File" in text:
        chain += PLACE.findall(text); continue
    m = INSTR.match(text)
    if m:
        if chain:
            kind = next((kinds[int(n)] for f, n in chain if f.endswith("megakernel.cu") and start <= int(n) <= end), "runtime")
            line = next((int(n) for f, n in chain if f.endswith("attention_chunk.cu")), None)
            chain = []
        off = int(m.group(1), 16); kind_of[off] = kind; line_of[off] = line
rows = list(csv.reader(gzip.open(sys.argv[3], "rt")))
h = rows[1]; col = {n: h.index(n) for n in ("Address", "Warp Stall Sampling (All Samples)", *REASONS)}
base = int(rows[2][col["Address"]], 16)
per = collections.defaultdict(collections.Counter)
for r in rows[2:]:
    off = int(r[col["Address"]], 16) - base
    if kind_of.get(off) != "ATTN_CHUNK": continue
    c = per[line_of.get(off)]
    c["all"] += int(r[col["Warp Stall Sampling (All Samples)"]] or 0)
    for x in REASONS: c[x] += int(r[col[x]] or 0)
tot = sum(c["all"] for c in per.values())
src = open(sys.argv[4]).read().splitlines()
print("chunk samples", tot)
for ln, c in sorted(per.items(), key=lambda kv: -kv[1]["all"])[:30]:
    top = sorted(((c[x], x[6:]) for x in REASONS), reverse=True)[:3]
    print(f"{ln!s:>5} {100*c['all']/tot:5.1f}%  " + " ".join(f"{k}:{100*v/max(c['all'],1):.0f}" for v, k in top), "|", (src[ln-1].strip()[:90] if ln else ""))
