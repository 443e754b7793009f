"""The report document: typed models of what `kvgate report --format json` prints.

Analysis (analysis.build) fills a `Report`; every renderer reads it by attribute; the JSON Schema under
`reports/templates/` is generated from these models (`make schema`, report.document.schema_gen).
"""
