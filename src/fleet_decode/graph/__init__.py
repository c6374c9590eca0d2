"""The decode task graph: build it from a config and a Plan, encode it as int32 records, decode and validate."""

from fleet_decode.graph.build import build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.graph.graph import EncodedGraph, Graph, GraphFormatError, decode_graph
from fleet_decode.graph.plan import Plan, decode_plan, default_plan

__all__ = ["build_graph", "Kind", "EncodedGraph", "Graph", "GraphFormatError", "decode_graph", "Plan", "decode_plan", "default_plan"]
