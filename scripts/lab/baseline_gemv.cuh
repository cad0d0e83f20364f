// The lab's baseline: the production decode GEMV (`gemv_rows8_split_k`, still what m = 2..8 and
// K not a multiple of 256 use), included from the production files rather than copied, so the
// lab always measures what ships. run.sh puts both folders on the include path.
#include "prelude.cuh"
#include "matmul_gemv.cu"
