from trainctl.cli.fast import main

main()
