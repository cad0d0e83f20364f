// Shared definitions for every bonsai kernel. Concatenated first into the single module.
// No CUDA headers are included: NVRTC ships none, and the kernels need only builtins.
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
