"""Builds hip/ (the task kernels and the runtime) into one shared library with a C ABI, and writes
build.json beside it: compiler and version, flags, the sha256 of every source and of the binary,
and per-kernel registers / spills as the compiler reports them.

    python -m fleet_decode.kernels.build --arch sm_90a            # nvcc, NVIDIA H100/H200
    python -m fleet_decode.kernels.build --arch gfx90a --out DIR  # hipcc (HIP_PLATFORM=amd), MI200
    python -m fleet_decode.kernels.build --arch gfx942             # hipcc of a ROCm >= 5.7, MI300
    python -m fleet_decode.kernels.build --arch gfx942 --device-only   # clang++-19: device code only
    python -m fleet_decode.kernels.build --arch sm_90a --objects-only  # compile check, no link

Every .cu file is compiled on its own (in parallel) and the objects are linked with the same
driver. nvcc: -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v (the -gencode form, since
`-arch=sm_90a` also runs a plain sm_90 pass). hipcc: HIP_PLATFORM=amd, --offload-arch, with
-Rpass-analysis=kernel-resource-usage for the register report (Debian's hipcc otherwise picks
nvcc whenever nvcc is on PATH). --device-only: an upstream clang (Debian's clang-19, $HIP_CLANG)
with the installed HIP headers generates the device assembly of an arch the installed ROCm is too
old for (the MI300X's gfx942), without the device libraries, so nothing is linked: enough to read
its registers and spills.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet_decode.pipeline.sources import sha256_file

REPO_ROOT = Path(__file__).resolve().parents[3]
HIP_DIR = REPO_ROOT / "hip"
LIBRARY_NAME = "libfleet_kernels.so"


@dataclass
class Toolchain:
    arch: str
    compiler: str
    compile_flags: list[str]
    link_flags: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output_kind: str = "-c"  # "-S": device assembly, for a toolchain that cannot link

    @property
    def vendor(self) -> str:
        return "nvidia" if self.arch.startswith("sm_") else "amd"


RESOURCE_REMARKS = "-Rpass-analysis=kernel-resource-usage"


def toolchain(arch: str, device_only: bool = False) -> Toolchain:
    if device_only:
        if not arch.startswith("gfx"):
            raise ValueError(f"--device-only is for AMD targets (gfxXXX), not {arch!r}")
        return Toolchain(
            arch=arch,
            compiler=os.environ.get("HIP_CLANG", "clang++-19"),
            compile_flags=["-x", "hip", f"--offload-arch={arch}", "-nogpulib", "--offload-device-only", "-O3",
                           "-std=c++17", RESOURCE_REMARKS],
            link_flags=[],
            output_kind="-S",
        )
    if arch.startswith("sm_"):
        number = arch[3:]
        gencode = f"-gencode=arch=compute_{number},code={arch}"
        return Toolchain(
            arch=arch,
            compiler=os.environ.get("NVCC", "nvcc"),
            compile_flags=["-O3", "-std=c++17", gencode, "-Xptxas", "-v", "-Xcompiler", "-fPIC", "-lineinfo"],
            link_flags=["--shared", gencode],
        )
    if arch.startswith("gfx"):
        offload = f"--offload-arch={arch}"
        return Toolchain(
            arch=arch,
            compiler=os.environ.get("HIPCC", "hipcc"),
            compile_flags=["-x", "hip", offload, "-O3", "-std=c++17", "-fPIC", RESOURCE_REMARKS],
            link_flags=["-shared", "-fPIC", offload],
            env={"HIP_PLATFORM": "amd"},
        )
    raise ValueError(f"unknown --arch {arch!r}: expected sm_XX[a] (nvcc) or gfxXXX (hipcc)")


def sources(hip_dir: Path = HIP_DIR) -> list[Path]:
    return sorted((hip_dir / "tasks").glob("*.cu")) + sorted((hip_dir / "runtime").glob("*.cu"))


def compiler_version(tc: Toolchain) -> str:
    result = subprocess.run([tc.compiler, "--version"], capture_output=True, text=True, env={**os.environ, **tc.env})
    return (result.stdout + result.stderr).strip()


def _run(cmd: list[str], tc: Toolchain) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **tc.env})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


TEMPLATE_ARGS = {"f": "float", "t": "bf16"}  # Itanium codes of the activation types (float, uint16_t)


def _kernel_name(mangled: str) -> str:
    """`_Z16fd_kernel_argmaxPKf...` -> `fd_kernel_argmax`; a template's arguments are kept where they are
    bools or activation types: `_Z15fd_kernel_embedIfEv...` -> `fd_kernel_embed<float>`,
    `_Z13fd_megakernelILb1EEv...` -> `fd_megakernel<true>`; a name in a namespace is its last part
    (`_ZN19fd_tensor_core_unit13fd_megakernelILb1EEEv...` -> `fd_megakernel<true>`)."""
    match = re.match(r"_ZN?", mangled)
    if not match:
        return mangled
    nested, at, name = match.group() == "_ZN", match.end(), None
    while part := re.match(r"\d+", mangled[at:]):
        end = at + part.end() + int(part.group())
        name, at = mangled[at + part.end(): end], end
        if not nested:
            break
    if name is None:
        return mangled
    if mangled[at: at + 1] != "I":
        return name
    args, at = [], at + 1
    while at < len(mangled) and mangled[at] != "E":
        if literal := re.match(r"Lb([01])E", mangled[at:]):
            args.append("true" if literal[1] == "1" else "false")
            at += literal.end()
        else:
            args.append(TEMPLATE_ARGS.get(mangled[at], mangled[at]))
            at += 1
    return f"{name}<{', '.join(args)}>"


def parse_ptxas(report: str) -> dict[str, dict]:
    """Registers, spills, stack frame and static shared memory per entry function (-Xptxas -v)."""
    kernels, current, entry = {}, None, None
    for line in report.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            entry = m.group(1)
            current = kernels.setdefault(_kernel_name(entry), {})
        elif m := re.search(r"Function properties for (\w+)", line):
            # a device function the entry calls has its own lines: not the entry's stack or spills
            current = kernels.get(_kernel_name(entry)) if m.group(1) == entry else None
        elif current is None:
            continue
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            current.update(stack_frame=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif m := re.search(r"Used (\d+) registers", line):
            current["registers"] = int(m[1])
            if s := re.search(r"(\d+) bytes smem", line):
                current["static_smem"] = int(s[1])
    return kernels


def parse_amdgpu_remarks(report: str) -> dict[str, dict]:
    """VGPRs, SGPRs, spills and scratch per kernel from -Rpass-analysis=kernel-resource-usage."""
    keys = {"VGPRs": "registers", "SGPRs": "sgprs", "AGPRs": "agprs", "ScratchSize [bytes/lane]": "scratch",
            "VGPRs Spill": "spill_vgprs", "SGPRs Spill": "spill_sgprs", "LDS Size [bytes/block]": "static_smem"}
    kernels, current = {}, None
    for line in report.splitlines():
        if m := re.search(r"remark: Function Name: (\w+)", line):
            current = kernels.setdefault(_kernel_name(m.group(1)), {})
        elif current is not None and (m := re.search(r"remark:\s+([^:]+(?::[^:\d]+)?): (\d+) \[", line)):
            if m.group(1).strip() in keys:
                current[keys[m.group(1).strip()]] = int(m.group(2))
    return kernels


def compile_one(src: Path, obj: Path, tc: Toolchain) -> dict[str, dict]:
    report = _run([tc.compiler, *tc.compile_flags, tc.output_kind, str(src), "-o", str(obj)], tc)
    return parse_ptxas(report) if tc.vendor == "nvidia" else parse_amdgpu_remarks(report)


SPILL_FIELDS = ("spill_stores", "spill_loads", "spill_vgprs", "spill_sgprs", "scratch")


def spills(kernels: dict[str, dict]) -> dict[str, dict]:
    """{kernel: {field: amount}} of every kernel that spills or uses scratch, only the nonzero fields."""
    found = {name: {f: info[f] for f in SPILL_FIELDS if info.get(f)} for name, info in kernels.items()}
    return {name: fields for name, fields in sorted(found.items()) if fields}


def new_spills(found: dict[str, dict], known: dict[str, dict]) -> list[str]:
    """Every spill of `found` (spills() of a build) above the `known` amounts of the same kernel."""
    return [f"{name}: {what} {amount} (known: {known.get(name, {}).get(what, 0)})"
            for name, fields in found.items() for what, amount in fields.items()
            if amount > known.get(name, {}).get(what, 0)]


def build(arch: str, out: Path | None = None, hip_dir: Path = HIP_DIR, objects_only: bool = False,
          jobs: int | None = None, device_only: bool = False) -> dict:
    """Compiles every source of hip_dir for arch into out/ and returns the build record."""
    tc = toolchain(arch, device_only)
    objects_only = objects_only or device_only
    if shutil.which(tc.compiler) is None:
        raise FileNotFoundError(f"compiler {tc.compiler!r} for {arch} not found on PATH")
    out = Path(out or REPO_ROOT / "build" / "kernels" / arch)
    out.mkdir(parents=True, exist_ok=True)
    srcs = sources(hip_dir)
    if not srcs:
        raise FileNotFoundError(f"no .cu sources under {hip_dir}/tasks or {hip_dir}/runtime")
    started = time.time()
    suffix = ".s" if tc.output_kind == "-S" else ".o"
    objs = [out / f"{src.parent.name}_{src.stem}{suffix}" for src in srcs]
    kernels: dict[str, dict] = {}
    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        for report in pool.map(compile_one, srcs, objs, [tc] * len(srcs)):
            kernels.update(report)
    record = {
        "arch": arch,
        "vendor": tc.vendor,
        "compiler": shutil.which(tc.compiler),
        "compiler_version": compiler_version(tc),
        "compile_flags": tc.compile_flags,
        "link_flags": [] if objects_only else tc.link_flags,
        "env": tc.env,
        "sources": {str(src.relative_to(hip_dir.parent)): sha256_file(src) for src in srcs}
        | {str(h.relative_to(hip_dir.parent)): sha256_file(h) for h in sorted(hip_dir.rglob("*.h"))},
        "kernels": dict(sorted(kernels.items())),
        "spills": spills(kernels),
    }
    if not objects_only:
        library = out / LIBRARY_NAME
        _run([tc.compiler, *tc.link_flags, *map(str, objs), "-o", str(library)], tc)
        record["library"] = str(library)
        record["library_sha256"] = sha256_file(library)
    record["seconds"] = round(time.time() - started, 2)
    (out / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="sm_90a | gfx90a | gfx942 | any sm_XX / gfxXXX")
    parser.add_argument("--out", type=Path, help="output directory (default build/kernels/<arch>)")
    parser.add_argument("--hip-dir", type=Path, default=HIP_DIR)
    parser.add_argument("--objects-only", action="store_true", help="compile only (CI check), no link")
    parser.add_argument("--device-only", action="store_true",
                        help="AMD device assembly only, with clang++-19 ($HIP_CLANG): registers and spills")
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args(argv)
    record = build(args.arch, args.out, args.hip_dir, args.objects_only, args.jobs, args.device_only)
    for name, info in record["kernels"].items():
        print(f"{name:34s} " + " ".join(f"{k}={v}" for k, v in info.items()))
    print(f"{record.get('library', 'objects only')}  sha256={record.get('library_sha256', '-')}  "
          f"{record['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
