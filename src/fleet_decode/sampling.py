"""Seeded sampling without sorting the vocabulary: Philox4x32-10 uniforms and the Gumbel-max trick.

    from fleet_decode.sampling import Sampling, sample
    token = sample(logits, Sampling(temperature=0.8, top_k=40, top_p=0.95, seed=7), position=1030)

The token at `position` (the position it will take in the sequence) is

    argmax over allowed i of  logits[i] / T - log(-log(u(seed, position, i)))

where u is a uniform in (0, 1) from Philox4x32-10 keyed by the seed with the counter (i, position,
0, 0). That is an exact draw from softmax(logits / T) over the allowed tokens, and it depends only
on (seed, position, logits): the same on every run, every launch split and every device. The
allowed tokens are the top-k and then the top-p of the rest, each as a threshold on the logits: the
largest of their order-preserving integer keys that still keeps enough, found without a sort (here by
bisection, on the device by a 16-way search per pass, hip/tasks/sampling.h; the same key):

  top-k: logits[i] is allowed if fewer than k logits are strictly larger;
  top-p: ... if the probability mass (within the top-k) of the strictly larger logits is below p.

That is Hugging Face's TopKLogitsWarper then TopPLogitsWarper, ties included on the kept side.
Temperature 0 is greedy (torch.argmax, the first maximum), the default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
PHILOX_ROUNDS = 10
MASK32 = 0xFFFFFFFF


class InvalidInput(ValueError):
    """A request that cannot be decoded (bad ids, lengths or sampling settings); one line, nothing run."""


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0: greedy
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self):
        if not self.temperature >= 0:  # also refuses NaN
            raise InvalidInput(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise InvalidInput(f"top-k must be >= 1, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise InvalidInput(f"top-p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.seed < 2 ** 64:
            raise InvalidInput(f"seed must be in [0, 2^64), got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def uses_top_p(self) -> bool:
        return self.top_p is not None and np.float32(self.top_p) < 1  # as the device sees it, in fp32

    def device_args(self) -> tuple:
        """The fields of hip/tasks/sampling.h's fd_sampling, in order: temperature, top_k (0: off),
        top_p (1: off), the seed's low and high 32-bit words."""
        return (float(self.temperature), self.top_k or 0, float(self.top_p) if self.uses_top_p else 1.0,
                self.seed & MASK32, self.seed >> 32)


def philox4x32(counter, key, rounds: int = PHILOX_ROUNDS) -> np.ndarray:
    """Philox4x32-R (Salmon et al., SC'11; Random123's philox4x32). counter: uint32 array [..., 4];
    key: two uint32 words. Returns uint32 [..., 4]."""
    c = [np.asarray(counter, dtype=np.uint64)[..., j] for j in range(4)]
    k0, k1 = np.uint64(key[0] & MASK32), np.uint64(key[1] & MASK32)
    m0, m1, mask = np.uint64(PHILOX_M[0]), np.uint64(PHILOX_M[1]), np.uint64(MASK32)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + np.uint64(PHILOX_W[0])) & mask, (k1 + np.uint64(PHILOX_W[1])) & mask
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & mask]
    return np.stack(c, axis=-1).astype(np.uint32)


def uniforms(seed: int, position: int, n: int) -> torch.Tensor:
    """u(seed, position, i) for i < n, fp32 in (0, 1): the top 24 bits of Philox's first word plus
    one half, times 2^-24 (exact in fp32, never 0 or 1)."""
    counter = np.zeros((n, 4), dtype=np.uint32)
    counter[:, 0] = np.arange(n, dtype=np.uint32)
    counter[:, 1] = position
    word = philox4x32(counter, (seed & MASK32, seed >> 32))[:, 0]
    return torch.from_numpy(((word >> 8).astype(np.float32) + np.float32(0.5)) * np.float32(2.0 ** -24))


def order_keys(x: torch.Tensor) -> torch.Tensor:
    """int64 keys with the order of the fp32 values x: the bits as int32, negatives' lower 31 flipped."""
    bits = x.float().contiguous().view(torch.int32).to(torch.int64)
    return torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


def _largest_key(keys: torch.Tensor, lo: int, hi: int, enough) -> int:
    """The largest K in [lo, hi) with enough(keys >= K), given enough at lo and not at hi (monotone)."""
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        lo, hi = (mid, hi) if enough(keys >= mid) else (lo, mid)
    return lo


def allowed_threshold(logits: torch.Tensor, sampling: Sampling) -> int:
    """The order key of the smallest allowed logit: top-k, then top-p within it (see the module doc)."""
    x = logits.float()
    keys = order_keys(x)
    top = int(keys.max()) + 1
    threshold = -(2 ** 31)
    if sampling.top_k is not None:
        threshold = _largest_key(keys, threshold, top, lambda kept: int(kept.sum()) >= sampling.top_k)
    if sampling.uses_top_p:
        weights = torch.exp((x - x.max()) / np.float32(sampling.temperature))
        total = float(weights[keys >= threshold].sum(dtype=torch.float32))
        target = np.float32(sampling.top_p) * np.float32(total)
        threshold = _largest_key(keys, threshold, top,
                                 lambda kept: float(weights[kept].sum(dtype=torch.float32)) >= target)
    return threshold


def sample(logits: torch.Tensor, sampling: Sampling, position: int) -> int:
    """The token at `position` from one row of logits (fp32 [vocab])."""
    if sampling.greedy:
        return int(torch.argmax(logits))
    x = logits.float().cpu()  # the draw is made where its uniforms are
    gumbel = -torch.log(-torch.log(uniforms(sampling.seed, position, x.numel())))
    scores = x / np.float32(sampling.temperature) + gumbel
    scores[order_keys(x) < allowed_threshold(x, sampling)] = -torch.inf
    return int(torch.argmax(scores))
