#!/usr/bin/env bash
# Installs what fleet-decode needs on a fresh Debian machine: system packages (sshd for the SSH
# tests, hipcc for the AMD compile check, clang-19 and lld-19 for the MI300X's gfx942, which the
# installed ROCm is too old for, chromium to look at the report as a person would) and the Python
# project with its test extra.
# The CPU torch wheel is installed first so that the project's torch range resolves to it.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  need=()
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v hipcc >/dev/null || need+=(hipcc)
  command -v clang++-19 >/dev/null || need+=(clang-19)
  command -v ld.lld-19 >/dev/null || need+=(lld-19)
  command -v chromium >/dev/null || need+=(chromium)
  command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ] || need+=(slurm-wlm munge)  # the cluster test
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[test]'
# console scripts (snakemake, fleet-decode) reach PATH through pyenv's shims only after a rehash
if command -v pyenv >/dev/null; then pyenv rehash; fi
