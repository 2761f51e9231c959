# The scores q_j K_j^T of a batch of four sequences at 16 tokens, d = 16: sequence j's key cache (16 rows of
# 16) at j*640, its query right after it at j*640 + 256, its 16 scores to 3000 + 16 j.
# One MM per 4-column tile for the whole batch: rb = 1, row j's B (and A) 640 words on, a sequence a row
# (docs/ISA.md, "A B per row"; a chip built with --row-b 1).
#   ga2 run docs/examples/attention_rb.s --mode decoupled --sp-banks 32 --row-b 1 [--sim pysim|verilator]
MM dst=3000 A=256 B=0 M=4 K=16 N=4 tb=1 lda=640 ldb=16 ldc=16 rb=1
MM dst=3004 A=256 B=64 M=4 K=16 N=4 tb=1 lda=640 ldb=16 ldc=16 rb=1
MM dst=3008 A=256 B=128 M=4 K=16 N=4 tb=1 lda=640 ldb=16 ldc=16 rb=1
MM dst=3012 A=256 B=192 M=4 K=16 N=4 tb=1 lda=640 ldb=16 ldc=16 rb=1
HALT
