"""How a graph is cut into tiles and spread over workers: the Plan, and the two assignment policies."""

import math
from dataclasses import dataclass

import numpy as np

from fleet_decode.graph.format import KERNEL_LIMITS

ASSIGNMENTS = ("round-robin", "balanced")
# How an MoE layer's expert tiles are cut (graph.build._mlp):
#   routing-free   shared and routed gate/up as ONE stage cut over the workers the routing leaves free;
#   shared-first   the shared experts' gate/up cut over those workers ahead of the routing, so it streams
#                  while the routing is decided, and the routed gate/up over the workers the shared
#                  down tiles leave free;
#   shared-first-all  the same with the routed gate/up cut over every worker.
#   split-k        each tile a slice of one MLP's intermediate rows, gate/up AND down (GATE_UP_DOWN,
#                  EXPERT_GATE_UP_DOWN): the shared experts' slices start at o_proj beside the
#                  routing, every routed slot's slices form one stage, and SUM_PARTIALS tiles add the
#                  slices' partial rows into the residual sum in a fixed order.
#   split-k-routed the routed slots as split-K slices (no down tile waits for its slot's whole gate/up),
#                  the shared experts as in routing-free (gate/up tiles from o_proj on, beside the
#                  routing), their down tiles cut as the sum's tiles, so that the two add into each row
#                  range as two adders.
MOE_TILINGS = ("routing-free", "shared-first", "shared-first-all", "split-k", "split-k-routed")
# How the split-K slices' partials become the layer's output (graph.build._sum):
#   rows         each slice writes its own partial row; SUM_PARTIALS tiles add the rows in row order.
#   fixed-point  each slice adds its partial, rounded to 2**-32, into ONE int64 row with integer atomics
#                (any order, the same bits); SUM_FIXED_POINT tiles add that row into h_out and zero it.
#                Slices need no row each, and the sum reads one row instead of one per slice: what lets
#                rows be handed out at run time (docs/next/README.md item 11) and the sum stage shrink.
SPLIT_K_SUMS = ("rows", "fixed-point")


@dataclass(frozen=True)
class Plan:
    workers: int = 8
    stage_tiles: int = 0  # tiles each GEMV stage is cut into (0: as many as workers)
    row_align: int = 8  # tile heights are multiples of this (wide loads, whole warps of rows)
    heads_per_tile: int = 1  # heads per merge tile; (head, column block) units per q-absorb tile
    absorb_parts: int = 4  # column blocks a head's q-absorb is cut into (one task each by default)
    attn_chunk: int = 64  # cache positions per attention chunk (flash-decoding split)
    # Each chunk's heads cut into this many tasks: a task loads only its heads' q and writes only their
    # partials, so longer chunks (fewer partials for the merge to read) cost no more per task.
    attn_head_groups: int = 1
    max_positions: int = 2048  # cache rows allocated: prefill + decoded tokens must fit
    max_steps: int = 64  # decode steps one launch can run (token and logits rows allocated)
    assign: str = "balanced"
    task_overhead: int = 4096  # weight elements one task start costs in the balanced cost model
    moe_tiles: str = "routing-free"  # one of MOE_TILINGS
    # Most intermediate rows per split-K slice. The slice's down rows go through the runtime's stage in
    # chunks of what it holds (32 rows of a 2048-wide transposed down matrix are 128 KB), the first while
    # its gate/up rows stream; decoding takes 64 (DECODE_SPLIT_K_ROWS).
    split_k_rows: int = 32
    # Split-K slices of the shared experts (0: one per worker the routing leaves free). Fewer, longer
    # slices leave HBM to the router tiles that run beside them.
    split_k_shared_tiles: int = 0
    # The shared experts' MLP cut into this many parts over its intermediate rows (routing-free and
    # shared-first tilings): each part its own act, gate/up tiles and down tiles (the down matrix's
    # columns of the part), adding into the layer's output beside the routed slots. With 2 parts a
    # shared down tile streams as many bytes as a routed one, instead of twice as many.
    shared_parts: int = 1
    # The router's dot products computed by the o_proj tiles of the MoE layers (O_PROJ_ROUTER), each over
    # its own rows of h_attn, and the top-k from their partial sums (ROUTE_PARTS_TOPK): no router stage.
    router_in_o_proj: bool = False
    # Each merge task's W_UV rows cut into this many tasks (heads_per_tile must then be 1): each merges
    # its head's partials and computes 128 / merge_v_parts rows of attn_out, from a smaller staged tile.
    merge_v_parts: int = 1
    # The merge cut by latent columns instead (ATTN_MERGE_COLS; merge_v_parts and heads_per_tile 1): each
    # task reads 1/merge_lat_parts of its head's partials and of its W_UV (a block of columns, laid
    # out contiguously on the host), and writes one of merge_lat_parts partial attn_out vectors that
    # the o_proj tiles add in order.
    merge_lat_parts: int = 1
    # The cache append counts on the q-absorb's event, so that an attention chunk waits for ONE event
    # (q and the cache row both written): a wait on two events is two acquire round trips in a row.
    append_signals_absorb: bool = True
    # The down stage (every slot's down tiles and the shared experts') cut into this many times more,
    # shorter tiles: the down tiles of the slot whose gate/up finishes last then spread over more workers.
    down_split: int = 1
    # The down stage cut into as many tiles as fit the workers (18 a matrix for 7 down matrices on 132
    # workers, near-equal row counts) instead of tiles of the stage's rows (19 a matrix, the last of 32
    # rows: 133 tiles, so one worker streams two).
    down_fit: bool = False
    # The shared experts' gate/up tiles wait for the router's logits instead of h_attn (routing-free and
    # shared-first tilings; an edge the data does not need, h_attn being written before the router ran):
    # the router tiles then read their weights with HBM to themselves, and the shared experts' bytes
    # stream during the top-k and the routed window, where part 5 saw them slow the router down.
    shared_after_router: bool = False
    # The routing-free gate/up stage cut over every worker instead of those the routing tasks leave free:
    # the router's and top-k's workers are free again when the routed tiles become ready, and on 132
    # workers the tiles are then 88 rows (128 tiles, none short) instead of 96 (120, each slot's last 64).
    gate_up_all_workers: bool = False
    # Rows by which the routed split-K slices of the workers that run no shared slice are longer than the
    # others (0: all alike). Those workers take their routed slice as soon as the top-k fires, the others
    # only once their shared slice is done; longer slices first in the graph, list scheduling hands them
    # the workers that are free first.
    split_k_skew: int = 0
    # Rows of the layer's output a split-K sum tile adds (0: one tile a worker, as any GEMV stage). Longer
    # sum tiles leave more workers free to reach the next layer's q/kv tiles before the output fires.
    sum_rows: int = 0
    split_k_sum: str = "rows"  # one of SPLIT_K_SUMS
    # Routed rows handed out at run time (0: static routed slices): every slot's rows in pieces of this many,
    # which one EXPERT_POOL task a worker takes from a counter until none is left, so that no worker waits
    # for a slow one's static slice (docs/next/README.md item 11). Needs the fixed-point sum.
    routed_pool_rows: int = 0
    # A taker sums its pieces' fixed-point partials in its shared memory (exact integer adds) and adds them
    # into the layer's accumulator once, when the pool is empty: one atomic add a column a taker, as a static
    # slice makes, instead of one a piece. The same bits either way.
    pool_local_sum: bool = True
    # The dense layers' MLP (first_k_dense_replace) as split-K slices too (GATE_UP_DOWN over its
    # intermediate rows, one a worker, then SUM_PARTIALS), instead of a gate/up stage and a down stage:
    # no down tile waits for the last gate/up tile.
    dense_split_k: bool = False
    # Worker list w runs on block (w * worker_stride) % workers. The balanced policy hands a stage's
    # consecutive tiles (one expert slot's) to consecutive workers; a stride spreads them over the
    # GPU's SM clusters, whose share of the memory system may differ. Must be coprime with workers.
    worker_stride: int = 1

    def __post_init__(self):
        if self.assign not in ASSIGNMENTS:
            raise ValueError(f"assign must be one of {ASSIGNMENTS}, got {self.assign!r}")
        if self.moe_tiles not in MOE_TILINGS:
            raise ValueError(f"moe_tiles must be one of {MOE_TILINGS}, got {self.moe_tiles!r}")
        if self.split_k_sum not in SPLIT_K_SUMS:
            raise ValueError(f"split_k_sum must be one of {SPLIT_K_SUMS}, got {self.split_k_sum!r}")
        if self.routed_pool_rows < 0 or self.routed_pool_rows % self.row_align:
            raise ValueError(f"plan.routed_pool_rows must be 0 or a positive multiple of row_align "
                             f"{self.row_align}, got {self.routed_pool_rows}")
        if self.routed_pool_rows and self.split_k_sum != "fixed-point":
            raise ValueError("plan.routed_pool_rows needs split_k_sum='fixed-point': whichever worker runs a "
                             "piece, its partial must add to the same bits")
        for name in ("workers", "row_align", "heads_per_tile", "absorb_parts", "attn_chunk", "attn_head_groups",
                     "max_positions",
                     "max_steps", "split_k_rows", "shared_parts", "down_split", "merge_v_parts", "merge_lat_parts",
                     "worker_stride"):
            if getattr(self, name) < 1:
                raise ValueError(f"plan.{name} must be >= 1, got {getattr(self, name)}")
        if self.split_k_skew < 0:
            raise ValueError(f"plan.split_k_skew must be >= 0, got {self.split_k_skew}")
        if self.sum_rows < 0:
            raise ValueError(f"plan.sum_rows must be >= 0 (0: one sum tile a worker), got {self.sum_rows}")
        if math.gcd(self.worker_stride, self.workers) != 1:
            raise ValueError(f"plan.worker_stride {self.worker_stride} must be coprime with plan.workers "
                             f"{self.workers}, or some workers would get no list")

    def sum_tile_rows(self, total: int) -> int:
        """Rows a split-K sum tile adds: sum_rows, or those of a GEMV stage's tile."""
        return self.sum_rows or self.tile_rows(total)

    def tile_rows(self, stage_rows: int, reserved: int = 0) -> int:
        """Rows per tile for a stage whose matrices (run side by side) have stage_rows rows in all, cut
        into as many tiles as workers (or stage_tiles) less `reserved`: tasks that run beside the stage."""
        tiles = max(1, (self.stage_tiles or self.workers) - reserved)
        rows = math.ceil(stage_rows / tiles)
        return max(self.row_align, math.ceil(rows / self.row_align) * self.row_align)


def default_plan(config, workers: int = 132, **overrides) -> Plan:
    """One tile per worker per GEMV stage (132 = the H200's SMs; pass the target's own count), and a
    cache no longer than the model can attend over."""
    overrides.setdefault("max_positions", min(Plan.max_positions, config.max_position_embeddings))
    return Plan(workers=workers, **overrides)


# The fastest tiling measured for decoding (docs/megakernel.md "Speed"): a cache no longer than the
# decode needs, since empty rows still cost attention-chunk tasks, cut into the shortest chunks that
# still fit one round of the workers (shorter chunks are shorter tasks; a second round costs more),
# each chunk's heads cut into as many tasks as still fit (DECODE_HEAD_GROUPS, most first: a task
# of fewer heads loads less q and writes fewer partials, and the merge reads fewer of them; at 1,024
# positions 4 groups of 64-position chunks beat 1 group of 16, docs/megakernel.md "Speed, part 7").
# Rows are rounded to 32, not 64: a 1,024 + 32 decode then has 1,056 rows, 33 chunks of 32 in 4
# groups, one task per H200 worker, each one score pass of the chunk kernel (sweep 39: 2.388 ms
# against 2.485 for 17 chunks of 64 on 1,088 rows); 48-position chunks fit 1,088 rows in 92 tasks
# (2.453 against 2.485).
DECODE_ATTN_CHUNKS = (16, 32, 48, KERNEL_LIMITS["MAX_ATTN_CHUNK"])
DECODE_HEAD_GROUPS = (4, 2, 1)
CACHE_ROUNDING = 32
# Each merge task's W_UV rows in two tasks (Plan.merge_v_parts), where a head's rows split into whole
# row_align pieces: 1 % faster in sweeps 48, 49 and 50 (H200, one process each: 2.351 against 2.375,
# 2.350 against 2.374, 2.355 against 2.381), logits bit-identical. docs/megakernel.md part 11.
DECODE_MERGE_V_PARTS = 2
# Better still: each head's merge cut into four blocks of latent columns (Plan.merge_lat_parts), whose
# task finds the chunk weights in one warp while its partials' loads are in flight: 2.356 against 2.383
# ms (sweep 64, one process; 2 blocks 2.355). Used where the plan allows it (one head a merge task, no
# router in the o_proj tiles), else the two-part merge above. docs/megakernel.md part 13.
DECODE_MERGE_LAT_PARTS = 4


# The experts as split-K slices (Plan.moe_tiles = "split-k"): each task a slice of one expert's intermediate
# rows, gate/up AND down, so that no down tile waits for its expert's last gate/up tile and the workers
# stream about the same bytes each through the expert window (at the copy rate, trace 102). Routed slices
# of 64 rows: one a worker on the H200 (6 slots x 22), their down rows through the stage in two chunks.
# The shared experts' slices of 32 rows (two full gate/up passes of a block, one stage of down rows) stream
# from o_proj on, beside the routing: 88 of them leave the router's and more workers free. Sweep 79 (H200,
# one process): 2.230 ms against 2.263 for the routing-free tiling; 24-row shared slices 2.243, 16-row
# 2.339. docs/megakernel.md part 17.
DECODE_MOE_TILES = "split-k"
DECODE_SPLIT_K_ROWS = 64
DECODE_SPLIT_K_SHARED_ROWS = 32
# The split-K sum in 32 tiles of 64 rows (Plan.sum_rows) instead of one a worker: the other workers reach
# the next layer's q/kv tile (and start its stage copy) as soon as their slice is done. Sweep 82: 2.214 ms
# against 2.227; sweep 83, with the q/kv tiles staged: 2.099 against 2.129. docs/megakernel.md part 18.
DECODE_SUM_ROWS = 64
# Tiles in multiples of 4 rows (Plan.row_align), each head's q-absorb in 8 column blocks (Plan.absorb_parts,
# where the latent columns split into blocks of whole 8-column pieces) and the dense layer's MLP as split-K
# slices and a sum (Plan.dense_split_k). Sweep 86b (H200, one process): the three together 2.052 ms against
# 2.091; sweep 86: row_align 4 alone 2.090 against 2.108 (row_align 2: 2.089 against 2.091, no gain over 4),
# 8 absorb parts 2.074, the dense split-K 2.092 and 2.074 with row_align 4. Tokens identical; logits within
# 0.016 of the old order's (the dense MLP's sum in another order). Sweep 87b, each undone on the new defaults:
# 2.043 ms; dense MLP unsplit 2.061, 4 absorb parts 2.071, all three undone 2.100; at 4,096 positions 2.419
# against 2.480 (87c). docs/megakernel.md part 18.
DECODE_ROW_ALIGN = 4
DECODE_ABSORB_PARTS = 8
DECODE_DENSE_SPLIT_K = True
# How the split-K partials are summed (Plan.split_k_sum; docs/megakernel.md part 26): "rows" (a partial row a
# slice, added in a fixed order by the sum tiles) or "fixed-point" (every slice adds into one int64 row a layer).
# With the fixed-point sum, DECODE_ROUTED_POOL_ROWS > 0 hands the routed rows out at run time in pieces of that
# many rows (Plan.routed_pool_rows), and DECODE_SUM_IN_ONE_TILE sums a layer in one tile (sum_rows = hidden),
# which the megakernel runs as a tail of the slices (runtime.default_tuning).
DECODE_SPLIT_K_SUM = "rows"
DECODE_ROUTED_POOL_ROWS = 0
DECODE_SUM_IN_ONE_TILE = False


def merge_lat_parts_fit(parts: int, kv_rank: int, heads_per_tile: int, router_in_o_proj: bool) -> bool:
    """Whether the merge can be cut into `parts` blocks of latent columns (graph.build's conditions)."""
    return (parts <= KERNEL_LIMITS["MAX_MERGE_LAT_PARTS"] and kv_rank % (8 * parts) == 0 and heads_per_tile == 1
            and not router_in_o_proj)


def merge_v_parts_fit(parts: int, v_head_rows: int, heads_per_tile: int) -> bool:
    """Whether each merge task's W_UV rows can be cut into `parts` tasks: one head a tile, and a head's
    rows in parts of whole passes of the kernel (KERNEL_LIMITS["WUV_ROWS_PER_PASS"] rows), whatever the
    plan's row_align."""
    rows_per_pass = KERNEL_LIMITS["WUV_ROWS_PER_PASS"]
    return parts == 1 or (heads_per_tile == 1 and v_head_rows % parts == 0 and (v_head_rows // parts) % rows_per_pass == 0)


def absorb_parts_fit(parts: int, kv_rank: int) -> bool:
    """Whether a head's q-absorb can be cut into `parts` blocks of latent columns: blocks of a multiple of
    8 columns (a thread's 16-byte piece of W_UK rows), at most 8 a thread of a worker (the kernel's
    conditions; kernels.runtime refuses a graph that breaks them)."""
    return (parts > 0 and kv_rank > 0 and kv_rank % parts == 0 and (kv_rank // parts) % 8 == 0
            and kv_rank // parts // 8 <= KERNEL_LIMITS["RUNTIME_THREADS"])


def decode_worker_stride(workers: int) -> int:
    """The worker stride decoding uses: workers / 2 + 1 where that is coprime with the workers (67 on the
    H200's 132 SMs), else 1. Which SM a block lands on is the hardware's choice, and where each list
    runs mattered: sweep 47 (H200, 24 strides, one process) put 67 at 2.404 ms against 2.503 for the
    identity, the next best stride (89) at 2.433 and most others slower than the identity; sweeps 45
    and 46 gave 67 the same 4 %. Tokens and logits do not depend on it (the sums' order is the graph's)."""
    stride = workers // 2 + 1
    return stride if workers > 2 and math.gcd(stride, workers) == 1 else 1


def decode_plan(config, n_positions: int, workers: int, **overrides) -> Plan:
    """The plan for decoding n_positions (prompt + tokens: a launch of n steps from position p writes
    cache rows p .. p + n - 1): a cache of just that many rows (rounded up) cut into chunks and head
    groups: the most head groups (of DECODE_HEAD_GROUPS that divide the heads), then the shortest chunk
    (of DECODE_ATTN_CHUNKS), that make at most one task per worker (else one group of the longest
    chunks); the lists spread by decode_worker_stride; the merge in DECODE_MERGE_LAT_PARTS blocks of latent
    columns where the plan allows it, else in DECODE_MERGE_V_PARTS parts where a head's W_UV rows allow
    it; the experts as split-K slices (DECODE_MOE_TILES, DECODE_SPLIT_K_ROWS, the shared experts' slices
    DECODE_SPLIT_K_SHARED_ROWS long, the sum in tiles of DECODE_SUM_ROWS); tiles of DECODE_ROW_ALIGN rows, the
    q-absorb in DECODE_ABSORB_PARTS blocks where the latent columns allow it, the dense MLP split-K
    (DECODE_DENSE_SPLIT_K), the sum's form (DECODE_SPLIT_K_SUM, DECODE_ROUTED_POOL_ROWS, DECODE_SUM_IN_ONE_TILE).
    An override of any of these is kept and the others chosen."""
    rows = -(-n_positions // CACHE_ROUNDING) * CACHE_ROUNDING
    groups = [overrides["attn_head_groups"]] if "attn_head_groups" in overrides else \
        [g for g in DECODE_HEAD_GROUPS if config.num_attention_heads % g == 0]
    chunks = [overrides["attn_chunk"]] if "attn_chunk" in overrides else DECODE_ATTN_CHUNKS
    fits = [(g, c) for g in groups for c in chunks if -(-rows // c) * g <= workers]
    group, chunk = fits[0] if fits else (groups[-1], chunks[-1])
    kv_rank = getattr(config, "kv_lora_rank", 0) or 0
    heads_per_tile = overrides.get("heads_per_tile", 1)
    lat_parts = 1
    if "merge_v_parts" not in overrides and merge_lat_parts_fit(
            DECODE_MERGE_LAT_PARTS, kv_rank or 1, heads_per_tile, overrides.get("router_in_o_proj", False)):
        lat_parts = DECODE_MERGE_LAT_PARTS
    lat_parts = overrides.get("merge_lat_parts", lat_parts)
    v_parts = DECODE_MERGE_V_PARTS if lat_parts == 1 and merge_v_parts_fit(
        DECODE_MERGE_V_PARTS, config.v_head_dim, heads_per_tile) else 1
    shared_rows = getattr(config, "moe_intermediate_size", 0) * (getattr(config, "n_shared_experts", 0) or 0)
    absorb_parts = DECODE_ABSORB_PARTS if absorb_parts_fit(DECODE_ABSORB_PARTS, kv_rank) else Plan.absorb_parts
    # the pool and the one sum tile only where the sum is the fixed-point one (an override may ask for rows)
    fixed_point = overrides.get("split_k_sum", DECODE_SPLIT_K_SUM) == "fixed-point"
    sum_rows = config.hidden_size if fixed_point and DECODE_SUM_IN_ONE_TILE else DECODE_SUM_ROWS
    overrides = {"max_positions": rows, "row_align": DECODE_ROW_ALIGN, "absorb_parts": absorb_parts,
                 "dense_split_k": DECODE_DENSE_SPLIT_K, "attn_chunk": chunk, "attn_head_groups": group,
                 "worker_stride": decode_worker_stride(workers), "merge_v_parts": v_parts,
                 "merge_lat_parts": lat_parts, "moe_tiles": DECODE_MOE_TILES, "split_k_rows": DECODE_SPLIT_K_ROWS,
                 "split_k_shared_tiles": -(-shared_rows // DECODE_SPLIT_K_SHARED_ROWS), "sum_rows": sum_rows,
                 "split_k_sum": DECODE_SPLIT_K_SUM, "routed_pool_rows": DECODE_ROUTED_POOL_ROWS if fixed_point else 0,
                 **overrides}
    return default_plan(config, workers=workers, **overrides)


def tiles(total: int, rows: int):
    """[begin, end) ranges of at most `rows` covering range(total)."""
    return [(b, min(b + rows, total)) for b in range(0, total, rows)]


def even_tiles(total: int, n_tiles: int, align: int = 8):
    """range(total) in n_tiles contiguous ranges whose lengths are multiples of `align` (but the last)
    and differ by at most `align`: the longest tile is as short as n_tiles allow."""
    units = -(-total // align)
    n_tiles = max(1, min(n_tiles, units))
    bounds = [min(total, (units * i // n_tiles) * align) for i in range(n_tiles + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n_tiles)]


def split_k_tiles(total: int, n_tiles: int, max_rows: int, align: int = 8):
    """Slices of range(total) for the split-K expert tiles: about n_tiles of them, each a multiple of
    `align` rows (whole 16-byte pieces), at most max_rows."""
    rows = min(max_rows, max(align, math.ceil(total / n_tiles / align) * align))
    return tiles(total, rows)


def skewed_tiles(total: int, n_tiles: int, n_long: int, skew: int, align: int = 8):
    """range(total) in n_tiles contiguous ranges, the first n_long about `skew` rows longer than the others,
    each a multiple of `align` rows (but the last)."""
    n_long = max(0, min(n_long, n_tiles))
    ideal = [(total - n_long * skew) / n_tiles + (skew if i < n_long else 0) for i in range(n_tiles)]
    bounds, acc = [0], 0.0
    for length in ideal:
        acc += length
        bounds.append(min(total, max(bounds[-1], round(acc / align) * align)))
    bounds[-1] = total
    return [(bounds[i], bounds[i + 1]) for i in range(n_tiles) if bounds[i + 1] > bounds[i]]


def assign(tasks, events, plan: Plan) -> list[list[int]]:
    """Per-worker task lists, each in the graph's (topological) task order, so no worker blocks itself."""
    if plan.assign == "round-robin":
        lists = [list(range(w, len(tasks), plan.workers)) for w in range(plan.workers)]
    else:
        lists = _balanced(tasks, events, plan)
    if plan.worker_stride == 1:
        return lists
    spread = [[] for _ in lists]
    for w, tasks_of_w in enumerate(lists):
        spread[(w * plan.worker_stride) % plan.workers] = tasks_of_w
    return spread


def _ready(task, event_done):
    return max((event_done[e] for e, lag in task.inputs if lag == 0), default=0.0)


def _balanced(tasks, events, plan):
    """List scheduling on a cost model in which a task takes its bytes read plus a fixed start cost:
    each task, in order, goes to the worker that could start it earliest."""
    free = np.zeros(plan.workers)
    event_done = np.zeros(len(events))
    lists = [[] for _ in range(plan.workers)]
    for i, t in enumerate(tasks):
        start = np.maximum(free, _ready(t, event_done))
        w = int(np.argmin(start))
        free[w] = start[w] + t.cost + plan.task_overhead
        if t.out_event >= 0:
            event_done[t.out_event] = max(event_done[t.out_event], free[w])
        lists[w].append(i)
    return lists


def estimated_step_time(graph, task_overhead: int = Plan.task_overhead) -> float:
    """One step's length under the balanced policy's cost model (weight elements streamed by one worker),
    for any assignment whose lists follow the graph's task order."""
    owner = {t: w for w, tasks in enumerate(graph.workers) for t in tasks}
    free = np.zeros(len(graph.workers))
    event_done = np.zeros(len(graph.events))
    for i, t in enumerate(graph.tasks):
        w = owner[i]
        free[w] = max(free[w], _ready(t, event_done)) + t.cost + task_overhead
        if t.out_event >= 0:
            event_done[t.out_event] = max(event_done[t.out_event], free[w])
    return float(free.max())
