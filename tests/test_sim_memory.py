"""The memory checks on their own: what counts as ordered, across steps and for LOG buffers."""

import pytest
import torch

from fleet_decode.graph import Kind, Plan, build_graph
from fleet_decode.model import get_config
from fleet_decode.sim.memory import Memory, SimRace


@pytest.fixture
def memory():
    graph = build_graph(get_config("tiny"), Plan(workers=2, max_positions=16, max_steps=4))
    return Memory(graph, torch.float32), graph


def bit(graph, task, step):
    return 1 << (step * len(graph.tasks) + task)


def test_overwriting_last_steps_input_needs_its_readers_ordered_first(memory):
    mem, g = memory
    q, writer, reader = g.buffer_index("L0.q"), g.task_index("L0.q_proj[0]"), g.task_index("L0.q_absorb[0]")
    values = torch.ones(8)
    mem.write(writer, 0, bit(g, writer, 0), q, 0, 8, values)
    mem.read(reader, 0, bit(g, reader, 0) | bit(g, writer, 0), q, 0, 8)
    with pytest.raises(SimRace, match=r"task L0\.q_proj\[0\] overwrote L0\.q\[0:8\] at step 1 while "
                                      r"L0\.q_absorb\[0\] \(step 0\) may still read it"):
        mem.write(writer, 1, bit(g, writer, 1) | bit(g, writer, 0), q, 0, 8, values)
    # once the writer knows the reader finished, the overwrite is fine
    mem.write(writer, 1, bit(g, writer, 1) | bit(g, reader, 0), q, 0, 8, values)
    assert torch.equal(mem.data[q][:8], values)


def test_a_log_element_is_written_once(memory):
    mem, g = memory
    ckv, append = g.buffer_index("L0.ckv"), g.task_index("L0.cache_append")
    mem.host_write(ckv, 0, torch.zeros(32))
    with pytest.raises(SimRace, match="already written"):
        mem.write(append, 0, bit(g, append, 0), ckv, 0, 32, torch.ones(32))
    # a row the host left free is the step's to write, and a later step may read it
    mem.write(append, 0, bit(g, append, 0), ckv, 32, 64, torch.ones(32))
    assert float(mem.read(g.task_index("L0.attn_chunk[0]"), 1, -1, ckv, 0, 64).sum()) == 32


def test_a_sum_is_readable_only_with_every_addition(memory):
    mem, g = memory
    h1, start = g.buffer_index("h.1"), g.task_index("L0.o_proj[0]")
    adders = [i for i, t in enumerate(g.tasks) if t.name.startswith("L0.mlp_down")]
    first = g.tasks[adders[0]]
    lo, hi = first.tile
    with pytest.raises(SimRace, match="added into h.1.* before it was written"):
        mem.write(adders[0], 0, -1, h1, lo, hi, torch.ones(hi - lo), accumulate=True)
    mem.write(start, 0, bit(g, start, 0), h1, lo, hi, torch.ones(hi - lo))
    reader = g.task_index("L1.q_proj[0]")
    with pytest.raises(SimRace, match="has 0 of its 1 accumulations"):
        mem.read(reader, 0, -1, h1, lo, hi)
    mem.write(adders[0], 0, -1, h1, lo, hi, torch.ones(hi - lo), accumulate=True)
    assert torch.equal(mem.read(reader, 0, -1, h1, lo, hi), torch.full((hi - lo,), 2.0))


def test_a_fixed_point_sum_is_zeroed_by_its_reader_for_the_next_steps_adders():
    """The accumulator starts at the host's zero; its reader zeroes it for step 1, whose adders must know
    that reader; an adder of step 1 that ran before the zeroing added into step 0's sum."""
    from fleet_decode.graph.format import SPLIT_K_KINDS
    from fleet_decode.graph.plan import decode_plan
    config = get_config("tiny")
    g = build_graph(config, decode_plan(config, 16, 3, max_steps=4, split_k_sum="fixed-point", routed_pool_rows=0))
    mem = Memory(g, torch.float32)
    acc = g.buffer_index("L1.moe_acc")
    slices = [i for i, t in enumerate(g.tasks) if t.layer == 1 and t.kind in SPLIT_K_KINDS]
    reader = g.task_index("L1.sum_slices[0]")
    lo, hi = g.tasks[reader].tile
    d = g.buffers[acc].numel
    assert mem.expected_adds[acc].tolist() == [len(slices)] * d
    with pytest.raises(SimRace, match=f"has 0 of its {len(slices)} accumulations"):
        mem.read(reader, 0, -1, acc, lo, hi)
    for s in slices:
        mem.write(s, 0, bit(g, s, 0), acc, 0, d, torch.full((d,), 3, dtype=torch.int64), accumulate=True)
    knows_slices = sum(bit(g, s, 0) for s in slices) | bit(g, reader, 0)
    assert mem.read(reader, 0, knows_slices, acc, lo, hi).tolist() == [3 * len(slices)] * (hi - lo)
    # a slice of step 1 before the zeroing: the accumulator still holds step 0's sum
    with pytest.raises(SimRace, match="added into L1.moe_acc.* before it was written"):
        mem.write(slices[0], 1, bit(g, slices[0], 1), acc, 0, d, torch.ones(d, dtype=torch.int64), accumulate=True)
    mem.write(reader, 0, knows_slices, acc, lo, hi, torch.zeros(hi - lo, dtype=torch.int64), for_next_step=True)
    others = [i for i, t in enumerate(g.tasks) if t.layer == 1 and t.name.startswith("L1.sum_slices") and i != reader]
    for other in others:  # the other sum tiles read their rows of step 0 and zero them too
        o_lo, o_hi = g.tasks[other].tile
        mem.read(other, 0, knows_slices | bit(g, other, 0), acc, o_lo, o_hi)
        mem.write(other, 0, knows_slices | bit(g, other, 0), acc, o_lo, o_hi, torch.zeros(o_hi - o_lo, dtype=torch.int64),
                  for_next_step=True)
    # step 1's adder must know every zeroing reader of step 0, not just have run after it
    blind = bit(g, slices[0], 1) | sum(bit(g, o, 0) for o in others)
    with pytest.raises(SimRace, match=r"the starting write by L1\.sum_slices\[0\] is not ordered before it"):
        mem.write(slices[0], 1, blind, acc, 0, d, torch.ones(d, dtype=torch.int64), accumulate=True)
    mem.write(slices[0], 1, blind | bit(g, reader, 0), acc, 0, d, torch.ones(d, dtype=torch.int64), accumulate=True)
    assert mem.data[acc].tolist() == [1] * d
    # the reader may not zero its rows for step 1 twice
    with pytest.raises(SimRace, match="twice in step 1"):
        mem.write(reader, 0, knows_slices, acc, lo, hi, torch.zeros(hi - lo, dtype=torch.int64), for_next_step=True)


def test_a_pools_takers_count_on_one_counter_and_a_take_before_the_last_step_is_done_is_a_race():
    """Simulator.take_pieces: each taker's pieces follow the last one's, the step's last taker takes what is
    left, and the counter grows by the pieces plus one take a taker; a taker of step 1 while a step-0 taker
    has not run would be handed step 0's pieces on the device."""
    from fleet_decode.graph.format import pool_pieces
    from fleet_decode.graph.plan import decode_plan
    from fleet_decode.sim.runtime import Simulator
    config = get_config("tiny")
    g = build_graph(config, decode_plan(config, 16, 3, max_steps=4, split_k_sum="fixed-point", routed_pool_rows=8))
    takers = [i for i, t in enumerate(g.tasks) if t.kind == Kind.EXPERT_POOL and t.layer == 1]
    _, n_pieces = pool_pieces(g.tasks[takers[0]], config.moe_intermediate_size, config.num_experts_per_tok)
    weights = [torch.zeros(w.shape) for w in g.weights]
    sim = Simulator(g.encode(), weights, torch.float32, 0, schedule="round-robin")
    pool = g.buffer_index("L1.moe_pool")
    got = [sim.take_pieces(t, 0, n_pieces) for t in takers]
    assert [p for r in got for p in r] == list(range(n_pieces)) and len(got[0]) == -(-n_pieces // len(takers))
    assert int(sim.memory.data[pool][0]) == n_pieces + len(takers)
    with pytest.raises(SimRace, match="an earlier step's takers are not all done"):
        sim.take_pieces(takers[0], 2, n_pieces)
    later = [sim.take_pieces(t, 1, n_pieces) for t in takers]
    assert [p for r in later for p in r] == list(range(n_pieces))
