set -u
O=$OUT/l; mkdir -p $O
for v in a b; do [ -f .gpu/$v.xz ] && xz -dc .gpu/$v.xz > /tmp/bonsai-$v && chmod +x /tmp/bonsai-$v; done
M=.gpu/bonsai; A=/tmp/bonsai-a; Bb=/tmp/bonsai-b
r() { local n=$1; shift; echo "=== $n: $*"; timeout ${T:-150} "$@" > $O/$n.log 2>&1; echo "=== $n rc=$? ${SECONDS}s"; tail -n ${TAILN:-8} $O/$n.log; }
T=100 TAILN=2 r verify-a $A kernels verify --shapes all --only image_gemm,decode_seqs
grep -iE "fail" $O/verify-a.log | grep -v " 0 failed" | head -6
T=60 TAILN=2 r verify-b $Bb kernels verify --shapes all --only qwen35,small
grep -iE "fail" $O/verify-b.log | grep -v " 0 failed" | head -6
for v in M A; do eval bin=\$$v
  T=60 TAILN=0 r gemmbench-$v $bin kernels verify --bench-only --only bench_batch_gemm
  grep -iE "us|gemm" $O/gemmbench-$v.log | tail -14
  T=60 TAILN=4 r p8b-$v $bin bench --synthetic bonsai-8b -p 512 -n 0 -r 3
  T=60 TAILN=5 r b64-$v $bin bench --synthetic bonsai-8b -p 0 -n 32 -r 2 --batch 1,64
done
for v in Bb M; do eval bin=\$$v
  T=100 TAILN=16 r trace27-$v bash -c "$bin --kernel-config trace=kernels bench --synthetic bonsai2-27b -p 0 -n 24 -r 1 2>&1 | grep -A14 'per kernel (release'"
done
for v in A M; do eval bin=\$$v; T=90 TAILN=3 r p27-$v $bin bench --synthetic bonsai2-27b -p 512 -n 0 -r 1; done
tar czf $OUT/logs.tgz -C $O . && rm -rf $O
# binaries: .gpu/bonsai = ca34f87 (main), a = helper-a b0e38d1, b = helper-b bf52cf4
