"""CPU checks of hip/: it compiles with nvcc for sm_90a, with hipcc for gfx90a and with clang-19 for
the MI300X's gfx942 (device code only; CI fails, not skips, when a compiler is missing), no kernel
spills more than tests/known_spills.json records, the library exports every launcher with the C ABI
the ctypes loader declares, and no source outside port.h assumes a warp width, an SM count or a vendor."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from fleet_decode.kernels.build import (HIP_DIR, _kernel_name, build, new_spills, parse_amdgpu_remarks, parse_ptxas,
                                       spills, toolchain)
from fleet_decode.kernels.library import SIGNATURES, TaskKernels, ptr

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TASK_FILES = sorted((HIP_DIR / "tasks").glob("*.cu"))
# a launcher of two kernels: router_tiles (the graph's ROUTER tiles, then its ROUTE_TOPK)
STANDALONE_KERNELS = {"fd_kernel_" + kind for kind in SIGNATURES if kind != "router_tiles"} \
    | {"fd_kernel_router_logits", "fd_kernel_route_topk"}


KNOWN_SPILLS = json.loads((Path(__file__).parent / "known_spills.json").read_text())["targets"]


def require_compiler(arch: str, device_only: bool = False) -> None:
    compiler = toolchain(arch, device_only).compiler
    if shutil.which(compiler) is None:
        message = f"{compiler} not on PATH (needed to compile hip/ for {arch})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def nvcc_build(tmp_path_factory):
    require_compiler("sm_90a")
    return build("sm_90a", tmp_path_factory.mktemp("sm_90a"))


@pytest.fixture(scope="module")
def hipcc_build(tmp_path_factory):
    require_compiler("gfx90a")
    return build("gfx90a", tmp_path_factory.mktemp("gfx90a"))


@pytest.fixture(scope="module")
def clang_gfx942_build(tmp_path_factory):
    require_compiler("gfx942", device_only=True)
    return build("gfx942", tmp_path_factory.mktemp("gfx942"), device_only=True)


BUILDS = {"sm_90a": "nvcc_build", "gfx90a": "hipcc_build", "gfx942": "clang_gfx942_build"}


@pytest.mark.parametrize("arch", BUILDS)
def test_hip_compiles_every_kernel_and_spills_nothing_new(arch, request):
    record = request.getfixturevalue(BUILDS[arch])
    built = {name.split("<")[0] for name in record["kernels"]}
    assert STANDALONE_KERNELS | {"fd_megakernel"} <= built, built
    # the plain chunk's entry and its pool entry (kPool); NVIDIA builds add the tensor-core chunk's two
    assert {"fd_megakernel<false, false>", "fd_megakernel<false, true>"} <= set(record["kernels"])
    if arch == "sm_90a":
        assert record["kernels"]["fd_megakernel<true, false>"]["registers"] > 0
        assert record["kernels"]["fd_megakernel<true, true>"]["registers"] > 0
    assert "fd_kernel_rmsnorm_gemv<bf16>" in record["kernels"] and "fd_kernel_rmsnorm_gemv<float>" in record["kernels"]
    for name, info in record["kernels"].items():
        assert info["registers"] > 0, name
    assert record["spills"] == spills(record["kernels"])
    new = new_spills(record["spills"], KNOWN_SPILLS.get(arch, {}))
    assert not new, f"{arch}: new spills {new}; fix hip/, or record them in tests/known_spills.json on purpose"


def test_a_new_spill_is_named():
    known = {"fd_megakernel": {"spill_sgprs": 99, "scratch": 160}}
    assert new_spills({"fd_megakernel": {"spill_sgprs": 99, "scratch": 160}}, known) == []
    assert new_spills({"fd_megakernel": {"spill_sgprs": 12}}, known) == []
    assert new_spills({"fd_megakernel": {"spill_sgprs": 100, "scratch": 160}, "fd_kernel_embed<float>": {"scratch": 8}},
                      known) == ["fd_megakernel: spill_sgprs 100 (known: 99)", "fd_kernel_embed<float>: scratch 8 (known: 0)"]


def test_gfx942_is_device_code_from_clang(clang_gfx942_build):
    flags = clang_gfx942_build["compile_flags"]
    assert "--offload-arch=gfx942" in flags and "--offload-device-only" in flags
    assert "clang" in clang_gfx942_build["compiler_version"].lower()
    assert "library" not in clang_gfx942_build


@pytest.mark.parametrize("record_name", ["nvcc_build", "hipcc_build"])
def test_the_library_links(record_name, request):
    record = request.getfixturevalue(record_name)
    assert Path(record["library"]).stat().st_size > 0
    assert len(record["library_sha256"]) == 64
    assert all(src in record["sources"] for src in (f"hip/tasks/{f.name}" for f in TASK_FILES))
    assert record["compiler_version"]


@pytest.mark.parametrize("record_name", ["nvcc_build", "hipcc_build"])
def test_the_persistent_runtime_compiles_with_every_task_kind(record_name, request):
    record = request.getfixturevalue(record_name)
    assert "fd_megakernel<false, false>" in record["kernels"], sorted(record["kernels"])
    assert "hip/runtime/megakernel.cu" in record["sources"] and "hip/runtime/graph_format.h" in record["sources"]
    assert "hip/runtime/megakernel_pool.cu" in record["sources"]
    assert record["kernels"]["fd_megakernel<false, false>"]["registers"] > 0
    assert record["kernels"]["fd_megakernel<false, true>"]["registers"] > 0


def test_nvcc_targets_sm90a_with_ptxas_report(nvcc_build):
    flags = " ".join(nvcc_build["compile_flags"])
    assert "code=sm_90a" in flags and "-Xptxas -v" in flags and "-O3" in flags


def test_hipcc_targets_amd_not_nvcc(hipcc_build):
    # Debian's hipcc falls back to nvcc when HIP_PLATFORM is unset and nvcc is on PATH.
    assert hipcc_build["env"] == {"HIP_PLATFORM": "amd"}
    assert "--offload-arch=gfx90a" in hipcc_build["compile_flags"]
    assert "clang" in hipcc_build["compiler_version"].lower()


def test_library_exports_every_launcher(nvcc_build):
    lib = TaskKernels(nvcc_build["library"])  # dlopen needs no GPU
    for kind in SIGNATURES:
        assert getattr(lib.lib, f"fd_launch_{kind}") is not None
    assert lib.warp_size == 32
    for name in ("fd_megakernel_launch", "fd_megakernel_threads", "fd_megakernel_error_words"):
        assert getattr(lib.lib, name) is not None
    assert lib.lib.fd_megakernel_threads() % lib.warp_size == 0
    assert lib.lib.fd_error_string(-1) == b"invalid launch arguments"


def test_loader_rejects_host_tensors():
    with pytest.raises(ValueError):
        ptr(torch.zeros(4))
    assert ptr(None) is None


PTXAS_SAMPLE = """ptxas info    : Compiling entry function '_Z16fd_kernel_argmaxPKfPKiiPiS3_S2_' for 'sm_90a'
ptxas info    : Function properties for _Z16fd_kernel_argmaxPKfPKiiPiS3_S2_
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 17 registers, used 1 barriers, 256 bytes smem
"""

AMD_SAMPLE = """x.cu:24:1: remark: Function Name: _Z15fd_kernel_embedPKtPKiiPt [-Rpass-analysis=kernel-resource-usage]
x.cu:24:1: remark:     SGPRs: 18 [-Rpass-analysis=kernel-resource-usage]
x.cu:24:1: remark:     VGPRs: 10 [-Rpass-analysis=kernel-resource-usage]
x.cu:24:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
x.cu:24:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]
"""


def test_task_functions_compile_together_for_the_runtime(tmp_path):
    """The persistent runtime includes every task file in its own translation unit with
    FD_NO_STANDALONE: the device functions must then coexist without wrappers or launchers."""
    require_compiler("sm_90a")
    tc = toolchain("sm_90a")
    unit = tmp_path / "all_tasks.cu"
    unit.write_text("#define FD_NO_STANDALONE\n" + "".join(f'#include "{f}"\n' for f in TASK_FILES))
    obj = tmp_path / "all_tasks.o"
    result = subprocess.run([tc.compiler, *tc.compile_flags, "-c", str(unit), "-o", str(obj)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "fd_kernel_" not in result.stdout + result.stderr  # no standalone kernel was compiled


def test_resource_reports_are_parsed():
    assert _kernel_name("_Z15fd_kernel_embedIfEvPKtPKiiPT_") == "fd_kernel_embed<float>"
    assert _kernel_name("_Z15fd_kernel_embedItEvPKtPKiiPT_") == "fd_kernel_embed<bf16>"
    # the two megakernel entries: a bool template argument, and the tensor-core entry inside its unit's namespace
    assert _kernel_name("_Z13fd_megakernelILb0EEv14fd_launch_argsy") == "fd_megakernel<false>"
    assert _kernel_name("_ZN19fd_tensor_core_unit13fd_megakernelILb1EEEvNS_14fd_launch_argsEy") == "fd_megakernel<true>"
    assert _kernel_name("_Z25fd_kernel_attention_chunkILb1EtEvPKf") == "fd_kernel_attention_chunk<true, bf16>"
    assert _kernel_name("_Z13fd_megakernel14fd_launch_argsy") == "fd_megakernel"
    assert parse_ptxas(PTXAS_SAMPLE) == {"fd_kernel_argmax": {
        "stack_frame": 8, "spill_stores": 4, "spill_loads": 12, "registers": 17, "static_smem": 256}}
    # a called (noinline) device function's own lines after the entry's are not the entry's
    callee = ("ptxas info    : Function properties for _Z11fd_run_kindILi5EEvv\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    assert parse_ptxas(PTXAS_SAMPLE + callee) == parse_ptxas(PTXAS_SAMPLE)
    assert parse_amdgpu_remarks(AMD_SAMPLE) == {"fd_kernel_embed": {
        "sgprs": 18, "registers": 10, "scratch": 16, "spill_vgprs": 3}}


# --- portability lint --------------------------------------------------------------------------

FORBIDDEN = [
    (r"#\s*include\s*[<\"](cuda_runtime|cuda_bf16|cuda_fp16|cuda/|hip/)", "vendor header outside port.h"),
    (r"\bwarpSize\b", "warpSize (use kWarpSize from port.h)"),
    (r"__shfl|__syncwarp|__ballot|__activemask|\batomic(Add|CAS|Exch)\b|__hip_atomic|cuda::", "vendor intrinsic"),
    (r"\basm\b", "inline assembly outside port.h"),
    (r"(threadIdx\.x|lane|tid)\s*(%|/|&|>>)\s*\d", "thread index split by a numeric literal (warp width?)"),
    (r"(%|&)\s*(31|32|63|64)\b|>>\s*[56]\b|\b0x[fF]{8}\b", "warp-width arithmetic or a full-warp mask"),
    (r"\b(108|114|132|228|304)\b", "an SM/CU count"),
]


def lint(hip_dir: Path) -> list[str]:
    problems = []
    for path in sorted(hip_dir.rglob("*")):
        if path.suffix not in (".h", ".cu", ".cuh", ".hip", ".cpp") or path.name == "port.h":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            for pattern, why in FORBIDDEN:
                if re.search(pattern, code):
                    problems.append(f"{path.relative_to(hip_dir)}:{number}: {why}: {line.strip()}")
    return problems


def test_hip_sources_are_portable():
    assert TASK_FILES, "no task kernels found"
    assert lint(HIP_DIR) == []


@pytest.mark.parametrize("bad_line", [
    "#include <cuda_runtime.h>",
    "int lane = threadIdx.x % 32;",
    "v += __shfl_xor_sync(0xffffffff, v, 16);",
    "for (int m = warpSize / 2; m; m >>= 1) {}",
    "const int workers = 132;",
    "int w = tid >> 5;",
])
def test_lint_catches_non_portable_code(tmp_path, bad_line):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "bad.cu").write_text(f"// fine comment: warpSize 32\n{bad_line}\n")
    assert len(lint(tmp_path)) >= 1
