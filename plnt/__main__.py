"""`python -m plnt` is the `plnt` CLI."""

from plnt.cli.main import main

main()
