"""Replays the indexing of docs/next/chunk-tensor-cores.patch's fd_attention_chunk_mma in numpy (q and the
probabilities split into hi + lo bf16 parts; the warp products' tiles and k-step blocks (both parts of q in one product); the fixed order of
the partial sums; the clamped row tiles of the weighted sum) and compares the chunk's m, l and o with fp64
arithmetic on the same bf16 cache. It checks the kernel's index math, not the WMMA fragment layouts.

    python docs/dropped/emulate_chunk_mma.py     # prints the worst relative error (M1's bound: 1e-4)
"""
import numpy as np, torch
rng = np.random.default_rng(0)
LAT, ROPE, MAXC = 512, 64, 64
QK = LAT + ROPE
def bf16(x): return torch.tensor(x, dtype=torch.float32).bfloat16().float().numpy()
def split(x):
    hi = bf16(x); lo = bf16(x - hi); return hi, lo
def chunk(q, cache, n_pos, t_begin, t_end, n, scale, warps=8, items_max=8):
    len_ = max(0, min(t_end, n_pos) - t_begin); tiles = (len_ + 15) // 16
    Q = np.zeros((16, QK), np.float32); Q[:n] = q[:n]
    qh, ql = split(Q)
    splits = 4 if tiles <= 2 else 2
    n_items = tiles * splits
    items = np.zeros((items_max, 16, 16), np.float32)
    steps = QK // 16
    for item in range(n_items):
        tile, sp = item // splits, item % splits
        row0 = t_begin + 16 * tile
        acc = np.zeros((16, 16), np.float64)
        for s in range(sp * steps // splits, (sp + 1) * steps // splits):
            B = cache[row0:row0 + 16, 16 * s:16 * s + 16].T  # (k, n)
            acc += qh[:, 16 * s:16 * s + 16].astype(np.float64) @ B.astype(np.float64)
            acc += ql[:, 16 * s:16 * s + 16].astype(np.float64) @ B.astype(np.float64)
        items[item] = acc.astype(np.float32)
    prob = np.zeros((16, MAXC), np.float32)
    flat = items.reshape(-1)
    for h in range(n):
        for t in range(len_):
            sc = np.float32(0)
            for r in range(splits):
                sc += flat[256 * (splits * (t // 16) + r) + 16 * h + t % 16]
            prob[h, t] = sc * scale
    m = np.full(n, -np.inf, np.float32); l = np.zeros(n, np.float32)
    for h in range(n):
        if len_:
            m[h] = prob[h, :len_].max(); p = np.exp(prob[h, :len_] - m[h]); prob[h, :len_] = p; l[h] = p.sum()
    P = np.where((np.arange(16)[:, None] < n) & (np.arange(MAXC)[None] < len_), prob, 0)
    ph, pl = split(P)
    O = np.zeros((n, LAT), np.float32)
    for ct in range(LAT // 16):
        acc = np.zeros((16, 16), np.float64)
        for tile in range(4):
            if tile >= tiles: break
            rows = t_begin + 16 * min(tile, max(tiles - 1, 0))
            B = cache[rows:rows + 16, 16 * ct:16 * ct + 16]
            acc += ph[:, 16 * tile:16 * tile + 16].astype(np.float64) @ B
            acc += pl[:, 16 * tile:16 * tile + 16].astype(np.float64) @ B
        O[:, 16 * ct:16 * ct + 16] = acc[:n]
    return m, l, O
def ref(q, cache, n_pos, t_begin, t_end, n, scale):
    t1 = min(t_end, n_pos); K = cache[t_begin:t1].astype(np.float64)
    s = (q[:n].astype(np.float64) @ K.T) * scale
    if t1 <= t_begin: return np.full(n, -np.inf), np.zeros(n), np.zeros((n, LAT))
    m = s.max(1); p = np.exp(s - m[:, None]); return m, p.sum(1), p @ K[:, :LAT]
cache = bf16(rng.standard_normal((1024, QK)).astype(np.float32))
worst = 0
for n in (16, 8, 4, 1):
    q = (rng.standard_normal((16, QK)) * 0.75).astype(np.float32)
    for (t_begin, t_end, n_pos) in [(0, 64, 1000), (64, 128, 100), (992, 1024, 1000), (32, 64, 40), (16, 32, 10), (0, 16, 5), (48, 96, 90)]:
        m, l, O = chunk(q, cache, n_pos, t_begin, t_end, n, 0.1)
        mr, lr, Or = ref(q, cache, n_pos, t_begin, t_end, n, 0.1)
        if np.isinf(mr).all():
            assert np.isinf(m).all() and (l == 0).all() and (O == 0).all(); continue
        e = max(np.abs(m - mr).max() / np.abs(mr).max(), np.abs(l - lr).max() / np.abs(lr).max(), np.abs(O - Or).max() / np.abs(Or).max())
        worst = max(worst, e)
print("worst relative error", worst)
