"""Tools beside the checks: `potrun doctor`, `potrun bench`, `potrun image`."""
