# Device call 3 (lab build: interleaved layout at the AVX-512 level, AVX2 lookup below 8 tokens, panel
# packing through the scalar dequantizer), carry .gpu/cpu-ab3.tgz (bonsai-head = 44b2296, bonsai-il-lab):
REPS=3 SIDE=" " bash scripts/lab/cpu-ab.sh $OUT/cpu .gpu/cpu-ab3.tgz   # -> ab-avx2-lookup-lab.log
# then tg32 at 1 and 8 threads, two alternations -> threads-avx2-lookup-lab.log
# Device call 4 (the committed code: bonsai-il; panel packs the interleaved layout with AVX-512),
# carry .gpu/cpu-ab4.tgz (bonsai-head = 44b2296, bonsai-il, kernels-tests, llama.cpp icelake build):
REPS=3 SIDE=bonsai-il CHECK=bonsai-il bash scripts/lab/cpu-ab.sh $OUT/cpu .gpu/cpu-ab4.tgz
