"""`python -m toolwise`: the CLI without its installed script."""

from toolwise.cli.entry import main

main()
