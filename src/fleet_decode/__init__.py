"""fleet-decode: a persistent-megakernel batch-1 decoder for DeepSeek-Coder-V2-Lite."""

__version__ = "0.1.0"
