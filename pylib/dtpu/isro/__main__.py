"""``python -m dtpu.isro``: the ISRO toolchain without the project-wide ``dtpu`` command."""
from dtpu.isro.cli import main

raise SystemExit(main())
