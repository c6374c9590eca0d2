"""Renders hip/runtime/graph_format.h from format.py, so the device runtime reads the same encoding."""

from fleet_decode.graph import format as fmt


def _enum(name, prefix, items):
    body = "".join(f"    {prefix}{key} = {value},\n" for key, value in items)
    return f"enum {name} {{\n{body}}};\n"


def render_c_header() -> str:
    out = [
        "/* GENERATED from src/fleet_decode/graph/format.py by\n"
        " *   python -m fleet_decode.graph --c-header hip/runtime/graph_format.h\n"
        " * Do not edit: change format.py and regenerate (tests/test_graph_format.py checks they agree).\n"
        " * The meaning of every field is in docs/task-graph.md. All words are int32; floats are stored\n"
        " * as their IEEE-754 binary32 bit pattern (read them with a bitcast). */\n",
        "#pragma once\n",
        f"#define FD_GRAPH_MAGIC 0x{fmt.MAGIC:08X}\n",
        f"#define FD_GRAPH_VERSION {fmt.VERSION}\n",
        f"#define FD_NONE ({fmt.NONE})\n",
    ]
    for name in ("MAX_INPUTS", "MAX_BUFFERS", "MAX_WEIGHTS", "MAX_ARGS", "HEADER_WORDS", "TASK_WORDS", "EVENT_WORDS",
                 "BUFFER_WORDS", "WEIGHT_WORDS"):
        out.append(f"#define FD_{name} {getattr(fmt, name)}\n")
    out.append("\n/* What the device code is compiled for (FD_COMPILED_*) and its fixed limits. */\n")
    for name, value in fmt.COMPILED_DIMS.items():
        out.append(f"#define FD_COMPILED_{name.upper()} {value}\n")
    for name, value in fmt.KERNEL_LIMITS.items():
        out.append(f"#define FD_{name} {value}\n")
    out.append(f"#define FD_FIXED_POINT_BITS {fmt.FIXED_POINT_BITS} /* the I64 accumulator's unit: 2^-bits */\n")
    out.append("\n" + _enum("fd_kind", "FD_KIND_", [(k.name, k.value) for k in fmt.Kind]))
    out.append(_enum("fd_dtype", "FD_DTYPE_", [(k.name, k.value) for k in fmt.DType]))
    out.append(_enum("fd_persistence", "FD_PERSIST_", [(k.name, k.value) for k in fmt.Persistence]))
    for enum_name, prefix, table in (("fd_header_word", "FD_H_", fmt.HEADER), ("fd_task_word", "FD_T_", fmt.TASK),
                                     ("fd_event_word", "FD_E_", fmt.EVENT), ("fd_buffer_word", "FD_B_", fmt.BUFFER),
                                     ("fd_weight_word", "FD_W_", fmt.WEIGHT)):
        out.append(_enum(enum_name, prefix, table.items()))
    out.append("\n/* Operand positions per kind: FD_<KIND>_BUF_<NAME> indexes BUF0.., _WT_ WT0.., _ARG_ ARG0.. */\n")
    for kind, (bufs, wts, args) in fmt.OPERANDS.items():
        for group, names in (("BUF", bufs), ("WT", wts), ("ARG", args)):
            for i, n in enumerate(names):
                out.append(f"#define FD_{kind.name}_{group}_{n.upper()} {i}\n")
    for kind, operand in fmt.ACCUMULATES.items():
        out.append(f"#define FD_{kind.name}_ACCUMULATES 1 /* adds into BUF {operand} */\n")
    return "".join(out)
