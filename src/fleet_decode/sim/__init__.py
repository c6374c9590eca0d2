"""The CPU simulator of the Fleet-style runtime: runs the encoded task graph with torch ops."""

from fleet_decode.sim.decode import SimResult, simulate, simulate_layer
from fleet_decode.sim.kind_check import check_task_kinds
from fleet_decode.sim.memory import SimRace
from fleet_decode.sim.runtime import SCHEDULES, SimDeadlock, Simulator

__all__ = ["check_task_kinds", "SCHEDULES", "SimDeadlock", "SimRace", "SimResult", "Simulator", "simulate", "simulate_layer"]
