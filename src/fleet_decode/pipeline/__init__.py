"""The workflow's machinery: config, declared sources, deploy, transports, evidence envelopes, audit."""
