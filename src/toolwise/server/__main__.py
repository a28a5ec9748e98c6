from toolwise.server.cli import main

main()
