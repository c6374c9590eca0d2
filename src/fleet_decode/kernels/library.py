"""ctypes loader for the task-kernel library built by fleet_decode.kernels.build.

Each `fd_launch_<kind>` of the C ABI becomes a method of `TaskKernels` that takes torch tensors,
checks their dtype / device / contiguity, passes raw device pointers and the current stream, and
raises `KernelError` with the runtime's message when the launch fails.

    lib = load()                       # build/kernels/<arch of this GPU>/libfleet_kernels.so
    lib.rmsnorm_gemv(x, norm_w, 1e-6, W, out, rows_per_tile=16)
"""
import ctypes
import os
from pathlib import Path

import torch

from fleet_decode.kernels.build import LIBRARY_NAME, REPO_ROOT, build

P, I, F, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_longlong

# Argument types of every exported launcher, in C order; the trailing stream is implied. The
# last int of most is `f32`: activations stored as fp32 (the task graph's F32 buffers) instead of
# bf16 (HF's storage); the wrappers below set it from the activation tensor's dtype.
SIGNATURES = {
    "embed": [P, P, I, P, I],
    "rmsnorm_gemv": [P, P, F, P, I, I, I, P, P, I],
    "rope_cache": [P, P, P, F, P, P, I, P, P, P, I],
    "rope_q_absorb": [P, P, I, P, P, I, I, P, P, I],
    "attention_chunk": [P, P, P, P, I, I, I, I, F, P, P, P, I, I],
    "attention_merge_uv": [P, P, I, P, I, P, I],
    "attention_merge_cols": [P, P, I, P, I, P, I],
    "router_tiles": [P, P, F, P, I, I, I, I, F, P, P, P, P, I],
    "o_proj_router": [P, P, I, I, I, P, P, P, P, I, F, I, F, P, P, P, P, I],
    "expert_gate_up": [P, P, F, P, P, L, P, I, I, I, I, P, I],
    "down_accum": [P, L, P, P, I, P, I, I, I, P, I],
    "lm_head": [P, P, F, P, I, I, I, P, P, P, I],
    "argmax": [P, P, I, P, P, I],
    "gate_up_down": [P, P, F, P, P, P, P, P, I, I, I, I, P, I, I],
    "sum_partials": [P, I, I, I, P],
    "sum_fixed_point": [P, I, I, P],
    "expert_pool": [P, P, F, P, P, P, P, I, I, I, I, I, P, P, I, I],
}
ACTIVATION_DTYPES = (torch.bfloat16, torch.float32)


class KernelError(RuntimeError):
    pass


def device_arch(device: torch.device | str | None = None) -> str:
    """The build target of a GPU: sm_90a on Hopper (its arch-specific features), gfxXXX on AMD."""
    props = torch.cuda.get_device_properties(device)
    if getattr(torch.version, "hip", None):
        return props.gcnArchName.split(":")[0]
    major, minor = props.major, props.minor
    return f"sm_{major}{minor}a" if major == 9 else f"sm_{major}{minor}"


def ptr(t: torch.Tensor | None, dtype: torch.dtype | None = None) -> int | None:
    """Raw device pointer of a contiguous GPU tensor (None passes a null pointer)."""
    if t is None:
        return None
    if not t.is_cuda:
        raise ValueError(f"tensor on {t.device}, expected a GPU tensor")
    if not t.is_contiguous():
        raise ValueError("tensor must be contiguous")
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"expected {dtype}, got {t.dtype}")
    return t.data_ptr()


def act(t: torch.Tensor) -> int:
    """Pointer of an activation tensor: bf16 (HF's storage) or fp32 (the task graph's buffers)."""
    if t.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"activations are bf16 or fp32, got {t.dtype}")
    return ptr(t)


def is_f32(t: torch.Tensor) -> int:
    return int(t.dtype == torch.float32)


class TaskKernels:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.fd_error_string.restype = ctypes.c_char_p
        self.lib.fd_error_string.argtypes = [I]
        self.warp_size = self.lib.fd_warp_size()
        for kind, argtypes in SIGNATURES.items():
            fn = getattr(self.lib, f"fd_launch_{kind}")
            fn.argtypes = [*argtypes, P]
            fn.restype = I

    def _launch(self, kind: str, *args) -> None:
        stream = torch.cuda.current_stream().cuda_stream
        code = getattr(self.lib, f"fd_launch_{kind}")(*args, stream)
        if code != 0:
            raise KernelError(f"fd_launch_{kind}: {self.lib.fd_error_string(code).decode()} ({code})")

    def embed(self, table, token, out):
        self._launch("embed", ptr(table, torch.bfloat16), ptr(token, torch.int32), table.shape[1], act(out),
                     is_f32(out))

    def rmsnorm_gemv(self, x, norm_weight, eps, W, out, rows_per_tile, residual=None):
        self._launch("rmsnorm_gemv", act(x), ptr(norm_weight, torch.bfloat16), eps, ptr(W, torch.bfloat16),
                     W.shape[1], W.shape[0], rows_per_tile, ptr(residual, x.dtype), ptr(out, x.dtype), is_f32(x))

    def rope_cache(self, q, kv_a, kv_norm_weight, eps, cos, sin, pos, q_pe_out, ckv_cache, kpe_cache):
        self._launch("rope_cache", act(q), ptr(kv_a, q.dtype), ptr(kv_norm_weight, torch.bfloat16), eps,
                     ptr(cos, torch.float32), ptr(sin, torch.float32), pos, ptr(q_pe_out, q.dtype),
                     ptr(ckv_cache, torch.bfloat16), ptr(kpe_cache, torch.bfloat16), is_f32(q))

    def rope_q_absorb(self, q, w_uk_parts, parts, cos, sin, pos, q_lat, q_pe_out, units_per_tile=1):
        """The task graph's ROPE_Q_ABSORB: w_uk_parts in the graph's layout (fleet_decode.graph.derived)."""
        self._launch("rope_q_absorb", act(q), ptr(w_uk_parts, torch.bfloat16), parts, ptr(cos, torch.float32),
                     ptr(sin, torch.float32), pos, units_per_tile, ptr(q_lat, torch.float32), ptr(q_pe_out, q.dtype),
                     is_f32(q))

    def attention_chunk(self, q_lat, q_pe, ckv_cache, kpe_cache, n_pos, chunk_len, scale, part_m, part_l, part_o,
                        head_groups=1, tensor_cores=False):
        """head_groups: each chunk's heads cut into this many blocks (the graph's Plan.attn_head_groups).
        tensor_cores: the form of the megakernel's tensor-core entry (runtime.Tuning.chunk_form; plain where
        the build has none)."""
        self._launch("attention_chunk", ptr(q_lat, torch.float32), act(q_pe), ptr(ckv_cache, torch.bfloat16),
                     ptr(kpe_cache, torch.bfloat16), n_pos, part_m.shape[0], chunk_len, head_groups, scale,
                     ptr(part_m, torch.float32), ptr(part_l, torch.float32), ptr(part_o, torch.float32),
                     int(tensor_cores), is_f32(q_pe))

    def attention_merge_uv(self, part_ml, part_o, kv_b, attn_out, heads_per_tile=1):
        """part_ml: [n_chunks, heads, 2] interleaved (m, l), as the task graph's buffer."""
        self._launch("attention_merge_uv", ptr(part_ml, torch.float32), ptr(part_o, torch.float32),
                     part_ml.shape[0], ptr(kv_b, torch.bfloat16), heads_per_tile, act(attn_out), is_f32(attn_out))

    def attention_merge_cols(self, part_ml, part_o, w_uv_parts, lat_parts, attn_parts):
        """The task graph's ATTN_MERGE_COLS for every (head, column block): w_uv_parts in the graph's layout
        (fleet_decode.graph.derived), attn_parts [lat_parts, heads * v_head]."""
        self._launch("attention_merge_cols", ptr(part_ml, torch.float32), ptr(part_o, torch.float32),
                     part_ml.shape[0], ptr(w_uv_parts, torch.bfloat16), lat_parts, act(attn_parts), is_f32(attn_parts))

    def router_tiles(self, x, norm_weight, eps, w_router, rows_per_tile, top_k, routed_scaling, logits, probs,
                     topk_idx, topk_weight):
        """The task graph's ROUTER tiles, then its ROUTE_TOPK: two launches."""
        self._launch("router_tiles", act(x), ptr(norm_weight, torch.bfloat16), eps, ptr(w_router, torch.float32),
                     w_router.shape[0], w_router.shape[1], rows_per_tile, top_k, routed_scaling,
                     ptr(logits, torch.float32), ptr(probs, torch.float32), ptr(topk_idx, torch.int32),
                     ptr(topk_weight, torch.float32), is_f32(x))

    def o_proj_router(self, attn_out, W_o, residual, h_attn, norm_weight, eps, w_router, rows_per_tile, top_k,
                      routed_scaling, parts, probs, topk_idx, topk_weight):
        """The task graph's O_PROJ_ROUTER tiles (h_attn = residual + W_o attn_out, and each tile's row of
        parts [tiles, experts + 1]), then its ROUTE_PARTS_TOPK: two launches."""
        self._launch("o_proj_router", act(attn_out), ptr(W_o, torch.bfloat16), W_o.shape[1], W_o.shape[0],
                     rows_per_tile, ptr(residual, attn_out.dtype), ptr(h_attn, attn_out.dtype),
                     ptr(norm_weight, torch.bfloat16), ptr(w_router, torch.float32), w_router.shape[0], eps, top_k,
                     routed_scaling, ptr(parts, torch.float32), ptr(probs, torch.float32), ptr(topk_idx, torch.int32),
                     ptr(topk_weight, torch.float32), is_f32(attn_out))

    def expert_gate_up(self, x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, act_out, rows_per_tile):
        """act_out: [n_slots, inter]; gate_w/up_w: views into the expert weights (any shape, contiguous base)."""
        self._launch("expert_gate_up", act(x), ptr(norm_weight, torch.bfloat16), eps, gate_w.data_ptr(),
                     up_w.data_ptr(), expert_stride, ptr(expert_idx, torch.int32), act_out.shape[0], x.shape[0],
                     act_out.shape[1], rows_per_tile, ptr(act_out, x.dtype), is_f32(x))

    def down_accum(self, down_w, expert_stride, expert_idx, expert_weight, act_in, h_out, rows_per_tile):
        """h_out[r] += w_slot * down[e_slot][r] . act_in[slot] for every slot (fp32 atomics)."""
        self._launch("down_accum", down_w.data_ptr(), expert_stride, ptr(expert_idx, torch.int32),
                     ptr(expert_weight, torch.float32), act_in.shape[0], act(act_in), act_in.shape[1],
                     h_out.shape[0], rows_per_tile, ptr(h_out, torch.float32), is_f32(act_in))

    def gate_up_down(self, x, norm_weight, eps, gate_w, up_w, down_t, expert_idx, expert_weight, inter, partials,
                     rows_per_tile):
        """partials [n_slots * slices, hidden] (fp32): slice i of slot k in row k * slices + i; or an int64
        [hidden] accumulator every slice adds into in fixed point (Plan.split_k_sum "fixed-point"). down_t
        is the down matrix transposed ([inter, hidden], or [E, inter, hidden] with expert_idx); with
        expert_idx, gate_w/up_w are views of experts.gate_up_proj (expert e at e * 2 * inter * hidden)."""
        n_slots = 1 if expert_idx is None else expert_idx.shape[0]
        fixed_point = partials.dtype == torch.int64
        self._launch("gate_up_down", act(x), ptr(norm_weight, torch.bfloat16), eps, gate_w.data_ptr(), up_w.data_ptr(),
                     ptr(down_t, torch.bfloat16), ptr(expert_idx, torch.int32), ptr(expert_weight, torch.float32),
                     n_slots, x.shape[0], inter, rows_per_tile,
                     ptr(partials, torch.int64 if fixed_point else torch.float32), is_f32(x), int(fixed_point))

    def sum_partials(self, partials, into, rows_per_tile):
        """into[r] += sum over the rows of partials [n, len(into)], in row order per thread subset."""
        self._launch("sum_partials", ptr(partials, torch.float32), partials.shape[0], partials.shape[1], rows_per_tile,
                     ptr(into, torch.float32))

    def expert_pool(self, x, norm_weight, eps, gate_up, down_t, expert_idx, expert_weight, piece_rows, n_takers,
                    pool, acc, local_sum=True):
        """n_takers blocks take pieces of piece_rows rows of every slot's expert from pool (an int32 counter,
        zeroed) and add each in fixed point into acc (int64 [hidden]); local_sum: each block sums its pieces
        first and adds once. gate_up [E, 2I, hidden], down_t [E, I, hidden] (the down matrices transposed)."""
        self._launch("expert_pool", act(x), ptr(norm_weight, torch.bfloat16), eps, ptr(gate_up, torch.bfloat16),
                     ptr(down_t, torch.bfloat16), ptr(expert_idx, torch.int32), ptr(expert_weight, torch.float32),
                     expert_idx.shape[0], x.shape[0], down_t.shape[1], piece_rows, n_takers, ptr(pool, torch.int32),
                     ptr(acc, torch.int64), int(local_sum), is_f32(x))

    def sum_fixed_point(self, acc, into, rows_per_tile):
        """into[r] += acc[r] * 2**-32 (acc int64, as long as into), then acc[r] = 0."""
        self._launch("sum_fixed_point", ptr(acc, torch.int64), acc.shape[0], rows_per_tile, ptr(into, torch.float32))

    def lm_head(self, x, norm_weight, eps, W, logits, part_value, part_index, rows_per_tile):
        self._launch("lm_head", act(x), ptr(norm_weight, torch.bfloat16), eps, ptr(W, torch.bfloat16), W.shape[1],
                     W.shape[0], rows_per_tile, ptr(logits, torch.float32), ptr(part_value, torch.float32),
                     ptr(part_index, torch.int32), is_f32(x))

    def argmax(self, value, token, index=None, tokens=None, step=0):
        self._launch("argmax", ptr(value, torch.float32), ptr(index, torch.int32), value.shape[0],
                     ptr(token, torch.int32), ptr(tokens, torch.int32), step)


def default_library_path(arch: str) -> Path:
    return Path(os.environ.get("FLEET_DECODE_KERNELS", REPO_ROOT / "build" / "kernels" / arch / LIBRARY_NAME))


def load(path: str | os.PathLike | None = None, build_if_missing: bool = True) -> TaskKernels:
    """Loads the library at path (default: this GPU's build dir), building it first if missing."""
    if path is None:
        arch = device_arch()
        path = default_library_path(arch)
        if not path.exists() and build_if_missing:
            build(arch, path.parent)
    return TaskKernels(path)
