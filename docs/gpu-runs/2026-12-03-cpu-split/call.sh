# Lab build: branch lab-cpu (commit 2c3a275), its settings as environment variables.
set -u
O=$OUT/l; mkdir -p $O
xz -dc .gpu/lab.xz > /tmp/lab && chmod +x /tmp/lab
export LD_LIBRARY_PATH=$PWD/.cache/llama-cpu/bin
L=.cache/llama-cpu/bin/llama-bench
ru() { local n=$1; shift; python3 - "$@" > $O/$n.log 2>&1 <<'PY'
import resource, subprocess, sys, time
t=time.time(); p=subprocess.run(sys.argv[1:], capture_output=True, text=True); w=time.time()-t
r=resource.getrusage(resource.RUSAGE_CHILDREN)
print(p.stdout[-2500:]); print(p.stderr[-800:])
print(f"RUSAGE wall={w:.2f}s user={r.ru_utime:.2f}s sys={r.ru_stime:.2f}s vcsw={r.ru_nvcsw} ivcsw={r.ru_nivcsw}")
PY
echo "=== $n ${SECONDS}s $(grep -hE '^\| (pp|tg)|tg64|pp512' $O/$n.log | tr -s ' ' | tr '\n' ' ' | cut -c1-200)"; }
F=/tmp/b17.gguf
/tmp/lab bench --synthetic bonsai-1.7b --write-gguf $F > /dev/null 2>&1
for v in 0 1; do RAYON_NUM_THREADS=1 LAB_Q1_NEW=$v ru opbench1-new$v .gpu/cpu_op_bench avx512; grep "M=1:" $O/opbench1-new$v.log; done
export RAYON_NUM_THREADS=16
for rep in 1 2; do
ru llama-$rep $L -m $F -t 16 -p 0 -n 64 -r 3
ru default-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=2 ru ppt2-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=4 ru ppt4-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=8 ru ppt8-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=4 LAB_MIN_COLS=32 ru ppt4c32-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=8 LAB_MIN_COLS=16 ru ppt8c16-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=4 LAB_Q1_NEW=1 ru ppt4new-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_GEMV_PPT=4 LAB_SPIN_US=200 ru ppt4spin-$rep /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
done
tar czf $OUT/logs.tgz -C $O . && rm -rf $O
