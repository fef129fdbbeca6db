"""Reports on a finished run: the terminal table and markdown, the HTML report, the diff of two runs."""
