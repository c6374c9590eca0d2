// Library-wide exports of the standalone task-kernel library (not a task kind).
#include "common.h"

#ifndef FD_NO_STANDALONE
// Names an error code returned by any fd_launch_*: negative codes are argument checks of the
// launcher itself, positive ones the runtime's (cudaError_t / hipError_t).
FD_EXPORT const char* fd_error_string(int code) {
  return code < 0 ? "invalid launch arguments" : fd_get_error_string(static_cast<fd_error_t>(code));
}

// The warp width this library was compiled for (32 on NVIDIA, 64 on CDNA).
FD_EXPORT int fd_warp_size() { return kWarpSize; }
#endif
