# The scores q_j K_j^T of a batch of four sequences at 16 tokens, d = 16: sequence j's key cache (16 rows of
# 16) at j*640, its query right after it at j*640 + 256, its 16 scores to 3000 + 16 j.
# One M = 1 MM per sequence and 4-column tile: a row of the array each (compare attention_rb.s).
#   ga2 run docs/examples/attention_per_sequence.s --mode decoupled --sp-banks 32 [--sim pysim|verilator]
MM dst=3000 A=256 B=0 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3004 A=256 B=64 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3008 A=256 B=128 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3012 A=256 B=192 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3016 A=896 B=640 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3020 A=896 B=704 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3024 A=896 B=768 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3028 A=896 B=832 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3032 A=1536 B=1280 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3036 A=1536 B=1344 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3040 A=1536 B=1408 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3044 A=1536 B=1472 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3048 A=2176 B=1920 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3052 A=2176 B=1984 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3056 A=2176 B=2048 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
MM dst=3060 A=2176 B=2112 M=1 K=16 N=4 tb=1 lda=16 ldb=16 ldc=4
HALT
