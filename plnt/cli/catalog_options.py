"""The options `plnt up` and `plnt serve` share for the workflow catalog (an option group,
see `option_groups`): the YAML file of sources it reads, and how often it reads them.

Without `--catalog-sources`, `plnt up` lists every OCI layout under `STATE/layouts` (where
`make up` pushes the examples) and `plnt serve` lists nothing. docs/catalog.md.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from plnt.apiserver.settings import CatalogSettings
from plnt.cli import option_groups

_DEFAULTS = CatalogSettings()


@dataclasses.dataclass(frozen=True, slots=True)
class CatalogOptions:
    """The catalog's flags; `settings()` is what the servers take (they add the rest)."""

    catalog_sources: Annotated[
        Path | None,
        typer.Option(
            envvar="PLNT_CATALOG_SOURCES",
            help="YAML file of the sources the workflow catalog lists (read at each refresh).",
        ),
    ] = None
    catalog_refresh: Annotated[
        float,
        typer.Option(
            min=1.0,
            envvar="PLNT_CATALOG_REFRESH",
            help="Seconds between two refreshes of the workflow catalog.",
        ),
    ] = _DEFAULTS.refresh_seconds

    def settings(self) -> CatalogSettings:
        return CatalogSettings(
            sources_file=self.catalog_sources.expanduser().resolve()
            if self.catalog_sources
            else None,
            refresh_seconds=self.catalog_refresh,
        )


with_catalog_options = option_groups.takes("catalog", CatalogOptions)
"""`command(..., catalog: CatalogOptions)` as typer sees it: one `--option` per field."""
