"""The ONE encoding of a decode task graph: int32 records, shared by the simulator and the device runtime.

docs/task-graph.md explains every field; hip/runtime/graph_format.h is generated from this file
(`python -m fleet_decode.graph --c-header hip/runtime/graph_format.h`), so change the format here only.
"""

import enum
import struct

MAGIC = 0x46445447  # "FDTG"
VERSION = 9  # 2: the router cut into expert tiles and a ROUTE_TOPK task; 3: q-absorb by (head, column block);
# 4: split-K expert tiles (GATE_UP_DOWN, EXPERT_GATE_UP_DOWN) and SUM_PARTIALS; 5: ATTN_MERGE_UV's W_UV
# rows in parts (arg v_parts, slot = the part); 6: the router's dot products in the o_proj tiles
# (O_PROJ_ROUTER) and the top-k from their partial sums (ROUTE_PARTS_TOPK); 7: the merge cut by latent
# columns (ATTN_MERGE_COLS), o_proj adding attn_out's parts; 8: the split-K slices' fixed-point sum (arg
# fixed_point, SUM_FIXED_POINT, DType.I64); 9: routed rows handed out at run time (EXPERT_POOL, Persistence.COUNTER)
MAX_INPUTS = 4  # input events per task record
MAX_BUFFERS = 6  # buffer operands per task record
MAX_WEIGHTS = 4  # weight operands per task record
MAX_ARGS = 2  # integer parameters per task record
NONE = -1  # an unused operand, event or layer

# What the device code is compiled for, and its fixed limits: ONE source for both sides, emitted into
# graph_format.h as FD_<NAME> (hip/tasks/common.h and the runtime size their arrays from them; the
# host refuses graphs that break them).
COMPILED_DIMS = dict(n_heads=16, kv_rank=512, qk_rope=64, qk_nope=128, v_head=128)  # DeepSeek-V2-Lite's MLA
KERNEL_LIMITS = dict(
    MAX_ATTN_CHUNK=64,  # positions per attention chunk (the chunk's score buffer)
    MAX_MERGE_CHUNKS=1024,  # chunks one merge task reads
    RUNTIME_THREADS=256,  # threads per worker (block) of the persistent kernel
    TASK_THREADS=256,  # threads per block of the standalone task launchers
    GEMV_ROWS_PER_PASS=2,  # rows a warp streams at once in the GEMV tiles
    MAX_MERGE_LAT_PARTS=4,  # partial attn_out vectors o_proj adds (Plan.merge_lat_parts)
    WUV_ROWS_PER_PASS=8,  # W_UV rows of one head a warp streams at once in the merge (merge_v_parts cut in these)
)


class Kind(enum.IntEnum):
    EMBED = 1
    RMSNORM_GEMV = 2
    ROPE_Q_ABSORB = 3
    CACHE_APPEND = 4
    ATTN_CHUNK = 5
    ATTN_MERGE_UV = 6
    O_PROJ_RESIDUAL = 7
    ROUTER = 8
    GATE_UP = 9
    DOWN_ACCUM = 10
    EXPERT_GATE_UP = 11
    EXPERT_DOWN_ACCUM = 12
    LM_HEAD = 13
    ARGMAX = 14
    ROUTE_TOPK = 15
    GATE_UP_DOWN = 16
    EXPERT_GATE_UP_DOWN = 17
    SUM_PARTIALS = 18
    O_PROJ_ROUTER = 19
    ROUTE_PARTS_TOPK = 20
    ATTN_MERGE_COLS = 21
    SUM_FIXED_POINT = 22
    EXPERT_POOL = 23


class DType(enum.IntEnum):
    F32 = 0
    I32 = 1
    MODEL = 2  # the checkpoint's dtype: bf16 on the device, whatever the model was loaded in on the simulator
    I64 = 3  # a fixed-point accumulator: units of 2**-FIXED_POINT_BITS (SUM_FIXED_POINT)


class Persistence(enum.IntEnum):
    STEP = 0  # rewritten by every step; a read needs this step's write
    LOG = 1  # each element written at most once per launch (cache rows, tokens, logits rows)
    COUNTER = 2  # an atomic counter: zeroed before each launch, then only fetch-added to, never reset (EXPERT_POOL)


# What each kind's operands mean, in record order. This table is the contract: the builder fills
# exactly these slots, the validator checks it, the simulator and the device read them.
OPERANDS = {
    Kind.EMBED: (("tokens", "out"), ("embed",), ()),
    Kind.RMSNORM_GEMV: (("x", "y"), ("norm", "matrix"), ()),
    Kind.ROPE_Q_ABSORB: (("q", "q_lat", "q_pe"), ("w_uk", "rope_cos", "rope_sin"), ("parts",)),
    Kind.CACHE_APPEND: (("kv_a", "ckv", "kpe"), ("kv_norm", "rope_cos", "rope_sin"), ()),
    # Heads [head_begin, head_end) of the chunk's positions [tile); slot = the chunk's partials row.
    Kind.ATTN_CHUNK: (("q_lat", "q_pe", "ckv", "kpe", "part_o", "part_ml"), (), ("head_begin", "head_end")),
    # Heads [tile) merged from n_chunks partials; slot p of v_parts: W_UV rows p*v/v_parts .. of each head.
    Kind.ATTN_MERGE_UV: (("part_o", "part_ml", "attn_out"), ("kv_b",), ("n_chunks", "v_parts")),
    # Head [tile) merged from n_chunks partials over latent columns block `slot` of lat_parts, times the
    # same columns of the head's W_UV (w_uv_parts: block (h, slot) contiguous): attn_out's part `slot`.
    Kind.ATTN_MERGE_COLS: (("part_o", "part_ml", "attn_parts"), ("w_uv_parts",), ("n_chunks", "lat_parts")),
    # attn_out: one vector, or lat_parts of them (ATTN_MERGE_COLS), added in order before the product.
    Kind.O_PROJ_RESIDUAL: (("attn_out", "residual", "h_attn", "h_out"), ("o_proj",), ()),
    Kind.ROUTER: (("x", "logits"), ("norm", "router"), ()),
    Kind.GATE_UP: (("x", "act"), ("norm", "gate", "up"), ()),
    Kind.DOWN_ACCUM: (("act", "h_out"), ("down",), ()),
    Kind.EXPERT_GATE_UP: (("x", "route_idx", "act"), ("norm", "gate_up"), ()),
    Kind.EXPERT_DOWN_ACCUM: (("act", "route_idx", "route_w", "h_out"), ("down",), ()),
    Kind.LM_HEAD: (("x", "logits", "part_max", "part_idx"), ("norm", "lm_head"), ()),
    Kind.ARGMAX: (("part_max", "part_idx", "tokens"), (), ("n_tiles",)),
    Kind.ROUTE_TOPK: (("logits", "route_idx", "route_w"), (), ()),
    # A slice of intermediate rows [tile) of one MLP: its gate/up rows, then the same rows of the
    # transposed down matrix, written (times the route weight) as row `row` of `partials`;
    # SUM_PARTIALS adds the rows. fixed_point 1: `partials` is the layer's one I64 accumulator row and the
    # slice adds its partial into it in fixed point (integer adds: any order gives the same bits); row 0.
    Kind.GATE_UP_DOWN: (("x", "partials"), ("norm", "gate", "up", "down_t"), ("row", "fixed_point")),
    Kind.EXPERT_GATE_UP_DOWN: (("x", "route_idx", "route_w", "partials"), ("norm", "gate_up", "down_t"),
                               ("row", "fixed_point")),
    Kind.SUM_PARTIALS: (("partials", "h_out"), (), ("n_rows",)),
    # Rows [tile) of the fixed-point accumulator `acc` added into h_out, and zeroed: the start of next
    # step's sum (its slices follow this task through the step's chain).
    Kind.SUM_FIXED_POINT: (("acc", "h_out"), (), ()),
    # Every routed slot's intermediate rows in pieces of (tile end - tile begin) rows, handed out at run time:
    # n_takers tasks share the pool, each taking pieces from the I32 COUNTER `pool` until none is left, and
    # running each as EXPERT_GATE_UP_DOWN's slice of slot p // per_slot added in fixed point into `acc`
    # (local_sum 1: its pieces summed on the worker first, then added once: the same bits).
    Kind.EXPERT_POOL: (("x", "route_idx", "route_w", "acc", "pool"), ("norm", "gate_up", "down_t"),
                       ("n_takers", "local_sum")),
    # O_PROJ_RESIDUAL, and for the tile's rows r the router's partial sums: row `slot` of router_parts
    # holds sum_r router[e][r] * norm[r] * h_attn[r] for each expert e, then sum_r h_attn[r]^2.
    Kind.O_PROJ_ROUTER: (("attn_out", "residual", "h_attn", "h_out", "router_parts"), ("o_proj", "norm", "router"),
                         ()),
    # ROUTE_TOPK of logits[e] = rsqrt(sum of squares / hidden + eps) * (the n_parts rows' sums for e).
    Kind.ROUTE_PARTS_TOPK: (("router_parts", "route_idx", "route_w"), (), ("n_parts",)),
}

# Kinds that add into a buffer instead of overwriting it: (kind -> operand name). The region they add
# into must have been initialised (plainly written) earlier in the same step.
ACCUMULATES = {Kind.DOWN_ACCUM: "h_out", Kind.EXPERT_DOWN_ACCUM: "h_out", Kind.SUM_PARTIALS: "h_out",
               Kind.SUM_FIXED_POINT: "h_out"}

# The fixed-point accumulator's unit is 2**-FIXED_POINT_BITS: a slice's partial x adds round(x * 2**32)
# as an int64, so |x| < 2**31 and the sum's absolute error is at most n_slices * 2**-33.
FIXED_POINT_BITS = 32
SPLIT_K_KINDS = (Kind.GATE_UP_DOWN, Kind.EXPERT_GATE_UP_DOWN)


def fixed_point_adds(task) -> str | None:
    """The operand a task adds into in fixed point (a split-K slice with fixed_point set, a pool), else None."""
    if task.kind == Kind.EXPERT_POOL:
        return "acc"
    return "partials" if task.kind in SPLIT_K_KINDS and task.args[1] else None


def pool_pieces(task, moe_inter: int, top_k: int) -> tuple[int, int]:
    """An EXPERT_POOL's (pieces per slot, pieces in all): every slot's moe_inter rows in pieces of its tile's
    length. The pool's counter grows by pieces + n_takers a step (each taker's last take finds none left),
    so step s's pieces are the counts from s * (pieces + n_takers) on."""
    per_slot = -(-moe_inter // (task.tile[1] - task.tile[0]))
    return per_slot, top_k * per_slot


def _fields(*names):
    return {name: i for i, name in enumerate(names)}


HEADER = _fields(
    "MAGIC", "VERSION", "HEADER_WORDS", "TASK_WORDS", "EVENT_WORDS", "BUFFER_WORDS", "WEIGHT_WORDS",
    "N_TASKS", "N_EVENTS", "N_BUFFERS", "N_WEIGHTS", "N_WORKERS",
    "TASKS_AT", "EVENTS_AT", "BUFFERS_AT", "WEIGHTS_AT", "WORKER_OFFSETS_AT", "WORKER_TASKS_AT", "TOTAL_WORDS",
    "HIDDEN", "N_HEADS", "QK_NOPE", "QK_ROPE", "V_HEAD", "KV_RANK", "N_EXPERTS", "TOP_K", "MOE_INTER",
    "VOCAB", "FIRST_LAYER", "N_LAYERS", "HAS_HEAD", "MAX_POSITIONS", "MAX_STEPS",
    "RMS_EPS_F32", "ATTN_SCALE_F32", "ROUTED_SCALING_F32", "NORM_TOPK_PROB",
)
HEADER_WORDS = 40

TASK = _fields(
    "KIND", "LAYER", "TILE_BEGIN", "TILE_END", "SLOT", "OUT_EVENT", "N_INPUTS",
    *[f"IN{i}_{x}" for i in range(MAX_INPUTS) for x in ("EVENT", "LAG")],
    *[f"BUF{i}" for i in range(MAX_BUFFERS)],
    *[f"WT{i}" for i in range(MAX_WEIGHTS)],
    *[f"ARG{i}" for i in range(MAX_ARGS)],
    "COST",
)
TASK_WORDS = 32

EVENT = _fields("TRIGGERS", "LAYER")
EVENT_WORDS = 2

BUFFER = _fields("DTYPE", "ROWS", "COLS", "PERSISTENCE")
BUFFER_WORDS = 4

WEIGHT = _fields("DTYPE", "NDIM", "DIM0", "DIM1", "DIM2")
WEIGHT_WORDS = 5

for _table, _words in ((HEADER, HEADER_WORDS), (TASK, TASK_WORDS), (EVENT, EVENT_WORDS),
                       (BUFFER, BUFFER_WORDS), (WEIGHT, WEIGHT_WORDS)):
    assert len(_table) <= _words, "a record outgrew its declared size"


def f32_bits(x: float) -> int:
    """A float stored in an int32 word: its IEEE-754 binary32 bit pattern, read back with a bitcast."""
    return struct.unpack("<i", struct.pack("<f", x))[0]


def bits_f32(word: int) -> float:
    return struct.unpack("<f", struct.pack("<i", int(word)))[0]
