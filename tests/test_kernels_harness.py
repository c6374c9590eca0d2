"""The M1 harness itself, on the CPU: run against a torch model of every task kernel (same
rounding points as hip/tasks) it must pass every kind; against models with a planted bug it must
fail exactly that kind."""
import math

import pytest
import torch
import torch.nn.functional as F

from fleet_decode.fixed_point import from_fixed_point, to_fixed_point
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.checks import Shapes, check_all

EPS = 1e-6
SMALL = Shapes(hidden=128, heads=2, kv_lora=32, rope=8, nope=16, v_head=16, experts=8, top_k=2, moe_inter=32,
               shared_inter=64, dense_inter=96, vocab=500, cache_len=40, n_pos=37, chunk_len=8)
F32_ROWS = {kind.name for kind in Kind} | {"GATE_UP:dense"}  # as the simulator's M1 rows, plus a second width
ROWS = F32_ROWS | {row + ":bf16" for row in F32_ROWS}


def st(t, dtype):
    """t as stored in dtype, back in fp32 (bf16: rounded; fp32: unchanged)."""
    return t.to(dtype).float()


def rms_norm(x, w):
    h = (x.float() * torch.rsqrt(x.float().pow(2).mean() + EPS)).to(x.dtype)
    return st(w.to(x.dtype) * h, x.dtype) if x.dtype == torch.bfloat16 else h * w.float()


def rotate(x, cos, sin, dtype):
    a, b = x.float().view(-1, 2).unbind(-1)
    return st(torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(), dtype)


class TorchTaskKernels:
    """Each fd_launch_* of hip/tasks written with torch ops, fp32 accumulation, every stored
    activation in the activation tensor's dtype (bf16 rounds, fp32 does not), as the kernels do.
    Same Python signatures as fleet_decode.kernels.library.TaskKernels."""
    warp_size = 32

    def embed(self, table, token, out):
        out.copy_(table[int(token)])

    def rmsnorm_gemv(self, x, norm_weight, eps, W, out, rows_per_tile, residual=None):
        xn = x.float() if norm_weight is None else rms_norm(x, norm_weight)
        y = st(W.float() @ xn, x.dtype)
        out.copy_(y if residual is None else residual.float() + y)

    def rope_cache(self, q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache):
        for h, head in enumerate(q.view(q_pe_out.shape[0], -1)):
            q_pe_out[h] = rotate(head[-q_pe_out.shape[1]:], cos[pos], sin[pos], q.dtype)
        latent = kv_a.numel() - kpe_cache.shape[1]
        kpe_cache[pos] = rotate(kv_a[latent:], cos[pos], sin[pos], torch.bfloat16)
        ckv_cache[pos] = rms_norm(kv_a[:latent], kv_norm_weight)

    def rope_q_absorb(self, q, w_uk_parts, parts, cos, sin, pos, q_lat, q_pe_out, units_per_tile=1):
        heads, latent = q_lat.shape
        cols = latent // parts
        w = w_uk_parts.view(heads, parts, -1, cols).float()  # [h, block, d, c]
        nope = w.shape[2]
        q_lat.copy_(torch.einsum("hd,hpdc->hpc", q.view(heads, -1)[:, :nope].float(), w).reshape(heads, latent))
        for h, head in enumerate(q.view(q_pe_out.shape[0], -1)):
            q_pe_out[h] = rotate(head[-q_pe_out.shape[1]:], cos[pos], sin[pos], q.dtype)

    def attention_chunk(self, q_lat, q_pe, ckv_cache, kpe_cache, n_pos, chunk_len, scale, part_m, part_l, part_o,
                        head_groups=1, tensor_cores=False):
        for c in range(part_m.shape[0]):
            t0, t1 = c * chunk_len, min((c + 1) * chunk_len, n_pos)
            if t0 >= t1:
                part_m[c], part_l[c], part_o[c] = -math.inf, 0.0, 0.0
                continue
            s = scale * (q_lat @ ckv_cache[t0:t1].float().T + q_pe.float() @ kpe_cache[t0:t1].float().T)
            m = s.max(-1).values
            p = torch.exp(s - m[:, None])
            part_m[c], part_l[c], part_o[c] = m, p.sum(-1), p @ ckv_cache[t0:t1].float()

    def attention_merge(self, part_m, part_l, part_o, out_lat):
        w = torch.where(part_l > 0, torch.exp(part_m - part_m.max(0).values), torch.zeros_like(part_m))
        out_lat.copy_((w[..., None] * part_o).sum(0) / (w * part_l).sum(0)[:, None])

    def wuv(self, out_lat, kv_b, attn_out):
        heads, latent = out_lat.shape
        head_rows = kv_b.shape[0] // heads
        w_uv = kv_b.view(heads, head_rows, latent)[:, head_rows // 2:].float()
        attn_out.copy_(torch.einsum("hdc,hc->hd", w_uv, out_lat).flatten())

    def attention_merge_uv(self, part_ml, part_o, kv_b, attn_out, heads_per_tile=1):
        out_lat = torch.empty(part_o.shape[1:], dtype=torch.float32)
        self.attention_merge(part_ml[..., 0], part_ml[..., 1], part_o, out_lat)
        self.wuv(out_lat, kv_b, attn_out)

    def attention_merge_cols(self, part_ml, part_o, w_uv_parts, lat_parts, attn_parts):
        out_lat = torch.empty(part_o.shape[1:], dtype=torch.float32)
        self.attention_merge(part_ml[..., 0], part_ml[..., 1], part_o, out_lat)
        heads, latent = out_lat.shape
        cols = latent // lat_parts
        blocks = w_uv_parts.view(heads, lat_parts, -1, cols).float()  # [h, part, v, cols]
        lat = out_lat.view(heads, lat_parts, cols)
        attn_parts.copy_(torch.einsum("hpvc,hpc->phv", blocks, lat).flatten())

    def router_tiles(self, x, norm_weight, eps, w_router, rows_per_tile, top_k, routed_scaling, logits, probs,
                     topk_idx, topk_weight):
        xn = rms_norm(x, norm_weight)
        for e0 in range(0, w_router.shape[0], rows_per_tile):
            logits[e0:e0 + rows_per_tile] = w_router[e0:e0 + rows_per_tile] @ xn
        p = torch.softmax(logits, -1)
        chosen = sorted(sorted(range(p.numel()), key=lambda e: (-p[e].item(), e))[:top_k])
        probs.copy_(p)
        topk_idx.copy_(torch.tensor(chosen, dtype=torch.int32))
        topk_weight.copy_(p[chosen] * routed_scaling)

    def o_proj_router(self, attn_out, W_o, residual, h_attn, norm_weight, eps, w_router, rows_per_tile, top_k,
                      routed_scaling, parts, probs, topk_idx, topk_weight):
        h_attn.copy_(residual.float() + st(W_o.float() @ attn_out.float(), attn_out.dtype))
        h = h_attn.float()
        for i, r0 in enumerate(range(0, h.numel(), rows_per_tile)):
            rows = slice(r0, r0 + rows_per_tile)
            parts[i, :-1] = w_router[:, rows] @ (norm_weight[rows].float() * h[rows])
            parts[i, -1] = (h[rows] ** 2).sum()
        self.parts_topk(parts, h.numel(), eps, top_k, routed_scaling, probs, topk_idx, topk_weight)

    def parts_topk(self, parts, hidden, eps, top_k, routed_scaling, probs, topk_idx, topk_weight):
        sums = parts.sum(0)
        p = torch.softmax(sums[:-1] * torch.rsqrt(sums[-1] / hidden + eps), -1)
        chosen = sorted(sorted(range(p.numel()), key=lambda e: (-p[e].item(), e))[:top_k])
        probs.copy_(p)
        topk_idx.copy_(torch.tensor(chosen, dtype=torch.int32))
        topk_weight.copy_(p[chosen] * routed_scaling)

    def expert_gate_up(self, x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, act, rows_per_tile):
        xn = rms_norm(x, norm_weight)
        inter = act.shape[1]
        for slot in range(act.shape[0]):
            # routed: gate_w is experts.gate_up_proj [E, 2I, hidden], up_w its view [:, I:]
            gate, up = (gate_w, up_w) if expert_idx is None else (gate_w[int(expert_idx[slot])][:inter],
                                                                  up_w[int(expert_idx[slot])])
            g, u = st(gate.float() @ xn, x.dtype), st(up.float() @ xn, x.dtype)
            act[slot] = st(F.silu(g), x.dtype) * u

    def down_accum(self, down_w, expert_stride, expert_idx, expert_weight, act, h_out, rows_per_tile):
        if expert_idx is None:  # one plain matrix, weight 1
            h_out += down_w.float() @ act[0].float()
            return
        for slot, e in enumerate(expert_idx.tolist()):
            h_out += expert_weight[slot] * (down_w[e].float() @ act[slot].float())

    def gate_up_down(self, x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, partials,
                     rows_per_tile):
        xn = rms_norm(x, norm_weight)
        slices = -(-inter // rows_per_tile)
        for slot in range(1 if expert_idx is None else expert_idx.numel()):
            if expert_idx is None:
                gate, up, down, weight = gate_w, up_w, down_t.T, 1.0
            else:  # views of experts.gate_up_proj [E, 2I, hidden]; down_t [E, I, hidden]
                e = int(expert_idx[slot])
                gate, up, down, weight = gate_w[e], up_w[e], down_t[e].T, expert_weight[slot]
            g, u = st(gate.float() @ xn, x.dtype), st(up.float() @ xn, x.dtype)
            act = st(st(F.silu(g), x.dtype) * u, x.dtype)
            for i, r0 in enumerate(range(0, inter, rows_per_tile)):
                r1 = r0 + rows_per_tile
                partial = weight * (down[:, r0:r1].float() @ act[r0:r1])
                if partials.dtype == torch.int64:  # the fixed-point accumulator every slice adds into
                    partials += to_fixed_point(partial)
                else:
                    partials[slot * slices + i] = partial

    def sum_partials(self, partials, into, rows_per_tile):
        into += partials.sum(0)

    def expert_pool(self, x, norm_weight, eps, gate_up, down_t, expert_idx, expert_weight, piece_rows, n_takers,
                    pool, acc, local_sum=True):
        inter = down_t.shape[1]
        per_slot = -(-inter // piece_rows)
        xn = rms_norm(x, norm_weight)
        for p in range(expert_idx.numel() * per_slot):  # the takers' takes, in counter order
            slot, r0 = divmod(p, per_slot)
            r0 *= piece_rows
            rows = slice(r0, min(r0 + piece_rows, inter))
            e = int(expert_idx[slot])
            g, u = st(gate_up[e, rows].float() @ xn, x.dtype), st(gate_up[e, inter:][rows].float() @ xn, x.dtype)
            act = st(st(F.silu(g), x.dtype) * u, x.dtype)
            acc += to_fixed_point(expert_weight[slot] * (down_t[e, rows].float().T @ act))
        pool += expert_idx.numel() * per_slot + n_takers

    def sum_fixed_point(self, acc, into, rows_per_tile):
        into += from_fixed_point(acc)
        acc.zero_()

    def lm_head(self, x, norm_weight, eps, W, logits, part_value, part_index, rows_per_tile):
        logits.copy_(st(W.float() @ rms_norm(x, norm_weight), torch.bfloat16))
        for t in range(part_value.shape[0]):
            tile = logits[t * rows_per_tile: (t + 1) * rows_per_tile]
            part_value[t], part_index[t] = tile.max(), t * rows_per_tile + int(torch.argmax(tile))

    def argmax(self, value, token, index=None, tokens=None, step=0):
        best = int(torch.argmax(value))  # first occurrence
        token[0] = best if index is None else index[best]
        if tokens is not None:
            tokens[step] = token[0]


@pytest.fixture(scope="module")
def correct_results():
    return check_all(seed=0, device="cpu", lib=TorchTaskKernels(), shapes=SMALL,
                     activations=(torch.float32, torch.bfloat16))


def test_harness_passes_a_correct_model_of_every_kernel(correct_results):
    assert set(correct_results) == ROWS
    failed = {k: r["note"] or r for k, r in correct_results.items() if not r["passed"]}
    assert not failed
    for kind, r in correct_results.items():
        assert r["written"] and r["max_rel"] <= r["tol"], kind


class UnwrittenRow(TorchTaskKernels):
    def rmsnorm_gemv(self, x, norm_weight, eps, W, out, rows_per_tile, residual=None):
        full = out.clone()
        super().rmsnorm_gemv(x, norm_weight, eps, W, full, rows_per_tile, residual)
        out[:-1] = full[:-1]  # the last row is never written


class HalvesRope(TorchTaskKernels):
    def rope_cache(self, q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache):
        super().rope_cache(q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache)
        rope = q_pe_out.shape[1]
        half = q_pe_out.view(-1, 2, rope // 2).transpose(1, 2).reshape(q_pe_out.shape)  # GPT-NeoX pairing
        q_pe_out.copy_(half)


class LastIndexOnTies(TorchTaskKernels):
    def argmax(self, value, token, index=None, tokens=None, step=0):
        flipped = int(torch.argmax(value.flip(0)))
        best = value.numel() - 1 - flipped
        token[0] = best if index is None else index[best]
        if tokens is not None:
            tokens[step] = token[0]


class WritesOtherCacheRows(TorchTaskKernels):
    def rope_cache(self, q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache):
        super().rope_cache(q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache)
        ckv_cache[(pos + 1) % ckv_cache.shape[0]] = 0.0


class RoundsFp32ToBf16(TorchTaskKernels):
    def expert_gate_up(self, x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, act, rows_per_tile):
        super().expert_gate_up(x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, act, rows_per_tile)
        act.copy_(act.to(torch.bfloat16))  # an fp32 buffer holding bf16 values


class ExpertsInDescendingOrder(TorchTaskKernels):
    def router_tiles(self, x, norm_weight, eps, w_router, rows_per_tile, top_k, routed_scaling, logits, probs,
                     topk_idx, topk_weight):
        super().router_tiles(x, norm_weight, eps, w_router, rows_per_tile, top_k, routed_scaling, logits, probs,
                             topk_idx, topk_weight)
        topk_idx.copy_(topk_idx.flip(0))
        topk_weight.copy_(topk_weight.flip(0))


class RouterSkipsLastTile(TorchTaskKernels):
    def router_tiles(self, x, norm_weight, eps, w_router, rows_per_tile, top_k, routed_scaling, logits, probs,
                     topk_idx, topk_weight):
        super().router_tiles(x, norm_weight, eps, w_router[:-rows_per_tile], rows_per_tile, top_k, routed_scaling,
                             logits[:-rows_per_tile], probs[:-rows_per_tile], topk_idx, topk_weight)


class RouterPartsMissTheLastTile(TorchTaskKernels):
    def o_proj_router(self, attn_out, W_o, residual, h_attn, norm_weight, eps, w_router, rows_per_tile, top_k,
                      routed_scaling, parts, probs, topk_idx, topk_weight):
        super().o_proj_router(attn_out, W_o, residual, h_attn, norm_weight, eps, w_router, rows_per_tile, top_k,
                              routed_scaling, parts, probs, topk_idx, topk_weight)
        parts[-1] = 0.0


class TopkSkipsTheLastPart(TorchTaskKernels):
    def parts_topk(self, parts, hidden, eps, top_k, routed_scaling, probs, topk_idx, topk_weight):
        super().parts_topk(parts[:-1], hidden, eps, top_k, routed_scaling, probs, topk_idx, topk_weight)


class OverwritesInsteadOfAdding(TorchTaskKernels):
    def down_accum(self, down_w, expert_stride, expert_idx, expert_weight, act, h_out, rows_per_tile):
        h_out.zero_()
        super().down_accum(down_w, expert_stride, expert_idx, expert_weight, act, h_out, rows_per_tile)


class SlicesTheWrongDownRows(TorchTaskKernels):
    def gate_up_down(self, x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, partials,
                     rows_per_tile):
        super().gate_up_down(x, norm_weight, eps, gate_w, up_w, down_t.flip(-2), expert_idx, expert_weight, inter,
                             partials, rows_per_tile)


class ForgetsTheRouteWeight(TorchTaskKernels):
    def gate_up_down(self, x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, partials,
                     rows_per_tile):
        ones = None if expert_weight is None else torch.ones_like(expert_weight)
        super().gate_up_down(x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, ones, inter, partials,
                             rows_per_tile)


class FixedPointSliceTruncates(TorchTaskKernels):
    """Rounds each fixed-point add toward zero at 2**-8 instead of to nearest at 2**-32."""
    def gate_up_down(self, x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, partials,
                     rows_per_tile):
        if partials.dtype != torch.int64:
            return super().gate_up_down(x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter,
                                        partials, rows_per_tile)
        exact = torch.zeros_like(partials)
        super().gate_up_down(x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, exact,
                             rows_per_tile)
        partials += exact // 2 ** 24 * 2 ** 24


class PoolLosesTheLastPiece(TorchTaskKernels):
    def expert_pool(self, x, norm_weight, eps, gate_up, down_t, expert_idx, expert_weight, piece_rows, n_takers,
                    pool, acc, local_sum=True):
        short = down_t.clone()
        short[:, -piece_rows:] = 0  # every slot's last piece adds nothing
        super().expert_pool(x, norm_weight, eps, gate_up, short, expert_idx, expert_weight, piece_rows, n_takers,
                            pool, acc, local_sum)


class LocalSumDropsATakersRow(TorchTaskKernels):
    """Summed per taker first, one taker's row is never added (its flush skipped)."""
    def expert_pool(self, x, norm_weight, eps, gate_up, down_t, expert_idx, expert_weight, piece_rows, n_takers,
                    pool, acc, local_sum=True):
        short = down_t.clone()
        if local_sum:
            short[:, :piece_rows] = 0  # the first taker's first piece, as if its row never reached acc
        super().expert_pool(x, norm_weight, eps, gate_up, short, expert_idx, expert_weight, piece_rows, n_takers,
                            pool, acc, local_sum)


class KeepsTheFixedPointSum(TorchTaskKernels):
    def sum_fixed_point(self, acc, into, rows_per_tile):
        into += from_fixed_point(acc)


class SumsAllButTheLastRow(TorchTaskKernels):
    def sum_partials(self, partials, into, rows_per_tile):
        super().sum_partials(partials[:-1], into, rows_per_tile)


class ChunkWritesOnlyItsFirstHeadGroup(TorchTaskKernels):
    def attention_chunk(self, q_lat, q_pe, ckv_cache, kpe_cache, n_pos, chunk_len, scale, part_m, part_l, part_o,
                        head_groups=1, tensor_cores=False):
        heads = q_lat.shape[0] // head_groups
        full = [t.clone() for t in (part_m, part_l, part_o)]
        super().attention_chunk(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, chunk_len, scale, *full)
        for out, t in zip((part_m, part_l, part_o), full):
            out[:, :heads] = t[:, :heads]


class DropsTheResidual(TorchTaskKernels):
    def rmsnorm_gemv(self, x, norm_weight, eps, W, out, rows_per_tile, residual=None):
        super().rmsnorm_gemv(x, norm_weight, eps, W, out, rows_per_tile)


@pytest.mark.parametrize("model, kind", [
    (UnwrittenRow, "RMSNORM_GEMV"),
    (DropsTheResidual, "O_PROJ_RESIDUAL"),
    (ChunkWritesOnlyItsFirstHeadGroup, "ATTN_CHUNK"),
    (HalvesRope, "CACHE_APPEND"),
    (WritesOtherCacheRows, "CACHE_APPEND"),
    (LastIndexOnTies, "ARGMAX"),
    (RoundsFp32ToBf16, "EXPERT_GATE_UP"),
    (ExpertsInDescendingOrder, "ROUTE_TOPK"),
    (RouterSkipsLastTile, "ROUTER"),
    (RouterPartsMissTheLastTile, "O_PROJ_ROUTER"),
    (TopkSkipsTheLastPart, "ROUTE_PARTS_TOPK"),
    (OverwritesInsteadOfAdding, "DOWN_ACCUM"),
    (OverwritesInsteadOfAdding, "EXPERT_DOWN_ACCUM"),
    (SlicesTheWrongDownRows, "GATE_UP_DOWN"),
    (SlicesTheWrongDownRows, "EXPERT_GATE_UP_DOWN"),
    (ForgetsTheRouteWeight, "EXPERT_GATE_UP_DOWN"),
    (SumsAllButTheLastRow, "SUM_PARTIALS"),
    (FixedPointSliceTruncates, "EXPERT_GATE_UP_DOWN"),
    (KeepsTheFixedPointSum, "SUM_FIXED_POINT"),
    (PoolLosesTheLastPiece, "EXPERT_POOL"),
    (LocalSumDropsATakersRow, "EXPERT_POOL"),
])
def test_harness_fails_a_planted_bug(model, kind):
    results = check_all(seed=0, device="cpu", lib=model(), shapes=SMALL, kinds=[kind])
    assert not results[kind]["passed"], results[kind]
