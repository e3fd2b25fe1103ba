from streams.cli.main import main

main()
