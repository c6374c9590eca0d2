// fd_megakernel<false, true>: the plain-chunk megakernel that runs EXPERT_POOL tasks (the routed rows handed
// out at run time), in a translation unit of its own (megakernel.cu says why), so that the pool's code costs
// the other entries nothing. megakernel.cu's C ABI launches it for graphs with pools
// (fleet_decode.kernels.runtime); megakernel_tensor_cores_pool.cu holds the tensor-core chunk's pool entry.
#define FD_MEGAKERNEL_BODY_ONLY
#include "../tasks/common.h"
namespace fd_pool_unit {  // apart from megakernel.cu's unit, which defines the same functions
#include "megakernel.cu"
}  // namespace fd_pool_unit

#if FD_CUDA
const void* fd_megakernel_tensor_core_pool_entry();
#endif

const void* fd_megakernel_pool_entry(int tensor_core_chunk) {
#if FD_CUDA
  if (tensor_core_chunk) return fd_megakernel_tensor_core_pool_entry();
#endif
  (void)tensor_core_chunk;
  return reinterpret_cast<const void*>(&fd_pool_unit::fd_megakernel<false, true>);
}
