from asynckubelet.cli import main

main()
