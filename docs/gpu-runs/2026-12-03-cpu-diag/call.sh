# Lab build: branch lab-cpu (commit 2c3a275), its settings as environment variables.
set -u
O=$OUT/l; mkdir -p $O
xz -dc .gpu/lab.xz > /tmp/lab && chmod +x /tmp/lab; xz -dc .gpu/main.xz > /tmp/main && chmod +x /tmp/main
export LD_LIBRARY_PATH=$PWD/.cache/llama-cpu/bin
L=.cache/llama-cpu/bin/llama-bench
{ uname -a; cat /proc/version; nproc; grep MHz /proc/cpuinfo | head -4; cat /proc/loadavg; ps aux | wc -l; } > $O/machine.txt 2>&1
cat $O/machine.txt
# rusage of one command: wall, user, sys, context switches
ru() { local n=$1; shift; python3 - "$@" > $O/$n.log 2>&1 <<'PY'
import resource, subprocess, sys, time
t=time.time(); p=subprocess.run(sys.argv[1:], capture_output=True, text=True); w=time.time()-t
r=resource.getrusage(resource.RUSAGE_CHILDREN)
print(p.stdout[-2500:]); print(p.stderr[-800:])
print(f"RUSAGE wall={w:.2f}s user={r.ru_utime:.2f}s sys={r.ru_stime:.2f}s vcsw={r.ru_nvcsw} ivcsw={r.ru_nivcsw} minflt={r.ru_minflt}")
PY
echo "=== $n ${SECONDS}s"; grep -E "pp512|tg64|tg32|RUSAGE|GB/s|GFLOP" $O/$n.log | head -12; }
F=/tmp/b17.gguf; FT=/tmp/t17.gguf
/tmp/main bench --synthetic bonsai-1.7b --write-gguf $F > /dev/null 2>&1
/tmp/main bench --synthetic ternary-1.7b --write-gguf $FT > /dev/null 2>&1
RAYON_NUM_THREADS=1 ru opbench-1 .gpu/cpu_op_bench
RAYON_NUM_THREADS=16 ru opbench-16 .gpu/cpu_op_bench avx512
export RAYON_NUM_THREADS=16
ru llama-a $L -m $F -t 16 -p 512 -n 64 -r 3
ru default-a /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
LAB_SPIN_US=2000 ru spin2000 /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
LAB_GEMV_PPT=4 ru gemvppt4 /tmp/lab bench --cpu -m $F -p 0 -n 64 -r 3
LAB_PIN=1 ru pin /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
LAB_PANEL_PPT=4 ru panelppt4 /tmp/lab bench --cpu -m $F -p 512 -n 0 -r 3
LAB_SPIN_US=2000 LAB_GEMV_PPT=4 LAB_PIN=1 ru combo /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
RAYON_NUM_THREADS=15 ru t15 /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
ru llama-b $L -m $F -t 16 -p 512 -n 64 -r 3
ru default-b /tmp/lab bench --cpu -m $F -p 512 -n 64 -r 3
ru llama-tern $L -m $FT -t 16 -p 0 -n 16 -r 2
ru bonsai-tern /tmp/lab bench --cpu -m $FT -p 0 -n 64 -r 3

# GPU: serve step size (-b) for 64 streams of 512-token prompts, fresh server each
B=/tmp/main
for b in 512 2048 4096; do
  log=$O/serve-b$b.log
  $B serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 -b $b > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  timeout 60 $B bench serve --url $url --streams 64 -p 512 -n 128 > $O/bench-serve-b$b.log 2>&1
  echo "=== serve -b $b ${SECONDS}s"; tail -12 $O/bench-serve-b$b.log
  kill $pid; wait $pid 2>/dev/null
done
tar czf $OUT/logs.tgz -C $O . && rm -rf $O
