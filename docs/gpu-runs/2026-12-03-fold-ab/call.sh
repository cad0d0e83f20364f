set -u
O=$OUT/l; mkdir -p $O
for b in main final; do xz -dc .gpu/$b.xz > /tmp/$b && chmod +x /tmp/$b; done
r() { local n=$1; shift; echo "=== $n: $*"; timeout ${T:-150} "$@" > $O/$n.log 2>&1; echo "=== $n rc=$? ${SECONDS}s"; tail -n ${TAILN:-8} $O/$n.log; }
T=120 TAILN=22 r trace27-final bash -c "/tmp/final --kernel-config trace=kernels bench --synthetic bonsai2-27b -p 0 -n 24 -r 1 -v 2>&1 | grep -E -A20 'per kernel \(release|tg24' | grep -v '^--'"
T=90 TAILN=3 r base27 /tmp/main bench --synthetic bonsai2-27b -p 0 -n 128 -r 2
T=90 TAILN=3 r final27 /tmp/final bench --synthetic bonsai2-27b -p 0 -n 128 -r 2
tar czf $OUT/logs.tgz -C $O . && rm -rf $O
