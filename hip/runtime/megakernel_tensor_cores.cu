// fd_megakernel<true>: the megakernel whose attention chunk runs on the tensor cores (fd_task_attention_chunk),
// in a translation unit of its own (megakernel.cu says why). megakernel.cu's C ABI launches it, through
// fd_megakernel_tensor_core_entry, for long contexts (fleet_decode.kernels.runtime, Tuning.chunk_form). AMD
// builds have no tensor-core form yet: this unit is empty there.
#define FD_MEGAKERNEL_BODY_ONLY
#include "../tasks/common.h"
namespace fd_tensor_core_unit {  // apart from megakernel.cu's unit, which defines the same functions
#include "megakernel.cu"
}  // namespace fd_tensor_core_unit

#if FD_CUDA
const void* fd_megakernel_tensor_core_entry() { return reinterpret_cast<const void*>(&fd_tensor_core_unit::fd_megakernel<true>); }
#endif
