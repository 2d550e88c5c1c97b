"""Pack a GPU target's data and weights here, unpack them on the node: python scripts/gpu_carry.py pack|unpack ...
(linformer/gpu/carry.py)."""

import sys

from linformer.gpu.carry import main

if __name__ == "__main__":
    sys.exit(main())
