"""Pack a GPU target's data and weights here, unpack them on the node: python scripts/gpu_carry.py pack|unpack ...
(linformer/gpu/carry.py)."""

import sys

try:
    from linformer.gpu.carry import main
except ModuleNotFoundError as err:  # a node without the carried wheels: one line, not an import traceback
    print(f"error: {err.name} is missing here: install the wheels first (docs/gpu/README.md, steps 1 and 3)",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
