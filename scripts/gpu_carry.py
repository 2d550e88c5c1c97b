"""Pack a GPU target's data and weights here, unpack them on the node: python scripts/gpu_carry.py pack|unpack ...
(linformer/gpu/carry.py)."""

import sys

from wheelhouse import package_main

main = package_main("linformer.gpu.carry")

if __name__ == "__main__":
    sys.exit(main())
