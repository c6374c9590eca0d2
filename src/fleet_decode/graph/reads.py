"""What each task streams from memory (weights and MLA cache): the cost model and the bytes-per-token count."""

from dataclasses import dataclass

from fleet_decode.graph.format import Kind


@dataclass(frozen=True)
class WeightRead:
    weight: int  # weight slot
    # which copy is read: the routed-expert slot k, or -1 (static rows); dynamic single rows are -2, and a
    # band of columns [begin, end) of every row (not one contiguous range) is COLUMN_BAND
    part: int
    begin: int  # first row read (rows of the last-but-one dimension for a 3-D expert tensor)
    end: int
    cols: int

    @property
    def elements(self):
        return (self.end - self.begin) * self.cols


COLUMN_BAND = -3


def weight_reads(task, graph) -> list[WeightRead]:
    c = graph.constants
    r0, r1 = task.tile
    shape = [graph.weights[w].shape for w in task.weights]

    def whole(j):  # a 1-D vector (a norm's weight)
        return WeightRead(task.weights[j], -1, 0, shape[j][0], 1)

    def one_row(j):  # one row picked at run time (the token's embedding, the position's rope row)
        return WeightRead(task.weights[j], -2, 0, 1, shape[j][-1])

    k = task.kind
    if k == Kind.EMBED:
        return [one_row(0)]
    if k in (Kind.RMSNORM_GEMV, Kind.LM_HEAD):
        return [whole(0), WeightRead(task.weights[1], -1, r0, r1, shape[1][1])]
    if k == Kind.ROPE_Q_ABSORB:  # units r0..r1 of (head, column block): contiguous rows of w_uk_parts
        return [WeightRead(task.weights[0], -1, r0 * c.qk_nope, r1 * c.qk_nope, shape[0][1]), one_row(1), one_row(2)]
    if k == Kind.ATTN_MERGE_UV:  # W_UV rows of the task's part of each head
        per_head, part_rows = c.qk_nope + c.v_head, c.v_head // task.args[1]
        v0 = c.qk_nope + task.slot * part_rows
        return [WeightRead(task.weights[0], -1, h * per_head + v0, h * per_head + v0 + part_rows, c.kv_rank)
                for h in range(r0, r1)]
    if k == Kind.ATTN_MERGE_COLS:  # the (head, column block)'s v rows of w_uv_parts: one contiguous range
        first = (r0 * task.args[1] + task.slot) * c.v_head
        return [WeightRead(task.weights[0], -1, first, first + c.v_head, shape[0][1])]
    if k == Kind.CACHE_APPEND:
        return [whole(0), one_row(1), one_row(2)]
    if k == Kind.O_PROJ_RESIDUAL:
        return [WeightRead(task.weights[0], -1, r0, r1, shape[0][1])]
    if k == Kind.O_PROJ_ROUTER:  # and the router's columns [r0, r1) of every expert's row (the norm's
        # [r0, r1) too, left out: the shared experts' tiles read the whole vector, counted once there)
        return [WeightRead(task.weights[0], -1, r0, r1, shape[0][1]),
                WeightRead(task.weights[2], COLUMN_BAND, r0, r1, shape[2][0])]
    if k == Kind.ROUTER:
        return [whole(0), WeightRead(task.weights[1], -1, r0, r1, shape[1][1])]
    if k == Kind.GATE_UP:
        return [whole(0)] + [WeightRead(task.weights[j], -1, r0, r1, shape[j][1]) for j in (1, 2)]
    if k == Kind.DOWN_ACCUM:
        return [WeightRead(task.weights[0], -1, r0, r1, shape[0][1])]
    if k == Kind.EXPERT_GATE_UP:
        inter, cols = shape[1][1] // 2, shape[1][2]
        return [whole(0), WeightRead(task.weights[1], task.slot, r0, r1, cols),
                WeightRead(task.weights[1], task.slot, inter + r0, inter + r1, cols)]
    if k == Kind.EXPERT_DOWN_ACCUM:
        return [WeightRead(task.weights[0], task.slot, r0, r1, shape[0][2])]
    if k == Kind.GATE_UP_DOWN:  # rows [r0, r1) of gate, up and the transposed down
        return [whole(0)] + [WeightRead(task.weights[j], -1, r0, r1, shape[j][1]) for j in (1, 2, 3)]
    if k == Kind.EXPERT_GATE_UP_DOWN:
        inter, cols = shape[1][1] // 2, shape[1][2]
        return [whole(0), WeightRead(task.weights[1], task.slot, r0, r1, cols),
                WeightRead(task.weights[1], task.slot, inter + r0, inter + r1, cols),
                WeightRead(task.weights[2], task.slot, r0, r1, shape[2][2])]
    if k == Kind.EXPERT_POOL:  # every slot's rows, shared by the pool's takers (pool_share)
        inter, cols = shape[1][1] // 2, shape[1][2]
        return [whole(0)] + [WeightRead(task.weights[1], slot, 0, 2 * inter, cols) for slot in range(c.top_k)] + \
            [WeightRead(task.weights[2], slot, 0, inter, shape[2][2]) for slot in range(c.top_k)]
    return []


def pool_share(task) -> int:
    """How many tasks share what weight_reads lists: an EXPERT_POOL's takers, else 1."""
    return task.args[0] if task.kind == Kind.EXPERT_POOL else 1


def cache_elements(task, graph) -> int:
    """Cache elements an attention chunk streams when its chunk is full."""
    if task.kind != Kind.ATTN_CHUNK:
        return 0
    ckv, kpe = graph.buffers[task.buffers[2]], graph.buffers[task.buffers[3]]
    return (task.tile[1] - task.tile[0]) * (ckv.cols + kpe.cols)


def task_cost(task, graph) -> int:
    return sum(r.elements for r in weight_reads(task, graph)) // pool_share(task) + cache_elements(task, graph)
