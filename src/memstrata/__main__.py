"""``python -m memstrata`` runs the CLI."""

from memstrata.cli import main

main()
