"""``python -m ga2_soc ARGS`` is ``ga2 soc ARGS`` (ga2_soc/commands.py)."""

import sys

from ga2_sw.cli import main

if __name__ == "__main__":
    sys.exit(main(["soc", *sys.argv[1:]]))
