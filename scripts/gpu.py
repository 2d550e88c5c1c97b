"""Run the GPU targets: python scripts/gpu.py tests table3 throughput --out $OUT (linformer/gpu/targets.py)."""

import sys

from wheelhouse import package_main

main = package_main("linformer.gpu.targets")

if __name__ == "__main__":
    sys.exit(main())
