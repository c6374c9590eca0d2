"""fleet-decode generate and fleet_decode.Decoder on the CPU simulator: text in, streamed text out, any
length over several launches, stop ids, seeded sampling, and bad requests refused in one line."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from importlib import resources

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from fleet_decode import Decoder, InvalidInput
from fleet_decode.bench.timing import latency_summary
from fleet_decode.decoder import TextStream
from fleet_decode.model import load_model
from fleet_decode.sim import Simulator
from sim_cases import one_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["def quicksort(items):", "    return sorted(items)", "Le café était très animé, naïve façade.",
         "Grüße aus München, schön!", "日本語のテキストも少し。", "print('hello world')"]
PROMPT = "def quicksort(items):\n    return"
STEPS_PER_LAUNCH = 16  # small, so that 100 new tokens take several launches


def train_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained offline on a few lines (multi-byte characters included)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(LINES * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny-architecture checkpoint whose vocabulary is the tokenizer's, saved with it as hf: expects."""
    directory = tmp_path_factory.mktemp("generate_ckpt")
    tokenizer = train_tokenizer()
    config = json.loads((resources.files("fleet_decode.model") / "configs" / "tiny.json").read_text())
    config.update(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    (directory / "config.json").write_text(json.dumps(config))
    model = load_model(f"random:{directory / 'config.json'}@5")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def decoder(checkpoint):
    return Decoder.load(f"hf:{checkpoint}", device="cpu", max_steps=STEPS_PER_LAUNCH)


def cli(*args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "fleet_decode", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_prints_the_text_it_generates(checkpoint, tmp_path):
    out = tmp_path / "out.json"
    run = cli("generate", "--model", f"hf:{checkpoint}", "--device", "cpu", "--prompt", PROMPT,
              "--max-new-tokens", "24", "--json", str(out))
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert len(result["tokens"]) >= 1 and result["text"].strip()
    assert run.stdout == result["text"] + "\n"  # streamed pieces add up to the whole decode
    assert "ms/token" in run.stderr and "tokens/s" in run.stderr and "GB/s" in run.stderr and "floor" in run.stderr


def test_greedy_equals_hf_generate_over_several_launches(checkpoint, decoder):
    model = load_model(f"hf:{checkpoint}")
    ids = decoder.encode(PROMPT)
    with torch.no_grad():
        hf = model.generate(torch.tensor([ids]), max_new_tokens=100, do_sample=False)[0, len(ids):].tolist()
    ours = decoder.generate(PROMPT, max_new_tokens=100)
    assert len(hf) == 100, "the model stopped at EOS early: pick another prompt for this test"
    assert ours.tokens == hf
    assert ours.launches == -(-99 // STEPS_PER_LAUNCH) and not ours.stopped
    assert len(ours.token_seconds) == len(ours.published_seconds) == 100
    assert ours.published_seconds == sorted(ours.published_seconds)
    assert ours.text == decoder.tokenizer.decode(hf, skip_special_tokens=True)


def test_one_engine_serves_every_request_and_the_summary_takes_the_bench_p50(decoder):
    first = decoder.generate(PROMPT, max_new_tokens=8, stop=())
    engine = decoder.engine
    again = decoder.generate(PROMPT, max_new_tokens=8, stop=())
    assert engine is not None and decoder.engine is engine  # built once, reused by every request
    assert again.tokens == first.tokens
    p50 = latency_summary([[s * 1e3 for s in first.decode_seconds]])["p50_ms"]
    assert f"(P50 {p50:.3f})" in first.summary()
    two_steps = replace(first, token_seconds=first.token_seconds[:3])  # no steady step: no P50
    assert "P50" not in two_steps.summary() and "ms/token" in two_steps.summary()


def test_a_fixed_context_gets_one_cache_row_per_position_but_the_last_and_decodes_to_its_end(checkpoint, decoder):
    # the last new token is returned, never fed back: a context of 64 + 1 positions fits 64 cache rows
    ids = decoder.encode(PROMPT)
    context = 64 + 1
    exact = Decoder.load(f"hf:{checkpoint}", device="cpu", max_context=context, max_steps=STEPS_PER_LAUNCH)
    assert exact.graph.constants.max_positions == 64
    fitted = exact.generate(ids, max_new_tokens=context - len(ids), stop=())
    assert fitted.tokens == decoder.generate(ids, max_new_tokens=context - len(ids), stop=()).tokens
    with pytest.raises(InvalidInput, match="exceed the context"):
        exact.generate(ids, max_new_tokens=context - len(ids) + 1, stop=())


def test_stops_at_eos_and_at_listed_ids(decoder):
    greedy = decoder.generate(PROMPT, max_new_tokens=40, stop=()).tokens
    at = 20  # in the second launch
    stop_id = greedy[at]
    first = greedy.index(stop_id)
    out = decoder.generate(PROMPT, max_new_tokens=40, stop=[stop_id])
    assert out.stopped and out.tokens == greedy[:first + 1]
    assert decoder.eos == (decoder.tokenizer.eos_token_id,)
    eos = decoder.generate(PROMPT, max_new_tokens=40, stop=None)  # None: the model's EOS
    end = greedy.index(decoder.eos[0]) + 1 if decoder.eos[0] in greedy else len(greedy)
    assert eos.tokens == greedy[:end] and eos.stopped == (end < len(greedy))


def test_simulator_ends_within_one_step_of_a_stop_id(decoder):
    """No task of any step after the one that produced the stop id runs."""
    engine = decoder._engine
    greedy = decoder.generate(PROMPT, max_new_tokens=12, stop=()).tokens
    n = len(decoder.encode(PROMPT))
    decoder.generate(PROMPT, max_new_tokens=1, stop=())  # leaves the prompt's cache in the engine
    sim = Simulator(engine.encoded, engine.weights, decoder.model.dtype, n, stop_ids=[greedy[4]])
    sim.memory.host_write(sim.graph.buffer_index("tokens"), 0, torch.tensor([greedy[0]], dtype=torch.int32))
    for b in engine.cache_buffers:
        sim.memory.host_write(b, 0, engine.cache[b][:n * sim.graph.buffers[b].cols])
    sim.run(10)
    stop_step = greedy.index(greedy[4]) - 1
    assert sim.stopped_at == stop_step
    assert max(sim.runs) == stop_step + 1 == min(sim.runs)


def test_sampling_is_deterministic_per_seed_and_differs_across_seeds(decoder):
    def draw(seed, **kw):
        return decoder.generate(PROMPT, max_new_tokens=30, temperature=1.0, seed=seed, stop=(), **kw).tokens

    a, b = draw(1), draw(2)
    assert a == draw(1) and a != b
    assert a != decoder.generate(PROMPT, max_new_tokens=30, stop=()).tokens
    assert draw(3, top_k=1) == decoder.generate(PROMPT, max_new_tokens=30, stop=()).tokens  # top-1 is greedy
    narrow = draw(4, top_k=3, top_p=0.5)
    assert narrow == draw(4, top_k=3, top_p=0.5) and len(narrow) == 30


def test_sampled_tokens_are_draws_from_the_reference_logits_at_their_positions(decoder):
    """Across launches, step s of a launch from position p draws with the counter of position p + s + 1:
    the same tokens as sampling the reference decode's logits token by token."""
    from fleet_decode.model import Reference
    from fleet_decode.sampling import Sampling, sample

    setting = Sampling(temperature=0.9, top_k=20, top_p=0.9, seed=11)
    ids = decoder.encode(PROMPT)
    ours = decoder.generate(ids, max_new_tokens=40, temperature=0.9, top_k=20, top_p=0.9, seed=11, stop=()).tokens
    ref = Reference(decoder.model, max_positions=len(ids) + 41)
    with torch.no_grad():
        tokens = [sample(ref.prefill(ids), setting, position=len(ids))]
        while len(tokens) < 40:
            tokens.append(sample(ref.step(tokens[-1]), setting, position=len(ids) + len(tokens)))
    assert ours == tokens


def test_text_stream_prints_multibyte_characters_whole(decoder):
    tokenizer = decoder.tokenizer
    text = "Grüße, 日本語"
    ids = tokenizer(text)["input_ids"]
    stream = TextStream(tokenizer)
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) == text and "\ufffd" not in "".join(pieces)
    assert any(p == "" for p in pieces), "expected a character split over tokens in this text"


BAD_REQUESTS = {
    "id outside the vocab": (["--prompt-ids", "1,2,5000"], "outside the vocabulary"),
    "empty prompt": (["--prompt-ids", ""], "prompt is empty"),
    "beyond the context": (["--prompt-ids", "1,2,3", "--max-new-tokens", "100", "--max-context", "64"],
                           "exceed the context"),
    "temperature < 0": (["--prompt-ids", "1,2", "--temperature", "-0.5"], "temperature must be >= 0"),
    "top-p 0": (["--prompt-ids", "1,2", "--top-p", "0"], "top-p must be in (0, 1]"),
    "top-p above 1": (["--prompt-ids", "1,2", "--top-p", "1.5"], "top-p must be in (0, 1]"),
    "top-k 0": (["--prompt-ids", "1,2", "--top-k", "0"], "top-k must be >= 1"),
}


def test_bad_requests_are_one_line_and_exit_code_2(checkpoint):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base = [sys.executable, "-m", "fleet_decode", "generate", "--model", f"hf:{checkpoint}", "--device", "cpu"]
    cases = {**BAD_REQUESTS, "no GPU for --device cuda": (["--prompt-ids", "1,2"], "no GPU")}
    procs = {}
    for name, (args, _) in cases.items():
        device = ["--device", "cuda"] if name.startswith("no GPU") else []
        if device and torch.cuda.is_available():
            continue
        procs[name] = subprocess.Popen([*base, *args, *device], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env=env)
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 2, (name, stderr)
        assert stderr.count("\n") == 1 and "Traceback" not in stderr, (name, stderr)
        assert cases[name][1] in stderr, (name, stderr)
        assert stdout == "", name


def test_a_cpu_model_asked_to_run_on_the_gpu_is_refused(checkpoint):
    model = load_model(f"hf:{checkpoint}")
    with pytest.raises(InvalidInput, match="no GPU here|the model is on cpu"):
        Decoder.load(model, device="cuda")


def test_the_decoder_stays_usable_after_each_bad_request(decoder):
    expected = decoder.generate(PROMPT, max_new_tokens=8, stop=()).tokens
    bad = [dict(prompt=[1, 2, 10 ** 6]), dict(prompt=[]), dict(max_new_tokens=10 ** 6), dict(temperature=-1),
           dict(top_p=0.0), dict(top_p=2.0), dict(top_k=0)]
    for kwargs in bad:
        request = {"prompt": PROMPT, "max_new_tokens": 8, "stop": (), **kwargs}
        with pytest.raises(InvalidInput):
            decoder.generate(**request)
        assert decoder.generate(PROMPT, max_new_tokens=8, stop=()).tokens == expected, kwargs


def test_tiny_prints_ids_without_a_tokenizer():
    run = cli("generate", "--model", "tiny", "--device", "cpu", "--prompt-ids", "5,6,7", "--max-new-tokens", "5")
    assert run.returncode == 0, run.stderr
    ids = [int(t) for t in run.stdout.split()]
    assert len(ids) == 5 and all(0 <= i < 1024 for i in ids)


@pytest.mark.parametrize("command", ["generate", "bench", "compare", "graph", "sim", "audit", "check-config"])
def test_every_command_has_help_with_an_example(command, capsys):
    from fleet_decode.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("example:\n") and f"  fleet-decode {command} " in out and "usage:" in out


@pytest.fixture(scope="module")
def gpu_decoder():
    """The real config's shapes (the kernels are compiled for them), a 256-token prompt, 16-step launches."""
    from fleet_decode.model import prompt_ids

    return Decoder.load("random:deepseek-coder-v2-lite", device="cuda", max_context=512,
                        max_steps=STEPS_PER_LAUNCH), prompt_ids(256)


@pytest.mark.gpu
@pytest.mark.gpu_large
def test_gpu_greedy_chains_launches_streams_stops_and_survives_bad_requests(gpu_decoder):
    """100 greedy tokens over launches of 16 steps equal one launch's; each is streamed as produced; a
    stop id ends the generation there; after each bad request the same decoder decodes the same tokens."""
    chained, ids = gpu_decoder
    streamed = []
    out = chained.generate(ids, max_new_tokens=100, stop=(), on_token=lambda i, t: streamed.append((i, t)))
    assert streamed == list(enumerate(out.tokens)) and out.launches == -(-99 // STEPS_PER_LAUNCH)
    one = Decoder.load(chained.model, device="cuda", max_context=512, max_steps=128)
    assert one.generate(ids, max_new_tokens=100, stop=()).tokens == out.tokens
    stop_id = out.tokens[30]
    stopped = chained.generate(ids, max_new_tokens=100, stop=[stop_id])
    assert stopped.stopped and stopped.tokens == out.tokens[:out.tokens.index(stop_id) + 1]
    for kwargs in [dict(prompt=[1, 10 ** 7]), dict(prompt=[]), dict(max_new_tokens=10 ** 6), dict(top_p=0.0),
                   dict(temperature=-1.0), dict(top_k=0)]:
        with pytest.raises(InvalidInput):
            chained.generate(**{"prompt": ids, "max_new_tokens": 100, "stop": (), **kwargs})
        assert chained.generate(ids, max_new_tokens=100, stop=()).tokens == out.tokens


@pytest.mark.gpu
@pytest.mark.gpu_large
def test_gpu_sampling_is_deterministic_per_seed(gpu_decoder):
    """Needs the runtime's sampling launch argument (fd_task_sample called from the ARGMAX dispatch)."""
    chained, ids = gpu_decoder
    draw = lambda seed: chained.generate(ids, max_new_tokens=40, temperature=0.8, top_k=50, top_p=0.95,  # noqa: E731
                                         seed=seed, stop=()).tokens
    a = draw(3)
    assert a == draw(3) and a != draw(4)
