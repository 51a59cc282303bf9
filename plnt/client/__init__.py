"""A small HTTP client for plnt's own API, used by activities and the CLI."""
