"""`python -m toolwise`: the CLI without its installed script."""

from toolwise.cli.main import main

main()
