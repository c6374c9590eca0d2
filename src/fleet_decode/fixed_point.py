"""The split-K slices' fixed-point sum (Plan.split_k_sum = "fixed-point"): values as int64 counts of
2**-FIXED_POINT_BITS, so that adds in any order give the same bits. The device rounds the same way
(__float2ll_rn of x * 2**32, exact in fp32; the sum back through double), so these are its arithmetic.
"""

import torch

from fleet_decode.graph.format import FIXED_POINT_BITS

ONE = float(2 ** FIXED_POINT_BITS)


def to_fixed_point(x: torch.Tensor) -> torch.Tensor:
    """fp32 values as int64 units, rounded to nearest (ties to even)."""
    return torch.round(x.float() * ONE).to(torch.int64)


def from_fixed_point(q: torch.Tensor) -> torch.Tensor:
    """int64 units as fp32, through double: the one rounding is the final one to fp32."""
    return (q.double() / ONE).float()
