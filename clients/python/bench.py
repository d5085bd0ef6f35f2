"""Run foldstream.bench from a repository checkout: python3 clients/python/bench.py --help."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from foldstream.bench import main  # noqa: E402

raise SystemExit(main())
