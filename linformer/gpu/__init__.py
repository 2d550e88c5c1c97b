"""What runs on a GPU machine: its targets (targets.py: tests, Table 3, throughput, MFU, Figure 3, Table 2 at GPU
scale, each a few small result files) and the data and weights carried to a node without network (carry.py)."""
