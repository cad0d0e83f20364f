// Benchmark helper: keeps the GPU busy for `cycles` SM clocks so the host can queue a whole batch
// of launches behind it; the batch then runs back to back, timed by events, without host gaps.
extern "C" __global__ void bench_spin_cycles(long long cycles) {
    griddep_wait();
    griddep_launch_dependents();
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
