"""A host's benchmark as the report reads it: the bench rule's run (the megakernel, and the floor) with
the baselines rule's torch contenders joined in (bench.results.combine), and the headline of the two.
The verdict, the bench table and the figures all read it from here, so they agree."""
from fleet_decode.bench.results import Mismatch, combine, headline

BENCH, BASELINES = "bench/bench.json", "bench/baselines.json"


def host_bench(files: dict) -> dict:
    """{} without bench evidence; else {"result": one run_bench result, "headline": its headline (None
    when nothing was timed), "files": the evidence files it was read from, "problem": why the
    baselines were left out, or None}. `files` are one host's evidence docs by path under results/<host>/."""
    doc = files.get(BENCH)
    if not doc or "bench" not in doc.get("metrics", {}):
        return {}
    result, used, problem = doc["metrics"]["bench"], [BENCH], None
    baselines = files.get(BASELINES, {}).get("metrics", {}).get("baselines")
    if baselines is not None:
        try:
            result = combine(result, baselines)
            used.append(BASELINES)
        except Mismatch as err:
            problem = f"{BASELINES} left out: {err}"
    length = doc["metrics"].get("prompt_length") or doc.get("params", {}).get("prompt_tokens")
    try:
        top = headline(result, prompt_length=length)
    except (ValueError, KeyError):  # nothing timed at that length (a sim host's bench without its baselines)
        top = None
    return {"result": result, "headline": top, "files": used, "problem": problem}
