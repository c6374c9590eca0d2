"""fleet-decode: a persistent-megakernel batch-1 decoder for DeepSeek-Coder-V2-Lite.

    from fleet_decode import Decoder
    decoder = Decoder.load("hf:/data/DeepSeek-Coder-V2-Lite-Base", device="cuda")
    print(decoder.generate("def quicksort(", max_new_tokens=200).text)
"""

__version__ = "0.1.0"

# The decoder pulls in torch and transformers: imported on first use, so that light commands
# (audit, check-config) stay light.
_EXPORTS = {"Decoder": "fleet_decode.decoder", "Generation": "fleet_decode.decoder",
            "InvalidInput": "fleet_decode.sampling", "Sampling": "fleet_decode.sampling"}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fleet_decode' has no attribute {name!r}")
