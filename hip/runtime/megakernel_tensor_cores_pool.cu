// fd_megakernel<true, true>: the tensor-core chunk's megakernel that runs EXPERT_POOL tasks, in a translation
// unit of its own (megakernel.cu says why); megakernel_pool.cu's fd_megakernel_pool_entry hands it out. AMD
// builds have no tensor-core form yet: this unit is empty there.
#define FD_MEGAKERNEL_BODY_ONLY
#include "../tasks/common.h"
namespace fd_tensor_core_pool_unit {  // apart from megakernel.cu's unit, which defines the same functions
#include "megakernel.cu"
}  // namespace fd_tensor_core_pool_unit

#if FD_CUDA
const void* fd_megakernel_tensor_core_pool_entry() {
  return reinterpret_cast<const void*>(&fd_tensor_core_pool_unit::fd_megakernel<true, true>);
}
#endif
