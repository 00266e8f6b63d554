"""``python -m aiokafka_lite.cli``: same as the ``aiokafka-lite`` console script."""

import sys

from aiokafka_lite.cli import main

sys.exit(main())
