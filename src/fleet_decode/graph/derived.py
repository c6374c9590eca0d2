"""Weights the graph reads in a layout of its own, derived on the host from the model's parameters
(as the rope tables are computed there): W_UK cut into column blocks, each block contiguous, so a
q-absorb task of one (head, column block) streams one contiguous range (and W_UV so for the merge
cut by latent columns); transposed down
matrices, so a split-K expert slice streams its band of down columns as contiguous rows; and bands
of a matrix's rows or columns, so each part of the shared experts' MLP has matrices of its own."""

import re

import torch

W_UK_PARTS = "self_attn.w_uk_parts"  # model.layers.<l>.self_attn.w_uk_parts
W_UV_PARTS = "self_attn.w_uv_parts"  # model.layers.<l>.self_attn.w_uv_parts


def _head_rows_in_column_blocks(kv_b: torch.Tensor, n_heads: int, nope: int, v_head: int, parts: int,
                                first: int, count: int) -> torch.Tensor:
    """Rows [first, first + count) of each head's nope + v rows of kv_b [H*(nope+v), R], cut into `parts`
    column blocks: [H*parts*count, R/parts], row (h*parts + p)*count + d = head h's row first + d,
    columns p*R/parts .. (p+1)*R/parts. Same values."""
    rank = kv_b.shape[1]
    if rank % parts:
        raise ValueError(f"kv_lora_rank {rank} does not split into {parts} column blocks")
    band = kv_b.view(n_heads, nope + v_head, rank)[:, first:first + count]
    return (band.reshape(n_heads, count, parts, rank // parts).permute(0, 2, 1, 3)
            .reshape(n_heads * parts * count, rank // parts).contiguous())


def w_uk_parts(kv_b: torch.Tensor, n_heads: int, nope: int, v_head: int, parts: int) -> torch.Tensor:
    """kv_b_proj.weight [H*(nope+v), R] -> [H*parts*nope, R/parts]: row (h*parts + p)*nope + d holds
    W_UK[h][d][p*R/parts : (p+1)*R/parts] (W_UK[h] = rows h*(nope+v) .. +nope of kv_b)."""
    return _head_rows_in_column_blocks(kv_b, n_heads, nope, v_head, parts, 0, nope)


def w_uv_parts(kv_b: torch.Tensor, n_heads: int, nope: int, v_head: int, parts: int) -> torch.Tensor:
    """kv_b_proj.weight [H*(nope+v), R] -> [H*parts*v, R/parts]: row (h*parts + p)*v + d holds
    W_UV[h][d][p*R/parts : (p+1)*R/parts] (W_UV[h] = rows h*(nope+v)+nope .. +v of kv_b)."""
    return _head_rows_in_column_blocks(kv_b, n_heads, nope, v_head, parts, nope, v_head)


TRANSPOSED = ".transposed"  # <parameter name>.transposed: the parameter's last two dimensions swapped


def transposed(name: str) -> str:
    return name + TRANSPOSED


# <parameter name>.rows[a:b] / .cols[a:b]: a band of a matrix's rows (a view: no copy) or of its
# columns (copied, so that its rows are contiguous).
_SLICE = re.compile(r"\.(rows|cols)\[(\d+):(\d+)\]$")


def rows(name: str, begin: int, end: int) -> str:
    return f"{name}.rows[{begin}:{end}]"


def cols(name: str, begin: int, end: int) -> str:
    return f"{name}.cols[{begin}:{end}]"


def derived(name: str, shape, params: dict, config):
    """The tensor of a derived weight slot, or None if `name` is not one."""
    if name.endswith(TRANSPOSED):
        return params[name[: -len(TRANSPOSED)]].detach().transpose(-1, -2).contiguous()
    band = _SLICE.search(name)
    if band is not None:
        parent, (axis, begin, end) = params[name[: band.start()]].detach(), band.groups()
        begin, end = int(begin), int(end)
        return parent[begin:end] if axis == "rows" else parent[:, begin:end].contiguous()
    for suffix, blocks in ((W_UK_PARTS, w_uk_parts), (W_UV_PARTS, w_uv_parts)):
        if name.endswith("." + suffix):
            kv_b = params[name[: -len(suffix)] + "self_attn.kv_b_proj.weight"].detach()
            parts = config.kv_lora_rank // shape[1]
            return blocks(kv_b, config.num_attention_heads, config.qk_nope_head_dim, config.v_head_dim, parts)
    return None
