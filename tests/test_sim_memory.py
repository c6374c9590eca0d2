"""The memory checks on their own: what counts as ordered, across steps and for LOG buffers."""

import pytest
import torch

from fleet_decode.graph import Plan, build_graph
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
