"""Run the GPU targets: python scripts/gpu.py tests table3 throughput --out $OUT (linformer/gpu/targets.py)."""

import sys

try:
    from linformer.gpu.targets import main
except ModuleNotFoundError as err:  # a node without the carried wheels: one line, not an import traceback
    print(f"error: {err.name} is missing here: install the wheels first (docs/gpu/README.md, steps 1 and 3)",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
