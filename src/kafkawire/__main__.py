import sys

from kafkawire.cli.main import main

sys.exit(main())
