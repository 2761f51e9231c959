# The scores q_j K_j^T of a batch of four sequences at 16 tokens, d = 16, laid out as in
# attention_per_sequence.s: sequence j's key cache (16 rows of 16) at j*640, its query right after it at
# j*640 + 256, its 16 scores to 3000 + 16 j.
# One MM per sequence: sa = 1 gives every row of the array the query (A's row 0), rb = 1 row i the key
# cache's tile i (lda = 64 words on: 4 keys of 16), so the four tiles go through the array's four rows at once
# (docs/ISA.md, "A B per row"; a chip built with --row-b 1).
#   ga2 run docs/examples/attention_sa.s --mode decoupled --sp-banks 32 --row-b 1 [--sim pysim|verilator]
MM dst=3000 A=256 B=0 M=4 K=16 N=4 tb=1 lda=64 ldb=16 ldc=4 rb=1 sa=1
MM dst=3016 A=896 B=640 M=4 K=16 N=4 tb=1 lda=64 ldb=16 ldc=4 rb=1 sa=1
MM dst=3032 A=1536 B=1280 M=4 K=16 N=4 tb=1 lda=64 ldb=16 ldc=4 rb=1 sa=1
MM dst=3048 A=2176 B=1920 M=4 K=16 N=4 tb=1 lda=64 ldb=16 ldc=4 rb=1 sa=1
HALT
