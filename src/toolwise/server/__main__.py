"""`python -m toolwise.server`: the launch line `toolwise install` wrote before 2026-11-25; kept so
those configs keep starting."""

from toolwise.cli.entry import main

main()
