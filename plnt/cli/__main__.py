"""`python -m plnt.cli` is the `plnt` CLI."""

from plnt.cli.main import main

main()
