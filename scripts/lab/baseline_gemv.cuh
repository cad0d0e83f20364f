// The lab's production code, included from the production files rather than copied, so the lab
// always measures what ships: the prelude, the PTX wrappers, the device weight layout and the
// tensor-core decode GEMV (gemv_tc, round 6). The round-4 baseline `gemv_rows8_split_k` (and
// signed_word_dot, which the older lab variants use) is a frozen lab copy reading the natural
// layout. run.sh puts the production folders on the include path.
#include "prelude.cuh"
#include "ptx.cuh"
#include "weight_layout.cu"
#include "matmul_gemv.cu"
#include "matmul_gemv_tc.cu"
#include "matmul_gemv_b1.cu"
#include "matmul_gemv_rows8.cuh"
