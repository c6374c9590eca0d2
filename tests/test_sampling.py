"""Seeded sampling: Philox4x32-10 against Random123's known answers, the allowed set against Hugging
Face's top-k / top-p warpers, the Gumbel-max draw against softmax, and the device's draw
(hip/tasks/sampling.h, fd_launch_sample) against the Python one."""

import ctypes

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from fleet_decode.sampling import InvalidInput, Sampling, allowed_threshold, order_keys, philox4x32, sample, uniforms

# Random123's kat_vectors, philox4x32 10: counter[4], key[2] -> output[4]
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_philox_matches_random123_known_answers(counter, key, expected):
    assert tuple(int(w) for w in philox4x32(np.array(counter, dtype=np.uint32), key)) == expected


def test_uniforms_are_open_interval_and_keyed_by_seed_and_position():
    u = uniforms(7, 100, 50000)
    assert u.dtype == torch.float32 and float(u.min()) > 0 and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 0.01
    assert torch.equal(u, uniforms(7, 100, 50000))
    assert not torch.equal(u, uniforms(8, 100, 50000)) and not torch.equal(u, uniforms(7, 101, 50000))
    assert not torch.equal(uniforms(2 ** 40 + 7, 100, 10), uniforms(7, 100, 10))  # the seed's high word counts


def hf_allowed(logits, sampling):
    x = (logits / sampling.temperature)[None]
    if sampling.top_k is not None:
        x = TopKLogitsWarper(sampling.top_k)(None, x)
    if sampling.top_p is not None:
        x = TopPLogitsWarper(sampling.top_p)(None, x)
    return torch.isfinite(x[0])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("top_k,top_p", [(None, 0.9), (None, 0.5), (40, None), (1, None), (50, 0.8), (5, 0.999)])
def test_allowed_set_is_hf_top_k_then_top_p(seed, top_k, top_p):
    logits = torch.randn(5000, generator=torch.Generator().manual_seed(seed)) * 3
    sampling = Sampling(temperature=0.7, top_k=top_k, top_p=top_p, seed=seed)
    ours = order_keys(logits) >= allowed_threshold(logits, sampling)
    assert torch.equal(ours, hf_allowed(logits, sampling))


def test_ties_at_the_top_k_boundary_are_kept():
    logits = torch.tensor([3.0, 2.0, 2.0, 1.0])
    assert (order_keys(logits) >= allowed_threshold(logits, Sampling(1.0, top_k=2))).tolist() == [True, True, True,
                                                                                                    False]


def test_draws_follow_the_softmax_of_the_allowed_tokens():
    """Frequencies of 4,000 draws (one per position, fixed seed) against softmax(logits / T)."""
    logits = torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0, -3.0])
    for sampling in (Sampling(0.8, seed=3), Sampling(1.3, top_k=3, seed=4)):
        draws = torch.tensor([sample(logits, sampling, position=p) for p in range(4000)])
        counts = torch.bincount(draws, minlength=len(logits)).float()
        allowed = order_keys(logits) >= allowed_threshold(logits, sampling)
        probs = torch.softmax(torch.where(allowed, logits / sampling.temperature, -torch.inf), dim=0)
        expected = probs * len(draws)
        assert torch.all(counts[~allowed] == 0)
        # 5 standard deviations of a binomial count: a wrong distribution (e.g. T ignored) is far outside
        assert torch.all((counts - expected).abs() <= 5 * (expected * (1 - probs)).sqrt() + 1), (counts, expected)


def test_device_args_are_fd_sampling_fields():
    assert Sampling(0.7, top_k=None, top_p=None, seed=2 ** 32 + 9).device_args() == (0.7, 0, 1.0, 9, 1)
    assert Sampling(0.7, top_k=5, top_p=0.9, seed=3).device_args()[1:4] == (5, 0.9, 3)
    assert not Sampling(1.0, top_p=1 - 1e-9).uses_top_p  # 1 in fp32, as on the device


def test_greedy_and_top_1_are_the_first_maximum():
    logits = torch.tensor([0.5, 2.0, 1.9, -1.0])
    assert sample(logits, Sampling(), 0) == 1 and sample(torch.tensor([0.0, 1.0, 1.0]), Sampling(), 0) == 1
    assert all(sample(logits, Sampling(5.0, top_k=1, seed=s), s) == 1 for s in range(20))


def test_same_seed_same_draws_other_seed_other_draws():
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    draw = lambda seed: [sample(logits, Sampling(1.0, top_p=0.95, seed=seed), p) for p in range(50)]  # noqa: E731
    assert draw(1) == draw(1) and draw(1) != draw(2)


@pytest.mark.parametrize("kwargs,message", [
    (dict(temperature=-0.1), "temperature must be >= 0"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top-k must be >= 1"), (dict(top_p=0.0), "top-p must be in"), (dict(top_p=1.01), "top-p"),
    (dict(seed=-1), "seed"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        Sampling(**kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [64, 256, 1024])
def test_device_draw_equals_the_python_draw(threads):
    """fd_launch_sample (one block) against fleet_decode.sampling.sample on random logits of the real
    vocab size, over settings, seeds and positions; with the same Philox bits, the same token."""
    from fleet_decode.kernels.library import load

    lib = load().lib
    lib.fd_launch_sample.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_float,
                                     ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                     ctypes.c_void_p]
    lib.fd_launch_sample.restype = ctypes.c_int
    settings = [Sampling(0.0), Sampling(1.0, seed=1), Sampling(0.7, top_k=50, seed=2), Sampling(0.9, top_p=0.9, seed=3),
                Sampling(0.8, top_k=40, top_p=0.95, seed=2 ** 40 + 5), Sampling(1.5, top_k=1, seed=6)]
    gen = torch.Generator().manual_seed(threads)
    tokens = torch.zeros(64, dtype=torch.int32, device="cuda")
    mismatches = []
    for trial in range(8):
        logits = (torch.randn(102400, generator=gen) * 2).to(torch.bfloat16).float()  # bf16 values, as lm_head's
        device_logits = logits.cuda()
        for i, s in enumerate(settings):
            position = 1000 + 37 * trial + i
            temperature, top_k, top_p, _, _ = s.device_args()
            code = lib.fd_launch_sample(device_logits.data_ptr(), logits.numel(), temperature, top_k, top_p, s.seed,
                                        position, tokens.data_ptr(), i, threads, torch.cuda.current_stream().cuda_stream)
            assert code == 0
            torch.cuda.synchronize()
            want = sample(logits, s, position)
            if int(tokens[i]) != want:
                mismatches.append((trial, s, int(tokens[i]), want))
    assert mismatches == []
