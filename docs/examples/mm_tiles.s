# Sixteen independent 4 x 16 x 4 MMs back to back (a compute-bound chain, like prefill's): decoupled, each
# one's slices follow the last one's through the array while the last one's results are written.
#   ga2 run docs/examples/mm_tiles.s --mode decoupled [--sim pysim|verilator]
MM dst=1024 A=0 B=512 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1040 A=64 B=512 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1056 A=128 B=512 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1072 A=192 B=512 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1088 A=0 B=576 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1104 A=64 B=576 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1120 A=128 B=576 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1136 A=192 B=576 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1152 A=0 B=640 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1168 A=64 B=640 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1184 A=128 B=640 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1200 A=192 B=640 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1216 A=0 B=704 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1232 A=64 B=704 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1248 A=128 B=704 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
MM dst=1264 A=192 B=704 M=4 K=16 N=4 tb=0 lda=16 ldb=4 ldc=4
HALT
